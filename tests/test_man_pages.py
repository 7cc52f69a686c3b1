"""The man pages are generated from the command definitions (man_pages.py: click-man for slurm-topo, one page
per command; argparse-manpage for gpulayer-srun) and travel in the wheel (share/man/man1): every visible
command has a page, and every option of a command is on its page, so a page cannot drift from ``--help``.
Every page has its whole one-line summary as NAME, the exit-code table of ``slurm_topo.core.errors.ExitCode``,
examples the command's own parser takes, its files where it has some, and a SEE ALSO that names only pages
that exist (or Slurm's own)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from man_pages import write_man_pages  # noqa: E402
from slurm_topo.cli import cli  # noqa: E402
from slurm_topo.core.errors import ExitCode  # noqa: E402
from slurm_topo.srun.cli import _parser, split_argv  # noqa: E402
from slurm_topo.srun.options import check_srun_options  # noqa: E402

SLURM_PAGES = {"slurm.conf(5)", "topology.conf(5)", "gres.conf(5)", "sbatch(1)", "srun(1)", "scontrol(1)"}
"""Slurm's own pages, which the SEE ALSO sections may name without a page here."""


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
    """A page's text with roff's escapes plain (hyphens, backslashes, fonts), for looking things up."""
    for escape, plain in (("\\-", "-"), ("\\&", ""), ("\\e", "\\")):
        page = page.replace(escape, plain)
    return re.sub(r"\\f[BIRP]", "", page)


def _sections(page: str) -> dict[str, str]:
    """A page's sections by heading, as plain text (roff's requests left in)."""
    parts = re.split(r"^\.SH (.+)$", _roff_text(page), flags=re.MULTILINE)
    return {heading.strip('"'): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every page written, by name without ``.1``."""
    target = tmp_path_factory.mktemp("man")
    return {p.name.removesuffix(".1"): p.read_text() for p in write_man_pages(target)}


def test_every_command_and_every_option_is_on_a_page(pages: dict[str, str]) -> None:
    commands = _commands(cli, "slurm-topo")
    assert len(commands) > 15 and "slurm-topo-gpu-pick" in commands
    assert set(pages) == set(commands) | {"gpulayer-srun"}
    for name, command in commands.items():
        page = _roff_text(pages[name])
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for opt in param.opts:
                    assert opt in page, (name, opt)
    srun_page = _roff_text(pages["gpulayer-srun"])
    for action in _parser()._actions:
        if action.dest == "help":  # argparse-manpage leaves -h/--help out, as man pages do
            continue
        for opt in action.option_strings:
            assert opt in srun_page, opt


def test_a_hidden_command_gets_no_page_and_no_mention(pages: dict[str, str]) -> None:
    """The probes calibrate runs through srun are not for people: no page, though the group has them, and no
    page lists them or points at a page of theirs (slurm-topo(1) listed `probe` and slurm-topo-probe(1))."""
    assert cli.commands["probe"].hidden
    assert not any("probe" in name for name in pages)
    assert re.search(r"^probe$", _sections(pages["slurm-topo"])["COMMANDS"], re.MULTILINE) is None
    assert not any("slurm-topo-probe" in _roff_text(page) for page in pages.values())


def test_every_name_line_is_the_whole_summary(pages: dict[str, str]) -> None:
    """NAME holds the command's whole one-line summary (its help's first sentence, as `--help` lists it
    before cutting it to width); click-man cut it at 45 characters with "..."."""
    for name, command in _commands(cli, "slurm-topo").items():
        whole = command.get_short_help_str(limit=10**6)
        assert len(whole) > 20, name
        (line,) = _sections(pages[name])["NAME"].strip().splitlines()
        assert line == f"{name} - {whole.removesuffix('.')}", name
        assert not line.endswith("..."), name
    (line,) = _sections(pages["gpulayer-srun"])["NAME"].strip().splitlines()
    assert line.startswith("gpulayer-srun - Run COMMAND with one Slurm task per rank") and line.endswith(
        "tree"
    )


def test_every_page_has_its_sections_in_order(pages: dict[str, str]) -> None:
    groups = {name for name, c in _commands(cli, "slurm-topo").items() if isinstance(c, click.Group)}
    for name, page in pages.items():
        headings = list(_sections(page))
        wanted = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]
        assert [h for h in headings if h in wanted] == wanted, (name, headings)
        assert ("COMMANDS" in headings) == (name in groups), name
        if "FILES" in headings:
            assert headings.index("EXIT STATUS") < headings.index("FILES") < headings.index("EXAMPLES")


def _docstrings() -> dict[int, str]:
    """Each ExitCode member's docstring, read from slurm_topo/core/errors.py's text (what the pages must
    show)."""
    source = (REPO / "slurm_topo" / "core" / "errors.py").read_text()
    out = {}
    for code in ExitCode:
        m = re.search(
            rf"^    {code.name} = {int(code)}\n    \"\"\"(.*?)\"\"\"", source, re.MULTILINE | re.DOTALL
        )
        assert m, code.name
        out[int(code)] = " ".join(m.group(1).replace("``", "").split())
    return out


def test_exit_status_is_the_exit_code_table(pages: dict[str, str]) -> None:
    """EXIT STATUS lists every ExitCode, in order, with its member's docstring (not a copy kept elsewhere)."""
    meanings = _docstrings()
    for name, page in pages.items():
        body = _sections(page)["EXIT STATUS"]
        listed = re.findall(r"^\.TP\n\.B (\d+)\n(.*?)(?=^\.TP|^\.PP|\Z)", body, re.MULTILINE | re.DOTALL)
        assert [int(code) for code, _ in listed] == [int(c) for c in ExitCode], name
        for code, text in listed:
            assert " ".join(text.split()) == meanings[int(code)], (name, code)
        assert "one line on stderr" in body
    assert "becomes srun" in _sections(pages["gpulayer-srun"])["EXIT STATUS"]


