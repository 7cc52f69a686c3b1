"""``--locality=nvl:segment=N`` through the submit filter and the SPANK plugin on a real Slurm (issue 47,
build item 3): a job larger than any NVLink domain runs in segments of N nodes, each inside one domain, where
job_submit/lua can write ``segment_size`` (25.11.2+: the cached 26.05 root), and is refused at submit with the
release it needs before (22.05, 24.11).

Scaled-down NVL shape: three domains of 3 nodes (an NVL72 rack has 18 trays); the InfiniBand leaves cut across
them (ib-1 = n[1-4], ib-2 = n[5-9]). On 26.05 the generator's topology.yaml keeps the tree as the cluster's
default and the domains as the block topology ``nvl`` that ``PartitionName=nvl … Topology=nvl`` uses (as
tests/integration/test_block_topology_on_real_slurm.py installs it). Assertions read Slurm's own view:
``scontrol show job -d`` (SegmentSize, AdminComment, the nodes) and ``scontrol show topology nvl`` (each
node's block)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

HW = {"CPUs": 2, "RealMemory": 1000}
FLEET = {
    "nvlink": {"topology": "tree"},  # the launcher starts the tree; the 26.05 test installs the blocks
    "nodes": [
        {"name": "n[1-3]", "region": "r1", "zone": "z1", "network_group": "ib-1", "nvlink_domain": "rack-01"},
        {"name": "n4", "region": "r1", "zone": "z1", "network_group": "ib-1", "nvlink_domain": "rack-02"},
        {"name": "n[5-6]", "region": "r1", "zone": "z1", "network_group": "ib-2", "nvlink_domain": "rack-02"},
        {"name": "n[7-9]", "region": "r1", "zone": "z1", "network_group": "ib-2", "nvlink_domain": "rack-03"},
    ],
}
for entry in FLEET["nodes"]:  # type: ignore[attr-defined]
    entry["slurm"] = HW

SEGMENT_RELEASE = (25, 11)  # 25.11.2: the first patch level whose job_submit/lua writes segment_size
CAPTURE_ENV = "SLURM_TOPO_CAPTURE_SEGMENT"
"""A folder: the 26.05 run test writes Slurm's own outputs for its jobs there, byte for byte (the captures of
tests/fixtures/real/slurm-26.05/segment-job/, README there)."""


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("nvlseg", FLEET, "--with-filter", nodes_max=9) as c:
        yield c


def job_detail(slurm: slurmctl.Slurm, job: str) -> dict[str, str]:
    """``scontrol show job -d`` as Key=value tokens, the free-text fields (AdminComment, Comment) as their own
    lines say them."""
    out: dict[str, str] = {}
    for line in slurm.out("scontrol", "show", "job", "-d", job).splitlines():
        line = line.strip()
        if line.startswith(("AdminComment=", "Comment=")):
            key, _, value = line.partition("=")
            out[key] = value
            continue
        for token in line.split():
            key, eq, value = token.partition("=")
            if eq and key not in out:
                out[key] = value
    return out


def explain(cluster: slurmctl.Cluster, job: str) -> str:
    """``slurm-topo explain JOB`` against the cluster, its output (exit 0 asserted)."""
    p = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "explain", job],
        env=dict(cluster.env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, (p.stdout, p.stderr)
    return p.stdout


def capture(slurm: slurmctl.Slurm, name: str, job: str) -> None:
    """With $SLURM_TOPO_CAPTURE_SEGMENT set: Slurm's outputs for ``job`` written there unedited
    (``NAME-show-job-d.txt``, ``NAME-show-job-o.txt``, ``NAME-show-node-o.txt`` of its nodes)."""
    folder = os.environ.get(CAPTURE_ENV)
    if not folder:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}-show-job-d.txt").write_text(slurm.out("scontrol", "show", "job", "-d", job))
    (out / f"{name}-show-job-o.txt").write_text(slurm.out("scontrol", "show", "job", "-o", job))
    nodes = ",".join(slurm.allocation_of(job).nodes)
    (out / f"{name}-show-node-o.txt").write_text(slurm.out("scontrol", "show", "node", "-o", nodes))


def install_blocks(cluster: slurmctl.Cluster) -> None:
    """``slurm-topo generate`` for this release, blocks on: topology.yaml (tree as the cluster default, the
    domains as topology ``nvl``) and ``PartitionName=nvl … Topology=nvl``, then slurmctld restarted."""
    inv = yaml.safe_load((cluster.etc / "inventory.yaml").read_text())
    inv.pop("nvlink", None)
    work = cluster.base.parent
    (work / "inv-seg.yaml").write_text(yaml.safe_dump(inv, sort_keys=False))
    out = work / "gen-seg"
    v = f"{cluster.version[0]}.{cluster.version[1]:02d}"
    p = subprocess.run(
        [
            *slurmctl.slurm_topo_cli(),
            "generate",
            "-i",
            str(work / "inv-seg.yaml"),
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
    assert (out / "topology.yaml").is_file(), sorted(f.name for f in out.iterdir())
    (cluster.etc / "topology.yaml").write_text((out / "topology.yaml").read_text())
    conf = cluster.etc / "slurm.conf"
    text = conf.read_text()
    if "PartitionName=nvl " not in text:
        conf.write_text(text + "PartitionName=nvl Nodes=ALL Topology=nvl State=UP\n")
    slurmctl.restart_ctld(cluster.base)


def blocks_of(slurm: slurmctl.Slurm) -> dict[str, str]:
    """node -> its block, from Slurm's ``scontrol show topology nvl``."""
    out: dict[str, str] = {}
    for line in slurm.out("scontrol", "show", "topology", "nvl").splitlines():
        if line.startswith("BlockName="):
            kv = slurmctl.parse_kv_line(line)
            nodes = kv.get("Nodes", "")
            for n in slurm.hostnames(nodes) if nodes not in ("", "(null)") else ():
                out[n] = kv["BlockName"]
    return out


