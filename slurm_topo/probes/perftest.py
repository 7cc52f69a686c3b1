"""Read the output of perftest (``ib_write_bw``, ``ib_send_bw``, ``ib_read_bw``, ``ib_write_lat``, …).

Pure functions over text. The result table is found by its column line and every column located from it,
as perftest prints them (``src/perftest_parameters.h``): bandwidth ``#bytes  #iterations  BW peak[U]
BW average[U]  MsgRate[Mpps]`` (``#sl`` with raw QoS, ``BW PortN``/``MsgRate PortN`` per port, a ``BW min``
column some builds add, ``CPU_Util[%]``), latency ``#bytes #iterations t_min t_max t_typical t_avg t_stdev
99% percentile 99.9% percentile`` in µs (the first three only before 2016), and ``t_avg[usec] tps average``
for ``-D``. Units come from the header: ``MB/sec`` and ``MiB/sec`` are 2^20 B/s, ``Gb/sec`` 10^9 bit/s; the
figures are returned in GB/s (10^9 B/s).

The banner above the table names the test (``RDMA_Write Bidirectional BW Test``: ``-b``, whose figures
are both directions summed), the device and link type. ``Waiting for client`` marks the server side (with
``-a`` it prints only the last size); ``TX depth`` (printed on the client, or on both sides with ``-b``)
the client; with neither the side is None. A row is taken only with the header's field count and a
number in every field; a bandwidth row only when ``BW average`` is ``MsgRate × bytes`` (perftest computes
both from one count) within the printed rounding, a latency row only when ``t_typical``, ``t_avg`` and the
percentiles lie within ``t_min..t_max``. Refused rows are kept with a reason; a header that cannot be
read for sure raises :class:`~slurm_topo.core.errors.ParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import ParseError
from .nccl_tests import Line, Rejected, half_ulp, is_row_like, parse_float, split_lines

BYTES_PER_UNIT = {"MB/sec": 1048576.0, "MiB/sec": 1048576.0, "Gb/sec": 1.25e8}
"""Bytes a second per unit of a perftest bandwidth column (MB/sec is MiB/s in perftest: 0x100000)."""

_COLUMN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("bytes", r"#bytes"),
    ("sl", r"#sl"),
    ("iterations", r"#iterations"),
    ("bw_peak", r"BW peak\[(?P<u>[^\]]*)\]"),
    ("bw_average", r"BW average\[(?P<u>[^\]]*)\]"),
    ("bw_min", r"BW min\[(?P<u>[^\]]*)\]"),
    ("msg_rate_port", r"MsgRate Port(?P<p>\d)\[Mpps\]"),
    ("bw_port", r"BW Port(?P<p>\d)\[(?P<u>[^\]]*)\]"),
    ("msg_rate", r"MsgRate\[Mpps\]"),
    ("t_min", r"t_min\[usec\]"),
    ("t_max", r"t_max\[usec\]"),
    ("t_typical", r"t_typical\[usec\]"),
    ("t_avg", r"t_avg\[usec\]"),
    ("t_stdev", r"t_stdev\[usec\]"),
    ("p99_9", r"99\.9% percentile\[usec\]"),
    ("p99", r"99% percentile\[usec\]"),
    ("tps_average", r"tps average"),
    ("cpu_util", r"CPU_Util\[%\]"),
)
_COLUMN_RES = tuple((key, re.compile(pat)) for key, pat in _COLUMN_PATTERNS)
_TITLE = re.compile(
    r"^(?P<verb>Send|Send_imm|RDMA_Write|RDMA_Write_imm|RDMA_Read|Atomic)(?: (?:CMP_AND_SWAP|FETCH_AND_ADD))?"
    r" (?P<bi>Bidirectional )?(?P<pl>Post List )?(?P<kind>BW|Latency) (?:forwarding )?(?:Multicast )?Test$"
)
_PROGRAM = re.compile(r"\b(ib_(?:write|read|send|atomic)_(?:bw|lat)|raw_ethernet_\w+?_(?:bw|lat))\b")
_VERB_TOOL = {
    "Send": "ib_send",
    "Send_imm": "ib_send",
    "RDMA_Write": "ib_write",
    "RDMA_Write_imm": "ib_write",
    "RDMA_Read": "ib_read",
    "Atomic": "ib_atomic",
}
_RULE = re.compile(r"^-{20,}$")
_KV = re.compile(r"(?P<k>[A-Za-z][\w .*/-]*?)\s*:\s*(?P<v>\S+)")


@dataclass(frozen=True)
class BwRow:
    line: int
    bytes: int
    iterations: int
    bw_peak_gbs: float | None
    """GB/s (10^9 B/s); None where perftest printed 0.00 (not measured: ``-D``, ``--run_infinitely``)."""
    bw_average_gbs: float
    msg_rate_mpps: float | None
    bw_min_gbs: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "bytes": self.bytes,
            "iterations": self.iterations,
            "bw_peak_gbs": self.bw_peak_gbs,
            "bw_average_gbs": self.bw_average_gbs,
            "bw_min_gbs": self.bw_min_gbs,
            "msg_rate_mpps": self.msg_rate_mpps,
        }


@dataclass(frozen=True)
class LatRow:
    line: int
    bytes: int
    iterations: int
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    """The median."""
    t_avg_us: float | None
    t_stdev_us: float | None
    p99_us: float | None
    p99_9_us: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "bytes": self.bytes,
            "iterations": self.iterations,
            "t_min_us": self.t_min_us,
            "t_max_us": self.t_max_us,
            "t_typical_us": self.t_typical_us,
            "t_avg_us": self.t_avg_us,
            "t_stdev_us": self.t_stdev_us,
            "p99_us": self.p99_us,
            "p99_9_us": self.p99_9_us,
        }


@dataclass(frozen=True)
class PerftestTable:
    header_line: int
    test: str
    """``ib_write_bw``, ``ib_send_lat``, …; ``perftest_bw``/``perftest_lat`` when the output does not say."""
    kind: str
    """``bw`` or ``lat``."""
    title: str | None
    side: str | None
    """``client``, ``server``, or None when the output does not say."""
    bidirectional: bool
    """``-b``: every bandwidth is both directions summed."""
    units: str | None
    """The bandwidth unit as printed (``MB/sec``, ``MiB/sec``, ``Gb/sec``)."""
    device: str | None
    link_type: str | None
    qps: int | None
    rows: tuple[BwRow | LatRow, ...]
    rejected: tuple[Rejected, ...]
    part: str | None = None
    """``local``/``remote`` for the tables of ``--report_both``."""
    notes: tuple[str, ...] = field(default=())

    tool = "perftest"

    def as_dict(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "line": self.header_line,
            "test": self.test,
            "kind": self.kind,
            "title": self.title,
            "side": self.side,
            "bidirectional": self.bidirectional,
            "units": self.units,
            "device": self.device,
            "link_type": self.link_type,
            "qps": self.qps,
            "part": self.part,
            "rows": [r.as_dict() for r in self.rows],
            "rejected": [r.as_dict() for r in self.rejected],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class _Col:
    key: str
    text: str
    unit: str | None


def _header(body: str) -> tuple[list[_Col], str | None] | None:
    """The columns of a perftest column line, None if the line is not one, or a reason it cannot be read."""
    s = body.strip()
    if not s.startswith("#bytes"):
        return None
    cols: list[_Col] = []
    pos = 0
    while True:
        while pos < len(s) and s[pos] in " \t":
            pos += 1
        if pos >= len(s):
            break
        for key, rx in _COLUMN_RES:
            m = rx.match(s, pos)
            if m:
                gd = m.groupdict()
                name = key if key not in ("bw_port", "msg_rate_port") else f"{key}{gd['p']}"
                cols.append(_Col(name, m.group(0), gd.get("u")))
                pos = m.end()
                break
        else:
            return [], f"unknown column at {s[pos : pos + 24]!r}"
    keys = [c.key for c in cols]
    if len(set(keys)) != len(keys):
        return [], "a column twice"
    if keys[:1] != ["bytes"] or "iterations" not in keys:
        return [], "no #bytes and #iterations columns"
    for c in cols:
        if c.unit is not None and c.unit not in BYTES_PER_UNIT:
            return [], f"unknown bandwidth unit {c.unit!r}"
    units = {c.unit for c in cols if c.unit is not None}
    if len(units) > 1:
        return [], f"bandwidth columns in different units ({', '.join(sorted(units))})"
    if "bw_average" not in keys and "t_avg" not in keys and "t_typical" not in keys:
        return [], "neither BW average nor t_avg/t_typical"
    return cols, None


def find_headers(lines: Sequence[Line]) -> list[int]:
    return [i for i, ln in enumerate(lines) if _header(ln.body) is not None]


@dataclass
class _Banner:
    title: str | None = None
    test: str | None = None
    bidirectional: bool = False
    tx_depth: bool = False
    waiting: bool = False
    device: str | None = None
    link_type: str | None = None
    qps: int | None = None
    part: str | None = None
    program: str | None = None
    flag_b: bool = False


def _banner(bodies: Sequence[str]) -> _Banner:
    b = _Banner()
    for body in bodies:
        s = body.strip()
        if m := _TITLE.match(s):
            b = _Banner(program=b.program, flag_b=b.flag_b, waiting=b.waiting)
            b.title = s
            kind = "bw" if m.group("kind") == "BW" else "lat"
            b.test = f"{_VERB_TOOL[m.group('verb')]}_{kind}"
            b.bidirectional = bool(m.group("bi"))
            continue
        if "Waiting for client" in s:
            b.waiting = True
            continue
        if s.startswith("Local results"):
            b.part = "local"
            continue
        if s.startswith("Remote results"):
            b.part = "remote"
            continue
        if m := _PROGRAM.search(s):  # a command line
            b.program = m.group(1)
            b.flag_b = bool(re.search(r"\s(?:-b|--bidirectional)(?=\s|$)", s))
        for kv in _KV.finditer(s):
            key, value = kv.group("k").strip(), kv.group("v")
            if key == "Device":
                b.device = value
            elif key == "Link type":
                b.link_type = value
            elif key == "Number of qps" and value.isdigit():
                b.qps = int(value)
            elif key == "TX depth":
                b.tx_depth = True
    return b


def parse_perftest(text: str, source: str = "<text>") -> tuple[PerftestTable, ...]:
    """Every perftest result table of ``text``; () when there is none. A table whose header cannot be read
    for sure, or with no row that can, raises :class:`ParseError` (``source: line N: why``)."""
    lines = split_lines(text)
    headers = find_headers(lines)
    tables: list[PerftestTable] = []
    start = 0
    for n, h in enumerate(headers):
        end = headers[n + 1] if n + 1 < len(headers) else len(lines)
        table, start = _table(lines, start, h, end, source)
        tables.append(table)
    return tuple(tables)


def _fail(source: str, line: int, reason: str) -> ParseError:
    return ParseError(source, None, f"line {line}: {reason}")


def _table(lines: Sequence[Line], start: int, h: int, end: int, source: str) -> tuple[PerftestTable, int]:
    """The table whose column line is ``lines[h]`` (``start``: the end of the table before; ``end``: the next
    column line), and the index where its rows end."""
    head = lines[h]
    parsed = _header(head.body)
    assert parsed is not None
    cols, why = parsed
    if why:
        raise _fail(source, head.number, f"perftest column line: {why}")
    keys = [c.key for c in cols]
    kind = "bw" if "bw_average" in keys else "lat"
    unit = next((c.unit for c in cols if c.unit), None)
    banner = _banner([ln.body for ln in lines[start:h]])
    notes: list[str] = []
    test = _test(banner, kind, notes, source, head.number)
    bidirectional = _bidirectional(banner, notes)
    side = _side(banner, notes)
    rows, rejected, region_end = _rows(lines, h, end, cols, unit)
    if not rows:
        why = "; ".join(f"line {r.line}: {r.reason}" for r in rejected[:3]) or "no data row under it"
        raise _fail(source, head.number, f"perftest table: no row could be read ({why})")
    if kind == "bw" and any(isinstance(r, BwRow) and r.bw_peak_gbs is None for r in rows):
        notes.append("BW peak 0.00: not measured (-D duration, --run_infinitely or --noPeak)")
    table = PerftestTable(
        header_line=head.number,
        test=test,
        kind=kind,
        title=banner.title,
        side=side,
        bidirectional=bidirectional,
        units=unit,
        device=banner.device,
        link_type=banner.link_type,
        qps=banner.qps,
        rows=tuple(rows),
        rejected=tuple(rejected),
        part=banner.part,
        notes=tuple(notes),
    )
    return table, region_end


def _test(banner: _Banner, kind: str, notes: list[str], source: str, line: int) -> str:
    """The test a ``kind`` table is of: the banner's, else the command line's, else ``perftest_<kind>``."""
    test = banner.test or banner.program
    if banner.test and banner.program and banner.program != banner.test:
        notes.append(f"the command line runs {banner.program}, the banner says {banner.title!r}")
    if test is None:
        return f"perftest_{kind}"
    if not test.endswith(kind):
        raise _fail(source, line, f"a {kind} table under {test}'s banner")
    return test


def _bidirectional(banner: _Banner, notes: list[str]) -> bool:
    """Whether the figures are both directions summed: the banner's word, or ``-b`` when there is none."""
    if banner.title is None and banner.flag_b:
        notes.append("no banner: -b on the command line, figures taken as both directions summed")
        return True
    return banner.bidirectional


