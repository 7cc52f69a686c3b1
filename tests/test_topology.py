"""The switch tree and feature names derived from the inventory."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from preconditions import unavailable

from slurm_topo import InputError, build_topology, merge, parse_inventory, render_all
from slurm_topo.core.model import (
    SLURM_MAX_RANGE,
    SLURM_MAX_SUFFIX,
    Inventory,
    Location,
    Node,
    oversized_number,
)


def topo(doc: str):  # type: ignore[no-untyped-def]
    return build_topology(merge([parse_inventory(doc)]))


def switches(doc: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {s.name: (s.switches, s.nodes) for s in topo(doc).switches}


def test_missing_levels_get_their_own_leaves() -> None:
    """No group -> per-zone leaf, no zone -> per-region leaf, no location -> the root's leaf; each node
    once."""
    sw = switches("""
nodes:
  - {name: a1, region: r1, zone: r1-a, network_group: g1}
  - {name: a2, region: r1, zone: r1-a}
  - {name: a3, region: r1}
  - {name: a4}
""")
    assert sw["ng_r1-a.g1"] == ((), ("a1",))
    assert sw["leaf_r1-a"] == ((), ("a2",))
    assert sw["zone_r1-a"] == (("leaf_r1-a", "ng_r1-a.g1"), ())
    assert sw["leaf_r1"] == ((), ("a3",))
    assert sw["region_r1"] == (("leaf_r1", "zone_r1-a"), ())
    assert sw["leaf_root"] == ((), ("a4",))
    assert sw["root"] == (("leaf_root", "region_r1"), ())
    placed = [n for _, nodes in sw.values() for n in nodes]
    assert sorted(placed) == ["a1", "a2", "a3", "a4"]


def test_group_without_zone_hangs_under_region() -> None:
    """A network group with no zone is a leaf directly under its region."""
    sw = switches("nodes:\n  - {name: a1, region: r1, network_group: g1}\n")
    assert sw["region_r1"] == (("ng_r1.g1",), ())


def test_colliding_names_get_a_path_hash() -> None:
    """Zone 'a' in two regions: both zone switches get _<sha1(path)[:8]> so neither captures the other."""
    t = topo("nodes:\n  - {name: n1, region: r1, zone: a}\n  - {name: n2, region: r2, zone: a}\n")
    names = {s.name for s in t.switches if s.kind == "zone"}
    expected = {
        f"zone_a_{hashlib.sha1(p.encode()).hexdigest()[:8]}" for p in ("region=r1/zone=a", "region=r2/zone=a")
    }
    assert names == expected
    assert t.node_features["n1"][1] != t.node_features["n2"][1]


def test_long_names_are_cut_and_hashed_to_64() -> None:
    """A derived name over 64 characters is cut and hashed, staying unique and at most 64 long."""
    zone = "z" * 63
    t = topo(f"nodes:\n  - {{name: n1, region: r1, zone: {zone}, network_group: {'g' * 63}}}\n")
    for s in t.switches:
        assert len(s.name) <= 64
    assert any(s.name.startswith("ng_zzz") and len(s.name) == 64 for s in t.switches)


def test_node_features_follow_levels() -> None:
    """Each node carries region_, zone_ and ng_ features for the levels it has, coarsest first."""
    t = topo("nodes:\n  - {name: n1, region: r1, zone: r1-a, network_group: g}\n  - {name: n2, region: r1}\n")
    assert t.node_features["n1"] == ("region_r1", "zone_r1-a", "ng_r1-a.g")
    assert t.node_features["n2"] == ("region_r1",)


def test_trusted_location_is_used_in_every_output() -> None:
    """A node claimed elsewhere by its self-report is placed where the provider record puts it, in every
    file."""
    inv = merge(
        [
            parse_inventory("nodes:\n  - {name: n1, region: r9, source: self}\n", source="self.yaml"),
            parse_inventory(
                "nodes:\n  - {name: n1, region: r1, zone: r1-a, source: provider}\n"
                "  - {name: n2, region: r9}\n",
                source="prov.yaml",
            ),
        ]
    )
    out = render_all(inv, (22, 5))
    assert "SwitchName=leaf_r1-a Nodes=n1\n" in out["topology.conf"]
    assert "NodeName=n1 Features=region_r1,zone_r1-a\n" in out["slurm-topo-nodes.conf"]
    assert "region_r9" not in out["slurm-topo-nodes.conf"].split("NodeName=n2")[0]


def test_own_features_and_gres_are_kept_on_the_node_line() -> None:
    """Own features come first, then location features; gpus and gpu_type make Gres unless Gres is given."""
    out = render_all(
        merge(
            [
                parse_inventory(
                    "nodes:\n  - {name: 'n[1-2]', region: r1, features: [torch-2.4], gpus: 8, "
                    "gpu_type: h100, slurm: {CPUs: 16, Weight: 5}}\n"
                    "  - {name: n3, gpus: 4, slurm: {Gres: 'gpu:a100:4,nic:1'}}\n"
                )
            ]
        ),
        (22, 5),
    )
    lines = [ln for ln in out["slurm-topo-nodes.conf"].splitlines() if not ln.startswith("#")]
    assert lines == [
        "NodeName=n[1-2] CPUs=16 Gres=gpu:h100:8 Weight=5 Features=torch-2.4,region_r1",
        "NodeName=n3 Gres=gpu:a100:4,nic:1",
    ]
    assert "NodeName=DEFAULT" not in out["slurm-topo-nodes.conf"]


def _slurm_hostnames(tmp_path: Path, expression: str) -> list[str] | None:
    """Slurm's own reading of a hostlist (``scontrol show hostnames``; no daemon is contacted), or None when
    scontrol is not installed."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return None
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\n")
    proc = subprocess.run(
        [scontrol, "show", "hostnames", expression],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(conf)},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def _no_scontrol(what: str) -> None:
    """Without scontrol: skip here, but fail in CI (which installs Slurm: the check must run there)."""
    unavailable(f"scontrol is not installed: {what}")


