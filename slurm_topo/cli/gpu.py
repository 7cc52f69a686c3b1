"""``slurm-topo gpu``: read a node's GPU links (``nvidia-smi topo -m`` or NVML), its NVLink islands, a
pick."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..core.errors import InputError
from .common import _warn, cli


@cli.group()
def gpu() -> None:
    """GPUs inside a node: read `nvidia-smi topo -m`, NVLink islands, the best free GPUs for a task."""


def _topology(path: str | None, nvml: bool = False):  # type: ignore[no-untyped-def]
    """A GPU topology from a `nvidia-smi topo -m` capture, or (``nvml``) from this machine's NVML."""
    if nvml == (path is not None):
        raise click.UsageError("give a `nvidia-smi topo -m` capture FILE or --nvml, not both or neither")
    if nvml:
        from ..gpu.nvml import read_nvml

        topo = read_nvml().topology
        source = "nvml"
    else:
        from ..gpu import parse_topo_matrix

        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")  # type: ignore[arg-type]
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        topo = parse_topo_matrix(text, source=str(path))
        source = str(path)
    for w in topo.warnings:
        _warn(f"warning: {source}: {w}")
    return topo


nvml_option = click.option(
    "--nvml", is_flag=True, help="Read this machine's GPUs through NVML (nvidia-ml-py)."
)


@gpu.command("parse")
@click.argument("file", required=False)
@nvml_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object: gpus, matrix, nics, affinity.")
def gpu_parse(file: str | None, nvml: bool, as_json: bool) -> None:
    """Read a `nvidia-smi topo -m` capture (or NVML); a file that cannot be read exactly is refused."""
    topo = _topology(file, nvml)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "gpus": list(topo.gpus),
                    "matrix": [list(r) for r in topo.matrix],
                    "nics": list(topo.nics),
                    "nic_matrix": [list(r) for r in topo.nic_matrix],
                    "cpu_affinity": list(topo.cpu_affinity),
                    "numa_affinity": list(topo.numa_affinity),
                }
            )
        )
        return
    width = max([4, *(len(c) for row in topo.matrix for c in row)]) + 1
    click.echo(" " * 6 + "".join(f"GPU{g}".ljust(width) for g in topo.gpus) + "CPU affinity")
    for i, row in enumerate(topo.matrix):
        aff = topo.cpu_affinity[i] if i < len(topo.cpu_affinity) else None
        click.echo(f"GPU{topo.gpus[i]}".ljust(6) + "".join(c.ljust(width) for c in row) + (aff or "-"))


@gpu.command("islands")
@click.argument("file", required=False)
@nvml_option
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"islands": [[GPU, ...], ...]}.')
def gpu_islands(file: str | None, nvml: bool, as_json: bool) -> None:
    """NVLink islands: the maximal groups of GPUs joined by NVLink."""
    from ..gpu import islands

    found = [sorted(island) for island in islands(_topology(file, nvml))]
    if as_json:
        click.echo(json.dumps({"islands": found}))
        return
    for i, island in enumerate(found):
        click.echo(f"island {i}: GPUs {','.join(map(str, island))}")


@gpu.command("pick")
@click.argument("file", required=False)
@nvml_option
@click.option(
    "--topology",
    "topology_file",
    metavar="FILE",
    hidden=True,
    help="The capture FILE, as an option (the older form; FILE is the same).",
)
@click.option("--count", "-k", required=True, type=click.IntRange(1), help="How many GPUs the task needs.")
@click.option("--busy", default="", metavar="LIST", help="GPU indices already in use, e.g. 0,3.")
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"gpus": [...]}.')
def gpu_pick(
    file: str | None, nvml: bool, topology_file: str | None, count: int, busy: str, as_json: bool
) -> None:
    """The free GPUs whose slowest link is fastest (then most bandwidth, fewest islands broken, lowest
    ids).

    FILE: a `nvidia-smi topo -m` capture, as for `gpu parse` and `gpu islands` (or --nvml)."""
    from ..gpu import pick_devices

    if file is not None and topology_file is not None:
        raise click.UsageError("give the capture once: FILE or --topology FILE, not both")
    path = file if file is not None else topology_file
    topo = _topology(path, nvml)
    try:
        busy_ids = {int(x) for x in busy.split(",") if x.strip()}
    except ValueError:
        raise click.UsageError(f"--busy: expected GPU indices like 0,3, got {busy!r}") from None
    unknown = busy_ids - set(topo.gpus)
    if unknown:
        where = path if path is not None else "this machine's GPUs (NVML)"
        raise click.UsageError(f"--busy: no GPU {sorted(unknown)[0]} in {where}")
    chosen = pick_devices(topo, [g for g in topo.gpus if g not in busy_ids], count)
    click.echo(json.dumps({"gpus": sorted(chosen)}) if as_json else ",".join(map(str, sorted(chosen))))