def _side(banner: _Banner, notes: list[str]) -> str | None:
    """``server`` (``Waiting for client``), ``client`` (``TX depth``), or None."""
    if banner.waiting:
        notes.append("server side: with -a perftest's server prints only the last size; read the client's")
        return "server"
    if banner.tx_depth:
        return "client"  # perftest prints TX depth on the client, or on both sides with -b
    notes.append("neither `Waiting for client` nor `TX depth` above the table: the side is not known")
    return None


def _rows(
    lines: Sequence[Line], h: int, end: int, cols: list[_Col], unit: str | None
) -> tuple[list[BwRow | LatRow], list[Rejected], int]:
    """The rows under the column line at ``h`` that can be read, the refused ones (noise skipped), and where
    they end: the first rule line after a row, or ``end``."""
    label = lines[h].label
    rows: list[BwRow | LatRow] = []
    rejected: list[Rejected] = []
    for i in range(h + 1, end):
        ln = lines[i]
        body = ln.body.strip()
        if _RULE.match(body) and (rows or rejected):
            return rows, rejected, i
        if not is_row_like(body):
            continue
        if ln.label is not None and label is not None and ln.label != label:
            rejected.append(Rejected(ln.number, f"from task {ln.label}; the table is task {label}'s"))
            continue
        row, reason = _row(ln.number, body.split(), cols, unit)
        if row is None:
            rejected.append(Rejected(ln.number, reason))
        else:
            rows.append(row)
    return rows, rejected, end


