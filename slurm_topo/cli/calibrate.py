"""``slurm-topo calibrate``: measure the links table; and the hidden ``probe`` commands it runs through
srun."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.errors import CommandError, InputError
from ..plumbing.output import write_files
from ..plumbing.runner import SubprocessRunner
from .common import _load, cli, inventory_option
from .cost import _links_table

if TYPE_CHECKING:
    from ..probes.nccl_tests import Half, NcclTable
    from ..probes.perftest import LatRow, PerftestTable


@cli.command()
@inventory_option
@click.option(
    "--nodes",
    "nodelist",
    metavar="HOSTLIST",
    help="Nodes to measure among (default: this allocation's, $SLURM_JOB_NODELIST).",
)
@click.option("--output", "-o", "output", metavar="FILE", help="Write the table here (default: stdout).")
@click.option(
    "--probe",
    type=click.Choice(["tcp", "nccl", "perftest", "auto"]),
    default="tcp",
    show_default=True,
    help="tcp (built in); nccl (nccl-tests all_reduce_perf: GPU links and the network); perftest "
    "(ib_write_bw/ib_write_lat per rail); auto: nccl, else perftest, else tcp, by what the nodes have.",
)
@click.option(
    "--tool-arg",
    "tool_args",
    multiple=True,
    metavar="ARG",
    help="Extra argument for every nccl-tests/perftest command (e.g. -x 3, RoCE's GID index); repeat.",
)
@click.option("--bytes", "nbytes", default="64M", show_default=True, metavar="B", help="Bytes per transfer.")
@click.option(
    "--repeats", default=5, show_default=True, type=click.IntRange(1, 100), help="Transfers a pair."
)
@click.option("--port", default=47123, show_default=True, type=click.IntRange(1, 65535), help="Probe port.")
@click.option(
    "--probe-command",
    metavar="CMD",
    help="How compute nodes start slurm-topo (default: this Python with -m slurm_topo).",
)
@click.option("--srun-arg", "srun_args", multiple=True, metavar="ARG", help="Extra srun argument; repeat.")
@click.option(
    "--time", "time_limit", default=5, show_default=True, type=click.IntRange(1, 120), metavar="MIN"
)
@click.option(
    "--links", "links_file", metavar="FILE", help="The table to start from (default: inventories')."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (table, measurements, notes).")
def calibrate(
    inventories: tuple[str, ...],
    nodelist: str | None,
    output: str | None,
    probe: str,
    nbytes: str,
    repeats: int,
    port: int,
    probe_command: str | None,
    srun_args: tuple[str, ...],
    time_limit: int,
    links_file: str | None,
    as_json: bool,
    tool_args: tuple[str, ...],
) -> None:
    """Measure each link level among the nodes (one pair per level, a probe step through srun) and write a
    links: table with the measured figures, the date, the probe and the pairs. Run it inside an
    allocation (salloc) or give --nodes. Guide: README "Calibrating the cost model", docs/cost.md
    "Calibrating"."""
    import dataclasses
    import os
    import shlex

    from ..access import SlurmAccess
    from ..core.hostlist import expand
    from ..cost import parse_bytes
    from ..cost.calibrate import detect_tools, failure_reason, run_calibration
    from ..cost.calibrate_probes import choose_probe

    given = nodelist or os.environ.get("SLURM_JOB_NODELIST")
    if not given:
        raise click.UsageError("give --nodes HOSTLIST, or run inside an allocation (salloc)")
    nodes = expand(given)
    inventory = _load(inventories)
    base = _links_table(inventories, links_file)
    size = parse_bytes(nbytes, "--bytes")
    if not 1 <= size <= 1 << 36:
        raise InputError("--bytes: 1 byte to 64 GiB")
    command = shlex.split(probe_command) if probe_command else [sys.executable, "-m", "slurm_topo"]
    runner = SubprocessRunner()
    try:
        records = SlurmAccess(runner).nodes()
    except CommandError as exc:  # the argv and status once, then what it was for and Slurm's own words
        tail = exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else ""
        why = "reading the nodes' addresses" + (f": {tail}" if tail else "")
        raise CommandError(exc.argv, exc.returncode, why, timeout=exc.timeout) from None
    addresses = {name: rec.get("NodeAddr") or name for name, rec in records.items() if name in set(nodes)}
    found, failed = {}, ""
    if probe != "tcp":
        try:
            found = detect_tools(runner, nodes, command, srun_args=srun_args)
        except CommandError as exc:  # auto goes on with what runs everywhere; a named probe cannot
            if probe != "auto":
                raise
            failed = f"the probe tools step failed: {failure_reason(exc)}"
    choice = choose_probe(probe, found, sorted(dict.fromkeys(nodes)))
    if failed:
        choice = dataclasses.replace(choice, reasons=(failed, *choice.reasons))
    done = run_calibration(
        inventory,
        nodes,
        runner,
        base=base,
        probe_command=command,
        addresses=addresses,
        port=port,
        nbytes=int(size),
        repeats=repeats,
        srun_args=srun_args,
        time_limit_min=time_limit,
        probe=choice.probe,
        tools=found,
        tool_args=tool_args,
        choice=choice.reasons,
    )
    if output:
        target = Path(output)
        write_files(target.parent if str(target.parent) else ".", {target.name: done.text})
    if as_json:
        click.echo(
            json.dumps(
                {
                    "links": done.table.as_dict(),
                    "measured": [
                        {
                            "level": m.pair.level,
                            "pair": [m.pair.a, m.pair.b],
                            "probe": m.probe,
                            "bandwidth": m.bandwidth,
                            "latency_us": m.latency_us,
                            **dict(m.detail),
                        }
                        for m in done.measured
                    ],
                    "notes": list(done.notes),
                    "probe": done.probe,
                    "probe_choice": list(done.choice),
                    **({"output": output} if output else {}),
                },
                sort_keys=True,
            )
        )
        return
    if not output:
        click.echo(done.text, nl=False)
        return
    for reason in done.choice:
        click.echo(f"probe {reason}")
    for m in done.measured:
        click.echo(f"{m.pair.level:<14} {m.pair.text():<28} {m.bandwidth:9.3f} GB/s {m.latency_us:10.1f} µs")
    for note in done.notes:
        click.echo(f"note: {note}")
    click.echo(f"wrote {output}")


@cli.group(hidden=True)
def probe() -> None:
    """The probes calibrate runs inside its srun steps."""


@probe.command("tcp")
@click.option("--port", required=True, type=click.IntRange(1, 65535))
@click.option("--address", "addresses", multiple=True, metavar="NODE=ADDR")
@click.option("--bytes", "nbytes", default=64 << 20, type=click.IntRange(1, 1 << 36))
@click.option("--repeats", default=5, type=click.IntRange(1, 100))
@click.option("--pings", default=200, type=click.IntRange(1, 100000))
@click.option("--bind", default="0.0.0.0", show_default=True)
@click.option("--timeout", default=120.0, type=click.FloatRange(1, 3600))
def probe_tcp(
    port: int, addresses: tuple[str, ...], nbytes: int, repeats: int, pings: int, bind: str, timeout: float
) -> None:
    """One task's side of the TCP probe (task 0 serves, task 1 measures and prints the result)."""
    import os

    from ..probes import parse_addresses, tcp_task

    line = tcp_task(
        os.environ,
        port=port,
        addresses=parse_addresses(addresses),
        nbytes=nbytes,
        repeats=repeats,
        pings=pings,
        bind=bind,
        timeout=timeout,
    )
    click.echo(line)


