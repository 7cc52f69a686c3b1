"""The man pages are generated from the command definitions (man_pages.py: click-man for slurm-topo, one page
per command; argparse-manpage for gpulayer-srun) and travel in the wheel (share/man/man1): every visible
command has a page, and every option of a command is on its page, so a page cannot drift from ``--help``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from man_pages import write_man_pages  # noqa: E402
from slurm_topo.cli import cli  # noqa: E402
from slurm_topo.srun.cli import _parser  # noqa: E402


def _commands(group: click.Group, path: str) -> dict[str, click.Command]:
    """Every visible command under ``group``, by its page name (slurm-topo-gpu-pick)."""
    out: dict[str, click.Command] = {path: group}
    for name, command in group.commands.items():
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            out.update(_commands(command, f"{path}-{name}"))
        else:
            out[f"{path}-{name}"] = command
    return out


def _roff_text(page: str) -> str:
    """A page's text with roff's escaped hyphens plain, for looking up option names."""
    return page.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")


def test_every_command_and_every_option_is_on_a_page(tmp_path: Path) -> None:
    written = {p.name for p in write_man_pages(tmp_path)}
    commands = _commands(cli, "slurm-topo")
    assert len(commands) > 15 and "slurm-topo-gpu-pick" in commands
    assert written == {f"{name}.1" for name in commands} | {"gpulayer-srun.1"}
    for name, command in commands.items():
        page = _roff_text((tmp_path / f"{name}.1").read_text())
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts:
                    assert opt in page, (name, opt)
    srun_page = _roff_text((tmp_path / "gpulayer-srun.1").read_text())
    for action in _parser()._actions:
        if action.dest == "help":  # argparse-manpage leaves -h/--help out, as man pages do
            continue
        for opt in action.option_strings:
            assert opt in srun_page, opt


def test_a_hidden_command_gets_no_page(tmp_path: Path) -> None:
    """The probes calibrate runs through srun are not for people: no page, though the group has them."""
    assert cli.commands["probe"].hidden
    assert not any("probe" in p.name for p in write_man_pages(tmp_path))


def test_the_wheel_installs_the_pages(tmp_path: Path) -> None:
    """``pip wheel .`` (setup.py runs man_pages.py) puts every page under share/man/man1."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    pages = {n.rsplit("/", 1)[1] for n in names if "/data/share/man/man1/" in n}
    assert "slurm-topo.1" in pages and "gpulayer-srun.1" in pages and "slurm-topo-apply.1" in pages
    assert len(pages) == len(_commands(cli, "slurm-topo")) + 1