def _row(
    number: int, fields: list[str], cols: list[_Col], unit: str | None
) -> tuple[BwRow | LatRow | None, str]:
    """The row of line ``number``, or None and why it is refused."""
    if len(fields) != len(cols):
        return None, f"{len(fields)} fields where the column line has {len(cols)}"
    tok = {c.key: f for c, f in zip(cols, fields, strict=True)}
    ints, why = _counts(tok)
    if why:
        return None, why
    nums, why = _numbers(cols, tok, ints)
    if why:
        return None, why
    if "bw_average" in nums:
        return _bw_row(number, tok, ints, nums, unit)
    return _lat_row(number, tok, ints, nums)


def _counts(tok: dict[str, str]) -> tuple[dict[str, int], str]:
    """A row's #bytes, #iterations and #sl, or why one is not a count."""
    ints: dict[str, int] = {}
    for key in ("bytes", "iterations", "sl"):
        if key in tok:
            if not tok[key].isdigit():
                return {}, f"{key} {tok[key]!r} is not a count"
            ints[key] = int(tok[key])
    return ints, ""


def _numbers(cols: list[_Col], tok: dict[str, str], ints: dict[str, int]) -> tuple[dict[str, float], str]:
    """A row's other fields as numbers, or why one is not a number (not negative)."""
    nums: dict[str, float] = {}
    for c in cols:
        if c.key in ints:
            continue
        v = parse_float(tok[c.key])
        if v is None or v < 0:
            return {}, f"{c.text} {tok[c.key]!r} is not a number"
        nums[c.key] = v
    return nums, ""