def test_what_the_filter_does_with_a_segment_request_on_this_release(cluster: slurmctl.Cluster) -> None:
    """Every release: ``sbatch --locality=nvl:segment=2 -N4`` (no domain holds 4 nodes). Before 25.11.2 it is
    refused at submit with one line naming the release and the 24.05 ``--segment`` alternative (the sbatch
    error text); from it the job is accepted with SegmentSize=2 in Slurm's record and the filter's record in
    AdminComment (held here, so that no topology is needed: the 26.05 test below runs one)."""
    slurm = cluster.slurm
    slurm.quiesce()
    if cluster.version < SEGMENT_RELEASE:
        err = slurm.submit_error("--locality=nvl:segment=2", "-N4", "--wrap", "true")
        assert "slurm-topo: --locality=nvl:segment=2: 4 nodes is larger than any NVLink domain" in err, err
        assert "from Slurm 25.11.2" in err and "from Slurm 24.05 `sbatch --segment=2`" in err, err
        assert "the largest is rack-01 with 3 nodes" in err, err
        return
    job = slurm.submit("-H", "--locality=nvl:segment=2", "-N4", "--wrap", "true")
    seen = job_detail(slurm, job)
    assert seen["SegmentSize"] == "2", seen
    assert "slurm-topo: nvl:wait segment=2 [4 nodes in segments of 2" in seen["AdminComment"], seen
    slurm.cancel(job)


