"""Man pages for ``slurm-topo`` and ``gpulayer-srun``, generated from the command definitions themselves
(click for slurm-topo, with click-man: one page per visible command, found by walking the click group, so a
command registered in ``slurm_topo/cli`` gets its page with no list to edit; argparse for gpulayer-srun, with
argparse-manpage), so a page cannot drift from ``--help``. ``setup.py`` runs this at build time and installs
the pages with the wheel (``share/man/man1``); ``tests/test_man_pages.py`` checks every command has its page.
An editable install (``pip install -e``) installs no data files: read them there with
``man -l build/man/slurm-topo.1``.

Every page has NAME (the command's whole one-line summary: the first sentence of its help, as click's own
``--help`` listing has it before cutting it to width), SYNOPSIS, DESCRIPTION, OPTIONS (and COMMANDS for a
group), then sections this module adds:

* EXIT STATUS: :class:`slurm_topo.core.errors.ExitCode`, each code with the docstring its member carries in
  ``slurm_topo/core/errors.py`` (read from the source, not copied here);
* FILES, where a command reads or writes fixed places (:data:`FILES`; a default path comes from the option
  that sets it, ``{--state-dir}``; ``generate``'s outputs from ``slurm_topo.render.RENDERERS``, ``files``'s
  folders from ``slurm_topo.files.GROUPS``);
* EXAMPLES: a few real invocations per command (:data:`EXAMPLES`, the one place they are kept; the tests
  parse each one with the command's own parser);
* SEE ALSO: every other page written here, and Slurm's own pages (:data:`EXTERNAL_PAGES`).

    python man_pages.py DIR     # write the pages into DIR
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

HERE = Path(__file__).resolve().parent
# A fixed date keeps the build reproducible: the release's, not the build machine's clock.
DATE = "2026-12-03"
PROG = "slurm-topo"
SRUN = "gpulayer-srun"

EXTERNAL_PAGES = ("slurm.conf(5)", "topology.conf(5)", "gres.conf(5)", "sbatch(1)", "srun(1)", "scontrol(1)")
"""Slurm's own pages every SEE ALSO names (Slurm ships them; they are not written here)."""

