"""`slurm-topo apply` (slurm_topo/apply/) against a fake slurmctld: refusals, journal, recovery, rollback.

``FakeSlurm`` is a Runner that behaves like slurmctld for what apply asks: it reads topology.conf and the node
lines from the config directory only at ``scontrol reconfigure`` (and records the hashes of the config set it
read), answers ``show topology`` / ``show node -o`` from what it read, ``squeue`` from a list, ``ping`` from a
flag.
The benchmark benchmarks/bench_apply_faults.py imports it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo.apply import (
    CONFIG_ORDER,
    DATA,
    EXIT_APPLIED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_ROLLBACK_FAILED,
    EXIT_ROLLED_BACK,
    GRES,
    NODES,
    TOPOLOGY,
    TOPOLOGY_YAML,
    ApplyOptions,
    parse_node_lines,
    recover,
    rollback,
    run_apply,
)
from slurm_topo.apply.prove import Proof, ThrowawayController, probe_conf
from slurm_topo.core import hostlist
from slurm_topo.core.errors import CommandError, ExitCode
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import render_all
from slurm_topo.slurmconfig.slurmconf import parse_topology_conf

HW = {"CPUs": 4, "RealMemory": 4000}


def fleet(moves: dict[str, str] | None = None, nodes: int = 8, extra_group: str | None = None) -> dict:
    """n1..nN over two racks of zone z1 (n1-n4 rack-a, the rest rack-b); ``moves`` node -> rack."""
    moves = moves or {}
    entries = []
    for i in range(1, nodes + 1):
        name = f"n{i}"
        rack = moves.get(name, "rack-a" if i <= 4 else "rack-b")
        entries.append({"name": name, "region": "r1", "zone": "z1", "network_group": rack, "slurm": HW})
    if extra_group:
        entries.append(
            {"name": "x1", "region": "r1", "zone": "z1", "network_group": extra_group, "slurm": HW}
        )
    return {"nodes": entries}


def render(tmp: Path, inv: dict, name: str = "inv.yaml") -> dict[str, str]:
    path = tmp / name
    path.write_text(yaml.safe_dump(inv))
    return render_all(merge([load_inventory_file(path)]), (22, 5))


def sha_set(directory: Path, names: Sequence[str]) -> tuple[str | None, ...]:
    out = []
    for n in names:
        p = directory / n
        out.append(hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None)
    return tuple(out)


class FakeSlurm:
    """A Runner imitating slurmctld (see the module docstring)."""

    def __init__(
        self, slurm_dir: Path, version: str = "22.05.8", up: bool = True, extra_nodes: Sequence[str] = ()
    ):
        self.dir = slurm_dir
        self.version = version
        self.up = up
        self.extra_nodes = list(extra_nodes)
        self.pending: list[tuple[str, str]] = []
        self.calls: list[list[str]] = []
        self.reconfigured_sets: list[tuple[str | None, ...]] = []
        self.ignore_reconfigure = False
        self.down_after_reconfigures: int | None = None
        self.fail_sync = 0
        self.topology: dict[str, tuple[list[str], list[str]]] = {}
        self.nodes: dict[str, frozenset[str]] = {}
        self.plugin = "topology/tree"
        self.load()
        self.running_plugin = self.plugin

    def load(self) -> None:
        """Read what slurmctld reads: topology.yaml when it exists (25.05+), else topology.conf in tree or
        block syntax (the plugin from slurm.conf's TopologyPlugin when the directory has one)."""
        topo = self.dir / TOPOLOGY
        yml = self.dir / TOPOLOGY_YAML
        nodes = self.dir / NODES
        conf = self.dir / "slurm.conf"
        if conf.exists():
            for line in conf.read_text().splitlines():
                if line.startswith("TopologyPlugin="):
                    self.plugin = line.split("=", 1)[1].strip()
        self.topology = {}
        self.topologies: dict[str, dict[str, tuple[list[str], list[str]]] | list[tuple[str, list[str]]]] = {}
        if yml.exists() and self.version >= "25.05":
            for t in yaml.safe_load(yml.read_text()):
                if "tree" in t:
                    self.topologies[t["topology"]] = {
                        sw["switch"]: (
                            hostlist.expand(sw["nodes"]) if sw.get("nodes") else [],
                            sw["children"].split(",") if sw.get("children") else [],
                        )
                        for sw in t["tree"]["switches"]
                    }
                else:
                    self.topologies[t["topology"]] = [
                        (b["block"], hostlist.expand(b["nodes"]) if b.get("nodes") else [])
                        for b in t["block"]["blocks"]
                    ]
                if t.get("cluster_default"):
                    self.topologies[""] = self.topologies[t["topology"]]
        elif topo.exists():
            text = topo.read_text()
            if "BlockName=" in text:
                blocks = []
                for line in text.splitlines():
                    if line.startswith("BlockName="):
                        pairs = dict(tok.split("=", 1) for tok in line.split())
                        blocks.append((pairs["BlockName"], hostlist.expand(pairs.get("Nodes", ""))))
                self.topologies[""] = blocks
            else:
                for sw in parse_topology_conf(text):
                    self.topology[sw.name] = (list(sw.nodes or ()), list(sw.switches or ()))
                self.topologies[""] = self.topology
        self.nodes = parse_node_lines(nodes.read_text()) if nodes.exists() else {}

    def show(self, name: str) -> str:
        shown = self.topologies.get(name)
        if shown is None:
            raise CommandError(["scontrol", "show", "topology", name], 1, "no such topology")
        lines = []
        if isinstance(shown, list):
            for i, (block, members) in enumerate(shown):
                nodes = f" Nodes={hostlist.compress(members)}" if members else ""
                lines.append(f"BlockName={block} BlockIndex={i}{nodes} BlockSize=4")
            lines.append("AggregatedBlock=x[1-2] BlockIndex=9 Nodes=n1 BlockSize=8")
            return "\n".join(lines) + "\n"
        for sw, (nodes, sws) in shown.items():
            if nodes:
                lines.append(f"SwitchName={sw} Level=0 LinkSpeed=1 Nodes={hostlist.compress(nodes)}")
            else:
                lines.append(f"SwitchName={sw} Level=1 LinkSpeed=1 Nodes=x Switches={','.join(sws)}")
        return "\n".join(lines) + "\n"

    def reconfigures(self) -> int:
        return sum(1 for c in self.calls if c[:2] == ["scontrol", "reconfigure"])

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        argv = list(argv)
        self.calls.append(argv)
        assert timeout and timeout > 0
        if argv[:2] == ["scontrol", "--version"]:
            return f"slurm {self.version}\n"
        if argv[:1] == ["sync-cmd"]:
            if self.fail_sync:
                self.fail_sync -= 1
                raise CommandError(argv, 1, "sync failed")
            return ""
        if not self.up:
            raise CommandError(argv, 1, "Unable to contact slurm controller (connect failure)")
        if argv == ["scontrol", "ping"]:
            return "Slurmctld(primary) at localhost is UP\n"
        if argv == ["scontrol", "reconfigure"]:
            self.reconfigured_sets.append(sha_set(self.dir, CONFIG_ORDER))
            if not self.ignore_reconfigure:
                self.load()
                self.running_plugin = self.plugin
            if (
                self.down_after_reconfigures is not None
                and self.reconfigures() >= self.down_after_reconfigures
            ):
                self.up = False
            return ""
        if argv[:3] == ["scontrol", "show", "topology"] and len(argv) <= 4:
            return self.show(argv[3] if len(argv) == 4 else "")
        if argv == ["scontrol", "show", "config"]:
            return f"ClusterName             = c\nTopologyPlugin          = {self.running_plugin}\n"
        if argv == ["scontrol", "show", "node", "-o"]:
            lines = [
                f"NodeName={n} Arch=x86_64 CoresPerSocket=1"
                f" AvailableFeatures={','.join(sorted(f)) or '(null)'}"
                f" ActiveFeatures={','.join(sorted(f)) or '(null)'} State=IDLE"
                for n, f in self.nodes.items()
            ]
            lines += [f"NodeName={n} AvailableFeatures=(null) State=IDLE" for n in self.extra_nodes]
            return "\n".join(lines) + "\n"
        if argv[:2] == ["squeue", "-h"]:
            return "".join(f"{j} {f}\n" for j, f in self.pending)
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A config dir holding the rendering of fleet() (as if applied earlier) and a state dir beside it."""
    etc = tmp_path / "etc"
    etc.mkdir()
    for name, text in render(tmp_path, fleet()).items():
        (etc / name).write_text(text)
    return etc, tmp_path / "state", FakeSlurm(etc)


def opts(etc: Path, state: Path, **kw: object) -> ApplyOptions:
    kw.setdefault("min_interval", 0)
    kw.setdefault("verify_timeout", 0.5)
    kw.setdefault("sleep", lambda s: None)
    return ApplyOptions(slurm_dir=etc, state_dir=state, **kw)  # type: ignore[arg-type]


def snapshot(etc: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(etc.iterdir())}


# --------------------------------------------------------------------------------------------------
# the ordinary paths


def test_unchanged_touches_nothing_and_does_not_contact_slurmctld(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = {p.name: p.stat().st_mtime_ns for p in etc.iterdir()}
    res = run_apply(opts(etc, state), render(tmp_path, fleet()), fake)
    assert (res.exit_code, res.status) == (EXIT_OK, "unchanged")
    assert "\n" not in res.summary and res.summary.startswith("slurm-topo apply: unchanged:")
    assert {p.name: p.stat().st_mtime_ns for p in etc.iterdir()} == before
    assert fake.calls == []


def test_a_moved_node_is_applied_reconfigured_once_and_verified(env, tmp_path: Path) -> None:
    etc, state, fake = env
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    res = run_apply(opts(etc, state, detailed_exitcodes=True), new, fake)
    assert (res.exit_code, res.status) == (EXIT_APPLIED, "applied"), res
    assert res.reconfigured and fake.reconfigures() == 1
    for name, text in new.items():
        assert (etc / name).read_text() == text
    assert "n1" in fake.topology["ng_z1.rack-b"][0]
    assert not (state / "journal.json").exists()
    assert not [p for p in etc.iterdir() if p.name.startswith(".")]
    again = run_apply(opts(etc, state), new, fake)
    assert again.status == "unchanged" and fake.reconfigures() == 1
    without = run_apply(opts(etc, state), render(tmp_path, fleet({"n2": "rack-b"})), fake)
    assert without.exit_code == EXIT_OK and without.status == "applied"


def test_replaced_file_keeps_mode_and_a_new_one_is_0644(env, tmp_path: Path) -> None:
    etc, state, fake = env
    os.chmod(etc / TOPOLOGY, 0o640)
    (etc / DATA).unlink()
    res = run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert res.status == "applied", res
    assert stat.S_IMODE((etc / TOPOLOGY).stat().st_mode) == 0o640
    assert stat.S_IMODE((etc / DATA).stat().st_mode) == 0o644


def test_dry_run_changes_nothing_and_says_what_would_change(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    res = run_apply(opts(etc, state, dry_run=True), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert res.status == "dry-run" and res.exit_code == EXIT_OK
    assert "would replace" in res.summary and "topology.conf" in res.summary
    assert any(line.startswith("+SwitchName=ng_z1.rack-b") for line in res.details)
    assert snapshot(etc) == before and fake.reconfigures() == 0 and not state.exists()


def test_no_reconfigure_never_contacts_slurmctld_and_the_next_run_pays_the_reconfigure(
    env, tmp_path: Path
) -> None:
    etc, state, fake = env
    new = render(tmp_path, fleet({"n1": "rack-c"}))  # a new group: the data file must wait for slurmctld
    res = run_apply(opts(etc, state, no_reconfigure=True), new, fake)
    assert res.status == "applied" and fake.calls == []
    assert (etc / TOPOLOGY).read_text() == new[TOPOLOGY]
    assert (etc / DATA).read_text() != new[DATA], "data naming a group slurmctld lacks went live"
    res = run_apply(opts(etc, state, no_reconfigure=True), new, fake)  # still owed: the data file still waits
    assert fake.calls == [] and (etc / DATA).read_text() != new[DATA]
    res = run_apply(opts(etc, state), new, fake)
    assert res.status == "applied" and fake.reconfigures() == 1
    assert (etc / DATA).read_text() == new[DATA]
    assert run_apply(opts(etc, state), new, fake).status == "unchanged"


def test_debounce_defers_without_touching_files(env, tmp_path: Path) -> None:
    etc, state, fake = env
    now = [1000.0]
    o = opts(etc, state, min_interval=300, clock=lambda: now[0])
    assert run_apply(o, render(tmp_path, fleet({"n1": "rack-b"})), fake).status == "applied"
    before = snapshot(etc)
    now[0] += 10
    res = run_apply(o, render(tmp_path, fleet({"n2": "rack-b"})), fake)
    assert (res.status, res.exit_code) == ("deferred", EXIT_OK) and snapshot(etc) == before
    now[0] += 300
    assert run_apply(o, render(tmp_path, fleet({"n2": "rack-b"})), fake).status == "applied"
    assert fake.reconfigures() == 2


def test_sync_cmd_runs_before_reconfigure_and_its_failure_rolls_back(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    fake.fail_sync = 1  # the rollback's own sync succeeds
    res = run_apply(
        opts(etc, state, sync_cmd="sync-cmd --all"), render(tmp_path, fleet({"n1": "rack-b"})), fake
    )
    assert res.exit_code == EXIT_ROLLED_BACK, res
    assert snapshot(etc) == before and fake.reconfigures() == 0
    res = run_apply(
        opts(etc, state, sync_cmd="sync-cmd --all"), render(tmp_path, fleet({"n1": "rack-b"})), fake
    )
    assert res.status == "applied"
    last_sync = max(i for i, c in enumerate(fake.calls) if c[0] == "sync-cmd")
    assert fake.calls.index(["scontrol", "reconfigure"]) > last_sync
    fake.fail_sync = 2  # and when the rollback's sync fails too: exit 5
    res = run_apply(opts(etc, state, sync_cmd="sync-cmd"), render(tmp_path, fleet({"n2": "rack-b"})), fake)
    assert res.exit_code == EXIT_ROLLBACK_FAILED, res


def test_verify_mismatch_restores_reconfigures_again_and_exits_4(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    fake.ignore_reconfigure = True  # slurmctld keeps its old view: what a failed 23.11 re-exec looks like
    res = run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert (res.exit_code, res.status) == (EXIT_ROLLED_BACK, "rolled-back"), res
    assert any("switch ng_z1.rack-b: nodes" in d for d in res.details)
    assert snapshot(etc) == before and fake.reconfigures() == 2
    assert not (state / "journal.json").exists()


def test_rollback_failure_exits_5_and_keeps_the_journal_for_recover(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    fake.ignore_reconfigure = True
    fake.down_after_reconfigures = 1
    res = run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert res.exit_code == EXIT_ROLLBACK_FAILED, res
    assert (state / "journal.json").exists()
    fake.up, fake.ignore_reconfigure, fake.down_after_reconfigures = True, False, None
    rec = recover(opts(etc, state), fake)
    assert rec.status == "recovered" and snapshot(etc) == before, rec
    assert fake.reconfigured_sets[-1] == sha_set(etc, CONFIG_ORDER)


def test_rollback_restores_the_previous_set_and_keeps_ten_sets(env, tmp_path: Path) -> None:
    etc, state, fake = env
    original = snapshot(etc)
    for i in range(12):
        racks = {f"n{j}": "rack-b" for j in range(1, 1 + i % 4)}
        racks["n8"] = "rack-a" if i % 2 else "rack-b"
        res = run_apply(opts(etc, state), render(tmp_path, fleet(racks)), fake)
        assert res.status in ("applied", "unchanged"), res
    assert len([p for p in (state / "sets").iterdir()]) == 10
    latest = snapshot(etc)
    res = run_apply(opts(etc, state), render(tmp_path, fleet()), fake)
    assert res.status == "applied"
    assert snapshot(etc) == original
    rb = rollback(opts(etc, state), fake)
    assert rb.exit_code == EXIT_OK and "rolled back" in rb.summary, rb
    assert snapshot(etc) == latest
    assert fake.reconfigured_sets[-1] == sha_set(etc, CONFIG_ORDER)


# --------------------------------------------------------------------------------------------------
# refusals: exit 3, nothing changed


def refused(res, etc: Path, before: dict[str, bytes], text: str) -> None:  # type: ignore[no-untyped-def]
    assert (res.exit_code, res.status) == (EXIT_REFUSED, "refused"), res
    assert text in res.summary, res.summary
    assert snapshot(etc) == before


FOREIGN_YAML = (
    "- topology: x\n  cluster_default: true\n"
    "  tree:\n    switches:\n      - switch: s\n        nodes: n[1-8]\n"
)


def test_a_foreign_topology_yaml_is_refused_and_adopt_retires_it(env, tmp_path: Path) -> None:
    """A topology.yaml slurm-topo did not write hides topology.conf from Slurm 25.05+: refused, naming
    --adopt; --adopt moves it into the set's old/ copy (rollback puts it back)."""
    etc, state, fake = env
    (etc / "topology.yaml").write_text(FOREIGN_YAML)
    before = snapshot(etc)
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    refused(run_apply(opts(etc, state), new, fake), etc, before, "--adopt retires it")
    res = run_apply(opts(etc, state, adopt=True), new, fake)
    assert res.status == "applied" and TOPOLOGY_YAML in res.changed, res
    assert not (etc / TOPOLOGY_YAML).exists()
    (last,) = [p for p in (state / "sets").iterdir()]
    assert (last / "old" / TOPOLOGY_YAML).read_text() == FOREIGN_YAML
    back = rollback(opts(etc, state), fake)
    assert back.status == "applied" and (etc / TOPOLOGY_YAML).read_text() == FOREIGN_YAML, back


def test_refuses_a_foreign_file_unless_adopted(env, tmp_path: Path) -> None:
    etc, state, fake = env
    (etc / TOPOLOGY).write_text("SwitchName=s1 Nodes=n[1-8]\n")
    fake.load()
    before = snapshot(etc)
    new = render(tmp_path, fleet())
    refused(run_apply(opts(etc, state), new, fake), etc, before, "--adopt")
    assert run_apply(opts(etc, state, adopt=True), new, fake).status == "applied"
    assert run_apply(opts(etc, state), new, fake).status == "unchanged"


def test_refuses_removing_more_than_max_removal_unless_forced(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    fake.version = "23.11.4"  # node set changes are fine on 23.11: only the threshold speaks
    new = render(tmp_path, fleet(nodes=5))
    res = run_apply(opts(etc, state), new, fake)
    refused(res, etc, before, "3 of 8 nodes would disappear")
    assert any("n[6-8]" in d for d in res.details)
    assert run_apply(opts(etc, state, max_removal=0.5), new, fake).status == "applied"


def test_refuses_a_node_set_change_before_23_11_listing_the_nodes(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    res = run_apply(opts(etc, state), render(tmp_path, fleet(extra_group="rack-x")), fake)
    refused(res, etc, before, "restart required")
    assert "nodes to add: x1" in res.summary
    fake.version = "23.11.1"
    assert (
        run_apply(opts(etc, state), render(tmp_path, fleet(extra_group="rack-x")), fake).status == "applied"
    )


def test_refuses_when_pending_jobs_name_a_group_about_to_disappear(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    fake.pending = [("17", "[ng_z1.rack-a|ng_z1.rack-b]"), ("18", "(null)")]
    new = render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)}))  # rack-a disappears
    res = run_apply(opts(etc, state), new, fake)
    refused(res, etc, before, "1 pending jobs name a group")
    assert res.details == ["job 17: [ng_z1.rack-a|ng_z1.rack-b]"]
    assert run_apply(opts(etc, state, force=True), new, fake).status == "applied"


