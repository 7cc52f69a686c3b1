"""A fleet imported from the providers' own fabric runs on real Slurm (issue 47).

The inventory is what ``slurm-topo import`` makes of tests/fixtures/providers/: a GCE listing with
``physicalHostTopology`` blocks and sub-blocks (four A4X VMs in one block, two sub-blocks = two NVLink
domains;
two A3 Ultra VMs in another block; a login VM with none) and an AWS account's ``describe-instances`` with its
``describe-instance-topology`` (zones by AZ id; the top network node as the network group, the lower ones as
switches below it; an UltraServer's capacity block as the NVLink domain). Slurm's own view is asserted:
``scontrol show topology`` has the provider's blocks as switches under the zones' ids and the layers below
them (GCE sub-block and host, AWS's lower network nodes) as switches under the blocks, jobs that ask
``--locality`` (through the submit filter) land inside one block / one NVLink domain, and a job kept to one
block that fits under one deeper switch is placed inside it by the tree (``scontrol show job -d``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

from slurm_topo.core import hostlist
from slurm_topo.sources.providers import Companion, import_listing

pytestmark = pytest.mark.slurm

PROV = Path(__file__).parent.parent / "fixtures" / "providers"
HW = {"CPUs": 2, "RealMemory": 1000}


def _fleet() -> dict[str, object]:
    gcp = import_listing("gcp", (PROV / "gcp-instances-physical-topology.json").read_text())
    aws = import_listing(
        "aws",
        (PROV / "aws-account-a-describe-instances.json").read_text(),
        topology=Companion((PROV / "aws-account-a-describe-instance-topology.json").read_text(), "topo"),
    )
    nodes = yaml.safe_load(gcp.text)["nodes"] + yaml.safe_load(aws.text)["nodes"]
    for entry in nodes:
        entry["slurm"] = dict(HW)
    return {"nvlink": {"topology": "tree"}, "nodes": nodes}


FLEET = _fleet()
COUNT = 21  # 9 GCE VMs, 12 EC2 instances
B1, B2 = "a1b2c3d4e5f60718293a4b5c6d7e8f90", "0f9e8d7c6b5a49382716f5e4d3c2b1a0"
GROUPS = {
    f"ng_us-central1-b.{B1}": {"a4x-01", "a4x-02", "a4x-03", "a4x-04"},
    f"ng_us-central1-b.{B2}": {"a3u-01", "a3u-02", "a3h-01", "a3h-02"},
    "ng_use1-az1.nn-1a11111111example": {"p5-a-01", "p5-a-02", "p5-a-05", "p5-a-06"},
    "ng_use1-az1.nn-1b22222222example": {"p5-a-03", "p5-a-04"},
    "ng_use1-az1.nn-1c66666666example": {"b200-a-01", "b200-a-02"},
    "ng_use1-az1.nn-1d00000000example": {"gb200-a-01", "gb200-a-02", "gb200-a-03"},
}
DOMAINS = {
    "5e1c0a93d7b24f6e8a1b2c3d4e5f6071": {"a4x-01", "a4x-02"},
    "7d2e4f6a8b0c1d3e5f708192a3b4c5d6": {"a4x-03", "a4x-04"},
    "cr-0ccc000000000001": {"gb200-a-01", "gb200-a-02"},
}


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("fabric", FLEET, "--with-filter", nodes_max=COUNT) as c:
        yield c


@pytest.fixture
def slurm(cluster: slurmctl.Cluster) -> Iterator[slurmctl.Slurm]:
    s = cluster.slurm
    s.quiesce()
    yield s
    s.quiesce()


def _below() -> dict[str, tuple[str, ...]]:
    """Each imported node's layers below its block, top first, as the listings give them."""
    return {
        name: tuple(entry.get("switches") or ())
        for entry in FLEET["nodes"]  # type: ignore[attr-defined]
        for name in hostlist.expand(entry["name"])
    }


def _level(members: set[str], start: tuple[str, ...]) -> int:
    """The level Slurm must give the switch at ``start`` (layers below the block of ``members``): one a layer
    down to the deepest node, one more where a node's last layer also has layers below it (its nodes then sit
    on a leaf of their own)."""
    below = {n: layers for n, layers in _below().items() if n in members}
    under = [layers for layers in below.values() if layers[: len(start)] == start]
    mixed = {p for p in below.values() if any(q != p and q[: len(p)] == p for q in below.values())}
    return max(len(layers) - len(start) + (layers in mixed) for layers in under)


