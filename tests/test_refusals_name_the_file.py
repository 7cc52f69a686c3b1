"""Every refusal of an inventory names the file: ``slurm-topo: error: FILE: …`` (README "A bad inventory
exits 2 with one line"), also for the checks that run after merging — at render time, for a release (block
sizes, nodes without an NVLink domain, Slurm's 65 536-node limit from 24.11, placeholder names, gres.conf's
minor numbers, an empty fleet). A property test over generated bad fleets (several files, an ``nvlink:``
section in any of them, every release the renderers know) and one case per refusal naming the entry."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from slurm_topo.cli import main

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests" / "fixtures" / "real" / "topo" / "h800-8gpu-nv18-10nic-merged-affinity-numa.txt"
"""A ``nvidia-smi topo -m`` capture: no device minor numbers (gres.conf refuses without
``--assume-minor-equals-index``)."""
RELEASES = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05")


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _slurm_topo(argv: tuple[str, ...]) -> None:
    main(list(argv))


def generate(files: Sequence[Path], version: str, out: Path, *extra: str) -> Result:
    args = [
        "generate",
        *(a for f in files for a in ("-i", str(f))),
        "-o",
        str(out),
        "--slurm-version",
        version,
    ]
    return CliRunner().invoke(_slurm_topo, [*args, *extra], catch_exceptions=False)


def error_of(result: Result) -> str:
    """The one error line (warnings may come before it), in the house style."""
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("slurm-topo: error: ")]
    assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
    return errors[0].removeprefix("slurm-topo: error: ")


def named_file(line: str, files: Sequence[Path]) -> Path | None:
    """The given file the error line starts with (``FILE: …``), else None."""
    return next((f for f in files if line.startswith(f"{f}: ")), None)


def write(folder: Path, docs: Sequence[Mapping[str, object]]) -> list[Path]:
    paths = []
    for i, doc in enumerate(docs):
        path = folder / f"inv{i}.yaml"
        path.write_text(yaml.safe_dump(dict(doc), sort_keys=False))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------------
# generated bad fleets


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[dict[str, object]], str]:
    """1-3 inventory documents and a release: entries with and without NVLink domains, an ``nvlink:``
    section with any topology, block sizes and domain order in one of the files, sometimes an oversized
    entry (65 537 nodes), a node named like a block placeholder, a GPU node with a capture without minor
    numbers, an empty file, a RealMemory of 0 or a bad label."""
    version = draw(st.sampled_from(RELEASES))
    every_node_in_a_domain = draw(st.booleans())  # else some nodes have none (refused on 23.11-24.11)
    entries: list[dict[str, object]] = []
    for i in range(draw(st.integers(0, 5))):
        entry: dict[str, object] = {"name": f"e{i}n[1-{draw(st.integers(1, 5))}]", "region": "r1"}
        if draw(st.booleans()):
            entry["zone"] = draw(st.sampled_from(["z1", "z2"]))
        domains = st.sampled_from(["d1", "d2", "d3"])
        domain = draw(domains if every_node_in_a_domain else st.none() | domains)
        if domain is not None:
            entry["nvlink_domain"] = domain
        if draw(st.integers(0, 19)) == 0:
            entry["slurm"] = {"RealMemory": draw(st.sampled_from([0, 1, 4000]))}
        if draw(st.integers(0, 39)) == 0:
            entry["zone"] = "bad zone"
        entries.append(entry)
    domain_of_the_rest = {"nvlink_domain": "d3"} if every_node_in_a_domain else {}
    if draw(st.integers(0, 11)) == 0:
        entries.append({"name": "big[1-65537]", "region": "r1", **domain_of_the_rest})
    if draw(st.integers(0, 5)) == 0:  # a short block d1 or d2 is padded with nvl_dN-future<k> on 24.x
        name = draw(st.sampled_from(["nvl_d1-future1", "nvl_d2-future2"]))
        entries.append({"name": name, "region": "r1", "nvlink_domain": "d3"})
    if draw(st.integers(0, 11)) == 0:
        gpu = {"name": "gpu1", "region": "r1", "gpus": 8, "gpu_topology": str(CAPTURE)}
        entries.append({**gpu, **domain_of_the_rest})
    docs: list[dict[str, object]] = [{"nodes": []} for _ in range(draw(st.integers(1, 3)))]
    for entry in entries:
        nodes = docs[draw(st.integers(0, len(docs) - 1))]["nodes"]
        assert isinstance(nodes, list)
        nodes.append(entry)
    if draw(st.booleans()):
        nvlink: dict[str, object] = {"topology": draw(st.sampled_from(["auto", "tree", "block"]))}
        sizes = draw(st.lists(st.integers(1, 40), max_size=3))
        if sizes:
            nvlink["block_sizes"] = sizes
        order = draw(st.lists(st.sampled_from(["d1", "d2", "d3", "d4"]), unique=True, max_size=3))
        if order:
            nvlink["domains"] = order
        docs[draw(st.integers(0, len(docs) - 1))]["nvlink"] = nvlink
    return docs, version


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet=fleets())
def test_every_refusal_of_a_generated_fleet_names_a_file(fleet: tuple[list[dict[str, object]], str]) -> None:
    import tempfile

    docs, version = fleet
    with tempfile.TemporaryDirectory() as tmp:
        files = write(Path(tmp), docs)
        result = generate(files, version, Path(tmp) / "out")
        if result.exit_code == 0:
            return
        assert result.exit_code == 2, result.stderr
        line = error_of(result)
        file = named_file(line, files)
        assert file is not None, f"names no file: {line}"
        rest = line.removeprefix(f"{file}: ")
        where, _, reason = rest.partition(": ") if rest.startswith(("nodes[", "nvlink")) else ("", "", rest)
        event(re.sub(r"\d+|/\S+", "#", f"{where[:6]} {reason}")[:56])  # --hypothesis-show-statistics
        assert not (Path(tmp) / "out").exists(), "a refusal wrote something"


# --------------------------------------------------------------------------------------------------
# one case per refusal raised after merging: the file, and the entry where there is one


def fleet_of(*entries: dict[str, object], nvlink: dict[str, object] | None = None) -> dict[str, object]:
    doc: dict[str, object] = {"nodes": list(entries)}
    if nvlink is not None:
        doc["nvlink"] = nvlink
    return doc


NODE = {"name": "a[1-2]", "region": "r1", "zone": "z1"}
DOMAIN = {"name": "g[1-4]", "region": "r1", "zone": "z1", "nvlink_domain": "d1"}

CASES = [
    pytest.param(
        [fleet_of(NODE), fleet_of({"name": "b[1-65537]", "region": "r1"})],
        "24.11",
        "inv1.yaml: nodes[0]: ",
        "Slurm 24.11 and later hold at most 65536 nodes",
        id="65 536-node limit: the entry holding node 65 537",
    ),
    pytest.param(
        [fleet_of(NODE), fleet_of({"name": "g[1-4]", "region": "r1", "nvlink_domain": "d1"})],
        "24.11",
        "inv0.yaml: nodes[0]: ",
        "have no nvlink_domain (a1, a2)",
        id="nodes without a domain: the first one's entry",
    ),
    pytest.param(
        [fleet_of(DOMAIN), fleet_of(nvlink={"topology": "block", "block_sizes": [3, 5]})],
        "26.05",
        "inv1.yaml: nvlink.block_sizes: ",
        "5 is not a power of two times 3",
        id="given block sizes: the nvlink section's file",
    ),
    pytest.param(
        [
            fleet_of(
                {"name": "g[1-4]", "region": "r1", "nvlink_domain": "d1"},
                {"name": "h[1-3]", "region": "r1", "nvlink_domain": "d2"},
            )
        ],
        "23.11",
        "inv0.yaml: nodes[1]: ",
        "domain d2 has 3 nodes, not 4",
        id="derived block sizes: the short domain's entry",
    ),
    pytest.param(
        [fleet_of(DOMAIN), fleet_of(nvlink={"topology": "block"})],
        "22.05",
        "inv1.yaml: nvlink.topology: ",
        "needs Slurm 23.11 or later",
        id="block topology on 22.05: the nvlink section's file",
    ),
    pytest.param(
        [fleet_of(nvlink={"topology": "block"}), fleet_of(NODE)],
        "24.11",
        "inv0.yaml: nvlink.topology: ",
        "no node has an nvlink_domain",
        id="block topology without domains: the nvlink section's file",
    ),
    pytest.param(
        [
            fleet_of(
                {"name": "g[1-4]", "region": "r1", "nvlink_domain": "d1"},
                {"name": "h1", "region": "r1", "nvlink_domain": "d2"},
                {"name": "nvl_d2-future1", "region": "r1", "nvlink_domain": "d3"},
            )
        ],
        "24.11",
        "inv0.yaml: nodes[2]: ",
        "is named like a placeholder",
        id="placeholder name: the node's entry",
    ),
    pytest.param(
        [fleet_of(NODE, {"name": "gpu1", "region": "r1", "gpus": 8, "gpu_topology": str(CAPTURE)})],
        "24.11",
        "inv0.yaml: nodes[1]: ",
        "no device minor numbers for gpu1",
        id="gres.conf minors: the node's entry",
    ),
    pytest.param(
        [{"nodes": []}, {"nodes": []}],
        "24.11",
        "inv0.yaml: ",
        "no nodes",
        id="no nodes at all: the files",
    ),
    pytest.param(
        [fleet_of(NODE, {"name": "m1", "region": "r1", "slurm": {"RealMemory": 0}})],
        "24.11",
        "inv0.yaml: nodes[1].slurm.RealMemory: ",
        "must be from 1 to",
        id="RealMemory 0: the entry and key",
    ),
]


@pytest.mark.parametrize(("docs", "version", "where", "reason"), CASES)
def test_a_refusal_after_merging_names_the_file_and_the_entry(
    tmp_path: Path, docs: list[dict[str, object]], version: str, where: str, reason: str
) -> None:
    files = write(tmp_path, docs)
    result = generate(files, version, tmp_path / "out")
    assert result.exit_code == 2, result.stderr
    line = error_of(result)
    assert line.startswith(f"{tmp_path}/{where}"), line
    assert reason in line, line
    assert not (tmp_path / "out").exists()


def test_the_nvlink_sections_file_is_named_whichever_file_holds_it(tmp_path: Path) -> None:
    """Two files, the section in the second: its file, not the first one's."""
    docs = [fleet_of(NODE), fleet_of({"name": "b1", "region": "r1"}, nvlink={"topology": "block"})]
    files = write(tmp_path, docs)
    line = error_of(generate(files, "24.11", tmp_path / "out"))
    assert line.startswith(f"{files[1]}: nvlink.topology: "), line


def test_a_node_slurm_knows_without_a_domain_names_the_file_that_asks_for_blocks(tmp_path: Path) -> None:
    """Nodes only ``--nodes-from`` knows (no inventory places them) have no entry: the file whose
    domains made the fleet a block fleet is named, and the nodes."""
    files = write(tmp_path, [fleet_of({"name": "g[1-4]", "region": "r1", "nvlink_domain": "d1"})])
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("g[1-4]\nx[1-2]\n")
    line = error_of(generate(files, "24.11", tmp_path / "out", "--nodes-from", str(nodes)))
    assert line.startswith(f"{files[0]}: "), line
    assert "(x1, x2)" in line, line