def _bw_row(
    number: int, tok: dict[str, str], ints: dict[str, int], nums: dict[str, float], unit: str | None
) -> tuple[BwRow | None, str]:
    """A bandwidth row in GB/s, or None and why BW average is not MsgRate × bytes."""
    per = BYTES_PER_UNIT[unit or ""] / 1e9
    if "msg_rate" in nums:
        why = _msg_rate_mismatch(tok, ints["bytes"], nums, unit)
        if why:
            return None, why
    peak = nums.get("bw_peak")
    return (
        BwRow(
            line=number,
            bytes=ints["bytes"],
            iterations=ints["iterations"],
            bw_peak_gbs=round(peak * per, 9) if peak else None,
            bw_average_gbs=round(nums["bw_average"] * per, 9),
            msg_rate_mpps=nums.get("msg_rate"),
            bw_min_gbs=round(nums["bw_min"] * per, 9) if "bw_min" in nums else None,
        ),
        "",
    )


def _msg_rate_mismatch(tok: dict[str, str], nbytes: int, nums: dict[str, float], unit: str | None) -> str:
    """Why BW average is not MsgRate × bytes within the printed rounding (perftest computes both from one
    count), or ``""``."""
    got = nums["bw_average"] * BYTES_PER_UNIT[unit or ""]
    want = nums["msg_rate"] * 1e6 * nbytes
    slack = half_ulp(tok["bw_average"]) * BYTES_PER_UNIT[unit or ""]
    slack += half_ulp(tok["msg_rate"]) * 1e6 * nbytes + want * 1e-6 + 1e-9
    if abs(got - want) > slack:
        return (
            f"BW average {tok['bw_average']} {unit} is not MsgRate × bytes "
            f"({want / BYTES_PER_UNIT[unit or '']:.6g}): a field out of its column"
        )
    return ""


