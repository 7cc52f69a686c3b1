"""``slurm-topo metrics``: Prometheus' text format, to a textfile-collector file or a scrape endpoint."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import InputError
from ..plumbing.runner import SubprocessRunner
from .common import _load, cli, inventory_option, records_option

DEFAULT_SHAPES = ("2x8", "4x8", "8x8")


@cli.command()
@inventory_option
@records_option
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    metavar="NxG",
    help=f"Capacity shapes NODESxGPUS[:ep=E]; repeat (default {' '.join(DEFAULT_SHAPES)}).",
)
@click.option(
    "--data-file",
    metavar="FILE",
    help="The filter's slurm_topo_data.lua: its age and checksum (default: not checked).",
)
@click.option(
    "--textfile",
    metavar="FILE",
    help="Write FILE (node_exporter's --collector.textfile.directory, a name ending .prom), atomically.",
)
@click.option("--listen", type=click.IntRange(1, 65535), metavar="PORT", help="Serve /metrics on PORT.")
@click.option("--address", default="127.0.0.1", show_default=True, help="Address for --listen.")
@click.option(
    "--min-interval",
    default=15.0,
    show_default=True,
    type=click.FloatRange(1, 3600),
    metavar="S",
    help="--listen: read Slurm at most once per S seconds, however often it is scraped.",
)
@click.option("--no-slurm", is_flag=True, help="Do not ask Slurm (only the data file's metrics).")
def metrics(
    inventories: tuple[str, ...],
    records_dir: str | None,
    shapes: tuple[str, ...],
    data_file: str | None,
    textfile: str | None,
    listen: int | None,
    address: str,
    min_interval: float,
    no_slurm: bool,
) -> None:
    """Metrics for Prometheus: capacity per shape and level (with -i), locality jobs by state and reason,
    relax decisions, health drains by link, the data file's age and checksum, the filter's fail-open jobs.
    Without --textfile or --listen, print them. Names and labels: docs/report.md."""
    from ..reports import metrics as m
    from ..reports.capacity import parse_shape

    if textfile and listen:
        raise InputError("give --textfile or --listen, not both")
    inventory = _load(inventories, records_dir=records_dir) if inventories or records_dir else None
    sources = m.Sources(
        inventory,
        tuple(parse_shape(s) for s in (shapes or DEFAULT_SHAPES)) if inventory is not None else (),
        Path(data_file) if data_file else None,
        not no_slurm,
    )
    runner = SubprocessRunner()
    if listen:
        import time

        m.serve(listen, address, lambda: m.read_snapshot(sources, runner), min_interval)
        click.echo(f"metrics: serving http://{address}:{listen}/metrics", err=True)
        while True:
            time.sleep(3600)
    snap = m.read_snapshot(sources, runner)
    for source, why in sorted(snap.errors.items()):
        click.echo(f"metrics: {source} not read: {why}", err=True)
    if textfile:
        m.write_textfile(textfile, snap)
    else:
        click.echo(m.exposition(snap).decode(), nl=False)