@probe.command("tools")
def probe_tools() -> None:
    """One node's measuring tools (nccl-tests, perftest on PATH; active RDMA devices), as one JSON line."""
    import os

    from ..plumbing.runner import SubprocessRunner
    from ..probes.tools import tools_task

    click.echo(tools_task(os.environ, SubprocessRunner()))


@probe.command("tool", context_settings={"ignore_unknown_options": True})
@click.option("--gpus", "gpus", multiple=True, metavar="NODE=I,J", help="The node's GPUs for the tool.")
@click.option("--env", "variables", multiple=True, metavar="NAME=VALUE", help="A variable for the tool.")
@click.option("--serve", is_flag=True, help="Task 0 serves, task 1 connects (perftest).")
@click.option("--address", "addresses", multiple=True, metavar="NODE=ADDR")
@click.option("--timeout", default=300.0, type=click.FloatRange(1, 7200))
@click.argument("argv", nargs=-1, type=click.UNPROCESSED, required=True)
def probe_tool(
    gpus: tuple[str, ...],
    variables: tuple[str, ...],
    serve: bool,
    addresses: tuple[str, ...],
    timeout: float,
    argv: tuple[str, ...],
) -> None:
    """One task's run of a measuring tool (after --), reported as one JSON line with its whole output."""
    import os

    from ..plumbing.runner import SubprocessRunner
    from ..probes import parse_addresses
    from ..probes.tools import parse_gpus, parse_variables, tool_task

    env_vars = parse_variables(variables)
    click.echo(
        tool_task(
            os.environ,
            SubprocessRunner(),
            argv,
            gpus=parse_gpus(gpus),
            variables=env_vars,
            serve=serve,
            addresses=parse_addresses(addresses),
            timeout=timeout,
        )
    )


@probe.command("ring")
@click.option("--port", required=True, type=click.IntRange(1, 65535))
@click.option("--address", "addresses", multiple=True, metavar="NODE=ADDR")
@click.option("--bytes", "nbytes", required=True, type=click.IntRange(1, 1 << 36))
@click.option("--repeats", default=3, type=click.IntRange(1, 100))
@click.option("--timeout", default=120.0, type=click.FloatRange(1, 3600))
def probe_ring(port: int, addresses: tuple[str, ...], nbytes: int, repeats: int, timeout: float) -> None:
    """One rank of a plain-Python ring all-reduce over TCP (one task per node; rank 0 prints the seconds)."""
    import os

    from ..probes import parse_addresses
    from ..probes.ring import ring_task

    click.echo(
        ring_task(
            os.environ,
            port=port,
            addresses=parse_addresses(addresses),
            nbytes=nbytes,
            repeats=repeats,
            timeout=timeout,
        )
    )