def _lat_row(
    number: int, tok: dict[str, str], ints: dict[str, int], nums: dict[str, float]
) -> tuple[LatRow | None, str]:
    """A latency row in µs, or None and why its figures do not lie within t_min..t_max."""
    lo, hi = nums.get("t_min"), nums.get("t_max")
    if lo is not None and hi is not None:
        why = _latency_out_of_range(tok, nums, lo, hi)
        if why:
            return None, why
    return (
        LatRow(
            line=number,
            bytes=ints["bytes"],
            iterations=ints["iterations"],
            t_min_us=lo,
            t_max_us=hi,
            t_typical_us=nums.get("t_typical"),
            t_avg_us=nums.get("t_avg"),
            t_stdev_us=nums.get("t_stdev"),
            p99_us=nums.get("p99"),
            p99_9_us=nums.get("p99_9"),
        ),
        "",
    )


def _latency_out_of_range(tok: dict[str, str], nums: dict[str, float], lo: float, hi: float) -> str:
    """Why t_typical, t_avg or a percentile lies outside ``lo..hi`` (t_min..t_max, within the printed
    rounding) or t_min is above t_max, or ``""``."""
    for key in ("t_typical", "t_avg", "p99", "p99_9"):
        v = nums.get(key)
        if v is not None and not lo - 0.011 <= v <= hi + 0.011:
            return f"{key} {tok[key]} is outside t_min..t_max ({lo}..{hi}): a field out of its column"
    if lo > hi:
        return f"t_min {lo} is above t_max {hi}: a field out of its column"
    return ""