@pytest.mark.slurm_min(
    "25.11", reason="job_submit/lua writes segment_size from 25.11.2 (segments: topology/block)"
)
def test_a_segment_job_runs_with_each_segment_in_one_domain(cluster: slurmctl.Cluster) -> None:
    """26.05: with n1 busy, ``sbatch -p nvl --locality=nvl:segment=2 -N4`` runs; Slurm's record has
    SegmentSize=2 and no domain bracket, and every block (NVLink domain, ``scontrol show topology nvl``)
    holds an even number of the job's nodes: each 2-node segment inside one domain (the same job without the
    segment gets 1 + 3 from the blocks alone). A size the segment does
    not divide, and a segment larger than every domain, are refused at submit naming both numbers."""
    slurm = cluster.slurm
    install_blocks(cluster)
    slurm.quiesce()
    block = blocks_of(slurm)
    assert set(block.values()) == {"nvl_rack-01", "nvl_rack-02", "nvl_rack-03"}, block
    filler = slurm.submit("--locality=any", "--exclusive", "-w", "n1", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    # the control: the same job without a segment; the blocks alone take n2 + n4-n6 (1 + 3) here
    control = slurm.submit("-p", "nvl", "--exclusive", "--locality=any", "-N4", "--wrap", "sleep 300")
    slurm.wait_state(control, "RUNNING", timeout=30)
    spread = [
        sum(1 for n in slurm.allocation_of(control).nodes if block[n] == b) for b in set(block.values())
    ]
    assert any(c % 2 for c in spread), spread  # a domain with an odd share: what the segment prevents
    capture(slurm, "control", control)
    slurm.cancel(control)
    slurm.wait_state(control, "CANCELLED")
    job = slurm.submit("-p", "nvl", "--exclusive", "--locality=nvl:segment=2", "-N4", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING", timeout=30)
    seen = job_detail(slurm, job)
    assert seen["SegmentSize"] == "2", seen
    assert "segment=2 [4 nodes in segments of 2" in seen["AdminComment"], seen
    assert "nvl_" not in seen.get("Features", ""), seen  # no one-domain bracket: segments may differ
    nodes = slurm.allocation_of(job).nodes
    assert len(nodes) == 4 and "n1" not in nodes, nodes
    per_block = {b: sum(1 for n in nodes if block[n] == b) for b in set(block.values())}
    assert all(c % 2 == 0 for c in per_block.values()), (nodes, per_block)
    assert sum(1 for c in per_block.values() if c) == 2, per_block  # 4 nodes: two domains, 2 + 2
    capture(slurm, "segment", job)
    if os.environ.get(CAPTURE_ENV):
        Path(os.environ[CAPTURE_ENV], "show-topology-nvl.txt").write_text(
            slurm.out("scontrol", "show", "topology", "nvl")
        )
    assert_explain_says_the_segments_hold(cluster, job, 2, per_block)
    slurm.cancel(job)
    slurm.wait_state(job, "CANCELLED")
    # the user's own --segment=2 (the filter records it as theirs and sets nothing): explain judges it alike
    yours = slurm.submit(
        "-p", "nvl", "--exclusive", "--segment=2", "--locality=nvl", "-N4", "--wrap", "sleep 300"
    )
    slurm.wait_state(yours, "RUNNING", timeout=30)
    seen = job_detail(slurm, yours)
    assert seen["SegmentSize"] == "2", seen
    assert "slurm-topo: nvl:wait segment=2 (yours) [4 nodes in segments of 2" in seen["AdminComment"], seen
    nodes = slurm.allocation_of(yours).nodes
    per_block = {b: sum(1 for n in nodes if block[n] == b) for b in set(block.values())}
    assert all(c % 2 == 0 for c in per_block.values()), (nodes, per_block)
    capture(slurm, "yours", yours)
    assert_explain_says_the_segments_hold(cluster, yours, 2, per_block)
    slurm.cancel(yours, filler)
    err = slurm.submit_error("-p", "nvl", "--locality=nvl:segment=3", "-N4", "--wrap", "true")
    assert "the node count 4 is not a multiple of the segment size 3" in err, err
    err = slurm.submit_error("-p", "nvl", "--locality=nvl:segment=4", "-N8", "--wrap", "true")
    assert "the segment size 4 is larger than the largest NVLink domain (rack-01, 3 nodes)" in err, err


def assert_explain_says_the_segments_hold(
    cluster: slurmctl.Cluster, job: str, size: int, per_block: dict[str, int]
) -> None:
    """``slurm-topo explain JOB`` on a running segment job: no BROKEN line, and the segments line names each
    domain Slurm gave it nodes in (``scontrol show topology nvl``) with its share."""
    shown = explain(cluster, job)
    assert "BROKEN" not in shown, shown
    line = next((x for x in shown.splitlines() if x.startswith("  segments:")), "")
    assert line.startswith(
        f"  segments: hold: 4 nodes in segments of {size}, each inside one NVLink domain"
    ), shown
    for block, share in per_block.items():
        if share:
            assert f"{block.removeprefix('nvl_')} {share} nodes" in line, (block, share, shown)


@pytest.mark.slurm_min("25.11", reason="job_submit/lua writes segment_size from 25.11.2")
def test_a_resize_past_every_domain_is_refused_not_left_without_a_segment(cluster: slurmctl.Cluster) -> None:
    """26.05 cannot change a pending job's segment size (``scontrol update SegmentSize=`` is "not supported",
    and job_modify's segment_size is not applied): a held ``nvl:segment=2 -N2`` job (one domain holds it: its
    bracket, no segment) resized to 4 nodes is refused with the reason, and keeps its bracket."""
    slurm = cluster.slurm
    slurm.quiesce()
    job = slurm.submit("-H", "--locality=nvl:segment=2", "-N2", "--wrap", "true")
    before = job_detail(slurm, job)
    assert before["Features"].startswith("[nvl_") and "SegmentSize" not in before, before
    p = slurm.run(["scontrol", "update", f"JobId={job}", "NumNodes=4"], check=False)
    assert p.returncode != 0, p
    assert "Slurm cannot give a pending job a segment size: resubmit it" in p.stderr, p.stderr
    after = job_detail(slurm, job)
    assert after["Features"] == before["Features"] and after["NumNodes"] == before["NumNodes"], after
    slurm.cancel(job)