def test_slurm_shows_the_providers_blocks_under_the_zone_ids(slurm: slurmctl.Slurm) -> None:
    topo = slurm.topology()
    for name, members in GROUPS.items():
        assert topo[name].nodes == members, name  # a parent lists every node below it
        assert topo[name].level == _level(members, ()), name  # one level a layer below
    assert topo[f"ng_us-central1-b.{B2}"].level == 2  # sub-block, then the host two VMs share
    assert topo["zone_use1-az1"].level == 3  # above the blocks with two layers below them
    assert topo["zone_use1-az2"].nodes == {"p5-a-09"} and topo["zone_use1-az2"].level == 1
    assert topo["zone_us-central1-b"].nodes >= GROUPS[f"ng_us-central1-b.{B1}"]
    assert "zone_us-east-1a" not in topo  # the AZ name is a label, not the zone


def test_slurm_shows_the_layers_below_the_blocks(slurm: slurmctl.Slurm) -> None:
    """Every layer of every node is a switch (``leaf_<zone>.<id>``) holding it, one level above the layer
    below it, a child of the layer (or block) above; the last layer holds the node itself."""
    topo = slurm.topology()
    zone_of = {
        n: entry["zone"]
        for entry in FLEET["nodes"]  # type: ignore[attr-defined]
        for n in hostlist.expand(entry["name"])
    }
    ng_of = {n: ng for ng, members in GROUPS.items() for n in members}
    below = _below()
    for node, layers in below.items():
        parent = ng_of.get(node)
        for depth, label in enumerate(layers):
            name = f"leaf_{zone_of[node]}.{label}"
            assert node in topo[name].nodes, (node, name)
            assert topo[name].level == _level(set(GROUPS[ng_of[node]]), layers[: depth + 1]), name
            assert parent is not None and name in topo[parent].switches, (parent, name)
            parent = name
    # what the import kept: hosts and leaves holding one node of the listing are left out
    assert below["a3h-01"] == ("9a8b7c6d5e4f30211f2e3d4c5b6a7988", "c0ffee00h07aa11bb22cc33dd44ee55ff")
    assert below["a3u-01"] == ("9a8b7c6d5e4f30211f2e3d4c5b6a7988",)
    assert below["b200-a-01"] == ("nn-2c77777777example", "nn-3c88888888example")
    assert below["p5-a-01"] == ("nn-2a33333333example",)
    assert sum(map(len, below.values())) == 2 * 9 + 10  # a3h, p5-a-0[56], b200, gb200: 2; a4x, a3u, p5: 1
    mixed = topo["leaf_us-central1-b.9a8b7c6d5e4f30211f2e3d4c5b6a7988.nodes"]
    assert mixed.nodes == {"a3u-01", "a3u-02"} and mixed.level == 0
    leaf = topo["leaf_use1-az1.nn-3d00000002example"]
    assert leaf.nodes == {"gb200-a-01", "gb200-a-02", "gb200-a-03"} and leaf.switches == frozenset()