RECORDS = "/shared/slurm-topo/records"
FLEET = "/etc/slurm-topo/fleet.yaml"

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    PROG: (
        (
            "Write topology.conf, slurm-topo-nodes.conf and slurm_topo_data.lua for the fleet into a folder, "
            "all or nothing:",
            "slurm-topo generate -i fleet.yaml -o /etc/slurm/slurm-topo",
        ),
        (
            "Check the file against the nodes the running Slurm knows:",
            "slurm-topo lint --topology /etc/slurm/topology.conf --scontrol "
            "--slurm-conf /etc/slurm/slurm.conf",
        ),
        (
            "What the submit filter would do with an 8-node job that must stay in one zone:",
            "slurm-topo check -i fleet.yaml --locality zone:fail -N 8",
        ),
        ("Why job 1234 landed where it did, or why it waits:", "slurm-topo explain 1234"),
    ),
    "slurm-topo apply": (
        (
            "The regeneration job (cron or a systemd timer, contrib/): nothing changed touches nothing, a "
            "change is staged, installed, reconfigured and verified, or rolled back; exit 10 when one was "
            "applied:",
            f"slurm-topo apply -i {FLEET} --slurm-dir /etc/slurm --detailed-exitcodes",
        ),
        (
            "Say what a run would change, write nothing:",
            f"slurm-topo apply -i {FLEET} --slurm-dir /etc/slurm --dry-run",
        ),
        (
            "Finish or revert a run that was interrupted (what exit 13 asks for):",
            "slurm-topo apply --slurm-dir /etc/slurm --recover",
        ),
        ("Put the previous set of files back:", "slurm-topo apply --slurm-dir /etc/slurm --rollback"),
    ),
    "slurm-topo calibrate": (
        (
            "Inside an allocation whose nodes span the fleet's levels (salloc -N 4 ...): measure one pair "
            "per level and write the links: table:",
            "slurm-topo calibrate -i fleet.yaml -o links.yaml",
        ),
        (
            "The same on named nodes, the table and the measurements as JSON on stdout:",
            "slurm-topo calibrate -i fleet.yaml --nodes 'dgx[01-02],dgx05' --json",
        ),
        (
            "Then cost a placement with the measured table:",
            "slurm-topo cost -i fleet.yaml --links links.yaml --nodes 'dgx[01-02]' --tp 8 "
            "--allreduce-bytes 20G",
        ),
    ),
    "slurm-topo capacity": (
        (
            "How many 4 x 8-GPU and 2 x 8-GPU jobs could start now, each inside one group per level:",
            "slurm-topo capacity -i fleet.yaml --scontrol --shape 4x8 --shape 2x8",
        ),
        (
            "The same from a saved node list (scontrol -d show node -o > nodes.txt), as JSON:",
            "slurm-topo capacity -i fleet.yaml --nodes-from nodes.txt --shape 4x8 --json",
        ),
    ),
    "slurm-topo check": (
        (
            "An 8-node job that must stay in one zone, rejected at submit when no zone can ever hold it "
            "(exit 1 on reject):",
            "slurm-topo check -i fleet.yaml --locality zone:fail -N 8",
        ),
        (
            "Three nodes of 8 H100s inside one network group, the candidates as JSON:",
            "slurm-topo check -i fleet.yaml --locality network_group -N 3 --gpus-per-node h100:8 --json",
        ),
    ),
    "slurm-topo cost": (
        (
            "Communication and step seconds of TP 8 over four nodes, against the best placement of that "
            "shape:",
            "slurm-topo cost -i fleet.yaml --nodes 'dgx[01-02,05-06]' --tp 8 --allreduce-bytes 20G "
            "--tp-bytes 2G",
        ),
        (
            "With the step's compute given (the slowdown is then of the whole step), as JSON:",
            "slurm-topo cost -i fleet.yaml --nodes 'dgx[01-04]' --tp 8 --allreduce-bytes 10G "
            "--compute 450ms --json",
        ),
    ),
    "slurm-topo discover": (
        (
            "On a node: its location record, from the flags, GPULAYER_* and its own cloud's metadata:",
            "slurm-topo discover",
        ),
        (
            "On premises, where the provisioning system knows the rack:",
            "slurm-topo discover --region eu --zone eu-1 --network-group rack-7 --json",
        ),
    ),
    "slurm-topo doctor": (
        (
            "Check this controller's wiring against the live Slurm (exit 1 on any finding):",
            "slurm-topo doctor",
        ),
        (
            "Also check that the generated files were generated from the fleet's inventory, as JSON:",
            f"slurm-topo doctor -i {FLEET} --json",
        ),
    ),
    "slurm-topo explain": (
        ("Why job 1234 landed where it did, or why it waits:", "slurm-topo explain 1234"),
        (
            "Its predicted step seconds against the best placement free now, drawn on the fleet:",
            "slurm-topo explain 1234 -i fleet.yaml --plan tp=8,dp=4,bytes=20G --svg job.svg",
        ),
        (
            'As one JSON object (for a job Slurm does not know, "known": false, and exit 2):',
            "slurm-topo explain 1234 --json",
        ),
    ),
    "slurm-topo files": (
        ("List the Slurm-side files shipped with slurm-topo:", "slurm-topo files"),
        (
            "Copy them out, to install the submit filter from there:",
            "slurm-topo files --copy /tmp/slurm-topo",
        ),
    ),
    "slurm-topo generate": (
        (
            "Render for the Slurm installed here (scontrol --version) into a folder of its own:",
            "slurm-topo generate -i fleet.yaml -o /etc/slurm/slurm-topo",
        ),
        (
            "Merge the nodes' own records, carry the hardware over from the running Slurm, render for 24.11:",
            f"slurm-topo generate -i fleet.yaml --records {RECORDS} --scontrol --slurm-version 24.11 -o out",
        ),
        ("What was written, as JSON:", "slurm-topo generate -i fleet.yaml -o out --json"),
    ),
    "slurm-topo gpu": (
        (
            "A node's GPU link matrix, from a capture (nvidia-smi topo -m > topo.txt):",
            "slurm-topo gpu parse topo.txt",
        ),
        ("Its NVLink islands:", "slurm-topo gpu islands topo.txt"),
        ("The best 4 free GPUs while GPU 0 is busy:", "slurm-topo gpu pick topo.txt -k 4 --busy 0"),
    ),
    "slurm-topo gpu islands": (
        (
            "The NVLink islands of a capture (nvidia-smi topo -m > topo.txt):",
            "slurm-topo gpu islands topo.txt",
        ),
        ("Of this machine's GPUs, through NVML, as JSON:", "slurm-topo gpu islands --nvml --json"),
    ),
    "slurm-topo gpu parse": (
        ("Read a capture (a file that cannot be read exactly is refused):", "slurm-topo gpu parse topo.txt"),
        ("This machine's GPUs through NVML, as JSON:", "slurm-topo gpu parse --nvml --json"),
    ),
    "slurm-topo gpu pick": (
        ("The best 4 free GPUs while GPUs 0 and 1 are busy:", "slurm-topo gpu pick topo.txt -k 4 --busy 0,1"),
        ("Two GPUs of this machine, through NVML, as JSON:", "slurm-topo gpu pick --nvml -k 2 --json"),
    ),
    "slurm-topo health": (
        ("This node's NVLinks and InfiniBand/RoCE ports, a verdict each:", "slurm-topo health"),
        (
            "The pass the node's timer runs (contrib/systemd): the record where the controller reads it:",
            f"slurm-topo health --records {RECORDS} --json",
        ),
        (
            "Ports only, three healthy passes before a link is trusted again:",
            "slurm-topo health --no-nvml --threshold hysteresis=3",
        ),
    ),
    "slurm-topo health-sync": (
        (
            "What a pass would drain or resume, changing nothing:",
            f"slurm-topo health-sync --records {RECORDS} --dry-run",
        ),
        (
            "The controller's pass (contrib/systemd), as JSON:",
            f"slurm-topo health-sync --records {RECORDS} --json",
        ),
    ),
    "slurm-topo import": (
        (
            "A provider inventory from Google Cloud's own listing (gcloud compute instances list "
            "--format=json > gcp.json):",
            "slurm-topo import gcp gcp.json > provider-gcp.yaml",
        ),
        (
            "From Azure's listing (az vm list -d > azure.json), node names without the -vm suffix:",
            "slurm-topo import azure azure.json --name-map '(.*)-vm=\\1'",
        ),
    ),
    "slurm-topo lint": (
        (
            "The live file against the nodes Slurm knows and slurm.conf's node definitions (exit 1 on "
            "problems):",
            "slurm-topo lint --topology /etc/slurm/topology.conf --scontrol "
            "--slurm-conf /etc/slurm/slurm.conf",
        ),
        (
            "A new topology.yaml against the live one (blocks keep their order), for Slurm 25.05:",
            "slurm-topo lint --topology out/topology.yaml --previous /etc/slurm/topology.yaml "
            "--slurm-version 25.05",
        ),
    ),
    "slurm-topo metrics": (
        (
            "The textfile for node_exporter, with capacity and the data file (the timer's form):",
            "slurm-topo metrics -i fleet.yaml --shape 4x8 --data-file /etc/slurm/slurm_topo_data.lua "
            "--textfile /var/lib/node_exporter/textfile/slurm_topo.prom",
        ),
        ("A scrape endpoint on the controller:", "slurm-topo metrics -i fleet.yaml --listen 9788"),
    ),
    "slurm-topo report": (
        (
            "The last 30 days, a plan for jobs without one, and a page:",
            "slurm-topo report -i fleet.yaml --since now-30days --plan tp=8,pp=4,bytes=10G "
            "--html report.html",
        ),
        (
            "Before and after the filter's install, as JSON:",
            "slurm-topo report -i fleet.yaml --split-at 2026-11-15 --json",
        ),
    ),
    "slurm-topo relax": (
        ("One pass, the systemd timer's form:", "slurm-topo relax --once"),
        ("What a pass would change, as JSON, changing nothing:", "slurm-topo relax --once --dry-run --json"),
        (
            "Also widen jobs whose sbatch --test-only start one level looser saves more than it costs:",
            "slurm-topo relax --once --estimates 20",
        ),
    ),
    "slurm-topo show": (
        ("The fleet as a tree, with node and GPU counts:", "slurm-topo show -i fleet.yaml"),
        (
            "With the node states of a saved node list (scontrol -d show node -o > nodes.txt), drawn as SVG:",
            "slurm-topo show -i fleet.yaml --nodes-from nodes.txt --svg fleet.svg",
        ),
    ),
    SRUN: (
        (
            "In a batch script: TP 8 inside each node's NVLink island, 4 pipeline stages, DP over the rest:",
            "gpulayer-srun --tp 8 --pp 4 -- python train.py",
        ),
        (
            "Print the plan (each rank's node, GPUs and groups) and run nothing:",
            "gpulayer-srun --tp 4 --dry-run -- python train.py",
        ),
        (
            "srun's own options pass through (those the plan decides, such as -N, are refused):",
            "gpulayer-srun --tp 8 --cpus-per-task 16 --kill-on-bad-exit=1 -- python train.py",
        ),
    ),
}
"""Per page (the command as typed, ``slurm-topo gpu pick``): (what it does, the command line). A page whose
command is not here gets no EXAMPLES section (tests/test_man_pages.py asks for one on every page)."""