def test_every_page_reference_is_to_a_page_that_exists(pages: dict[str, str]) -> None:
    """Any NAME(N) on any page names a page written here or one of Slurm's (slurm-topo(1) pointed at a
    slurm-topo-probe(1) that is not shipped, slurm-topo-gpu(1) at `slurm-topo gpu-parse(1)`); every page's
    SEE ALSO names every other page."""
    known = {f"{name}(1)" for name in pages} | SLURM_PAGES
    for name, page in pages.items():
        text = _roff_text(page)
        referenced = set(re.findall(r"([A-Za-z][\w.-]*\(\d\))", text))
        assert referenced <= known, (name, referenced - known)
        assert re.search(r"slurm-topo [\w-]+\(\d\)", text) is None, name  # "slurm-topo gpu-parse(1)"
        see_also = set(re.findall(r"([A-Za-z][\w.-]*\(\d\))", _sections(page)["SEE ALSO"]))
        assert see_also == known - {f"{name}(1)"}, name


def _shell_words(line: str) -> list[str]:
    """A command line's words up to a shell operator (``> file``, ``| …``)."""
    words = shlex.split(line)
    ops = [i for i, w in enumerate(words) if w in (">", ">>", "|", "&&", ";", "<")]
    return words[: ops[0]] if ops else words


def _parse_slurm_topo(words: list[str]) -> str:
    """Parse ``slurm-topo …`` with the commands' own parsers (as a run would, without running): the page
    name of the command it runs."""
    assert words[0] == "slurm-topo"
    command: click.Command = cli
    ctx = cli.make_context("slurm-topo", [], resilient_parsing=True)
    rest, path = words[1:], "slurm-topo"
    while isinstance(command, click.Group):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None and not sub.hidden, words
        path, command, rest = f"{path}-{rest[0]}", sub, rest[1:]
        ctx = click.Context(command, info_name=path.rsplit("-", 1)[-1], parent=ctx)
    command.make_context(path.rsplit("-", 1)[-1], list(rest), parent=ctx.parent)  # raises on a bad line
    return path


