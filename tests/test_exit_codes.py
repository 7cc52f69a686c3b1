"""One exit-code table for every entry point (``slurm-topo``, ``gpulayer-srun``, the per-task shim): a test
per code.

The entry points run as a user runs them (subprocesses); the internal-error path is driven in-process through
``main`` with a command that raises, because no honest input makes slurm-topo crash. ``apply``'s outcome codes
(10 applied, 11 refused, 12 rolled back, 13 rollback failed / journal unreadable) are tested with the apply
engine in ``tests/test_apply.py``; here the README's table is checked to name every code.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from slurm_topo import cli as cli_module
from slurm_topo import srun
from slurm_topo.core.errors import (
    CommandError,
    ExitCode,
    InputError,
    OutputError,
    PlacementError,
    exit_code_for,
)

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "examples" / "benchmark-five-zones.yaml"


def run(
    *argv: str, module: str = "slurm_topo", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_error_line(proc: subprocess.CompletedProcess[str], prog: str = "slurm-topo") -> str:
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{prog}: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A folder put first on PATH for fake Slurm commands."""
    d = tmp_path / "bin"
    d.mkdir()
    return d


def fake(bin_dir: Path, name: str, body: str) -> dict[str, str]:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


# ---- the mapper


def test_the_mapper_follows_the_classes() -> None:
    assert exit_code_for(InputError("x")) == ExitCode.INPUT == 2
    assert exit_code_for(CommandError(["scontrol"], 1)) == ExitCode.COMMAND == 3
    assert exit_code_for(PlacementError("x")) == ExitCode.COMMAND
    assert exit_code_for(OutputError("x")) == ExitCode.OUTPUT == 4
    assert exit_code_for(KeyboardInterrupt()) == ExitCode.INTERRUPTED == 130
    assert exit_code_for(RuntimeError("x")) == ExitCode.INTERNAL == 70
    assert exit_code_for(KeyError("x")) == ExitCode.INTERNAL