def test_refuses_when_a_node_slurm_knows_would_be_on_no_switch(env, tmp_path: Path) -> None:
    etc, state, fake = env
    fake.extra_nodes = ["other1"]
    before = snapshot(etc)
    refused(
        run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake),
        etc,
        before,
        "would be on no switch",
    )


def test_refuses_when_the_controller_is_down(env, tmp_path: Path) -> None:
    etc, state, fake = env
    fake.up = False
    before = snapshot(etc)
    refused(
        run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake),
        etc,
        before,
        "does not answer",
    )


def test_refuses_files_that_fail_lint(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    new = render(tmp_path, fleet())
    new[TOPOLOGY] += "SwitchName=orphan Nodes=n1\n"
    res = run_apply(opts(etc, state), new, fake)
    refused(res, etc, before, "lint")
    assert fake.calls == []
    bad_nodes = dict(
        render(tmp_path, fleet()), **{NODES: "# x: generated by slurm-topo 0\nNodeName=n1\nNodeName=n1\n"}
    )
    refused(run_apply(opts(etc, state), bad_nodes, fake), etc, before, "defined twice")


def test_refuses_a_gres_cores_change(env, tmp_path: Path) -> None:
    etc, state, fake = env
    head = "# gres.conf: generated by slurm-topo 0.1.0 for Slurm 22.05\n"
    (etc / GRES).write_text(head + "NodeName=n1 Name=gpu File=/dev/nvidia0 Cores=0-1\n")
    before = snapshot(etc)
    new = dict(
        render(tmp_path, fleet()), **{GRES: head + "NodeName=n1 Name=gpu File=/dev/nvidia0 Cores=2-3\n"}
    )
    refused(run_apply(opts(etc, state), new, fake), etc, before, "Cores=")


def test_state_dir_inside_slurm_dir_is_refused(env) -> None:
    etc, _, fake = env
    res = run_apply(opts(etc, etc / "state"), {}, fake)
    assert res.exit_code == EXIT_REFUSED and "inside" in res.summary


# --------------------------------------------------------------------------------------------------
# ordering of the data file


def steps_of(etc: Path, state: Path, new: dict[str, str], fake: FakeSlurm) -> list[str]:
    seen: list[str] = []
    res = run_apply(opts(etc, state, step_hook=seen.append), new, fake)
    assert res.status == "applied", res
    return seen


def test_data_file_goes_first_when_groups_are_only_removed(env, tmp_path: Path) -> None:
    etc, state, fake = env
    seen = steps_of(etc, state, render(tmp_path, fleet({f"n{i}": "rack-b" for i in range(1, 5)})), fake)
    assert seen.index(f"rename:{DATA}") < seen.index(f"rename:{TOPOLOGY}") < seen.index("reconfigured")


def test_data_file_goes_last_when_groups_are_added(env, tmp_path: Path) -> None:
    etc, state, fake = env
    seen = steps_of(etc, state, render(tmp_path, fleet({"n1": "rack-c"})), fake)
    assert (
        seen.index(f"rename:{TOPOLOGY}")
        < seen.index("reconfigured")
        < seen.index("verified")
        < seen.index(f"rename:{DATA}")
    )


# --------------------------------------------------------------------------------------------------
# crashes at every step


class Crash(BaseException):
    """A simulated SIGKILL: not an Exception, so nothing in apply can catch and 'handle' it."""


SCENARIOS = {
    "move": {"n1": "rack-b"},
    "add-group": {"n1": "rack-c"},
    "remove-group": {f"n{i}": "rack-b" for i in range(1, 5)},
}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scenario=st.sampled_from(sorted(SCENARIOS)),
    crash_at=st.integers(0, 20),
    second_crash=st.integers(-1, 12),
    verify_fails=st.booleans(),
    recover_with=st.sampled_from(["apply", "recover"]),
)
def test_a_crash_at_any_step_recovers_to_old_or_new_and_never_reconfigures_a_mixed_set(
    tmp_path_factory: pytest.TempPathFactory,
    scenario: str,
    crash_at: int,
    second_crash: int,
    verify_fails: bool,
    recover_with: str,
) -> None:
    tmp = tmp_path_factory.mktemp("crash")
    old, new = render(tmp, fleet()), render(tmp, fleet(SCENARIOS[scenario]))
    crash_and_recover(tmp, old, new, "22.05.8", crash_at, second_crash, verify_fails, recover_with)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    to_yaml=st.booleans(),
    crash_at=st.integers(0, 20),
    second_crash=st.integers(-1, 12),
    verify_fails=st.booleans(),
    recover_with=st.sampled_from(["apply", "recover"]),
)
def test_a_crash_during_the_switch_between_topology_conf_and_yaml_recovers_to_one_whole_set(
    tmp_path_factory: pytest.TempPathFactory,
    to_yaml: bool,
    crash_at: int,
    second_crash: int,
    verify_fails: bool,
    recover_with: str,
) -> None:
    """topology.conf -> topology.yaml (and back): never both live or neither, never a mixed reconfigure."""
    tmp = tmp_path_factory.mktemp("crash")
    conf, yml = render_for(tmp, nvl_fleet(tree=True), (26, 5)), render_for(tmp, nvl_fleet(), (26, 5))
    old, new = (conf, yml) if to_yaml else (yml, conf)
    crash_and_recover(tmp, old, new, "26.05.5", crash_at, second_crash, verify_fails, recover_with)


