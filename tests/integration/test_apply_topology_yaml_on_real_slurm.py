"""`slurm-topo apply` switching a running cluster from the network tree (topology.conf) to NVLink blocks:
topology.yaml on 25.05+ (26.05), a block topology.conf on 24.05-24.11 (24.11) — and back, with Slurm's own
parser proving every set and the journal rolling back.

The fleet is the NVL72 shape scaled down as in test_block_topology_on_real_slurm.py: 4 nodes per NVLink
domain stand for a rack's 18 trays, three racks (rack-01, rack-02, rack-04) and the empty slot of rack-03.
The cluster starts on the tree (``nvlink: {topology: tree}``); apply then puts the blocks live with one
``scontrol reconfigure``, and what slurmctld loaded is read back with ``scontrol show topology [NAME]`` and
``scontrol show config``. A topology.yaml Slurm refuses never goes live (the throwaway controller), one
slurmctld loads other than written is rolled back to topology.conf (exit 12), and so is a run killed after
the reconfigure (``--recover``).

Run: ``pytest tests/integration/test_apply_topology_yaml_on_real_slurm.py --slurm-versions 24.11,26.05``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import slurmctl
import yaml
from slurmctl import EnvRunner

from slurm_topo.apply import ApplyOptions, recover, run_apply
from slurm_topo.apply.prove import ThrowawayController
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import RenderOptions, render_all

pytestmark = pytest.mark.slurm

HW = {"CPUs": 2, "RealMemory": 1000}
RACKS = (("rack-01", "g[01-04]", "ib-1"), ("rack-02", "g[05-08]", "ib-1"), ("rack-04", "g[09-12]", "ib-2"))
FLEET = {
    "nvlink": {"topology": "tree"},
    "nodes": [
        {
            "name": nodes,
            "region": "dc1",
            "zone": "dc1-a",
            "network_group": ib,
            "nvlink_domain": rack,
            "slurm": dict(HW),
        }
        for rack, nodes, ib in RACKS
    ],
}
DOMAINS = ["rack-01", "rack-02", "rack-03", "rack-04"]
LIVE = ("topology.conf", "topology.yaml", "slurm-topo-nodes.conf", "gres.conf", "slurm_topo_data.lua")


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("applyyaml", FLEET, nodes_max=13) as c:
        yield c


def rendered(c: slurmctl.Cluster, blocks: bool = True) -> dict[str, str]:
    """What `slurm-topo apply` renders for the cluster's release from its own inventory (expanded by the
    launcher, one entry per node): the NVLink blocks on, or the tree only."""
    inv = yaml.safe_load((c.etc / "inventory.yaml").read_text())
    inv["nvlink"] = {"domains": DOMAINS} if blocks else {"domains": DOMAINS, "topology": "tree"}
    path = c.base.parent / "inventory-apply.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return render_all(
        merge([load_inventory_file(path)]),
        c.version,
        None,
        RenderOptions(True, str(c.base / "dev" / "nvidia")),
    )


def options(c: slurmctl.Cluster, **kw: object) -> ApplyOptions:
    """Apply options for the cluster: its release given, and its own slurmctld (inside the release's root)
    as the throwaway controller that proves each set."""
    wrapper = c.base / "clients" / "slurmctld"
    kw.setdefault("min_interval", 0)
    kw.setdefault(
        "prover",
        ThrowawayController(slurmctld=str(wrapper) if wrapper.exists() else None, expect=c.version),
    )
    return ApplyOptions(  # type: ignore[arg-type]
        slurm_dir=c.etc, state_dir=c.base / "apply-state", slurm_version=c.version, **kw
    )


def live_bytes(c: slurmctl.Cluster) -> dict[str, bytes | None]:
    return {n: (c.etc / n).read_bytes() if (c.etc / n).exists() else None for n in LIVE}


def lines(slurm: slurmctl.Slurm, key: str, *name: str) -> list[dict[str, str]]:
    out = slurm.out("scontrol", "show", "topology", *name)
    return [slurmctl.parse_kv_line(ln) for ln in out.splitlines() if ln.startswith(f"{key}=")]


def plugin(slurm: slurmctl.Slurm) -> str:
    out = slurm.out("scontrol", "show", "config")
    return next(ln.split("=", 1)[1].strip() for ln in out.splitlines() if ln.startswith("TopologyPlugin"))


def no_topology(slurm: slurmctl.Slurm, name: str) -> None:
    """slurmctld knows no topology ``name`` (26.05 says so on stderr and exits 0)."""
    p = slurm.run(["scontrol", "show", "topology", name], check=False)
    assert not p.stdout and "Requested topology configuration is not available" in p.stderr, (
        p.stdout,
        p.stderr,
    )


def proven(res: object) -> bool:
    return any(
        d.startswith("proof: throwaway slurmctld") and "loaded the set" in d
        for d in res.details  # type: ignore[attr-defined]
    )


def expected_blocks(c: slurmctl.Cluster) -> list[tuple[str, tuple[str, ...]]]:
    """(block, nodes) in the generated order: the empty rack-03 slot is an empty block from 25.05 and a block
    of four State=FUTURE placeholders on 24.x (which stops on a short block)."""
    members = {rack: c.slurm.hostnames(nodes) for rack, nodes, _ in RACKS}
    if c.version < (25, 5):
        members["rack-03"] = tuple(f"nvl_rack-03-future{k}" for k in range(1, 5))
    return [(f"nvl_{d}", members.get(d, ())) for d in DOMAINS]


@pytest.mark.slurm_min("24.05", reason="topology/block with BlockSizes (24.05), topology.yaml (25.05)")
def test_apply_switches_a_running_cluster_from_the_tree_to_nvlink_blocks(cluster: slurmctl.Cluster) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    runner = EnvRunner(dict(cluster.env))
    yaml_release = cluster.version >= (25, 5)
    tree = {s["SwitchName"] for s in lines(slurm, "SwitchName")}
    assert "root" in tree and plugin(slurm) == "topology/tree"
    before = live_bytes(cluster)
    new = rendered(cluster)
    assert ("topology.yaml" in new) == yaml_release and ("topology.conf" in new) != yaml_release

    if not yaml_release:
        # a block topology.conf needs TopologyPlugin=topology/block, which only the admin sets in slurm.conf
        res = run_apply(options(cluster), new, runner)
        assert res.exit_code == 11 and "set TopologyPlugin=topology/block there first" in res.summary, res
        assert live_bytes(cluster) == before and ["scontrol", "reconfigure"] not in runner.calls
        conf = cluster.etc / "slurm.conf"
        conf.write_text(re.sub(r"(?m)^TopologyPlugin=.*$", "TopologyPlugin=topology/block", conf.read_text()))
        assert plugin(slurm) == "topology/tree"  # not read yet

    res = run_apply(options(cluster, detailed_exitcodes=True), new, runner)
    assert (res.exit_code, res.status) == (10, "applied"), res
    assert proven(res), res.details
    assert runner.calls.count(["scontrol", "reconfigure"]) == 1

    if yaml_release:
        assert (cluster.etc / "topology.yaml").read_text() == new["topology.yaml"]
        assert not (cluster.etc / "topology.conf").exists(), "topology.conf was not retired"
        (done,) = [p for p in (cluster.base / "apply-state" / "sets").iterdir()]
        assert (done / "old" / "topology.conf").read_bytes() == before["topology.conf"]
        assert "topology: tree -> yaml; topology.conf retired" in res.summary
        blocks = lines(slurm, "BlockName", "nvl")
        # the network tree is the cluster default, now read from topology.yaml
        assert {s["SwitchName"] for s in lines(slurm, "SwitchName")} == tree
    else:
        assert (cluster.etc / "topology.conf").read_text() == new["topology.conf"]
        assert plugin(slurm) == "topology/block", "the reconfigure did not switch the plugin"
        assert "switched by the reconfigure" in res.summary
        blocks = lines(slurm, "BlockName")
    got = [(b["BlockName"], slurm.hostnames(b.get("Nodes", ""))) for b in blocks]
    assert got == expected_blocks(cluster)
    assert [int(b["BlockIndex"]) for b in blocks] == list(range(len(blocks)))

    files = live_bytes(cluster)
    again = run_apply(options(cluster), new, runner)
    assert again.status == "unchanged", again
    assert live_bytes(cluster) == files


@pytest.mark.slurm_min("25.05", reason="topology.yaml")
def test_a_topology_yaml_slurm_refuses_leaves_topology_conf_live_and_a_failed_switch_rolls_back(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    runner = EnvRunner(dict(cluster.env))
    # back to the tree first: apply retires topology.yaml and puts topology.conf live again
    tree = rendered(cluster, blocks=False)
    was_yaml = (cluster.etc / "topology.yaml").exists()
    res = run_apply(options(cluster), tree, runner)
    assert res.status == "applied", res
    assert ("topology: yaml -> tree; topology.yaml retired" in res.summary) == was_yaml, res.summary
    assert not (cluster.etc / "topology.yaml").exists()
    assert (cluster.etc / "topology.conf").read_text() == tree["topology.conf"]
    no_topology(slurm, "nvl")
    before = live_bytes(cluster)
    switches = lines(slurm, "SwitchName")

    # 1. a yaml our lint passes but slurmctld does not load (a block of nodes slurm.conf does not define:
    #    only Slurm knows its nodes): refused by the throwaway controller
    new = rendered(cluster)
    bad = dict(new)
    head, sep, blocks = new["topology.yaml"].partition("  block:\n")
    bad["topology.yaml"] = head + sep + re.sub(r'nodes: "[^"]*"', 'nodes: "nosuch[01-02]"', blocks, count=1)
    assert bad["topology.yaml"] != new["topology.yaml"]
    runner = EnvRunner(dict(cluster.env))
    res = run_apply(options(cluster), bad, runner)
    assert (res.exit_code, res.status) == (11, "refused"), res
    assert "Slurm's own parser rejects the new set" in res.summary
    assert 'lookup failure for node "nosuch01"' in res.summary, res.summary  # slurmctld's own words
    assert live_bytes(cluster) == before and ["scontrol", "reconfigure"] not in runner.calls
    assert "UP" in slurm.out("scontrol", "ping")

    # 2. the good yaml goes live and slurmctld loads it; the run dies before it is recorded: the next run
    #    (here --recover) restores topology.conf, removes the yaml and reconfigures on the old set
    class Crash(BaseException):
        pass

    def crash(step: str) -> None:
        if step == "reconfigured":
            raise Crash(step)

    with pytest.raises(Crash):
        run_apply(options(cluster, step_hook=crash), new, runner)
    assert (cluster.etc / "topology.yaml").exists() and not (cluster.etc / "topology.conf").exists()
    assert [b["BlockName"] for b in lines(slurm, "BlockName", "nvl")][0] == "nvl_rack-01"  # it was live
    res = recover(options(cluster), runner)
    assert (res.exit_code, res.status) == (0, "recovered"), res
    assert "reconfigured on the old files" in res.summary
    assert live_bytes(cluster) == before
    no_topology(slurm, "nvl")
    assert lines(slurm, "SwitchName") == switches
    assert not (cluster.base / "apply-state" / "journal.json").exists()

    # 3. a yaml slurmctld loads but not as written (the block topology under the tree's name: Slurm keeps
    #    one of the two): the verification sees it, the old files come back, slurmctld is reconfigured on them
    odd = dict(new)
    odd["topology.yaml"] = new["topology.yaml"].replace("- topology: nvl\n", "- topology: fabric\n")
    runner = EnvRunner(dict(cluster.env))
    res = run_apply(options(cluster, verify_timeout=5), odd, runner)
    assert (res.exit_code, res.status) == (12, "rolled-back"), res
    assert "slurmctld does not show what was written" in res.summary and proven(res), res
    assert runner.calls.count(["scontrol", "reconfigure"]) == 2
    assert live_bytes(cluster) == before
    assert lines(slurm, "SwitchName") == switches


@pytest.mark.slurm_min("24.05", reason="topology/block with BlockSizes (24.05), topology.yaml (25.05)")
def test_the_launcher_starts_a_cluster_on_generated_nvlink_blocks(scratch_cluster) -> None:  # type: ignore[no-untyped-def]
    """docker-slurm/cluster up on a fleet with NVLink domains: TopologyPlugin=topology/block for a block
    topology.conf (24.11); topology.yaml plus a partition nvl with Topology=nvl (26.05)."""
    fleet = {**FLEET, "nvlink": {"domains": DOMAINS}}
    with scratch_cluster("launchnvl", fleet, nodes_max=13) as c:
        slurm = c.slurm
        yaml_release = c.version >= (25, 5)
        assert (c.etc / "topology.yaml").exists() == yaml_release
        assert (c.etc / "topology.conf").exists() != yaml_release
        if yaml_release:
            blocks = lines(slurm, "BlockName", "nvl")
            part = slurmctl.parse_kv_line(slurm.out("scontrol", "show", "partition", "nvl", "-o"))
            assert slurm.hostnames(part["Nodes"]) == tuple(f"g{i:02d}" for i in range(1, 13)), part
            job = slurm.submit("-p", "nvl", "-N4", "--wrap", "sleep 30")
            slurm.wait_state(job, "RUNNING", timeout=30)
            nodes = set(slurm.allocation_of(job).nodes)
            slurm.cancel(job)
            assert any(nodes == set(members) for _, members in expected_blocks(c)), nodes
        else:
            assert plugin(slurm) == "topology/block"
            blocks = lines(slurm, "BlockName")
        got = [(b["BlockName"], slurm.hostnames(b.get("Nodes", ""))) for b in blocks]
        assert got == expected_blocks(c)