def test_more_than_65536_nodes_under_one_leaf_are_split_into_ranges_slurm_reads(tmp_path: Path) -> None:
    """Slurm reads at most 65 536 hosts in one range (hostlist.c MAX_RANGE: `n[1-65537]` is "Too many hosts in
    range"); topology.conf `Nodes=` and the NodeName= line split longer runs, and Slurm reads back every
    node."""
    out = render_all(merge([parse_inventory("nodes:\n  - {name: 'n[1-70000]', region: r1}\n")]), (22, 5))
    nodes = next(line for line in out["topology.conf"].splitlines() if line.startswith("SwitchName=leaf_r1 "))
    expr = nodes.split("Nodes=", 1)[1]
    assert expr == "n[1-65536],n[65537-70000]"
    node_line = next(
        line for line in out["slurm-topo-nodes.conf"].splitlines() if line.startswith("NodeName=")
    )
    assert node_line.split()[0] == "NodeName=n[1-65536],n[65537-70000]"
    for lo, hi in re.findall(r"(\d+)-(\d+)", expr):
        assert int(hi) - int(lo) + 1 <= SLURM_MAX_RANGE
    want = [f"n{i}" for i in range(1, 70001)]
    got = _slurm_hostnames(tmp_path, expr)
    if got is None:
        _no_scontrol("Slurm's own hostlist reading not checked")
    assert got == want
    assert _slurm_hostnames(tmp_path, "n[1-65536]") == want[:65536]


def test_slurm_misreads_numbers_past_the_suffix_limit(tmp_path: Path) -> None:
    """Why names with a digit run over 2**64-2 are refused: Slurm's hostlist reads 2**64 and 2**64+1 as the
    same host (and 2**64-1 marks an empty range); 2**64-2 round-trips."""
    ok = f"n{SLURM_MAX_SUFFIX}"
    got = _slurm_hostnames(tmp_path, ok)
    if got is None:
        _no_scontrol("Slurm's own reading of long numbers not checked")
    assert got == [ok]
    assert oversized_number(ok) is None
    over = [f"n{2**64}", f"n{2**64 + 1}"]
    assert len(set(_slurm_hostnames(tmp_path, ",".join(over)) or [])) == 1  # two names, one host for Slurm
    assert all(oversized_number(name) is not None for name in over)


def test_slurm_24_11_and_later_hold_at_most_65536_nodes() -> None:
    """From 24.11 slurmctld stops creating node records past MAX_SLURM_NODES (65 536): rendering a larger
    fleet for those releases is one clear error (Slurm's nodes from --nodes-from count too); 22.05-24.05 have
    no such limit (the 70 000-node test above renders for 22.05)."""
    nodes = tuple(Node(f"n{i}", Location("r1")) for i in range(65_536))
    for version in ((24, 11), (25, 11)):
        with pytest.raises(InputError, match=r"65537 nodes: Slurm 24.11 and later hold at most 65536 nodes"):
            render_all(Inventory(nodes=nodes, extra_nodes=("x1",)), version)