GENERATED = {
    "topology.conf": "the switch tree for topology/tree, or the NVLink blocks on Slurm 23.11 to 24.11 "
    "(topology.conf(5))",
    "topology.yaml": "Slurm 25.05 and later, when nodes are in NVLink domains: the tree and the blocks in "
    "one file",
    "slurm-topo-nodes.conf": "NodeName= lines with each node's location features; Include it from "
    "slurm.conf(5)",
    "gres.conf": "the GPUs' Name=, File=, Cores= and Links= where the inventory knows them (gres.conf(5))",
    "slurm_topo_data.lua": "what the job_submit filter reads: groups, sizes, GPUs (job_submit/README.md)",
}
"""What each file ``generate`` and ``apply`` write is (keyed as ``slurm_topo.render.RENDERERS``)."""

SHIPPED = {
    "job_submit": "the submit filter (job_submit.lua and its modules) and the SPANK plugin's source",
    "gres": "how gres.conf is generated from a node's GPU topology, with example gres.conf files",
    "examples": "example inventories",
    "contrib": "systemd units and timers (and a cron entry) for apply, relax, discover, health, health-sync, "
    "metrics",
}
"""What each folder ``files`` ships holds (keyed as ``slurm_topo.files.GROUPS``)."""

FILES: dict[str, tuple[tuple[str, str], ...]] = {
    PROG: (
        (
            "/etc/slurm/topology.conf",
            "the switch tree (or the NVLink blocks) slurm-topo generates; topology.conf(5)",
        ),
        ("/etc/slurm/topology.yaml", "Slurm 25.05 and later: the tree and the NVLink blocks in one file"),
        ("/etc/slurm/slurm-topo-nodes.conf", "NodeName= lines with each node's location features"),
        ("/etc/slurm/slurm_topo_data.lua", "the data the job_submit filter reads"),
        ("/var/lib/slurm-topo", "apply's lock, journal, state and backups; health's previous pass"),
        (RECORDS, "where the units of contrib/ keep the nodes' records (discover, health)"),
    ),
    "slurm-topo apply": (
        (
            "{--state-dir}",
            "the lock, the journal, the state and the last 10 sets of backups (never inside --slurm-dir)",
        ),
    ),
    "slurm-topo doctor": (
        (
            "/etc/slurm/slurm.conf",
            "the one slurmctld reports, unless --slurm-conf; the generated files sit beside it",
        ),
        ("{--state-dir}", "apply's state directory: an interrupted apply's journal is a finding"),
    ),
    "slurm-topo discover": (
        ("{--dmi-root}", "names the cloud the node runs on: only that cloud's metadata server is asked"),
    ),
    "slurm-topo health": (
        ("{--state}", "the previous pass (error-counter deltas, hysteresis), replaced atomically"),
        ("{--sysfs-root}/class/infiniband", "the InfiniBand and RoCE ports read"),
        ("DIR/health/NODE.json", "with --records DIR: this node's record, which health-sync reads"),
    ),
    "slurm-topo health-sync": (
        ("DIR/health/NODE.json", "the nodes' records (--records DIR), written there by slurm-topo health"),
    ),
    "slurm-topo lint": (
        (
            "/etc/slurm/topology.conf",
            "the live file, as --topology usually names it (topology.yaml from 25.05)",
        ),
        ("/etc/slurm/slurm.conf", "with --slurm-conf: its NodeName= lines and those of its Include files"),
    ),
    "slurm-topo relax": (("{--lock}", "held during a pass: a second pass started meanwhile skips"),),
    SRUN: (
        (
            "$TMPDIR/gpulayer-srun-JOBID-HASH.hosts",
            "SLURM_HOSTFILE: the node of each rank, one line each (/tmp without TMPDIR)",
        ),
        ("gres.conf", "beside slurm.conf: the nodes' GPU links (Links=), unless --topology gives a capture"),
    ),
}
"""Per page: (path, what it is). ``{--opt}`` stands for that option's default. ``generate``, ``apply`` and
``files`` also get the entries derived from the code (their outputs, the shipped folders)."""


