"""``slurm-topo report`` on real accounting: a cluster with slurmdbd on a private MariaDB (``cluster up
--accounting``) and the locality filter; jobs submitted with ``--locality`` (the filter records and places
them) and without (the filter passes them), all finished; the report lists each multi-node job with the
nodes and levels Slurm allocated, asserted against ``sacct``'s own NodeList read apart (one job a call)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import slurmctl

from slurm_topo.core import hostlist
from slurm_topo.cost import Fabric, span_level
from slurm_topo.inventory import load_inventories
from slurm_topo.reports.explain import filter_record

pytestmark = [pytest.mark.slurm, pytest.mark.accounting]

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "docker-slurm" / "fleet-filter.yaml"
JOBS = {
    "zone": ["--locality=zone", "-N2", "--gres=gpu:2"],
    "region": ["--locality=region", "-N3", "--comment=plan=tp=2,bytes=1G"],
    "no_filter": ["-N4", "--exclusive"],
    "one_node": ["-N1"],
}


@pytest.fixture(scope="module")
def accounted(scratch_cluster: object) -> Iterator[slurmctl.Cluster]:
    """The cluster of the session's release (``scratch_cluster``: its preconditions checked first)."""
    if not shutil.which("mariadbd", path="/usr/sbin:/usr/bin"):
        pytest.fail(
            "mariadb-server is not installed (apt-get install mariadb-server slurmdbd)", pytrace=False
        )
    work = Path(f"/tmp/slurm-topo-it-acct-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    with slurmctl.owned_cluster(
        work, "--accounting", "--with-filter", "--inventory", str(FLEET), nodes_max=12
    ) as cluster:
        yield cluster
    shutil.rmtree(work, ignore_errors=True)


def test_jobs_with_and_without_the_filter_appear_with_the_levels_slurm_allocated(
    accounted: slurmctl.Cluster,
) -> None:
    slurm = accounted.slurm
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 120))
    ids = {}
    for tag, opts in JOBS.items():
        out = slurm.run(
            ["sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *opts, "--wrap", "sleep 1"]
        )
        ids[tag] = out.stdout.strip()
    for _ in range(120):
        if not slurm.run(["squeue", "-h", "-o", "%i"]).stdout.strip():
            break
        time.sleep(1)
    inventory = accounted.etc / "inventory.yaml"
    doc: dict[str, Any] = {}
    for _ in range(30):  # slurmctld hands the end records to slurmdbd a moment after the jobs end
        p = subprocess.run(
            [*slurmctl.slurm_topo_cli(), "report", "-i", str(inventory), "--since", since, "--json"],
            env=dict(accounted.env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        if {ids["zone"], ids["region"], ids["no_filter"]} <= {r["job_id"] for r in doc["jobs"]}:
            break
        time.sleep(1)
    rows = {r["job_id"]: r for r in doc["jobs"]}
    assert set(rows) == {ids["zone"], ids["region"], ids["no_filter"]}, doc
    fabric = Fabric.of(load_inventories([inventory]))
    for tag in ("zone", "region", "no_filter"):
        jid = ids[tag]
        own = slurm.run(
            ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={jid}", "--format=NodeList"]
        ).stdout.strip()
        nodes = hostlist.expand(own)
        assert hostlist.expand(rows[jid]["nodes"]) == nodes, (tag, own, rows[jid])
        assert rows[jid]["level"] == span_level(fabric, nodes), (tag, rows[jid])
        admin = slurm.run(
            [
                "sacct",
                "--noheader",
                "--parsable2",
                "--allocations",
                f"--jobs={jid}",
                "--format=AdminComment%4096",
            ]
        ).stdout.rstrip("\n")
        assert rows[jid]["record"] == filter_record(admin), (tag, admin, rows[jid])
    the_filters_decision(accounted, rows[ids["zone"]], fabric)
    assert rows[ids["region"]]["locality"] == "region:wait", rows[ids["region"]]
    assert rows[ids["region"]]["plan_source"] == "from the job's comment"
    assert rows[ids["region"]]["slowdown"] is not None
    assert rows[ids["no_filter"]]["locality"] != "zone:wait"


def the_filters_decision(cluster: slurmctl.Cluster, row: dict[str, Any], fabric: Fabric) -> None:
    """The zone job's row is the filter's real decision, not a fail-open pass: the record is the one
    ``slurm-topo check`` (the filter's specification, ``policy/``) makes of the same request on the cluster's
    inventory and partitions, slurmctld kept the constraint it set (``sacct``'s own Constraints), and
    the nodes Slurm allocated lie in one zone of the required bracket."""
    slurm = cluster.slurm
    parts = cluster.base / "partitions.txt"
    parts.write_text(slurm.run(["scontrol", "show", "partition", "-o"]).stdout)
    p = subprocess.run(
        [
            *slurmctl.slurm_topo_cli(),
            "check",
            "-i",
            str(cluster.etc / "inventory.yaml"),
            "--partitions-from",
            str(parts),
            "--locality",
            "zone",
            "-N",
            "2",
            "--gpus-per-node",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    want = json.loads(p.stdout)
    assert want["locality"] == "zone:wait" and want["features"].startswith("[zone_"), want
    assert row["locality"] == "zone:wait", row  # "not applied" here: the filter failed open
    assert f"slurm-topo: {row['record']}" == want["record"], (row, want)
    constraint = slurm.run(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--jobs={row['job_id']}",
            "--format=Constraints%4096",
        ]
    ).stdout.strip()
    # Slurm keeps the constraint the job started with: the filter's --prefer (finer groups of those zones
    # first) when the job could start under it, else the required bracket; a job the filter passed has none
    assert constraint in (want["prefer"], want["features"]), (constraint, want)
    zones = {c["group"] for c in want["candidates"]}
    landed = {fabric.node(n).location.zone for n in hostlist.expand(row["nodes"])}
    assert len(landed) == 1 and landed <= zones, (row, zones)
    assert row["level"] in ("node", "network_group", "zone"), row
