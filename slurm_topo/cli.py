"""``slurm-topo``: a thin click layer over the library. Errors map to exit codes in ``main`` only.

Exit codes: 0 ok · 1 lint found problems · 2 bad input or usage · 3 an external command failed ·
4 an output could not be written (nothing was changed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import files as shipped
from .errors import CommandError, InputError, OutputError, SlurmTopoError
from .inventory import load_inventories, with_slurm_nodes
from .lint import lint_topology
from .model import Inventory
from .output import write_files
from .render import render_all
from .runner import SubprocessRunner, scontrol_nodes_argv, slurm_version_argvs
from .show import render_tree
from .slurmconf import parse_scontrol_nodes, parse_topology_conf
from .version import DEFAULT_SLURM, __version__, format_slurm_version, parse_slurm_version

EXIT_PROBLEMS, EXIT_INPUT, EXIT_COMMAND, EXIT_OUTPUT = 1, 2, 3, 4


def _warn(message: str) -> None:
    click.echo(message, err=True)


def _slurm_nodes(nodes_from: str | None, scontrol: bool) -> list[dict[str, str]] | None:
    if nodes_from and scontrol:
        raise InputError("give --nodes-from or --scontrol, not both")
    if nodes_from:
        try:
            text = Path(nodes_from).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{nodes_from}: cannot read: {exc.strerror}") from None
        return parse_scontrol_nodes(text, source=nodes_from)
    if scontrol:
        return parse_scontrol_nodes(SubprocessRunner().run(scontrol_nodes_argv()))
    return None


def _load(inventories: tuple[str, ...], nodes_from: str | None = None, scontrol: bool = False) -> Inventory:
    inventory = load_inventories(inventories)
    records = _slurm_nodes(nodes_from, scontrol)
    if records is not None:
        inventory = with_slurm_nodes(inventory, records)
        if inventory.extra_nodes:
            _warn(f"{len(inventory.extra_nodes)} nodes Slurm knows are in no inventory; placed in the root's "
                  f"leaf: {' '.join(inventory.extra_nodes)}")
    for warning in inventory.warnings:
        _warn(f"warning: {warning}")
    for conflict in inventory.conflicts:
        _warn(conflict.message())
    return inventory


def _slurm_version(given: str | None) -> tuple[int, int]:
    if given:
        return parse_slurm_version(given)
    runner = SubprocessRunner()
    # `scontrol --version` needs a readable slurm.conf on 22.05; the daemons' -V does not.
    for argv in slurm_version_argvs():
        if runner.available(argv[0]):
            try:
                return parse_slurm_version(runner.run(argv, timeout=10))
            except (CommandError, InputError):
                continue
    _warn(f"no Slurm found to ask and no --slurm-version: rendering for Slurm {format_slurm_version(DEFAULT_SLURM)}")
    return DEFAULT_SLURM


inventory_option = click.option(
    "--inventory", "-i", "inventories", multiple=True, required=True, metavar="FILE",
    help="Inventory YAML; repeat to merge several (trust: provider > operator > self).")
nodes_from_option = click.option(
    "--nodes-from", metavar="FILE", help="Nodes Slurm knows: `scontrol show node -o` output or a hostlist per line.")
scontrol_option = click.option("--scontrol", is_flag=True, help="Ask the running Slurm (`scontrol show node -o`).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-topo")
def cli() -> None:
    """Write a GPU fleet's shape as Slurm configuration (topology.conf, node features, ...)."""


@cli.command()
@inventory_option
@click.option("--out", "-o", required=True, metavar="DIR", help="Directory to write into (created if missing).")
@click.option("--slurm-version", metavar="X.Y", help="Slurm to render for (default: `scontrol --version`).")
@nodes_from_option
@scontrol_option
def generate(inventories: tuple[str, ...], out: str, slurm_version: str | None, nodes_from: str | None,
             scontrol: bool) -> None:
    """Render every output for the merged inventories into DIR, all or nothing."""
    inventory = _load(inventories, nodes_from, scontrol)
    rendered = render_all(inventory, _slurm_version(slurm_version))
    for written in write_files(out, rendered):
        click.echo(f"{written.status:9} {written.path}")


@cli.command()
@click.option("--topology", "topology", required=True, metavar="FILE", help="topology.conf to check.")
@nodes_from_option
@scontrol_option
@click.option("--slurm-conf", metavar="FILE", help="slurm.conf: also check that no node is defined twice.")
def lint(topology: str, nodes_from: str | None, scontrol: bool, slurm_conf: str | None) -> None:
    """Check a topology.conf for what would make Slurm fail or never place a node."""
    try:
        text = Path(topology).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{topology}: cannot read: {exc.strerror}") from None
    switches = parse_topology_conf(text, source=topology)
    records = _slurm_nodes(nodes_from, scontrol)
    known = [r["NodeName"] for r in records] if records is not None else None
    problems = lint_topology(switches, known_nodes=known, slurm_conf=Path(slurm_conf) if slurm_conf else None)
    for p in problems:
        where = f"{topology}:{p.lineno}" if p.lineno else topology
        click.echo(f"{where}: {p.code}: {p.message}")
    if problems:
        sys.exit(EXIT_PROBLEMS)
    nodes = sum(len(sw.nodes or ()) for sw in switches)
    click.echo(f"{topology}: ok ({len(switches)} switches, {nodes} nodes)")


@cli.command()
@inventory_option
def show(inventories: tuple[str, ...]) -> None:
    """Print the fleet as a tree: region -> zone -> network group, with node and GPU counts."""
    click.echo(render_tree(_load(inventories)), nl=False)


@cli.command("files")
@click.option("--copy", "copy_to", metavar="DIR", help="Copy the shipped Slurm-side files into DIR.")
def files_cmd(copy_to: str | None) -> None:
    """List (or copy out) the files slurm-topo ships for Slurm: job_submit/, gres/, examples/."""
    if copy_to:
        for path in shipped.copy_to(Path(copy_to)):
            click.echo(f"copied    {path}")
    else:
        for name in shipped.names():
            click.echo(name)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="slurm-topo", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_INPUT if isinstance(exc, click.UsageError) else exc.exit_code)
    except click.exceptions.Abort:
        _warn("aborted")
        sys.exit(130)
    except InputError as exc:
        _warn(f"error: {exc}")
        sys.exit(EXIT_INPUT)
    except CommandError as exc:
        _warn(f"error: {exc}")
        sys.exit(EXIT_COMMAND)
    except OutputError as exc:
        _warn(f"error: {exc}")
        sys.exit(EXIT_OUTPUT)
    except SlurmTopoError as exc:
        _warn(f"error: {exc}")
        sys.exit(EXIT_INPUT)
    sys.exit(0)