# ---- roff


def roff(text: str) -> str:
    """Plain text as roff: backslashes and hyphens escaped, no line taken for a request; a docstring's
    double-backquoted literal in bold."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"``(.+?)``", r"\\fB\1\\fR", text)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n"))


def page_ref(name: str, section: str = "1") -> str:
    return f"\\fB{roff(name)}\\fR({section})"


# ---- what the pages say


def summary(command: click.Command) -> str:
    """The command's whole one-line summary: its short help, else the first sentence of its help (click's
    own rule, without cutting it to a width)."""
    return command.get_short_help_str(limit=sys.maxsize)


def command_pages(cli: click.Group, path: str = PROG) -> dict[str, click.Command]:
    """Every visible command under ``cli`` (groups included), by the command as typed (``slurm-topo gpu
    pick``), ``cli`` itself first: walked, so a newly registered command is on the list."""
    import click

    out: dict[str, click.Command] = {path: cli}
    for name, command in cli.commands.items():
        if command.hidden:
            continue
        if isinstance(command, click.Group):
            out.update(command_pages(command, f"{path} {name}"))
        else:
            out[f"{path} {name}"] = command
    return out


def exit_codes() -> list[tuple[int, str]]:
    """``ExitCode``'s codes with the docstring each member carries in slurm_topo/core/errors.py, whitespace
    collapsed (the one table: README "Exit codes" shows the same)."""
    from slurm_topo.core import errors

    tree = ast.parse(inspect.getsource(errors))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ExitCode"]
    meanings: dict[str, str] = {}
    for stmt, after in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            meanings[stmt.targets[0].id] = " ".join(after.value.value.split())
    missing = [code.name for code in errors.ExitCode if code.name not in meanings]
    if missing:
        raise ValueError(f"slurm_topo.core.errors.ExitCode: no docstring for {', '.join(missing)}")
    return [(int(code), meanings[code.name]) for code in errors.ExitCode]


def _option_default(command: click.Command, opt: str) -> str:
    import click

    for param in command.params:
        if isinstance(param, click.Option) and opt in param.opts:
            default = param.default
            if default is None or callable(default):
                break
            return str(default)
    raise ValueError(f"{command.name}: no option {opt} with a default, for FILES")


def files_of(name: str, command: click.Command | None) -> list[tuple[str, str]]:
    """The FILES entries of a page: :data:`FILES`'s, the defaults filled in from the options, and what the
    code lists for ``generate`` and ``apply`` (the outputs) and ``files`` (the shipped folders)."""
    from slurm_topo import files as shipped
    from slurm_topo.render import RENDERERS

    out: list[tuple[str, str]] = []
    if name in (f"{PROG} generate", f"{PROG} apply"):
        where = "DIR" if name.endswith("generate") else "SLURM_DIR"
        out += [(f"{where}/{out_name}", GENERATED.get(out_name, "generated")) for out_name in RENDERERS]
    if name == f"{PROG} files":
        out += [(f"{group}/", SHIPPED.get(group, "shipped with slurm-topo")) for group in shipped.GROUPS]
    for path, what in FILES.get(name, ()):
        if command is not None:
            path = re.sub(r"\{(--[a-z-]+)\}", lambda m: _option_default(command, m.group(1)), path)
        out.append((path, what))
    return out


def sections(name: str, command: click.Command | None, pages: Iterable[str]) -> str:
    """EXIT STATUS, FILES, EXAMPLES and SEE ALSO of the page ``name`` (``pages``: every page written)."""
    lines = [".SH EXIT STATUS"]
    prog = SRUN if name == SRUN else PROG
    lines.append(
        roff(
            f"The same codes for every command of {PROG}, for {SRUN} and its per-task shim (one table, "
            f"slurm_topo.core.errors.ExitCode). Every error is one line on stderr, {prog}: error: ..."
        )
    )
    for code, meaning in exit_codes():
        lines += [".TP", f".B {code}", roff(meaning)]
    if name == SRUN:
        lines += [
            ".PP",
            roff(
                f"Once the plan is made {SRUN} becomes srun (it execs it): from then on its exit status is "
                "srun's own, and a task's is its command's."
            ),
        ]
    entries = files_of(name, command)
    if entries:
        lines.append(".SH FILES")
        for path, what in entries:
            lines += [".TP", f".I {roff(path)}", roff(what)]
    examples = EXAMPLES.get(name, ())
    if examples:
        lines.append(".SH EXAMPLES")
        for what, line in examples:
            lines += [".PP", roff(what), ".PP", ".RS 4", ".nf", roff(line), ".fi", ".RE"]
    others = [page_ref(p.replace(" ", "-")) for p in sorted(pages, key=_page_order) if p != name]
    externals = [page_ref(*ext[:-1].split("(")) for ext in EXTERNAL_PAGES]
    lines += [".SH SEE ALSO", ".nh", ",\n".join(others + externals)]
    return "\n".join(lines) + "\n"


def _page_order(name: str) -> tuple[bool, bool, str]:
    return (name != PROG, name == SRUN, name)


# ---- the pages


def click_page(name: str, command: click.Command, parent: click.Context | None, pages: Iterable[str]) -> str:
    """One click command's page: click-man's NAME, SYNOPSIS, DESCRIPTION and OPTIONS (with the whole
    summary), a COMMANDS section naming only visible commands' pages, then :func:`sections`."""
    import click
    from click_man.man import ManPage  # type: ignore[import-untyped]

    # the command's own context settings, as make_context applies them: a bare Context gives the command
    # the default help option, which click then keeps on the command object (-h would stop working)
    ctx = click.Context(command, info_name=name.rsplit(" ", 1)[-1], parent=parent, **command.context_settings)
    page = ManPage(ctx.command_path)
    page.version = _version()
    page.date = DATE
    page.short_help = roff(summary(command).removesuffix("."))
    page.description = roff(inspect.cleandoc(command.help or summary(command)))
    page.synopsis = " ".join(command.collect_usage_pieces(ctx))
    page.options = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            record = param.get_help_record(ctx)
            if record is not None:
                page.options.append((record[0], roff(record[1])))
    text = str(page)
    if isinstance(command, click.Group):
        listed = [(sub, cmd) for sub, cmd in command.commands.items() if not cmd.hidden]
        lines = [".SH COMMANDS", ".nh"]  # a page name is never hyphenated
        for sub, cmd in listed:
            lines += [
                ".TP",
                f"\\fB{roff(sub)}\\fR",
                f"{roff(summary(cmd))} See {page_ref(f'{name} {sub}'.replace(' ', '-'))}.",
            ]
        text += "\n".join(lines) + "\n"
    return text + sections(name, command, pages)


