"""Two writers on one ``--slurm-dir``: two real processes with different ``--state-dir`` never interleave.

Run A applies set A and stops right after staging (its step hook waits for a file); meanwhile run B, with
its own state directory, applies set B to the same config directory. B must wait for A's lock on the
directory (or be refused once ``lock_wait`` runs out) and never write while A holds it; at the end the live
set is exactly B's, and every ``scontrol reconfigure`` the fake slurmctld of either process saw read one
whole set (old, A or B), never a mix.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from test_apply import fleet, render, snapshot

from slurm_topo.apply import CONFIG_ORDER

TESTS = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_apply import FakeSlurm
from slurm_topo.apply import ApplyOptions, CONFIG_ORDER, run_apply

etc, state, new_dir, lock_wait, pause, waited = sys.argv[2:8]
pause = Path(pause) if pause != "-" else None
waited = Path(waited) if waited != "-" else None

def hook(step):
    if pause is not None and step == "staged":
        (pause / "paused").write_text("")
        deadline = time.monotonic() + 60
        while not (pause / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

def sleep(seconds):
    # the run's sleeps: between tries of a held --slurm-dir lock (the first sleep a run makes), then the
    # verification's retries; `waited` tells the test the run has found the directory locked
    if waited is not None:
        waited.touch()
    time.sleep(min(seconds, 0.02))

fake = FakeSlurm(Path(etc))
rendered = {p.name: p.read_text() for p in Path(new_dir).iterdir()}
options = ApplyOptions(
    slurm_dir=Path(etc), state_dir=Path(state), min_interval=0, verify_timeout=0.5,
    lock_wait=float(lock_wait), step_hook=hook, sleep=sleep,
)
res = run_apply(options, rendered, fake)
print(json.dumps({"code": int(res.exit_code), "status": res.status, "summary": res.summary,
                  "reconfigured": fake.reconfigured_sets}))
sys.exit(int(res.exit_code))
"""


def start(
    etc: Path, state: Path, new: Path, lock_wait: float, pause: Path | None, waited: Path | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(TESTS), str(etc), str(state), str(new), str(lock_wait)]
        + [str(pause) if pause else "-", str(waited) if waited else "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> dict:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=120)
    assert out.strip(), err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def config_shas(files: dict[str, str]) -> list[str | None]:
    return [hashlib.sha256(files[n].encode()).hexdigest() if n in files else None for n in CONFIG_ORDER]


def wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_two_applies_with_different_state_dirs_on_one_slurm_dir_serialize(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    old = render(tmp_path, fleet())
    for name, text in old.items():
        (etc / name).write_text(text)
    sets = {"a": render(tmp_path, fleet({"n1": "rack-b"})), "b": render(tmp_path, fleet({"n8": "rack-a"}))}
    dirs = {}
    for key, files in sets.items():
        d = tmp_path / f"new-{key}"
        d.mkdir()
        for name, text in files.items():
            (d / name).write_text(text)
        dirs[key] = d
    pause = tmp_path / "pause"
    pause.mkdir()

    a = start(etc, tmp_path / "state-a", dirs["a"], 0, pause)
    try:
        wait_for(pause / "paused")
        while_a_holds = snapshot(etc)  # A has staged its files and holds both of its locks

        refused = finish(start(etc, tmp_path / "state-b", dirs["b"], 0.3, None))
        assert (refused["code"], refused["status"]) == (11, "refused"), refused
        assert f"another slurm-topo apply is writing {etc}" in refused["summary"]
        assert refused["reconfigured"] == []

        b = start(etc, tmp_path / "state-b", dirs["b"], 60, None, waited=pause / "b-waited")
        wait_for(pause / "b-waited")  # B tried the directory's lock, found it held, and sleeps between tries
        assert b.poll() is None, "the second writer did not wait for the first"
        assert snapshot(etc) == while_a_holds, "the second writer wrote while the first held the directory"
    finally:
        (pause / "release").write_text("")
    res_a = finish(a)
    res_b = finish(b)
    assert (res_a["code"], res_a["status"]) == (0, "applied"), res_a
    assert (res_b["code"], res_b["status"]) == (0, "applied"), res_b
    live = {n: (etc / n).read_text() for n in sets["b"]}
    assert live == sets["b"], "the live set is not exactly the last writer's"
    whole = [config_shas(old), config_shas(sets["a"]), config_shas(sets["b"])]
    for seen in res_a["reconfigured"] + res_b["reconfigured"]:
        assert seen in whole, "slurmctld was reconfigured on a mixed set"
    assert not [p for p in etc.iterdir() if p.name.startswith(".")]
