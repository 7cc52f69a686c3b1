"""The ``slurm-topo`` group and what its commands share: loading inventories (with Slurm's node records
and partitions), the Slurm release, the common options.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

import click

from ..access import argv as slurm_argv
from ..access.text import parse_scontrol_nodes, parse_scontrol_partitions
from ..core.errors import CommandError, ExitCode, InputError, show_value
from ..core.model import Inventory
from ..inventory import Loaded, load_inventory_file, merge, with_slurm_nodes
from ..plumbing.entry import read_input
from ..plumbing.runner import SubprocessRunner
from ..plumbing.text import counted
from ..plumbing.version import DEFAULT_SLURM, __version__, format_slurm_version, parse_slurm_version
from ..policy import IMPLICIT_PARTITION, Partition

PROG = "slurm-topo"

EXIT_PROBLEMS = ExitCode.PROBLEMS  # kept for the commands that exit 1 themselves

F = TypeVar("F", bound=Callable[..., Any])


def _warn(message: str) -> None:
    click.echo(message, err=True)


def _slurm_nodes(
    nodes_from: str | None, scontrol: bool, keys: Collection[str] | None = None
) -> list[dict[str, str]] | None:
    if nodes_from and scontrol:
        raise InputError("give --nodes-from or --scontrol, not both")
    if nodes_from:
        try:
            text = Path(nodes_from).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{nodes_from}: cannot read: {exc.strerror}") from None
        return parse_scontrol_nodes(text, source=nodes_from, keys=keys)
    if scontrol:
        return parse_scontrol_nodes(SubprocessRunner().run(slurm_argv.show_nodes()), keys=keys)
    return None


def _load(
    inventories: tuple[str, ...],
    nodes_from: str | None = None,
    scontrol: bool = False,
    records_dir: str | None = None,
) -> Inventory:
    if not inventories and not records_dir:
        raise click.UsageError("give at least one --inventory FILE or --records DIR")
    from ..core.model import MAX_NODES

    loaded: list[Loaded] = []
    for path in inventories:  # one budget for all files: each is counted before it is expanded
        loaded.append(load_inventory_file(path, MAX_NODES - sum(len(x.nodes) for x in loaded)))
    if records_dir:
        from ..sources.records import load_records

        found, skipped = load_records(Path(records_dir))
        for line in skipped:
            _warn(f"warning: {line}")
        loaded.extend(found)
    inventory = merge(loaded)
    records = _slurm_nodes(nodes_from, scontrol)
    if records is not None:
        inventory = with_slurm_nodes(inventory, records, nodes_from or "scontrol show node")
        if inventory.extra_nodes:
            extra = len(inventory.extra_nodes)
            _warn(
                f"{counted(extra, 'node')} Slurm knows {'is' if extra == 1 else 'are'} in no inventory; "
                f"placed in the root's leaf: {' '.join(inventory.extra_nodes)}"
            )
    if records_dir:
        from ..health.drain import load_effects
        from ..health.effects import apply_effects

        # DIR/health/: degraded nodes are kept as a last resort, down NVLinks leave Links= (docs/health.md)
        inventory, changes = apply_effects(inventory, load_effects(Path(records_dir)))
        for line in changes:
            _warn(f"health: {line}")
    for warning in inventory.warnings:
        _warn(f"warning: {warning}")
    for conflict in inventory.conflicts:
        _warn(conflict.message())
    return inventory


SUPPORTED_SLURM = ((22, 5), (23, 2), (23, 11), (24, 5), (24, 11), (25, 5), (25, 11), (26, 5))
"""The Slurm releases the renderers know (22.05 to 26.05, each one's rules: ``render.topology_block``'s
BlockLevels/BlockSizes/topology.yaml thresholds, ``render.SLURM_MAX_NODES``); ``--slurm-version`` takes one
of them, with or without its patch level (24.11 or 24.11.5)."""


def supported_slurm_text() -> str:
    return ", ".join(format_slurm_version(v) for v in SUPPORTED_SLURM)


def _check_slurm_version(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--slurm-version``: a release the renderers know, else a usage error (exit 2) naming them."""
    if value is None:
        return None
    try:
        version = parse_slurm_version(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from None
    if version not in SUPPORTED_SLURM:
        raise click.BadParameter(
            f"{value[:40]!r}: not a Slurm release slurm-topo renders for; give one of "
            f"{supported_slurm_text()}"
        )
    return value


def slurm_version_option(what: str) -> Callable[[F], F]:
    """``--slurm-version X.Y`` (``what`` says what it is for), checked against :data:`SUPPORTED_SLURM`."""
    return click.option(
        "--slurm-version",
        metavar="X.Y",
        callback=_check_slurm_version,
        help=f"{what} One of {supported_slurm_text()}.",
    )


def _slurm_version(given: str | None) -> tuple[int, int]:
    if given:
        return parse_slurm_version(given)
    runner = SubprocessRunner()
    # `scontrol --version` needs a readable slurm.conf on 22.05; the daemons' -V does not.
    for argv in slurm_argv.version_argvs():
        if runner.available(argv[0]):
            try:
                return parse_slurm_version(runner.run(argv, timeout=10))
            except (CommandError, InputError):
                continue
    _warn(
        "no Slurm found to ask and no --slurm-version: rendering for Slurm "
        f"{format_slurm_version(DEFAULT_SLURM)}"
    )
    return DEFAULT_SLURM


def _partitions(partitions_from: str | None, scontrol: bool) -> list[Partition] | None:
    """Slurm's partitions for the submit filter's data. Any name Slurm took is kept (``gpu+big``, ``a"b``,
    ``débug``: the data file escapes it, ``render.filter_data``); one the data cannot hold — ``*``, the data's
    own every-node entry, or a name Slurm printed in bytes that are not UTF-8 — is left out with one warning
    line, and the filter treats it as a partition it does not know. Never a reason to stop regenerating:
    an administrator's new partition must not stop ``apply --scontrol`` on every run from then on."""
    if partitions_from:
        text = read_input(partitions_from, errors="replace")  # as scontrol's output: a stray byte is U+FFFD
        rows = parse_scontrol_partitions(text, source=partitions_from)
    elif scontrol:
        rows = parse_scontrol_partitions(SubprocessRunner().run(slurm_argv.show_partitions()))
    else:
        return None
    kept = []
    for name, nodes, default in rows:
        if name == IMPLICIT_PARTITION:
            why = f"{IMPLICIT_PARTITION!r} is the data's own name for every node"
        elif "\ufffd" in name:
            why = "Slurm printed it in bytes that are not UTF-8"
        else:
            kept.append(Partition(name, tuple(nodes), default))
            continue
        _warn(
            f"warning: partition {show_value(name, 80)} left out of the submit filter's data ({why}): the "
            "filter treats it as a partition it does not know"
        )
    return kept


partitions_option = click.option(
    "--partitions-from",
    metavar="FILE",
    help="Partitions: saved `scontrol show partition -o` (default: one partition holding every node).",
)

inventory_option = click.option(
    "--inventory",
    "-i",
    "inventories",
    multiple=True,
    metavar="FILE",
    help="Inventory YAML; repeat to merge several (trust: provider > operator > self).",
)

records_option = click.option(
    "--records",
    "records_dir",
    metavar="DIR",
    help="A folder of node records written by `slurm-topo discover` (always trusted as self-reports).",
)

nodes_from_option = click.option(
    "--nodes-from",
    metavar="FILE",
    help="Nodes Slurm knows: `scontrol show node -o` output or a hostlist per line.",
)

scontrol_option = click.option(
    "--scontrol", is_flag=True, help="Ask the running Slurm (`scontrol show node -o`)."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-topo")
def cli() -> None:
    """Write a GPU fleet's shape as Slurm configuration (topology.conf, node features, ...)."""
