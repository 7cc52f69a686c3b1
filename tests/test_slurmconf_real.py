"""The project's readers of Slurm's text, run over what real daemons printed
(tests/fixtures/real/slurm-<X.Y>/, captured by ``make fixtures``). Every expectation comes from the capture
itself: the files the cluster ran on (its inventory, node lines and topology.conf) and ``capture.json`` (which
job is which, the drained node, Slurm's own expansion of the running job's node list) — never from what the
parser under test returns elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from slurm_topo.access import text as slurm_text
from slurm_topo.core.errors import ParseError
from slurm_topo.plumbing import version
from slurm_topo.reports import explain
from slurm_topo.slurmconfig import slurmconf, slurmconf_files

CAPTURES = sorted((Path(__file__).parent / "fixtures" / "real").glob("slurm-*"))


def test_there_is_a_capture() -> None:
    assert CAPTURES, "tests/fixtures/real/slurm-<X.Y>/ missing: run `make fixtures`"


@pytest.fixture(params=CAPTURES, ids=[p.name for p in CAPTURES])
def cap(request: pytest.FixtureRequest) -> Capture:
    return Capture(request.param)


class Capture:
    """One capture directory: its files as text, its facts and the cluster's own definitions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.facts: dict[str, Any] = json.loads((path / "capture.json").read_text())
        self.inventory = yaml.safe_load((path / "inventory.yaml").read_text())["nodes"]

    def text(self, name: str) -> str:
        return (self.path / name).read_text()

    def defined(self) -> dict[str, dict[str, str]]:
        """The NodeName= lines the cluster ran on, read token by token (no value there holds a space)."""
        out = {}
        for line in self.text("slurm-topo-nodes.conf").splitlines():
            if line.startswith("NodeName="):
                kv = dict(tok.split("=", 1) for tok in line.split())
                out[kv["NodeName"]] = kv
        return out


def test_version(cap: Capture) -> None:
    """``scontrol --version`` -> the directory's major.minor."""
    want = tuple(int(x) for x in cap.path.name.removeprefix("slurm-").split("."))
    text = cap.text("scontrol--version.txt")
    assert version.parse_slurm_version(text) == want
    assert cap.facts["slurm_version"] in text


def test_show_node_records(cap: Capture) -> None:
    """``scontrol show node -o``: every node, with the features, GRES and port its node line gave Slurm; a
    Reason with spaces and colons is one value; the running job's nodes are busy."""
    nodes = {n["NodeName"]: n for n in slurm_text.parse_scontrol_nodes(cap.text("scontrol-show-node-o.txt"))}
    defined = cap.defined()
    assert list(nodes) == cap.facts["nodes"]
    assert set(nodes) == set(defined)
    for name, rec in nodes.items():
        assert set(rec["AvailableFeatures"].split(",")) == set(defined[name]["Features"].split(",")), name
        assert rec["ActiveFeatures"] == rec["AvailableFeatures"], name
        assert rec["Gres"] == defined[name]["Gres"], name
        assert rec["Port"] == defined[name]["Port"], name
        assert rec["RealMemory"] == defined[name]["RealMemory"], name
    drained = cap.facts["drained"]
    assert nodes[drained["node"]]["Reason"].startswith(drained["reason"] + " [")
    assert "DRAIN" in nodes[drained["node"]]["State"]
    for name in cap.facts["hostnames"]["running"]:
        assert nodes[name]["State"] in ("MIXED", "ALLOCATED"), name
    assert slurm_text.parse_nodes(cap.text("scontrol-show-node-o.txt")) == {
        name: tuple(rec["ActiveFeatures"].split(",")) for name, rec in nodes.items()
    }


def test_show_node_matches_the_inventory(cap: Capture) -> None:
    """The inventory's own features, GPU type and count are what Slurm reports for each node."""
    nodes = {n["NodeName"]: n for n in slurm_text.parse_scontrol_nodes(cap.text("scontrol-show-node-o.txt"))}
    for entry in cap.inventory:
        rec = nodes[entry["name"]]
        assert set(entry.get("features", ())) <= set(rec["AvailableFeatures"].split(",")), entry["name"]
        assert f"zone_{entry['zone']}" in rec["AvailableFeatures"].split(","), entry["name"]
        if entry.get("gpus"):
            assert rec["Gres"] == f"gpu:{entry['gpu_type']}:{entry['gpus']}", entry["name"]


def test_show_partition(cap: Capture) -> None:
    parts = slurm_text.parse_scontrol_partitions(cap.text("scontrol-show-partition-o.txt"))
    assert parts == [("main", cap.facts["nodes"], True)]


