"""NVLink domains on real Slurm: the generated blocks are what slurmctld loads, and jobs stay in one domain.

The fleet is the NVL72 shape scaled down: three NVLink domains (racks) of 4 nodes instead of 18, with the slot
of a fourth (rack-03, out for service) between them, so 4 nodes here play the part of a rack's 18 trays,
``BlockSizes=4,8`` the part of ``18,36`` and ``--segment=2`` the part of an 8-tray EP group. The InfiniBand
leaves cut across the racks (ib-1 = g[01-06], ib-2 = g[07-12]), so a placement by the network tree alone and
one by NVLink domain differ.

* every release: ``--constraint='[nvl_rack-01|nvl_rack-02|nvl_rack-04]'`` (the nvl_ features, the only tool
  before topology/block: 22.05) keeps a job in one domain where the tree would split it;
* 24.05+ (24.11): topology.conf in block syntax (``TopologyPlugin=topology/block``); 24.x stops on a block
  shorter than the base size, so the empty rack-03 slot is a block of ``State=FUTURE`` placeholders
  (``nvl_rack-03-future[1-4]``, in slurm-topo-nodes.conf) that keeps rack-04's block index, and after a move
  a partly filled rack is padded the same way;
* 25.05+ (26.05): topology.yaml with the tree as the cluster default and the blocks as topology ``nvl``,
  chosen by ``PartitionName=nvl ... Topology=nvl``; an empty placeholder keeps rack-04's block index, also
  after a node moves between racks.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

HW = {"CPUs": 2, "RealMemory": 1000}
FLEET = {
    "nvlink": {"topology": "tree"},  # the launcher starts topology/tree; the tests switch to blocks
    "nodes": [
        {
            "name": "g[01-04]",
            "region": "dc1",
            "zone": "dc1-a",
            "network_group": "ib-1",
            "nvlink_domain": "rack-01",
        },
        {
            "name": "g[05-06]",
            "region": "dc1",
            "zone": "dc1-a",
            "network_group": "ib-1",
            "nvlink_domain": "rack-02",
        },
        {
            "name": "g[07-08]",
            "region": "dc1",
            "zone": "dc1-a",
            "network_group": "ib-2",
            "nvlink_domain": "rack-02",
        },
        {
            "name": "g[09-12]",
            "region": "dc1",
            "zone": "dc1-a",
            "network_group": "ib-2",
            "nvlink_domain": "rack-04",
        },
    ],
}
for _entry in FLEET["nodes"]:
    _entry["slurm"] = dict(HW)  # type: ignore[index]
DOMAIN = {
    f"g{i:02d}": d for d, lo in (("rack-01", 1), ("rack-02", 5), ("rack-04", 9)) for i in range(lo, lo + 4)
}


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("nvl", FLEET, nodes_max=13) as c:
        yield c


def generate(cluster: slurmctl.Cluster, moves: dict[str, str] | None = None) -> dict[str, str]:
    """``slurm-topo generate`` for the cluster's release from its own inventory, blocks on (``auto``);
    ``moves`` puts nodes into other domains. Returns the written files' texts."""
    inv = yaml.safe_load((cluster.etc / "inventory.yaml").read_text())
    inv.pop("nvlink", None)
    inv["nvlink"] = {"domains": ["rack-01", "rack-02", "rack-03", "rack-04"]}
    for entry in inv["nodes"]:
        if moves and entry["name"] in moves:
            entry["nvlink_domain"] = moves[entry["name"]]
    work = cluster.base.parent
    (work / "inv-nvl.yaml").write_text(yaml.safe_dump(inv, sort_keys=False))
    out = work / "gen-nvl"
    v = f"{cluster.version[0]}.{cluster.version[1]:02d}"
    p = subprocess.run(
        [
            *slurmctl.slurm_topo_cli(),
            "generate",
            "-i",
            str(work / "inv-nvl.yaml"),
            "-o",
            str(out),
            "--slurm-version",
            v,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return {
        f.name: f.read_text()
        for f in out.iterdir()
        if f.name.startswith("topology.") or f.name == "slurm-topo-nodes.conf"
    }


def install(cluster: slurmctl.Cluster, files: dict[str, str]) -> None:
    """Put the block topology where Slurm reads it, as an admin would, and restart slurmctld."""
    conf = cluster.etc / "slurm.conf"
    text = conf.read_text()
    if "topology.yaml" in files:
        (cluster.etc / "topology.yaml").write_text(files["topology.yaml"])
        if "PartitionName=nvl " not in text:
            text += "PartitionName=nvl Nodes=ALL Topology=nvl State=UP\n"
    else:
        (cluster.etc / "topology.conf").write_text(files["topology.conf"])
        text = re.sub(r"(?m)^TopologyPlugin=.*$", "TopologyPlugin=topology/block", text)
    (cluster.etc / "slurm-topo-nodes.conf").write_text(files["slurm-topo-nodes.conf"])  # placeholders
    conf.write_text(text)
    slurmctl.restart_ctld(cluster.base)


def block_lines(slurm: slurmctl.Slurm, *name: str) -> list[dict[str, str]]:
    out = slurm.out("scontrol", "show", "topology", *name)
    return [slurmctl.parse_kv_line(line) for line in out.splitlines() if line.startswith("BlockName=")]


def run_job(slurm: slurmctl.Slurm, *args: str) -> tuple[str, ...]:
    """Keep g01 and g09 busy, run one job with ``args``, return its nodes (Slurm's own view)."""
    slurm.quiesce()
    # one job per node: under topology/block a job cannot span rack-01 and rack-04 (no common aggregate)
    blockers = [slurm.submit("--exclusive", "-w", n, "--wrap", "sleep 300") for n in ("g01", "g09")]
    for b in blockers:
        slurm.wait_state(b, "RUNNING")
    job = slurm.submit(*args, "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING", timeout=30)
    nodes = slurm.allocation_of(job).nodes
    slurm.cancel(job, *blockers)
    return nodes


def test_domain_feature_or_keeps_a_job_in_one_domain(cluster: slurmctl.Cluster) -> None:
    """Every release (22.05 has no block plugin): the matching OR over the nvl_ features puts a 4-node job on
    the one domain with 4 free nodes, rack-02, across the two IB leaves."""
    slurm = cluster.slurm
    assert slurm.node_features("g05")[-1] == "nvl_rack-02"
    control = run_job(slurm, "-N4")  # the tree alone: two leaves of 5 free nodes, each across two domains
    assert len({DOMAIN[n] for n in control}) > 1, control
    nodes = run_job(slurm, "-N4", "--constraint=[nvl_rack-01|nvl_rack-02|nvl_rack-04]")
    assert {DOMAIN[n] for n in nodes} == {"rack-02"}, nodes


@pytest.mark.slurm_min("24.05", reason="topology/block with BlockSizes")
def test_blocks_are_loaded_in_the_generated_order_and_jobs_stay_in_one_domain(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    files = generate(cluster)
    install(cluster, files)
    yaml_release = "topology.yaml" in files
    part = ("-p", "nvl") if yaml_release else ()
    blocks = block_lines(slurm, "nvl") if yaml_release else block_lines(slurm)
    expected = ["nvl_rack-01", "nvl_rack-02", "nvl_rack-03", "nvl_rack-04"]
    assert [b["BlockName"] for b in blocks] == expected
    assert [int(b["BlockIndex"]) for b in blocks] == list(range(len(expected)))
    for b in blocks:
        members = slurm.hostnames(b.get("Nodes", "")) if b.get("Nodes") not in (None, "", "(null)") else ()
        pads = [n for n in members if n not in DOMAIN]
        assert {DOMAIN[n] for n in members if n in DOMAIN} <= {b["BlockName"].removeprefix("nvl_")}
        assert b["BlockSize"] == "4"
        if yaml_release:
            assert pads == [], b  # 25.05+ takes short and empty blocks as they are
        elif b["BlockName"] == "nvl_rack-03":  # 24.x: the empty slot, four placeholders
            assert pads == [f"nvl_rack-03-future{k}" for k in range(1, 5)], b
            for n in pads:
                assert "State=FUTURE" in slurm.out("scontrol", "--future", "show", "node", n), n
        else:
            assert pads == [], b
    # a 4-node job: the only whole free domain (the tree alone has two leaves of 5 free nodes)
    if yaml_release:  # partition main still places by the tree (cluster_default): across two domains
        control = run_job(slurm, "-p", "main", "-N4")
        assert len({DOMAIN[n] for n in control}) > 1, control
    nodes = run_job(slurm, *part, "-N4")
    assert {DOMAIN[n] for n in nodes} == {"rack-02"}, nodes
    # --segment=2: every 2-node segment inside one domain, so each domain holds an even share of the job
    nodes = run_job(slurm, *part, "-N4", "--segment=2")
    per_domain = [sum(1 for n in nodes if DOMAIN[n] == d) for d in ("rack-01", "rack-02", "rack-04")]
    assert all(c % 2 == 0 for c in per_domain), (nodes, per_domain)


@pytest.mark.slurm_min("24.05", reason="placeholders (24.x: FUTURE nodes; 25.05+: short and empty blocks)")
def test_a_node_moved_between_racks_leaves_the_other_blocks_in_place(cluster: slurmctl.Cluster) -> None:
    """g12 moves from rack-04 into the empty rack-03 slot: rack-01, rack-02 and rack-04 keep their indices.
    On 24.x both racks are then partly filled and padded; a 12-node job still runs on the 12 real nodes (the
    16-node aggregate of all four blocks) and a 4-node job only where a rack has 4 real nodes free."""
    slurm = cluster.slurm
    yaml_release = cluster.version >= (25, 5)
    name = ("nvl",) if yaml_release else ()
    install(cluster, generate(cluster))
    before = {b["BlockName"]: b["BlockIndex"] for b in block_lines(slurm, *name)}
    install(cluster, generate(cluster, {"g12": "rack-03"}))  # the launcher writes one entry per node
    after = block_lines(slurm, *name)
    assert {b["BlockName"]: b["BlockIndex"] for b in after} == before
    real = {b["BlockName"]: tuple(n for n in slurm.hostnames(b["Nodes"]) if n in DOMAIN) for b in after}
    assert real["nvl_rack-03"] == ("g12",) and real["nvl_rack-04"] == ("g09", "g10", "g11")
    if not yaml_release:
        pads = {b["BlockName"]: [n for n in slurm.hostnames(b["Nodes"]) if n not in DOMAIN] for b in after}
        assert pads["nvl_rack-03"] == [f"nvl_rack-03-future{k}" for k in range(1, 4)]
        assert pads["nvl_rack-04"] == ["nvl_rack-04-future1"]
        slurm.quiesce()
        job = slurm.submit("-N12", "--wrap", "sleep 300")
        slurm.wait_state(job, "RUNNING", timeout=30)
        assert set(slurm.allocation_of(job).nodes) == set(DOMAIN), "every real node, no placeholder"
        slurm.cancel(job)
        nodes = run_job(slurm, "-N4")  # g01, g09 busy: rack-02 is the one rack with 4 real nodes free
        assert {DOMAIN[n] for n in nodes} == {"rack-02"}, nodes
    install(cluster, generate(cluster))  # leave the module's cluster as the other tests found it