def test_network_group_locality_keeps_a_job_inside_one_block(slurm: slurmctl.Slurm) -> None:
    fillers = [
        slurm.submit("--locality=any", "--exclusive", "-w", n, "--wrap", "sleep 300")
        for n in ("gb200-a-01", "p5-a-01", "p5-a-05", "a3u-01", "a3h-01")
    ]
    for f in fillers:
        slurm.wait_state(f, "RUNNING")
    job = slurm.submit("--locality=network_group", "--exclusive", "-N3", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert len(nodes) == 3
    assert nodes <= GROUPS[f"ng_us-central1-b.{B1}"], nodes  # the one block with 3 free nodes
    slurm.cancel(job, *fillers)


@pytest.mark.parametrize(
    ("busy", "block", "inside"),
    [
        # layer 2 nn-2a33: p5-a-01 (busy), p5-a-02; nn-2a34: p5-a-05, p5-a-06 -> the free pair's switch
        ("p5-a-01", "ng_use1-az1.nn-1a11111111example", {"p5-a-05", "p5-a-06"}),
        # sub-block 1: a4x-01 (busy), a4x-02; sub-block 2: a4x-03, a4x-04
        ("a4x-01", f"ng_us-central1-b.{B1}", {"a4x-03", "a4x-04"}),
    ],
)
def test_a_job_that_fits_under_one_deeper_switch_is_placed_inside_it(
    slurm: slurmctl.Slurm, busy: str, block: str, inside: set[str]
) -> None:
    """Kept to one block by its feature, a 2-node job has 3 free nodes there: one under a switch with a busy
    node, two under the other. With the layers the tree takes the lowest switch that fits, so the pair;
    without them (the block a flat leaf) it would take the first two free nodes by name (one of each)."""
    filler = slurm.submit("--locality=any", "--exclusive", "-w", busy, "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit("--locality=any", "--exclusive", "-N2", f"--constraint={block}", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert nodes == inside, nodes
    topo = slurm.topology()
    under = [name for name, sw in topo.items() if name.startswith("leaf_") and nodes <= sw.nodes]
    assert any(name in topo[block].switches for name in under), under  # one switch below the block
    slurm.cancel(job, filler)


def test_nvl_locality_keeps_a_job_inside_one_sub_block_or_capacity_block(slurm: slurmctl.Slurm) -> None:
    fillers = [
        slurm.submit("--locality=any", "--exclusive", "-w", n, "--wrap", "sleep 300")
        for n in ("a4x-01", "gb200-a-02")
    ]
    for f in fillers:
        slurm.wait_state(f, "RUNNING")
    job = slurm.submit("--locality=nvl", "--exclusive", "-N2", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING")
    nodes = set(slurm.allocation_of(job).nodes)
    assert nodes == DOMAINS["7d2e4f6a8b0c1d3e5f708192a3b4c5d6"], nodes  # the one domain with 2 free
    slurm.cancel(job, *fillers)


def _chain_conf(depth: int, nodes: str) -> str:
    """root -> s1 -> ... -> s<depth-1> -> a leaf of every node, written parents first: ``depth`` passes."""
    names = ["root", *(f"s{i}" for i in range(1, depth)), "leaf"]
    lines = [f"SwitchName={a} Switches={b}\n" for a, b in zip(names[:-1], names[1:], strict=True)]
    return "".join(lines) + f"SwitchName=leaf Nodes={nodes}\n"


@pytest.mark.netns  # the throwaway slurmctld's namespace needs an address (CAP_NET_ADMIN): in the image,
# which has none to give, its proof of these files ran out of time (getaddrinfo retries); the host runs it
def test_lints_too_deep_exactly_where_slurmctld_stops(cluster: slurmctl.Cluster) -> None:
    """Slurm resolves switch levels in passes over the lines and stops after the 21st: a parents-first chain
    of 21 switches above the leaf loads, one of 22 stops slurmctld ("Switch configuration is not a tree"), and
    ``lint`` says ``too-deep`` for the second only (a throwaway slurmctld on the cluster's own files)."""
    from slurm_topo.apply.prove import ThrowawayController
    from slurm_topo.slurmconfig.lint import SLURM_LEVEL_PASSES, lint_file

    wrapper = cluster.base / "clients" / "slurmctld"  # the cluster's own (the release root's for 24.11/26.05)
    prover = ThrowawayController(slurmctld=str(wrapper) if wrapper.exists() else None, expect=cluster.version)
    nodes = hostlist.compress(sorted(_below()))
    for depth, verdict in ((SLURM_LEVEL_PASSES, "accepted"), (SLURM_LEVEL_PASSES + 1, "rejected")):
        text = _chain_conf(depth, nodes)
        codes = [p.code for p in lint_file(text, slurm_version=cluster.version)]
        assert ("too-deep" in codes) == (verdict == "rejected"), codes
        proof = prover.prove(cluster.etc, {"topology.conf": text.encode()}, timeout=120)
        assert proof.verdict == verdict, proof
        if verdict == "rejected":
            assert "not a tree" in proof.error, proof


@pytest.fixture(scope="module")
def yaml_cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    fleet = {"nodes": FLEET["nodes"]}  # nvlink: auto: topology.yaml (the tree and the NVLink blocks)
    with scratch_cluster("fabricyaml", fleet, nodes_max=COUNT) as c:
        yield c


@pytest.mark.slurm_min("25.05", reason="topology.yaml")
def test_topology_yaml_carries_the_layers_below_the_blocks(yaml_cluster: slurmctl.Cluster) -> None:
    """The same fleet with its NVLink domains as blocks: the tree is topology.yaml's cluster default, and it
    has the same switches below the blocks; the tree still places the 2-node job under one of them."""
    assert (yaml_cluster.etc / "topology.yaml").exists()
    assert not (yaml_cluster.etc / "topology.conf").exists()
    slurm = yaml_cluster.slurm
    slurm.quiesce()
    topo = slurm.topology()
    assert topo["ng_use1-az1.nn-1a11111111example"].level == 2
    assert topo["leaf_use1-az1.nn-2a34343434example"].nodes == {"p5-a-05", "p5-a-06"}
    assert topo["leaf_use1-az1.nn-3c88888888example"].level == 0
    assert topo[f"leaf_us-central1-b.{'7d2e4f6a8b0c1d3e5f708192a3b4c5d6'}"].nodes == {"a4x-03", "a4x-04"}
    filler = slurm.submit("--exclusive", "-w", "p5-a-01", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit(
        "--exclusive", "-N2", "--constraint=ng_use1-az1.nn-1a11111111example", "--wrap", "sleep 300"
    )
    slurm.wait_state(job, "RUNNING")
    assert set(slurm.allocation_of(job).nodes) == {"p5-a-05", "p5-a-06"}
    slurm.cancel(job, filler)
    slurm.quiesce()