def test_readme_table_names_every_code() -> None:
    """README "Exit codes" lists every ExitCode, and nothing else."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = {int(m) for m in re.findall(r"^\| `?(\d+)`? \|", section, re.MULTILINE)}
    assert listed == {int(c) for c in ExitCode}


# ---- slurm-topo


def test_0_ok_and_1_problems(tmp_path: Path) -> None:
    good = tmp_path / "good.conf"
    good.write_text("SwitchName=root Nodes=n[1-2]\n")
    assert run("lint", "--topology", str(good)).returncode == ExitCode.OK
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n")
    proc = run("lint", "--topology", str(bad))
    assert proc.returncode == ExitCode.PROBLEMS and "duplicate-switch" in proc.stdout


def test_2_bad_inventory_and_usage(tmp_path: Path) -> None:
    inv = tmp_path / "bad.yaml"
    inv.write_text("nodes:\n  - {name: n1, zone: 'a b'}\n")
    proc = run("generate", "-i", str(inv), "-o", str(tmp_path / "out"), "--slurm-version", "22.05")
    assert proc.returncode == ExitCode.INPUT
    assert "nodes[0].zone" in one_error_line(proc)
    assert not (tmp_path / "out").exists()
    # click's own usage errors: the same prefix, one line, exit 2
    proc = run("check", "-i", str(FLEET), "--locality", "zone", "-N", "0")
    assert proc.returncode == ExitCode.INPUT
    assert "'-N' / '--nodes'" in one_error_line(proc)
    proc = run("no-such-command")
    assert proc.returncode == ExitCode.INPUT
    assert one_error_line(proc) == (
        "slurm-topo: error: no such command 'no-such-command' (see 'slurm-topo --help')"
    )


def test_3_a_failing_command(tmp_path: Path, bin_dir: Path) -> None:
    env = fake(
        bin_dir, "scontrol", 'echo "slurm_load_node error: Unable to contact slurm controller" >&2\nexit 1'
    )
    proc = run("generate", "-i", str(FLEET), "-o", str(tmp_path / "out"), "--slurm-version", "22.05",
               "--scontrol", env=env)  # fmt: skip
    assert proc.returncode == ExitCode.COMMAND
    line = one_error_line(proc)
    assert "scontrol show node -o exited 1" in line and "Unable to contact" in line
    assert not (tmp_path / "out").exists()


def test_4_unwritable_output(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    proc = run("generate", "-i", str(FLEET), "-o", str(blocker / "out"), "--slurm-version", "22.05")
    assert proc.returncode == ExitCode.OUTPUT
    one_error_line(proc)
    assert blocker.read_text() == "not a folder\n"


def test_70_an_internal_error_prints_a_traceback_and_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug (an exception that is none of ours) exits 70 with the traceback, then one error line."""

    @click.command("boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    monkeypatch.setitem(cli_module.cli.commands, "boom", boom)
    with pytest.raises(SystemExit) as exc:
        cli_module.main(["boom"])
    assert exc.value.code == ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith("slurm-topo: error: internal error (RuntimeError: a bug)")


def _interrupt(argv: list[str], env: dict[str, str], started: Path) -> subprocess.CompletedProcess[str]:
    """Start ``argv``, wait until the fake command it runs has started, send SIGINT, collect the result.

    The child gets SIGINT's default disposition back: a test run started in the background of a
    non-interactive shell (``nohup bash .ci/run &``) inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt — what a user's Ctrl-C at a terminal does is what is tested."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the fake command never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_130_interrupted(tmp_path: Path, bin_dir: Path) -> None:
    """Ctrl-C while slurm-topo waits for Slurm (explain reads the job with squeue --json): exit 130 and one
    line, no traceback."""
    started = tmp_path / "started"
    env = fake(bin_dir, "squeue", f"touch {started}\nexec sleep 30")
    done = _interrupt([sys.executable, "-m", "slurm_topo", "explain", "1234"], env, started)
    assert done.returncode == ExitCode.INTERRUPTED, done.stderr
    assert done.stderr.splitlines()[-1] == "slurm-topo: interrupted"
    assert "Traceback" not in done.stderr


# ---- gpulayer-srun and its shim


def test_gpulayer_srun_codes(tmp_path: Path, bin_dir: Path) -> None:
    """2 outside an allocation or for a bad value (--tp 0 is a bad value, wherever it runs), 3 when Slurm's
    client (squeue) fails."""
    proc = run("--tp", "4", "--", "true", module="slurm_topo.srun", env={"SLURM_JOB_ID": ""})
    assert proc.returncode == ExitCode.INPUT
    assert "not inside a Slurm allocation" in one_error_line(proc, "gpulayer-srun")
    proc = run("--tp", "0", "--", "true", module="slurm_topo.srun", env={"SLURM_JOB_ID": "7"})
    assert proc.returncode == ExitCode.INPUT
    assert "--tp: 0: must be at least 1" in one_error_line(proc, "gpulayer-srun")
    env = fake(bin_dir, "squeue", 'echo "slurm_load_jobs error: Invalid job id specified" >&2\nexit 1')
    proc = run("--tp", "1", "--", "true", module="slurm_topo.srun", env={**env, "SLURM_JOB_ID": "7"})
    assert proc.returncode == ExitCode.COMMAND
    assert "Invalid job id specified" in one_error_line(proc, "gpulayer-srun")


def test_gpulayer_srun_unwritable_hostfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host file lives in memory (memfd) where the kernel has it; without it, in a private directory:
    when no such directory can be made under $XDG_RUNTIME_DIR, $TMPDIR or /tmp, exit 4 (OUTPUT),
    naming them."""
    import tempfile

    from slurm_topo.core.errors import exit_code_for
    from slurm_topo.srun import cli as srun_cli

    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    blocker = tmp_path / "a-file"
    with pytest.raises(Exception) as caught:
        srun_cli.private_hostfile(["n1"], {"TMPDIR": str(blocker)}, memory=False)
    assert exit_code_for(caught.value) == ExitCode.OUTPUT
    assert str(caught.value).startswith(
        f"cannot make a private directory for the SLURM_HOSTFILE in {blocker}, /tmp"
    )


def test_gpulayer_srun_version_and_interrupt(tmp_path: Path, bin_dir: Path) -> None:
    proc = run("--version", module="slurm_topo.srun")
    assert proc.returncode == 0 and proc.stdout.startswith("gpulayer-srun (slurm-topo) ")
    started = tmp_path / "started"
    env = fake(bin_dir, "squeue", f"touch {started}\nexec sleep 30")
    done = _interrupt(
        [sys.executable, "-m", "slurm_topo.srun", "--tp", "1", "--", "true"],
        {**env, "SLURM_JOB_ID": "7"},
        started,
    )
    assert done.returncode == ExitCode.INTERRUPTED and done.stderr == "gpulayer-srun: interrupted\n"


def test_shim_codes(tmp_path: Path) -> None:
    """The shim: 2 without the plan variables, 3 on the wrong node or for a command that cannot start."""
    plan_env = dict(srun.plan_srun(srun.Allocation("1", ("n1",), {"n1": (0, 1)}), tp=2).env)
    proc = run("--", "true", module="slurm_topo.plumbing.srun_shim", env={"SLURM_PROCID": "0"})
    assert proc.returncode == ExitCode.INPUT
    assert "GPULAYER_SRUN_GROUPS is not set" in one_error_line(proc, "gpulayer-srun shim")
    wrong = {**plan_env, "SLURM_PROCID": "1", "SLURMD_NODENAME": "n9"}
    proc = run("--", "true", module="slurm_topo.plumbing.srun_shim", env=wrong)
    assert proc.returncode == ExitCode.COMMAND
    assert "planned on n1 but runs on n9" in one_error_line(proc, "gpulayer-srun shim")
    here = {**plan_env, "SLURM_PROCID": "1", "SLURMD_NODENAME": "n1"}
    proc = run("--", str(tmp_path / "absent"), module="slurm_topo.plumbing.srun_shim", env=here)
    assert proc.returncode == ExitCode.COMMAND
    assert "could not be started" in one_error_line(proc, "gpulayer-srun shim")
    proc = run(
        "--",
        "sh",
        "-c",
        'echo "$CUDA_VISIBLE_DEVICES $LOCAL_RANK"',
        module="slurm_topo.plumbing.srun_shim",
        env=here,
    )
    assert proc.returncode == 0 and proc.stdout == "0,1 1\n"


def test_a_command_that_does_not_answer_in_time_says_so() -> None:
    """A Slurm client that hangs (slurmctld down: squeue retries its connection) is killed at the timeout:
    one line that says it did not answer, never "could not be started"; exit 3 as any failed command."""
    from slurm_topo.core.errors import CommandError
    from slurm_topo.plumbing.runner import SubprocessRunner

    with pytest.raises(CommandError) as exc:
        SubprocessRunner().run(["sleep", "30"], timeout=0.2)
    assert exc.value.timeout == 0.2 and exc.value.exit_code == ExitCode.COMMAND
    assert str(exc.value) == "sleep 30 did not answer within 0.2 s (slurmctld down or overloaded?)"
    with pytest.raises(CommandError, match="could not be started"):
        SubprocessRunner().run(["/nonexistent/squeue"], timeout=5)
