"""The README's wiring, followed step by step on a plain cluster, with the installed slurm-topo; then
``slurm-topo doctor`` on it, good and with each fault injected.

The cluster starts as a site has it before slurm-topo (``cluster up --plain``: node lines in slurm.conf with
their own features, no TopologyPlugin, no topology file, no filter, no SPANK plugin). The module fixture then
does what README "Wiring the outputs into Slurm" says, in its order: ``generate --out`` the directory of
slurm.conf; the node lines replaced by ``Include slurm-topo-nodes.conf`` and ``TopologyPlugin=topology/tree``;
the filter copied out of the package (``files --copy``) beside slurm.conf with ``JobSubmitPlugins=lua``; the
SPANK plugin built by the shipped ``build-spank`` and named in plugstack.conf beside slurm.conf; ``lint``; and
``scontrol reconfigure``, then the slurmctld restart a release before 24.11 needs to switch the topology
plugin (doctor is run in between: it must name the missing restart). Every assertion is Slurm's own view:
``scontrol show topology``, ``sbatch --help``, sbatch's refusal, the nodes a job got.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

FLEET = yaml.safe_load((slurmctl.REPO / "docker-slurm" / "fleet-filter.yaml").read_text())
#: the largest zone of fleet-filter.yaml (us-east-1a: n01-n04)
LARGEST_ZONE = 4


@dataclass
class Wired:
    cluster: slurmctl.Cluster
    work: Path
    before: dict[str, str] = field(default_factory=dict)
    doctor_before_restart: dict | None = None  # type: ignore[type-arg]

    @property
    def etc(self) -> Path:
        return self.cluster.etc

    @property
    def env(self) -> dict[str, str]:
        return dict(self.cluster.env)


def _cli(w: Wired, *args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [*slurmctl.slurm_topo_cli(), *args],
        env=w.env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and p.returncode != 0:
        raise AssertionError(f"slurm-topo {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def _doctor(w: Wired, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    p = _cli(w, "doctor", "--json", "--state-dir", str(w.work / "state"), *args, check=False)
    assert p.returncode in (0, 1), f"doctor exited {p.returncode}: {p.stderr}"
    return p.returncode, json.loads(p.stdout)


def _edit_conf(w: Wired, edit) -> None:  # type: ignore[no-untyped-def]
    conf = w.etc / "slurm.conf"
    conf.write_text(edit(conf.read_text()))


def _load(w: Wired) -> None:
    """README step 5: restart slurmctld on a release before 24.11 (to switch the plugin), else reconfigure."""
    if w.cluster.version < (24, 11):
        slurmctl.restart_ctld(w.cluster.base)
    else:
        w.cluster.slurm.reconfigure(w.cluster.version)


def follow_readme(cluster: slurmctl.Cluster) -> Wired:
    w = Wired(cluster, cluster.base.parent)
    slurm = cluster.slurm
    w.before["config"] = slurm.out("scontrol", "show", "config")
    w.before["help"] = slurm.out("sbatch", "--help")
    (w.work / "state").mkdir(exist_ok=True)
    # 1. generate straight into the directory of slurm.conf (the release asked from `scontrol --version`)
    _cli(w, "generate", "--inventory", str(w.etc / "inventory.yaml"), "--out", str(w.etc))
    for name in ("topology.conf", "slurm-topo-nodes.conf", "slurm_topo_data.lua"):
        assert (w.etc / name).is_file(), name

    # 2. slurm.conf: TopologyPlugin, the covered nodes' own lines out, the Include in
    def step2(text: str) -> str:
        text = re.sub(r"(?m)^NodeName=.*\n", "", text)
        return text + "TopologyPlugin=topology/tree\nInclude slurm-topo-nodes.conf\n"

    _edit_conf(w, step2)
    # 3. the filter, copied out of the installed package, beside slurm.conf
    st = w.work / "st"
    _cli(w, "files", "--copy", str(st))
    shutil.copy(st / "job_submit" / "job_submit.lua", w.etc / "job_submit.lua")
    shutil.rmtree(w.etc / "slurm_topo_filter", ignore_errors=True)
    shutil.copytree(st / "job_submit" / "slurm_topo_filter", w.etc / "slurm_topo_filter")
    _edit_conf(w, lambda t: t + "JobSubmitPlugins=lua\n")
    # 4. the SPANK plugin: the shipped build-spank (inside the release's root, against its headers)
    lib = w.work / "lib"
    build = subprocess.run(
        [*cluster.client_prefix, "sh", str(st / "job_submit" / "build-spank"), str(lib)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert build.returncode == 0, build.stderr + build.stdout
    with open(w.etc / "plugstack.conf", "a") as f:
        f.write(f"optional {lib}/locality.so\n")
    # 5. lint, then load: reconfigure first; a release before 24.11 still shows no topology (doctor says so)
    lint = _cli(
        w,
        "lint",
        "--topology",
        str(w.etc / "topology.conf"),
        "--scontrol",
        "--slurm-conf",
        str(w.etc / "slurm.conf"),
    )
    assert "ok" in lint.stdout
    slurm.reconfigure(cluster.version)
    if cluster.version < (24, 11):
        w.doctor_before_restart = _doctor(w)[1]
    _load(w)
    return w


@pytest.fixture(scope="module")
def wired(scratch_cluster) -> Iterator[Wired]:  # type: ignore[no-untyped-def]
    with scratch_cluster("wiring", FLEET, "--plain", nodes_max=12) as cluster:
        yield follow_readme(cluster)


def test_the_plain_cluster_had_no_topology_and_no_locality(wired: Wired) -> None:
    assert "topology/tree" not in wired.before["config"]
    assert "--locality" not in wired.before["help"]


def test_slurm_shows_the_generated_topology(wired: Wired) -> None:
    switches = slurmctl.assert_topology_matches(
        wired.cluster.slurm, (wired.etc / "topology.conf").read_text()
    )
    assert "zone_us-east-1a" in switches or any("us-east-1a" in s for s in switches)


def test_a_release_before_24_11_needs_the_restart_and_doctor_says_so(wired: Wired) -> None:
    if wired.cluster.version >= (24, 11):
        assert wired.doctor_before_restart is None  # reconfigure switched the plugin: no restart asked
        return
    report = wired.doctor_before_restart
    assert report is not None and not report["ok"]
    (finding,) = [f for f in report["findings"] if f["check"] == "topology"]
    assert "shows no topology" in finding["message"] and "restart slurmctld" in finding["fix"]


def test_sbatch_help_shows_locality(wired: Wired) -> None:
    assert "--locality" in wired.cluster.slurm.out("sbatch", "--help")


@pytest.mark.parametrize("how", ["--locality=zone:fail", "--comment=locality=zone:fail"])
def test_a_zone_fail_job_no_zone_can_hold_is_rejected(wired: Wired, how: str) -> None:
    said = wired.cluster.slurm.submit_error(f"-N{LARGEST_ZONE + 1}", how, "--wrap", "true")
    assert f"no zone can ever hold {LARGEST_ZONE + 1} nodes" in said, said


def test_a_zone_job_runs_in_one_zone_and_site_features_still_work(wired: Wired) -> None:
    slurm = wired.cluster.slurm
    job = slurm.submit("--exclusive", "-N3", "--locality=zone", "--wrap", "sleep 300")
    try:
        slurm.wait_state(job, "RUNNING", timeout=30)
        nodes = slurm.allocation_of(job).nodes
        feats = slurm.all_node_features()
        zones = {f for n in nodes for f in feats[n] if f.startswith("zone_")}
        assert len(nodes) == 3 and len(zones) == 1, (nodes, zones)
    finally:
        slurm.cancel(job)
    site = slurm.submit("-N1", "-C", "nvme&eth", "--wrap", "sleep 300")
    try:
        slurm.wait_state(site, "RUNNING", timeout=30)
        (node,) = slurm.allocation_of(site).nodes
        assert {"nvme", "eth"} <= set(slurm.all_node_features()[node])
    finally:
        slurm.cancel(site)
    slurm.quiesce()


def test_doctor_passes_on_the_wired_cluster(wired: Wired) -> None:
    rc, report = _doctor(wired, "--inventory", str(wired.etc / "inventory.yaml"))
    assert rc == 0 and report["ok"], report["findings"]
    passed = " | ".join(report["passed"])
    for what in ("scontrol show topology equals", "loads (checksum", "refuses a zone:fail job", "--locality"):
        assert what in passed, passed


# ---- doctor, each fault injected (and undone: the next fault starts from a good install)


def _other_inventory(w: Wired) -> Path:
    inv = yaml.safe_load((w.etc / "inventory.yaml").read_text())
    inv["nodes"][0]["zone"] = "us-east-1b"  # n01 moved
    path = w.work / "moved.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def _fault_data_missing(w: Wired) -> None:
    (w.etc / "slurm_topo_data.lua").rename(w.work / "data.saved")


def _undo_data(w: Wired) -> None:
    shutil.move(w.work / "data.saved", w.etc / "slurm_topo_data.lua")


def _fault_data_damaged(w: Wired) -> None:
    data = w.etc / "slurm_topo_data.lua"
    shutil.copy(data, w.work / "data.saved")
    data.write_bytes(data.read_bytes().replace(b'"zone_us-east-1a"', b'"zone_us-east-1Z"', 1))


def _fault_data_of_another_generation(w: Wired) -> None:
    shutil.copy(w.etc / "slurm_topo_data.lua", w.work / "data.saved")
    out = w.work / "other"
    _cli(w, "generate", "--inventory", str(_other_inventory(w)), "--out", str(out))
    shutil.copy(out / "slurm_topo_data.lua", w.etc / "slurm_topo_data.lua")


def _fault_filter_module_edited(w: Wired) -> None:
    mod = w.etc / "slurm_topo_filter" / "decide.lua"
    shutil.copy(mod, w.work / "decide.saved")
    with open(mod, "a") as f:
        f.write("-- a local edit\n")


def _undo_filter_module(w: Wired) -> None:
    shutil.move(w.work / "decide.saved", w.etc / "slurm_topo_filter" / "decide.lua")


def _fault_no_job_submit(w: Wired) -> None:
    _edit_conf(w, lambda t: t.replace("JobSubmitPlugins=lua\n", ""))
    w.cluster.slurm.reconfigure(w.cluster.version)


def _undo_no_job_submit(w: Wired) -> None:
    _edit_conf(w, lambda t: t + "JobSubmitPlugins=lua\n")
    w.cluster.slurm.reconfigure(w.cluster.version)


def _fault_no_plugstack(w: Wired) -> None:
    shutil.move(w.etc / "plugstack.conf", w.work / "plugstack.saved")


def _undo_no_plugstack(w: Wired) -> None:
    shutil.move(w.work / "plugstack.saved", w.etc / "plugstack.conf")


def _fault_topology_plugin(w: Wired) -> None:
    _edit_conf(w, lambda t: t.replace("TopologyPlugin=topology/tree\n", ""))
    _load(w)


def _undo_topology_plugin(w: Wired) -> None:
    _edit_conf(w, lambda t: t + "TopologyPlugin=topology/tree\n")
    _load(w)


def _fault_node_features(w: Wired) -> None:
    w.before["n05"] = ",".join(w.cluster.slurm.node_features("n05"))
    w.cluster.slurm.out("scontrol", "update", "NodeName=n05", "AvailableFeatures=ib", "ActiveFeatures=ib")


def _undo_node_features(w: Wired) -> None:
    feats = w.before.pop("n05")
    w.cluster.slurm.out(
        "scontrol", "update", "NodeName=n05", f"AvailableFeatures={feats}", f"ActiveFeatures={feats}"
    )


def _fault_apply_interrupted(w: Wired) -> None:
    (w.work / "state" / "journal.json").write_text("{}")


def _undo_apply_interrupted(w: Wired) -> None:
    (w.work / "state" / "journal.json").unlink()


#: fault -> (inject, undo, {check: text its finding's message holds}, doctor's extra arguments)
FAULTS = {
    "data file missing": (
        _fault_data_missing,
        _undo_data,
        {"filter": "which does not exist", "files": "no slurm_topo_data.lua"},
        (),
    ),
    "data file damaged": (_fault_data_damaged, _undo_data, {"filter": "fails its checksum"}, ()),
    "data file of another generation": (
        _fault_data_of_another_generation,
        _undo_data,
        {"files": "different generations"},
        (),
    ),
    "files not from the inventory": (
        lambda w: None,
        lambda w: None,
        {"files": "not generated from the inventory"},
        ("moved",),
    ),
    "filter module edited": (
        _fault_filter_module_edited,
        _undo_filter_module,
        {"filter": "decide.lua is not this slurm-topo's"},
        (),
    ),
    "job_submit/lua not loaded": (
        _fault_no_job_submit,
        _undo_no_job_submit,
        {"filter": "JobSubmitPlugins", "decision": "got no decision"},
        (),
    ),
    "SPANK plugin not in plugstack.conf": (
        _fault_no_plugstack,
        _undo_no_plugstack,
        {"spank": "no locality.so"},
        (),
    ),
    "TopologyPlugin not the file's": (
        _fault_topology_plugin,
        _undo_topology_plugin,
        {"topology": "is for topology/tree"},
        (),
    ),
    "node features changed by hand": (_fault_node_features, _undo_node_features, {"nodes": "node n05"}, ()),
    "apply interrupted": (_fault_apply_interrupted, _undo_apply_interrupted, {"units": "interrupted"}, ()),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_doctor_finds_each_injected_fault(wired: Wired, fault: str) -> None:
    inject, undo, expected, extra = FAULTS[fault]
    args = ["--inventory", str(_other_inventory(wired) if "moved" in extra else wired.etc / "inventory.yaml")]
    inject(wired)
    try:
        rc, report = _doctor(wired, *args)
    finally:
        undo(wired)
    assert rc == 1 and not report["ok"]
    found = {f["check"]: f for f in report["findings"]}
    for check, text in expected.items():
        assert check in found, (fault, report["findings"])
        assert text in found[check]["message"], (fault, found[check])
        assert found[check]["fix"], found[check]
    rc, report = _doctor(wired, "--inventory", str(wired.etc / "inventory.yaml"))
    assert rc == 0, (f"after undoing {fault}", report["findings"])