@probe.command("parse")
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: file and tables.")
def probe_parse(file: str, as_json: bool) -> None:
    """Print what the nccl-tests/rccl-tests or perftest parser reads from FILE (the parser calibrate uses):
    per size, algbw/busbw (GB/s = 10^9 B/s) out-of-place and in-place, or perftest BW average/peak (GB/s) or
    latency (µs). Exit 2 when FILE is no output it knows or cannot be read for sure."""
    from ..probes.nccl_tests import NcclTable, parse_nccl_tests
    from ..probes.perftest import parse_perftest

    try:
        text = Path(file).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{file}: cannot read: {exc.strerror}") from None
    tables: list[NcclTable | PerftestTable] = [*parse_nccl_tests(text, file), *parse_perftest(text, file)]
    if not tables:
        raise InputError(f"{file}: no nccl-tests, rccl-tests or perftest result table (no column line)")
    tables.sort(key=lambda t: t.header_line)
    if as_json:
        click.echo(json.dumps({"file": file, "tables": [t.as_dict() for t in tables]}, sort_keys=True))
        return
    for t in tables:
        lines = _nccl_table_text(file, t) if isinstance(t, NcclTable) else _perftest_table_text(file, t)
        for line in [*lines, *_rejected_and_notes_text(t)]:
            click.echo(line)


def _nccl_table_text(file: str, t: NcclTable) -> list[str]:
    """`probe parse`'s lines for an nccl-tests/rccl-tests table: what run, then per size algbw, busbw and
    #wrong out-of-place and in-place, then the average bus bandwidth."""
    ranks = t.ranks if t.ranks is not None else (f">={t.ranks_at_least}" if t.ranks_at_least else "?")
    hosts = f" on {len(t.hosts)} host(s)" if t.hosts else ""
    out = [
        f"{file}:{t.header_line}: {t.tool} {t.collective or '?'}, {ranks} ranks{hosts}",
        f"{'bytes':>12} {'type':>8}  {'o-o-p algbw':>11} {'busbw':>8} {'#wrong':>6}"
        f"  {'in-pl algbw':>11} {'busbw':>8} {'#wrong':>6}   (GB/s)",
    ]
    for r in t.rows:
        cells = [_nccl_half_text(half) for half in (r.out_of_place, r.in_place)]
        out.append(f"{r.bytes:12d} {r.type:>8}  " + "  ".join(cells))
    if t.avg_busbw_gbs is not None:
        out.append(f"avg bus bandwidth {t.avg_busbw_gbs:g} GB/s (over every size: not a link figure)")
    return out


def _nccl_half_text(half: Half | None) -> str:
    """One side's algbw, busbw and #wrong cells of a row (dashes for a side the table has not)."""
    if half is None:
        return f"{'-':>11} {'-':>8} {'-':>6}"
    wrong = "N/A" if half.wrong is None else str(half.wrong)
    return f"{half.algbw_gbs:11.2f} {half.busbw_gbs:8.2f} {wrong:>6}"


def _perftest_table_text(file: str, t: PerftestTable) -> list[str]:
    """`probe parse`'s lines for a perftest table: the test, side and device, then one line per size."""
    from ..probes.perftest import BwRow

    side = t.side or "side unknown"
    bi = ", bidirectional (both directions summed)" if t.bidirectional else ""
    out = [f"{file}:{t.header_line}: {t.test} ({side}{bi}), {t.device or '?'} {t.link_type or ''}"]
    for pr in t.rows:
        if isinstance(pr, BwRow):
            peak = "-" if pr.bw_peak_gbs is None else f"{pr.bw_peak_gbs:.3f}"
            out.append(f"{pr.bytes:12d} B  BW average {pr.bw_average_gbs:9.3f} GB/s  peak {peak}")
        else:
            out.append(_latency_row_text(pr))
    return out


def _latency_row_text(pr: LatRow) -> str:
    """A perftest latency row: its size and the figures it has, in µs."""
    cells = [
        f"{name} {v:.2f}"
        for name, v in (
            ("t_min", pr.t_min_us),
            ("t_typical", pr.t_typical_us),
            ("t_avg", pr.t_avg_us),
            ("t_max", pr.t_max_us),
            ("99%", pr.p99_us),
            ("99.9%", pr.p99_9_us),
        )
        if v is not None
    ]
    return f"{pr.bytes:12d} B  " + "  ".join(cells) + " µs"


def _rejected_and_notes_text(t: NcclTable | PerftestTable) -> list[str]:
    """A table's refused rows with their reasons, then its notes."""
    return [f"rejected: line {rej.line}: {rej.reason}" for rej in t.rejected] + [
        f"note: {n}" for n in t.notes
    ]