def crash_and_recover(
    tmp: Path,
    old: dict[str, str],
    new: dict[str, str],
    version: str,
    crash_at: int,
    second_crash: int,
    verify_fails: bool,
    recover_with: str,
) -> None:
    etc = tmp / "etc"
    etc.mkdir()
    for name, text in old.items():
        (etc / name).write_text(text)
    names = sorted(set(old) | set(new))
    old_set, new_set = sha_set(etc, names), None
    fake = FakeSlurm(etc, version=version)
    fake.ignore_reconfigure = verify_fails

    def crasher(limit: int):  # type: ignore[no-untyped-def]
        count = [0]

        def hook(step: str) -> None:
            count[0] += 1
            if count[0] > limit:
                raise Crash(step)

        return hook

    state = tmp / "state"
    try:
        run_apply(opts(etc, state, step_hook=crasher(crash_at)), new, fake)
    except Crash:
        pass
    if second_crash >= 0:  # crash the recovery too
        try:
            recover(opts(etc, state, step_hook=crasher(second_crash)), fake)
        except Crash:
            pass
    fake.ignore_reconfigure = False
    if recover_with == "recover":
        res = recover(opts(etc, state), fake)
        assert res.status == "recovered", res
        assert sha_set(etc, names) in (old_set, sha_set_of(new, names))
    res = run_apply(opts(etc, state), new, fake)
    assert res.status in ("applied", "unchanged"), res
    new_set = sha_set_of(new, names)
    assert sha_set(etc, names) == new_set
    assert not (state / "journal.json").exists()
    assert not [p for p in etc.iterdir() if p.name.startswith(".")]
    config = [names.index(n) for n in CONFIG_ORDER if n in names]
    allowed = {tuple(s[i] for i in config) for s in (old_set, new_set)}
    for seen in fake.reconfigured_sets:
        assert tuple(seen[CONFIG_ORDER.index(n)] for n in CONFIG_ORDER if n in names) in allowed, (
            "slurmctld was reconfigured on a mixed set"
        )