def _version() -> str:
    from slurm_topo.plumbing.version import __version__

    return __version__


def _contexts(cli: click.Group) -> dict[str, click.Context]:
    """The parent context of each page's command (a subcommand's usage line names its group)."""
    import click

    out: dict[str, click.Context] = {}

    def walk(group: click.Group, ctx: click.Context, path: str) -> None:
        for sub, command in group.commands.items():
            out[f"{path} {sub}"] = ctx
            if isinstance(command, click.Group):
                ctx_sub = click.Context(command, info_name=sub, parent=ctx, **command.context_settings)
                walk(command, ctx_sub, f"{path} {sub}")

    walk(cli, click.Context(cli, info_name=PROG, **cli.context_settings), PROG)
    return out


def srun_page(pages: Iterable[str]) -> str:
    """gpulayer-srun's page: argparse-manpage's, its NAME the first sentence of the parser's description."""
    from argparse_manpage.manpage import Manpage  # type: ignore[import-untyped]

    from slurm_topo.srun.cli import _parser

    parser = _parser()
    parser.prog = SRUN
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join((parser.description or "").split()), maxsplit=1)[0]
    data: Mapping[str, Any] = {
        "version": _version(),
        "date": DATE,
        "project_name": PROG,
        "description": first.rstrip("."),
        "manual_title": "slurm-topo manual",
    }
    page = Manpage(parser, _data=dict(data))
    return str(page).rstrip("\n") + "\n" + sections(SRUN, None, pages)


def write_man_pages(target: Path) -> list[Path]:
    """Write every page into ``target``; returns the paths written, slurm-topo's first."""
    sys.path.insert(0, str(HERE))  # the source tree's package, also inside an isolated build
    from slurm_topo.cli import cli

    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.1"):
        old.unlink()
    commands = command_pages(cli)
    pages = [*commands, SRUN]
    parents = _contexts(cli)
    with warnings.catch_warnings():  # click-man calls a click helper click 8.2 deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, command in commands.items():
            text = click_page(name, command, parents.get(name), pages)
            (target / f"{name.replace(' ', '-')}.1").write_text(text, encoding="utf-8")
    (target / f"{SRUN}.1").write_text(srun_page(pages), encoding="utf-8")
    return sorted(target.glob("*.1"), key=lambda p: (p.name != f"{PROG}.1", p.name))


if __name__ == "__main__":
    for path in write_man_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "build/man")):
        print(path)