def test_every_example_is_a_command_line_its_parser_takes(pages: dict[str, str]) -> None:
    """Each page's EXAMPLES: command lines slurm-topo's (or gpulayer-srun's) own parser takes, required
    options and values checked, at least one running the page's command (a group: one of its commands)."""
    for name, page in pages.items():
        lines = re.findall(r"^\.nf\n(.*?)\n\.fi$", _sections(page)["EXAMPLES"], re.MULTILINE | re.DOTALL)
        assert len(lines) >= 2, name
        ran = []
        for line in lines:
            words = _shell_words(line)
            if words[0] == "gpulayer-srun":
                ours, command = split_argv(words[1:])
                _, srun_options = _parser().parse_known_args(ours)
                check_srun_options(srun_options)
                assert command, line
                ran.append("gpulayer-srun")
            else:
                ran.append(_parse_slurm_topo(words))
        assert any(r == name or r.startswith(f"{name}-") for r in ran), (name, ran)


def test_a_bad_example_would_be_caught() -> None:
    """The example check refuses what the command would: an option it lacks, a missing required one."""
    with pytest.raises(click.UsageError):
        _parse_slurm_topo(["slurm-topo", "gpu", "pick", "topo.txt", "--no-such-option"])
    with pytest.raises(click.UsageError):
        _parse_slurm_topo(["slurm-topo", "cost", "--nodes", "n1"])  # no --allreduce-bytes
    with pytest.raises(click.BadParameter):
        _parse_slurm_topo(["slurm-topo", "generate", "-o", "out", "--slurm-version", "99.1"])


def test_files_name_what_the_code_writes_and_ships(pages: dict[str, str]) -> None:
    """FILES of generate and apply list every output the renderers write; files lists every shipped folder;
    a default path is the option's own default."""
    from slurm_topo import files as shipped
    from slurm_topo.render import RENDERERS

    generate = _sections(pages["slurm-topo-generate"])["FILES"]
    apply_files = _sections(pages["slurm-topo-apply"])["FILES"]
    assert len(RENDERERS) >= 5
    for output in RENDERERS:
        assert f".I DIR/{output}\n" in generate and f".I SLURM_DIR/{output}\n" in apply_files, output
    listed = _sections(pages["slurm-topo-files"])["FILES"]
    assert all(f".I {group}/\n" in listed for group in shipped.GROUPS)
    defaults = {
        "slurm-topo-apply": "--state-dir",
        "slurm-topo-health": "--state",
        "slurm-topo-relax": "--lock",
    }
    commands = _commands(cli, "slurm-topo")
    for page, opt in defaults.items():
        (param,) = [p for p in commands[page].params if opt in getattr(p, "opts", ())]
        assert f".I {param.default}\n" in _sections(pages[page])["FILES"], page
    assert "/etc/slurm/topology.conf" in _sections(pages["slurm-topo"])["FILES"]


def test_a_newly_registered_command_gets_a_whole_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command registered with the group (as `doctor` is, in slurm_topo/cli/doctor.py) gets its page with
    no list to edit: its NAME, its exit codes, a place in slurm-topo(1)'s COMMANDS and in every SEE ALSO."""

    @click.command("zz-check")
    @click.option("--deep", is_flag=True, help="Look harder.")
    def zz_check(deep: bool) -> None:
        """Check something new about the controller, at length and with care. It has a second sentence."""

    monkeypatch.setitem(cli.commands, "zz-check", zz_check)
    written = {p.name.removesuffix(".1"): p.read_text() for p in write_man_pages(tmp_path)}
    page = _sections(written["slurm-topo-zz-check"])
    assert page["NAME"].strip() == (
        "slurm-topo-zz-check - Check something new about the controller, at length and with care"
    )
    assert "--deep" in page["OPTIONS"] and ".B 70\n" in page["EXIT STATUS"]
    assert "slurm-topo-zz-check(1)" in _sections(written["slurm-topo"])["COMMANDS"]
    assert all(
        "slurm-topo-zz-check(1)" in _roff_text(p) for n, p in written.items() if n != "slurm-topo-zz-check"
    )


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