def test_show_topology(cap: Capture) -> None:
    """``scontrol show topology`` read three ways (switch lines, apply's verification, the switch tree)
    agrees with the topology.conf the cluster ran on."""
    from slurm_topo import apply  # imported here: a package split in progress must not hide the other tests

    written = slurmconf.parse_topology_conf(cap.text("topology.conf"))
    shown = slurmconf.parse_topology_conf(cap.text("scontrol-show-topology.txt"), scontrol_output=True)
    assert [s.name for s in shown] and {s.name for s in shown} == {s.name for s in written}
    leaves = {s.name: set(s.nodes or ()) for s in written if s.nodes}
    for sw in shown:
        if sw.name in leaves:
            assert sw.level == 0 and set(sw.nodes or ()) == leaves[sw.name], sw.name
    assert apply.topology_difference(cap.text("topology.conf"), cap.text("scontrol-show-topology.txt")) == []
    tree = slurm_text.parse_scontrol_topology(cap.text("scontrol-show-topology.txt"))
    for leaf, members in leaves.items():
        for node in members:
            assert tree.path(node)[0] == leaf and tree.path(node)[-1] == "root", node


def test_show_job_detail(cap: Capture) -> None:
    """``scontrol show job -d``: the running job's nodes in Slurm's expansion and its 2 GPUs per node; a
    pending job (no nodes) is a clear ParseError."""
    jobs = cap.facts["jobs"]
    alloc = slurm_text.parse_job_detail(cap.text("scontrol-show-job-d-running.txt"))
    assert alloc.job_id == jobs["running"]
    assert list(alloc.nodes) == cap.facts["hostnames"]["running"]
    assert {n: len(g) for n, g in alloc.gpus.items()} == {n: 2 for n in alloc.nodes}  # --gres=gpu:h100:2
    assert all(0 <= i < 8 for g in alloc.gpus.values() for i in g)
    for kind in ("pending", "held"):
        with pytest.raises(ParseError):
            slurm_text.parse_job_detail(cap.text(f"scontrol-show-job-d-{kind}.txt"))


def test_show_job_records_and_explain(cap: Capture) -> None:
    """``scontrol show job -o`` as explain reads it: ids, states, the filter's record in AdminComment (with
    its spaces), and where the running job landed."""
    jobs = cap.facts["jobs"]
    rec = {k: slurm_text.parse_record_line(cap.text(f"scontrol-show-job-o-{k}.txt")) for k in jobs}
    assert {k: r["JobId"] for k, r in rec.items()} == jobs
    assert rec["running"]["JobState"] == "RUNNING"
    assert rec["pending"]["JobState"] == rec["held"]["JobState"] == "PENDING"
    assert rec["pending"]["Reason"] == "Resources"
    assert rec["held"]["Priority"] == "0"
    for kind in ("running", "held"):
        record = explain.filter_record(rec[kind]["AdminComment"])
        assert record is not None and " " in record, kind
        assert explain.locality_of_record(record) == "zone:wait", kind
    nodes = slurm_text.parse_nodes(cap.text("scontrol-show-node-o.txt"))
    ran = explain.explain_record(rec["running"], {n: nodes[n] for n in cap.facts["hostnames"]["running"]})
    assert ran.broken is None and ran.outcome.startswith("same ")
    held = explain.explain_record(rec["held"], None)
    assert held.nodes is None and held.locality == "zone:wait"


def test_show_config(cap: Capture) -> None:
    """``scontrol show config`` as gpulayer-srun reads it: the values of the test cluster's slurm.conf."""
    config = slurm_text.parse_show_config(cap.text("scontrol-show-config.txt"))
    assert config["TopologyPlugin"] == "topology/tree"
    assert config["SelectType"] == "select/cons_tres"
    # slurm.conf says TaskPlugin=task/none (docker-slurm/conf/slurm.conf.in); 22.05 prints it back, later
    # releases (task/none is the default there, without a plugin of its own) print "(null)".
    version = tuple(int(x) for x in cap.facts["slurm_version"].split(".")[:2])
    assert config["TaskPlugin"] == ("task/none" if version < (23, 2) else "(null)")
    assert config["JobSubmitPlugins"] == "lua"
    assert config["SLURM_VERSION"] == cap.facts["slurm_version"]
    assert config["SlurmctldPort"].isdigit()


def test_cli_reads_the_captured_node_list(cap: Capture, tmp_path: Path) -> None:
    """``lint --nodes-from`` and ``generate --nodes-from`` take the daemons' own output: the topology the
    cluster ran on has no problems against it, and generate keeps each node's hardware from it."""
    run = [sys.executable, "-m", "slurm_topo"]
    nodes_from = str(cap.path / "scontrol-show-node-o.txt")
    lint = subprocess.run(
        [*run, "lint", "--topology", str(cap.path / "topology.conf"), "--nodes-from", nodes_from],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    gen = subprocess.run(
        [
            *run,
            "generate",
            "-i",
            str(cap.path / "inventory.yaml"),
            "--nodes-from",
            nodes_from,
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gen.returncode == 0, gen.stdout + gen.stderr
    assert set(
        slurmconf_files.slurm_conf_node_definitions(tmp_path / "slurm-topo-nodes.conf").get(
            str(tmp_path / "slurm-topo-nodes.conf"), []
        )
    ) == set(cap.facts["nodes"])