def sha_set_of(files: dict[str, str], names: Sequence[str]) -> tuple[str | None, ...]:
    return tuple(hashlib.sha256(files[n].encode()).hexdigest() if n in files else None for n in names)


# --------------------------------------------------------------------------------------------------
# exit codes: one test per apply outcome code (errors.ExitCode), each with its summary line


def one_summary(res) -> None:  # type: ignore[no-untyped-def]
    assert res.summary.startswith(f"slurm-topo apply: {res.status}:") and "\n" not in res.summary, res
    assert res.summary.isascii()


def test_exit_0_unchanged_deferred_and_a_plain_dry_run(env, tmp_path: Path) -> None:
    etc, state, fake = env
    res = run_apply(opts(etc, state, detailed_exitcodes=True), render(tmp_path, fleet()), fake)
    assert (int(res.exit_code), res.status) == (0, "unchanged") and res.exit_code is ExitCode.OK
    one_summary(res)
    res = run_apply(opts(etc, state, dry_run=True), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert (int(res.exit_code), res.status) == (0, "dry-run")
    one_summary(res)


def test_exit_10_applied_and_a_dry_run_that_would_apply_with_detailed_exitcodes(env, tmp_path: Path) -> None:
    etc, state, fake = env
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    before = snapshot(etc)
    res = run_apply(opts(etc, state, dry_run=True, detailed_exitcodes=True), new, fake)
    assert (int(res.exit_code), res.status) == (10, "dry-run") and res.exit_code is ExitCode.APPLIED
    assert snapshot(etc) == before
    res = run_apply(opts(etc, state, detailed_exitcodes=True), new, fake)
    assert (int(res.exit_code), res.status) == (10, "applied")
    one_summary(res)
    assert int(run_apply(opts(etc, state), render(tmp_path, fleet({"n2": "rack-b"})), fake).exit_code) == 0


def test_exit_11_refused_with_nothing_changed(env, tmp_path: Path) -> None:
    etc, state, fake = env
    fake.up = False
    before = snapshot(etc)
    res = run_apply(
        opts(etc, state, detailed_exitcodes=True), render(tmp_path, fleet({"n1": "rack-b"})), fake
    )
    assert (int(res.exit_code), res.status) == (11, "refused") and res.exit_code is ExitCode.REFUSED
    one_summary(res)
    assert snapshot(etc) == before


def test_exit_12_rolled_back_with_the_old_files_live(env, tmp_path: Path) -> None:
    etc, state, fake = env
    fake.ignore_reconfigure = True
    before = snapshot(etc)
    res = run_apply(
        opts(etc, state, detailed_exitcodes=True), render(tmp_path, fleet({"n1": "rack-b"})), fake
    )
    assert (int(res.exit_code), res.status) == (12, "rolled-back") and res.exit_code is ExitCode.ROLLED_BACK
    one_summary(res)
    assert snapshot(etc) == before


def test_exit_13_rollback_failed(env, tmp_path: Path) -> None:
    etc, state, fake = env
    fake.ignore_reconfigure = True
    fake.down_after_reconfigures = 1
    res = run_apply(opts(etc, state), render(tmp_path, fleet({"n1": "rack-b"})), fake)
    assert (int(res.exit_code), res.status) == (13, "rollback-failed")
    assert res.exit_code is ExitCode.ROLLBACK_FAILED
    one_summary(res)


@pytest.mark.parametrize(
    "journal", [b"{not json", b"[]", b'{"id": "x", "phase": "prepared"}', b"\xff\xfe", b"", None]
)
def test_exit_13_an_unreadable_journal_gives_one_summary_line_and_touches_nothing(
    env, tmp_path: Path, journal: bytes | None
) -> None:
    etc, state, fake = env
    state.mkdir()
    if journal is None:  # a journal that is not a readable file
        (state / "journal.json").mkdir()
    else:
        (state / "journal.json").write_bytes(journal)
    before = snapshot(etc)
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    for res in (
        run_apply(opts(etc, state), new, fake),
        run_apply(opts(etc, state, dry_run=True), new, fake),
        recover(opts(etc, state), fake),
        rollback(opts(etc, state), fake),
    ):
        assert (int(res.exit_code), res.status) == (13, "journal-unreadable"), res
        one_summary(res)
        assert "journal.json" in res.summary
    assert snapshot(etc) == before and fake.calls == []


def test_exit_13_from_the_command_line_with_its_summary_line(env, tmp_path: Path) -> None:
    """The CLI prints the summary line on stdout and exits 13 (it used to exit 2 with a bare error)."""
    etc, state, _ = env
    inv = tmp_path / "cli-inv.yaml"
    inv.write_text(yaml.safe_dump(fleet()))
    state.mkdir()
    (state / "journal.json").write_text("{truncated")
    before = snapshot(etc)
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "apply", "-i", str(inv), "--slurm-dir", str(etc)]
        + ["--state-dir", str(state), "--slurm-version", "22.05"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 13, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith("slurm-topo apply: journal-unreadable: ") and proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert snapshot(etc) == before


# --------------------------------------------------------------------------------------------------
# Slurm's own parser before a reconfigure (the throwaway controller itself: tests/integration)


class RejectingProver:
    def __init__(self) -> None:
        self.asked: list[dict[str, bytes | None]] = []

    def prove(self, slurm_dir: Path, staged, timeout: float) -> Proof:  # type: ignore[no-untyped-def]
        self.asked.append(dict(staged))
        return Proof("rejected", "test prover", "fatal: Invalid state BOGUS from n1", ("fatal: Invalid",))


def test_a_set_slurm_rejects_is_refused_before_anything_is_written(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    prover = RejectingProver()
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    res = run_apply(opts(etc, state, prover=prover), new, fake)
    refused(res, etc, before, "Slurm's own parser rejects the new set (fatal: Invalid state BOGUS from n1)")
    assert fake.reconfigures() == 0 and not (state / "journal.json").exists()
    assert prover.asked and prover.asked[0][TOPOLOGY] == new[TOPOLOGY].encode()
    dry = run_apply(opts(etc, state, prover=prover, dry_run=True), new, fake)
    assert dry.status == "refused" and snapshot(etc) == before
    unproven = run_apply(opts(etc, state, prover=prover, slurm_check=False), new, fake)
    assert unproven.status == "applied" and "not proven by Slurm (--no-slurm-check)" in unproven.details


class TimingOutProver:
    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def prove(self, slurm_dir: Path, staged, timeout: float) -> Proof:  # type: ignore[no-untyped-def]
        self.timeouts.append(timeout)
        return Proof(
            "timeout", "test prover (61.0s)", "timed out: no 'Running as primary controller' within 61s"
        )


def test_a_proof_that_times_out_is_refused_as_a_timeout_not_as_a_rejection(env, tmp_path: Path) -> None:
    etc, state, fake = env
    before = snapshot(etc)
    prover = TimingOutProver()
    new = render(tmp_path, fleet({"n1": "rack-b"}))
    res = run_apply(opts(etc, state, prover=prover, slurm_check_timeout=75.0), new, fake)
    refused(res, etc, before, "Slurm's own parser did not answer in time (timed out: no 'Running as primary")
    assert "rejects" not in res.summary and "raise --slurm-check-timeout" in res.summary
    assert res.summary.count("nothing changed") == 1, res.summary
    assert prover.timeouts == [75.0] and fake.reconfigures() == 0


def test_the_proofs_limit_grows_with_the_set_and_parser_complaints_are_rejections() -> None:
    from slurm_topo.apply.prove import config_error, proof_timeout

    assert proof_timeout(60, 0) == 60 and proof_timeout(60, 20_000) >= 60 + 20_000 * 0.0057 * 2
    # what slurmctld 22.05 printed for a staged set it loaded after changing it (tests/integration)
    assert config_error(
        "slurmctld: error: NodeNames=n01 Sockets=# and SocketsPerBoard=# is invalid , using x"
    )
    assert config_error(
        "slurmctld: error: NodeNames=n04 CPUs=12 match no Sockets, Sockets*CoresPerSocket or "
        "Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs."
    )
    for benign in (
        (
            "slurmctld: error: Could not open job state file /tmp/slurm-topo-prove-p/state/job_state: No "
            "such file or directory"
        ),
        "slurmctld: error:  mpi/pmix_v4: init: (null) [0]: mpi_pmix.c:195: pmi/pmix: can not load PMIx "
        "library",
        "slurmctld: error: Couldn't load specified plugin name for mpi/pmix_v4: Plugin init() callback "
        "failed",
        "slurmctld: error: NOTE: Trying backup state save file. Jobs may be lost!",
    ):
        assert not config_error(benign), benign


def test_the_throwaway_controller_gets_private_paths_and_nothing_it_could_reach() -> None:
    live = Path("/etc/slurm")
    text = (
        "ClusterName=c\nSlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\nStateSaveLocation=/var/spool/ctld\n"
        "SlurmUser=slurm\nAccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=db\n"
        "JobCompType=jobcomp/elasticsearch\nResumeProgram=/usr/bin/resume\n  slurmctldpidfile = /run/x.pid\n"
        "Include /etc/slurm/slurm-topo-nodes.conf\ninclude /other/parts.conf\nInclude nodes2.conf\n"
        "Include conf.d/*.conf\n"
        "PartitionName=p Nodes=ALL\n"
    )
    out = probe_conf(text, live, Path("/tmp/p"), "here")
    keys = [ln.split("=", 1)[0].strip().lower() for ln in out.splitlines() if "=" in ln and ln[0] != "#"]
    assert keys.count("slurmctldhost") == 1 and "SlurmctldHost=here" in out
    assert "StateSaveLocation=/tmp/p/state" in out and "/var/spool/ctld" not in out
    assert "SlurmctldPidFile=/tmp/p/slurmctld.pid" in out and "/run/x.pid" not in out
    assert not any(k.startswith(("accountingstorage", "jobcomp", "resume")) for k in keys)
    assert "Include /tmp/p/slurm-topo-nodes.conf" in out and "include /other/parts.conf" in out
    assert "Include nodes2.conf" in out and "PartitionName=p Nodes=ALL" in out and "ClusterName=c" in out
    assert "Include /etc/slurm/conf.d/*.conf" in out


def test_a_slurmctld_of_another_release_is_not_asked(tmp_path: Path) -> None:
    """The throwaway controller proves a set only with the controller's own release (--slurm-version)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    prover = ThrowawayController(expect=(99, 1))
    proof = prover.prove(etc, {}, 5)
    assert proof.verdict == "skipped" and "not proven by Slurm" in proof.how
    if prover.slurmctld and prover.unshare and os.geteuid() == 0:
        assert "the controller runs 99.01" in proof.how, proof


# --------------------------------------------------------------------------------------------------
# NVLink blocks: topology.conf -> topology.yaml (25.05+), topology/block (24.11), block order


def nvl_fleet(domains: Sequence[str] = ("d-01", "d-02", "d-03"), tree: bool = False) -> dict:
    """n1-n4 in NVLink domain d-01, n5-n8 in d-02 (d-03 an empty slot); ``tree``: blocks off."""
    inv = fleet()
    for entry in inv["nodes"]:
        entry["nvlink_domain"] = "d-01" if int(entry["name"][1:]) <= 4 else "d-02"
    inv["nvlink"] = {"domains": list(domains), **({"topology": "tree"} if tree else {})}
    return inv


def render_for(tmp: Path, inv: dict, version: tuple[int, int], name: str = "inv.yaml") -> dict[str, str]:
    path = tmp / name
    path.write_text(yaml.safe_dump(inv))
    return render_all(merge([load_inventory_file(path)]), version)


def live_dir(tmp: Path, files: dict[str, str], slurm_conf: str | None = None) -> Path:
    etc = tmp / "etc"
    etc.mkdir()
    for name, text in files.items():
        (etc / name).write_text(text)
    if slurm_conf is not None:
        (etc / "slurm.conf").write_text(slurm_conf)
    return etc


def test_the_switch_to_topology_yaml_retires_topology_conf_in_the_same_set(tmp_path: Path) -> None:
    old = render_for(tmp_path, nvl_fleet(tree=True), (26, 5))
    new = render_for(tmp_path, nvl_fleet(), (26, 5))
    assert TOPOLOGY in old and TOPOLOGY_YAML not in old and TOPOLOGY_YAML in new and TOPOLOGY not in new
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    fake = FakeSlurm(etc, version="26.05.5")

    dry = run_apply(opts(etc, state, dry_run=True), new, fake)
    assert f"would delete {etc / TOPOLOGY}" in dry.details and f"would create {etc / TOPOLOGY_YAML}" in (
        dry.details
    ), dry.details
    res = run_apply(opts(etc, state, detailed_exitcodes=True), new, fake)
    assert (res.exit_code, res.status) == (EXIT_APPLIED, "applied"), res
    assert "topology: tree -> yaml; topology.conf retired" in res.summary
    assert not (etc / TOPOLOGY).exists() and (etc / TOPOLOGY_YAML).read_text() == new[TOPOLOGY_YAML]
    (last,) = [p for p in (state / "sets").iterdir()]
    assert (last / "old" / TOPOLOGY).read_text() == old[TOPOLOGY]
    # slurmctld read one whole set: the yaml in place and topology.conf gone
    yaml_sha = hashlib.sha256(new[TOPOLOGY_YAML].encode()).hexdigest()
    assert fake.reconfigured_sets == [(yaml_sha, None, *sha_set(etc, CONFIG_ORDER[2:]))]
    assert ["scontrol", "show", "topology", "nvl"] in fake.calls  # the blocks were verified
    assert ["scontrol", "show", "topology", "fabric"] in fake.calls  # and the tree
    fake.calls.clear()
    assert run_apply(opts(etc, state), new, fake).status == "unchanged" and fake.calls == []

    back = rollback(opts(etc, state), fake)
    assert back.status == "applied" and back.reconfigured, back
    assert (etc / TOPOLOGY).read_text() == old[TOPOLOGY] and not (etc / TOPOLOGY_YAML).exists()
    assert set(fake.topologies) == {""} and "root" in fake.topology


def test_a_topology_yaml_slurmctld_does_not_show_is_rolled_back_to_topology_conf(tmp_path: Path) -> None:
    old = render_for(tmp_path, nvl_fleet(tree=True), (26, 5))
    new = render_for(tmp_path, nvl_fleet(), (26, 5))
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    fake = FakeSlurm(etc, version="26.05.5")
    fake.ignore_reconfigure = True  # slurmctld keeps the tree of topology.conf
    res = run_apply(opts(etc, state), new, fake)
    assert (res.exit_code, res.status) == (EXIT_ROLLED_BACK, "rolled-back"), res
    assert "slurmctld does not show what was written" in res.summary and "topology fabric" in res.summary
    assert (etc / TOPOLOGY).read_text() == old[TOPOLOGY] and not (etc / TOPOLOGY_YAML).exists()
    assert fake.reconfigures() == 2 and not (state / "journal.json").exists()


def test_a_topology_yaml_for_a_controller_before_25_05_is_refused(tmp_path: Path) -> None:
    old = render_for(tmp_path, nvl_fleet(tree=True), (24, 11))
    new = render_for(tmp_path, nvl_fleet(), (26, 5))
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    before = snapshot(etc)
    res = run_apply(opts(etc, state), new, FakeSlurm(etc, version="24.11.5"))
    refused(res, etc, before, "Slurm 24.11 does not read topology.yaml (25.05+)")


def test_blocks_that_would_move_are_refused_unless_forced(tmp_path: Path) -> None:
    old = render_for(tmp_path, nvl_fleet(), (26, 5))
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    fake = FakeSlurm(etc, version="26.05.5")
    before = snapshot(etc)
    # a node moving between domains keeps every block in place
    moved_node = nvl_fleet()
    moved_node["nodes"][0]["nvlink_domain"] = "d-03"
    res = run_apply(opts(etc, state), render_for(tmp_path, moved_node, (26, 5)), fake)
    assert res.status == "applied", res
    before = snapshot(etc)
    swapped = render_for(tmp_path, nvl_fleet(("d-02", "d-01", "d-03")), (26, 5))
    res = run_apply(opts(etc, state), swapped, fake)
    refused(
        res, etc, before, "NVLink block(s) would move (topology nvl: block nvl_d-01 moved from position 0"
    )
    assert fake.reconfigures() == 1
    res = run_apply(opts(etc, state, force=True), swapped, fake)
    assert res.status == "applied", res
    assert [b for b, _ in fake.topologies["nvl"]] == ["nvl_d-02", "nvl_d-01", "nvl_d-03"]


def test_blocks_of_topology_conf_are_compared_with_the_yaml_that_replaces_them(tmp_path: Path) -> None:
    """24.11's block topology.conf (topology 'default') and 26.05's yaml (topology nvl): same order passes."""
    old = render_for(tmp_path, nvl_fleet(("d-02", "d-01")), (24, 11))
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    before = snapshot(etc)
    fake = FakeSlurm(etc, version="26.05.5")
    res = run_apply(opts(etc, state), render_for(tmp_path, nvl_fleet(("d-01", "d-02")), (26, 5)), fake)
    refused(res, etc, before, "block nvl_d-02 moved from position 0 to 1")
    res = run_apply(opts(etc, state), render_for(tmp_path, nvl_fleet(("d-02", "d-01")), (26, 5)), fake)
    assert res.status == "applied" and not (etc / TOPOLOGY).exists(), res


TREE_CONF = "ClusterName=c\nTopologyPlugin=topology/tree\n"
BLOCK_CONF = "ClusterName=c\nTopologyPlugin=topology/block\n"


def test_a_block_topology_conf_needs_topology_block_in_slurm_conf_and_24_11_switches_at_reconfigure(
    tmp_path: Path,
) -> None:
    old = render_for(tmp_path, nvl_fleet(tree=True), (24, 11))
    new = render_for(tmp_path, nvl_fleet(), (24, 11))
    assert "BlockName=nvl_d-01" in new[TOPOLOGY] and "SwitchName=" in old[TOPOLOGY]
    etc, state = live_dir(tmp_path, old, TREE_CONF), tmp_path / "state"
    fake = FakeSlurm(etc, version="24.11.5")
    before = snapshot(etc)
    o = opts(etc, state, slurm_check=False)
    refused(
        run_apply(o, new, fake),
        etc,
        before,
        "has TopologyPlugin=topology/tree: set TopologyPlugin=topology/block",
    )
    assert fake.calls == []
    (etc / "slurm.conf").write_text(BLOCK_CONF)  # the admin's part; slurmctld still runs topology/tree
    res = run_apply(o, new, fake)
    assert res.status == "applied" and fake.running_plugin == "topology/block", res
    assert "TopologyPlugin topology/tree -> topology/block: switched by the reconfigure" in res.summary
    # verified as blocks; d-03, the empty slot, is a block of State=FUTURE placeholders on 24.x
    assert [b for b, _ in fake.topologies[""]] == ["nvl_d-01", "nvl_d-02", "nvl_d-03"]


def test_a_plugin_change_before_24_11_is_refused_as_a_restart(tmp_path: Path) -> None:
    old = render_for(tmp_path, nvl_fleet(tree=True), (24, 11))
    new = render_for(tmp_path, nvl_fleet(), (24, 11))
    etc, state = live_dir(tmp_path, old, BLOCK_CONF), tmp_path / "state"
    fake = FakeSlurm(etc, version="24.05.4")
    fake.running_plugin = "topology/tree"
    before = snapshot(etc)
    res = run_apply(opts(etc, state, slurm_check=False), new, fake)
    refused(res, etc, before, "restart required: slurmctld runs TopologyPlugin=topology/tree")
    assert "--no-reconfigure, then restart slurmctld" in res.summary
    res = run_apply(opts(etc, state, slurm_check=False, no_reconfigure=True), new, fake)
    assert res.status == "applied" and fake.reconfigures() == 0, res


def test_a_rollback_slurm_would_not_load_is_refused(tmp_path: Path) -> None:
    """slurm.conf changed since the last apply (a partition Topology=nvl): the old topology.conf must still
    load before --rollback puts it back."""
    old = render_for(tmp_path, nvl_fleet(tree=True), (26, 5))
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    fake = FakeSlurm(etc, version="26.05.5")
    assert run_apply(opts(etc, state), render_for(tmp_path, nvl_fleet(), (26, 5)), fake).status == "applied"
    before = snapshot(etc)
    prover = RejectingProver()
    refused(rollback(opts(etc, state, prover=prover), fake), etc, before, "Slurm's own parser rejects")
    assert prover.asked[0][TOPOLOGY] == old[TOPOLOGY].encode() and prover.asked[0][TOPOLOGY_YAML] is None


def test_the_command_line_switches_to_topology_yaml_for_26_05(tmp_path: Path) -> None:
    """`slurm-topo apply --slurm-version 26.05` on a fleet with NVLink domains writes topology.yaml and
    retires topology.conf (here without a controller: --no-reconfigure, no slurm.conf to prove with)."""
    etc = live_dir(tmp_path, render_for(tmp_path, nvl_fleet(tree=True), (26, 5)))
    old_conf = (etc / TOPOLOGY).read_text()
    inv = tmp_path / "cli-inv.yaml"
    inv.write_text(yaml.safe_dump(nvl_fleet()))
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "apply", "-i", str(inv), "--slurm-dir", str(etc)]
        + ["--state-dir", str(tmp_path / "state"), "--slurm-version", "26.05", "--no-reconfigure"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith("slurm-topo apply: applied: topology.yaml, topology.conf")
    assert "topology.conf retired" in proc.stdout
    assert not (etc / TOPOLOGY).exists() and "- topology: nvl" in (etc / TOPOLOGY_YAML).read_text()
    (done,) = [p for p in (tmp_path / "state" / "sets").iterdir()]
    assert (done / "old" / TOPOLOGY).read_text() == old_conf


def test_a_foreign_topology_conf_is_retired_only_with_adopt(tmp_path: Path) -> None:
    """A hand-written topology.conf that topology.yaml replaces: refused, naming --adopt."""
    old = render_for(tmp_path, nvl_fleet(tree=True), (26, 5))
    old[TOPOLOGY] = "SwitchName=s Nodes=n[1-8]\n"  # no slurm-topo header
    etc, state = live_dir(tmp_path, old), tmp_path / "state"
    fake = FakeSlurm(etc, version="26.05.5")
    before = snapshot(etc)
    new = render_for(tmp_path, nvl_fleet(), (26, 5))
    res = run_apply(opts(etc, state), new, fake)
    refused(res, etc, before, "topology.conf was not written by slurm-topo (topology.yaml replaces it)")
    res = run_apply(opts(etc, state, adopt=True), new, fake)
    assert res.status == "applied" and not (etc / TOPOLOGY).exists(), res


def test_a_long_proof_reports_that_it_is_still_running(tmp_path: Path) -> None:
    """The throwaway slurmctld's watcher calls back while it waits (apply prints a line each time), and still
    takes the answer when it comes. The fake controller answers only once the watcher has called back."""
    from slurm_topo.apply.prove import ACCEPTED_MARK, _watch

    called = tmp_path / "called"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time\n"
            "while not os.path.exists(sys.argv[1]):\n"
            "    time.sleep(0.01)\n"
            f"print('slurmctld: {ACCEPTED_MARK}', flush=True)",
            str(called),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    calls: list[tuple[float, float]] = []
    lines: list[str] = []

    def progress(elapsed: float, limit: float) -> None:
        calls.append((elapsed, limit))
        called.touch()

    try:
        verdict, _ = _watch(child, lines, time.monotonic() + 60, progress, every=0.1)
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()
    assert verdict == "accepted" and calls, (verdict, calls)
    assert all(0 < e < lim <= 60 for e, lim in calls)
