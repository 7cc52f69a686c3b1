"""Slurm 25.05 to 25.11.5 stop on a YAML file whose size is a multiple of 4096 bytes (serializer/yaml reads
the mmap'ed file with strlen; fixed in 25.11.6, SchedMD 79a81a8a7e): every topology.yaml rendered for them is
padded, and ``lint`` refuses an unpadded one for those releases.

The sizes are steered exactly: partition names are printed in topology.yaml's header (the ``Topology=nvl``
note), so names of chosen lengths make the unpadded file exactly ``pages * 4096`` bytes long; hypothesis picks
the page count, the fleet and the release."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.policy import Partition
from slurm_topo.render.topology_yaml import PAD_LINE, YAML_PAGE, pad_yaml, yaml_page_bug
from slurm_topo.slurmconfig.lint import lint_file

GATED = [(25, 5), (25, 11)]
FIXED = [(26, 5)]


def _fleet(domains: int, per_domain: int):  # type: ignore[no-untyped-def]
    lines = ["nodes:"]
    for d in range(domains):
        first = d * per_domain + 1
        names = f"g[{first:03d}-{first + per_domain - 1:03d}]" if per_domain > 1 else f"g{first:03d}"
        lines.append(
            f"  - {{name: '{names}', region: dc1, zone: dc1-a, network_group: r{d}, "
            f"nvlink_domain: rack-{d:02d}}}"
        )
    return merge([parse_inventory("\n".join(lines) + "\n", source="f.yaml")])


def _yaml(inventory, version, names):  # type: ignore[no-untyped-def]
    nodes = tuple(n.name for n in inventory.nodes)
    out = render_all(inventory, version, [Partition(name, nodes) for name in names])
    return out["topology.yaml"]


def _names_for(inventory, version, target: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Partition names that make the unpadded topology.yaml exactly ``target`` bytes (at least the size with
    one partition ``a``): each extra name adds ``, name`` to the header, the first one its own length."""
    base = len(_yaml(inventory, version, ["a"]).removesuffix(PAD_LINE).encode())
    gap = target - base
    assert gap >= 0
    names: list[str] = []
    while gap > 62:
        length = min(63, gap - 2)
        names.append(f"b{len(names):04d}".ljust(length, "x"))
        gap -= length + 2
    return ["a" + "x" * gap, *names]


@settings(max_examples=25, deadline=None)
@given(
    pages=st.integers(1, 4),
    domains=st.integers(1, 24),
    per_domain=st.integers(1, 18),
    version=st.sampled_from(GATED + FIXED),
)
def test_no_rendered_yaml_of_a_gated_release_is_a_page_multiple(
    pages: int, domains: int, per_domain: int, version: tuple[int, int]
) -> None:
    inventory = _fleet(domains, per_domain)
    smallest = len(_yaml(inventory, version, ["a"]).removesuffix(PAD_LINE).encode())
    target = max(pages, -(-smallest // YAML_PAGE)) * YAML_PAGE
    text = _yaml(inventory, version, _names_for(inventory, version, target))
    size = len(text.encode())
    if version in GATED:
        assert size % YAML_PAGE != 0
        assert text.endswith(PAD_LINE) and size == target + len(PAD_LINE.encode())
        assert lint_file(text, source="topology.yaml", slurm_version=version) == []
        unpadded = text.removesuffix(PAD_LINE)
        codes = [p.code for p in lint_file(unpadded, source="topology.yaml", slurm_version=version)]
        assert codes == ["yaml-page-size"]
    else:
        assert size == target  # fixed releases read it as it is: nothing added
        assert lint_file(text, source="topology.yaml", slurm_version=version) == []


@given(size=st.integers(1, 5 * YAML_PAGE), version=st.sampled_from([*GATED, *FIXED, (24, 11)]))
def test_pad_yaml_over_every_size(size: int, version: tuple[int, int]) -> None:
    text = "#" * (size - 1) + "\n"
    padded = pad_yaml(text, version)
    if yaml_page_bug(version):
        assert len(padded.encode()) % YAML_PAGE != 0
        assert padded == (text + PAD_LINE if size % YAML_PAGE == 0 else text)
    else:
        assert padded == text


def test_the_gate_follows_the_patch_level() -> None:
    assert yaml_page_bug((25, 5)) and yaml_page_bug((25, 5), 8)
    assert yaml_page_bug((25, 11)) and yaml_page_bug((25, 11), 0) and yaml_page_bug((25, 11), 5)
    assert not yaml_page_bug((25, 11), 6) and not yaml_page_bug((26, 5)) and not yaml_page_bug((24, 11))
    page = "#" * (YAML_PAGE - 1) + "\n"
    assert pad_yaml(page, (25, 11), 6) == page
    bad = "- topology: fabric\n  cluster_default: true\n  flat: true\n"
    bad += "#" * (2 * YAML_PAGE - len(bad) - 1) + "\n"
    assert len(bad) == 2 * YAML_PAGE
    problem = lint_file(bad, source="topology.yaml", slurm_version=(25, 11), slurm_patch=5)
    assert [p.code for p in problem] == ["yaml-page-size"]
    assert "25.11.6" in problem[0].message
    assert lint_file(bad, source="topology.yaml", slurm_version=(25, 11), slurm_patch=6) == []
    assert lint_file(bad, source="topology.yaml", slurm_version=(26, 5)) == []
    assert [p.code for p in lint_file(bad, source="topology.yaml")] == ["yaml-page-size"]  # release unknown
