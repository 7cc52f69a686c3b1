"""Read the output of nccl-tests and rccl-tests (``all_reduce_perf``, ``sendrecv_perf``, …).

Pure functions over text. The table is found by its column line (``#  size  count  type  redop  root  time
algbw  busbw  #wrong …``), never by position: every column is located from the header the tool printed,
every unit from its units line (``(B)  (elements)  (us)  (GB/s) …``), and out-of-place / in-place from the
title line above it. The formats this knows, from nccl-tests' own printf formats (``src/common.cu``,
``src/util.cu``) and rccl-tests':

* 2017: ``bytes  N  type  op  time  algbw  busbw  res`` (time in ms, no units line);
* 2019-2022: per-collective headers ``size  count  type  [redop]  [root]  time  algbw  busbw  error``
  (all_gather and sendrecv: neither redop nor root; broadcast: root; all_reduce: redop), error a float or N/A;
* 2.13+ (2022): one header ``size count type redop root time algbw busbw #wrong …`` for every test, with
  ``cputime`` for ``-C``, ``copybw`` for side work, ``i_min i_max i_p99 i_cv%`` per-iteration columns and a
  ``timestamp`` (two fields a row) at the end; rccl-tests' in-place-only table.

A row is taken only when its field count is the header's and every number parses; a row whose ``algbw`` is
not ``size / time`` (within the printed rounding) is refused too, so a field from the wrong column never
passes as a bandwidth. Refused rows are kept with a reason. A header that cannot be read for sure (an
unknown column, a units line that does not match, a unit other than GB/s, one column group and no title to
say which it is) refuses the whole table: :class:`~slurm_topo.core.errors.ParseError`.

Line prefixes of ``srun --label`` (`` 0: ``) and ``mpirun --tag-output`` (``[1,0]<stdout>:``) are
stripped; NCCL INFO/WARN lines, Open MPI/UCX messages and anything else that does not start with a number
is noise and skipped wherever it appears. ``# Avg bus bandwidth`` is read but it is an average over every
size (8-byte rows included), not a link figure: read the large-size rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import ParseError

# ---- lines and their prefixes (shared with perftest)

_TAG_OUTPUT = re.compile(r"^\s*\[(\d+,\d+)\]<(?:stdout|stderr)>:\s?")
_SRUN_LABEL = re.compile(r"^\s*(\d+):(?=\s|$)\s?")
_MPICH_RANK = re.compile(r"^\[(\d+)\]\s")  # mpiexec -prepend-rank / -l: "[0] "


@dataclass(frozen=True)
class Line:
    """One line of the input, its prefix taken off: ``label`` is the task it names (``0``, ``1,0``) or
    None, ``body`` what the tool printed (right-stripped)."""

    number: int
    label: str | None
    body: str


def split_lines(text: str) -> list[Line]:
    """Every line, numbered from 1, with an ``srun --label`` / ``mpirun --tag-output`` prefix removed."""
    out: list[Line] = []
    for i, raw in enumerate(text.splitlines(), 1):
        label: str | None = None
        body = raw
        for pattern in (_TAG_OUTPUT, _SRUN_LABEL, _MPICH_RANK):
            m = pattern.match(body)
            if m:
                label = m.group(1)
                body = body[m.end() :]
                break
        out.append(Line(i, label, body.rstrip()))
    return out


_INT = re.compile(r"^-?\d+$")


def is_row_like(body: str) -> bool:
    """A line that starts with an integer: a data row, or a broken one (never noise)."""
    first = body.split(maxsplit=1)
    return bool(first) and bool(_INT.match(first[0]))


def half_ulp(token: str) -> float:
    """Half the last printed digit of a number as printed (``15.12`` -> 0.005, ``1e+06`` -> 5e5)."""
    t = token.lower().lstrip("+-")
    exp = 0
    if "e" in t:
        t, _, e = t.partition("e")
        exp = int(e)
    decimals = len(t.partition(".")[2])
    return 0.5 * 10.0 ** (exp - decimals)


def parse_float(token: str) -> float | None:
    """A finite float, or None (``nan``, ``inf``, text)."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---- results


@dataclass(frozen=True)
class Half:
    """One side of a row: out-of-place or in-place."""

    time_us: float
    algbw_gbs: float
    """GB/s = 10^9 B/s."""
    busbw_gbs: float
    wrong: int | None = None
    """``#wrong``; None for ``N/A`` (validation off, or in-place sendrecv/alltoall) or the old ``error``."""
    error: float | None = None
    """The old ``error``/``res`` column: the largest deviation (None for ``N/A`` or the new format)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "time_us": self.time_us,
            "algbw_gbs": self.algbw_gbs,
            "busbw_gbs": self.busbw_gbs,
            "wrong": self.wrong,
            "error": self.error,
        }


@dataclass(frozen=True)
class Row:
    line: int
    bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Half | None
    in_place: Half | None

    def as_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "bytes": self.bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            "out_of_place": self.out_of_place.as_dict() if self.out_of_place else None,
            "in_place": self.in_place.as_dict() if self.in_place else None,
        }


@dataclass(frozen=True)
class Rejected:
    line: int
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class NcclTable:
    """One nccl-tests/rccl-tests result table and what its output says around it."""

    tool: str
    """``nccl-tests`` or ``rccl-tests``."""
    header_line: int
    columns: tuple[str, ...]
    collective: str | None
    """``all_reduce``, ``sendrecv``, …: from ``# Collective test starting:`` or a command line; None if the
    output does not say."""
    ranks: int | None
    """From a complete rank list or NCCL's ``nranks``; None when the output does not say for sure."""
    ranks_at_least: int | None
    hosts: tuple[str, ...]
    """Hosts of the rank list, in rank order of first appearance (empty if the list is incomplete)."""
    n_gpus: int | None
    n_threads: int | None
    iters: int | None
    validation: int | None
    nccl_version: str | None
    rows: tuple[Row, ...]
    rejected: tuple[Rejected, ...]
    avg_busbw_gbs: float | None
    """``# Avg bus bandwidth``: the mean over every size of the run, not a link figure."""
    out_of_bounds: int | None
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "line": self.header_line,
            "columns": list(self.columns),
            "collective": self.collective,
            "ranks": self.ranks,
            "ranks_at_least": self.ranks_at_least,
            "hosts": list(self.hosts),
            "n_gpus": self.n_gpus,
            "n_threads": self.n_threads,
            "iters": self.iters,
            "validation": self.validation,
            "nccl_version": self.nccl_version,
            "avg_busbw_gbs": self.avg_busbw_gbs,
            "out_of_bounds": self.out_of_bounds,
            "rows": [r.as_dict() for r in self.rows],
            "rejected": [r.as_dict() for r in self.rejected],
            "notes": list(self.notes),
        }


# ---- the header

_PREFIX_COLUMNS = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "N": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_GROUP_START = {"time", "cputime"}
_GROUP_COLUMNS = {
    "time",
    "cputime",
    "algbw",
    "busbw",
    "copybw",
    "#wrong",
    "error",
    "res",
    "i_min",
    "i_max",
    "i_p99",
    "i_cv%",
}
_UNITS = {
    "size": ("(B)",),
    "count": ("(elements)",),
    "time": ("(us)", "(ms)"),
    "cputime": ("(us)", "(ms)"),
    "algbw": ("(GB/s)",),
    "busbw": ("(GB/s)",),
    "copybw": ("(GB/s)",),
    "i_min": ("(us)",),
    "i_max": ("(us)",),
    "i_p99": ("(us)",),
    "i_cv%": ("(%)",),
}
_TITLE = re.compile(r"out-of-place|in-place")
_COLLECTIVES_ARITH_OK = {
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
}


def _header_tokens(body: str) -> list[str] | None:
    """The column names of a column line (``#  size  count … busbw …``), or None if it is not one."""
    s = body.strip()
    if not s.startswith("#"):
        return None
    tokens = s[1:].split()
    if (
        len(tokens) < 4
        or tokens[0] not in ("size", "bytes")
        or "algbw" not in tokens
        or "busbw" not in tokens
    ):
        return None
    return tokens


@dataclass(frozen=True)
class _Column:
    name: str
    """As printed (``#wrong``, ``cputime``)."""
    key: str
    """Canonical (``size``, ``wrong``, ``time``)."""
    group: int
    """-1 for the size/count/type/redop/root columns, then 0, 1 for each time/algbw/busbw group, -2 for the
    timestamp."""
    width: int = 1
    """Fields a row has for it (the timestamp: date and time)."""


def _columns(tokens: Sequence[str]) -> tuple[list[_Column], str | None]:
    """The columns of a header, or a reason it cannot be read."""
    cols: list[_Column] = []
    group = -1
    seen: set[str] = set()
    for tok in tokens:
        if tok == "timestamp":
            cols.append(_Column(tok, "timestamp", -2, 2))
            group = -3
            continue
        if group == -3:
            return [], f"column {tok!r} after the timestamp"
        if tok in _GROUP_START:
            group += 1
            seen = set()
        if group == -1:
            key = _PREFIX_COLUMNS.get(tok)
            if key is None:
                return [], f"unknown column {tok!r}"
        else:
            if tok not in _GROUP_COLUMNS:
                return [], f"unknown column {tok!r}"
            key = {"cputime": "time", "#wrong": "wrong", "res": "error"}.get(tok, tok)
        if key in seen:
            return [], f"column {tok!r} twice"
        seen.add(key)
        cols.append(_Column(tok, key, group))
    if "size" not in {c.key for c in cols if c.group == -1}:
        return [], "no size column"
    groups = sorted({c.group for c in cols if c.group >= 0})
    if not groups:
        return [], "no time/algbw/busbw columns"
    for g in groups:
        keys = {c.key for c in cols if c.group == g}
        if not {"time", "algbw", "busbw"} <= keys:
            return [], "a column group without time, algbw and busbw"
    return cols, None


def _read_units(cols: list[_Column], tokens: list[str]) -> tuple[dict[str, float], str | None]:
    """Check the units line against the columns: ``{column name: factor to µs}``, or a reason."""
    scale: dict[str, float] = {}
    rest = list(tokens)
    for c in cols:
        if c.key == "timestamp":
            rest = []  # the strftime format, whatever it prints
            continue
        allowed = _UNITS.get(c.name)
        if allowed is None:
            continue
        if not rest:
            return {}, f"the units line has no unit for {c.name!r}"
        unit = rest.pop(0)
        if unit not in allowed:
            return {}, f"{c.name!r} is in {unit}, not {' or '.join(allowed)}"
        if unit == "(ms)":
            scale[c.name] = 1000.0
    if rest:
        return {}, f"the units line has more units than the column line has columns ({' '.join(rest)})"
    return scale, None


# ---- the tables


_NTHREAD = re.compile(r"nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_ITERS = re.compile(r"(?<!warmup )(?<!agg )\biters: (\d+)")
_VALIDATION = re.compile(r"validation: (\d+)")
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]"
)
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_PROGRAM = re.compile(r"(?:^|[\s/])([a-z][a-z_]*?)_perf(?:_mpi)?(?=\s|$)")
_NRANKS = re.compile(r"\bnranks (\d+)", re.IGNORECASE)
_NCCL_VERSION = re.compile(r"\b[NR]CCL version (\d+\.\d+\.\d+\S*)")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_RCCL = re.compile(r"\bRCCL version|rccl-tests|Errors with asterisks|\brccl\b", re.IGNORECASE)


def find_headers(lines: Sequence[Line]) -> list[int]:
    """Indexes (into ``lines``) of nccl-tests column lines."""
    return [i for i, ln in enumerate(lines) if _header_tokens(ln.body) is not None]


def parse_nccl_tests(text: str, source: str = "<text>") -> tuple[NcclTable, ...]:
    """Every nccl-tests/rccl-tests table of ``text``; () when there is none. A table whose header cannot be
    read for sure, or with no row that can, raises :class:`ParseError` (``source: line N: why``)."""
    lines = split_lines(text)
    headers = find_headers(lines)
    tool = "rccl-tests" if _RCCL.search(text) else "nccl-tests"
    tables: list[NcclTable] = []
    start = 0
    for n, h in enumerate(headers):
        end = headers[n + 1] if n + 1 < len(headers) else len(lines)
        table, start = _table(lines, start, h, end, tool, source)
        tables.append(table)
    return tuple(tables)


def _fail(source: str, line: int, reason: str) -> ParseError:
    return ParseError(source, None, f"line {line}: {reason}")


def _title_before(lines: Sequence[Line], h: int, start: int) -> list[str] | None:
    """The out-of-place/in-place title of the column line at ``h``: the ``#`` line just above it (noise
    skipped), or None."""
    for i in range(h - 1, start - 1, -1):
        body = lines[i].body.strip()
        if not body.startswith("#"):
            continue
        found = _TITLE.findall(body)
        return found or None
    return None


@dataclass(frozen=True)
class _Layout:
    """How the rows of one table are read: its columns, the fields a row has, the place (out-of-place,
    in-place) of each column group, each time column's factor to µs, and whether algbw is checked against
    size/time."""

    cols: list[_Column]
    width: int
    place: dict[int, str]
    scale: dict[str, float]
    check: bool


def _table(
    lines: Sequence[Line], start: int, h: int, end: int, tool: str, source: str
) -> tuple[NcclTable, int]:
    """The table whose column line is ``lines[h]`` (``start``: the end of the table before; ``end``: the next
    column line), and the index where its rows end."""
    head = lines[h]
    tokens = _header_tokens(head.body) or []
    cols, why = _columns(tokens)
    if why:
        raise _fail(source, head.number, f"nccl-tests column line: {why}")
    notes: list[str] = []
    units, first_row = _units_line(lines, h, end)
    scale = _time_scale(cols, units, tokens[0] == "bytes", notes, source, head.number)
    place = _places(cols, _title_before(lines, h, start), notes, source, head.number)
    context = [ln.body.strip() for ln in lines[start:h]]
    inside = [ln.body.strip() for ln in lines[h:end]]
    info = _run_info(context, inside, notes)
    layout = _Layout(cols, sum(c.width for c in cols), place, scale, _arith_checked(info.collective, notes))
    region_end = _rows_end(lines, first_row, end)
    rows, rejected = _rows(lines[first_row:region_end], head.label, layout)
    avg, oob = _footer(lines[region_end:end])
    if not rows:
        raise _fail(source, head.number, f"nccl-tests table: no row could be read ({_why_no_row(rejected)})")
    table = NcclTable(
        tool=tool,
        header_line=head.number,
        columns=tuple(c.name for c in cols),
        collective=info.collective,
        ranks=info.ranks,
        ranks_at_least=info.ranks_at_least,
        hosts=info.hosts,
        n_gpus=info.n_gpus,
        n_threads=info.n_threads,
        iters=info.iters,
        validation=info.validation,
        nccl_version=info.nccl_version,
        rows=tuple(rows),
        rejected=tuple(rejected),
        avg_busbw_gbs=avg,
        out_of_bounds=oob,
        notes=tuple(notes),
    )
    return table, region_end


def _units_line(lines: Sequence[Line], h: int, end: int) -> tuple[list[str] | None, int]:
    """The units of the column line at ``h`` (the next ``#`` line, noise skipped, before any row, if it
    starts with ``(B)``; else None) and the index of the first line that may be a row."""
    for i in range(h + 1, end):
        body = lines[i].body.strip()
        if is_row_like(body):
            break
        if body.startswith("#"):
            rest = body[1:].split()
            if rest and rest[0] == "(B)":
                return rest, i + 1
            break
    return None, h + 1


def _time_scale(
    cols: list[_Column], units: list[str] | None, old_2017: bool, notes: list[str], source: str, line: int
) -> dict[str, float]:
    """``{column name: factor to µs}`` from the units line, or the format's units when there is none."""
    if units is not None:
        scale, why = _read_units(cols, units)
        if why:
            raise _fail(source, line, f"nccl-tests units line: {why}")
        return scale
    if old_2017:
        notes.append("2017 format (no units line): time in ms, bandwidths in GB/s, as that version printed")
        return {c.name: 1000.0 for c in cols if c.key == "time"}  # 2017's %7.3f of deltaSec*1e3
    notes.append("no units line under the column line: nccl-tests' units assumed (µs, GB/s)")
    return {}


def _places(
    cols: list[_Column], titles: list[str] | None, notes: list[str], source: str, line: int
) -> dict[int, str]:
    """``{column group: out-of-place or in-place}``, from the title line or, with two groups and no title,
    the tool's order."""
    groups = sorted({c.group for c in cols if c.group >= 0})
    if titles is not None and len(titles) != len(groups):
        raise _fail(
            source,
            line,
            f"the title names {len(titles)} column group(s) ({' '.join(titles)}), the column line has "
            f"{len(groups)}",
        )
    if titles is None:
        if len(groups) != 2:
            raise _fail(
                source,
                line,
                "one time/algbw/busbw group and no out-of-place/in-place title: cannot tell which it is",
            )
        titles = ["out-of-place", "in-place"]
        notes.append("no out-of-place/in-place title line: the tool's order (out-of-place first) assumed")
    return dict(zip(groups, titles, strict=True))


def _arith_checked(collective: str | None, notes: list[str]) -> bool:
    """Whether the rows of ``collective``'s table are checked for algbw = size/time."""
    if collective is None or collective in _COLLECTIVES_ARITH_OK:
        return True
    notes.append(f"{collective}: algbw is not size/time, rows not checked against it")
    return False


def _rows_end(lines: Sequence[Line], first_row: int, end: int) -> int:
    """Where the rows end: the first ``#`` line after them (footer, next run's preamble), or ``end``."""
    for i in range(first_row, end):
        body = lines[i].body.strip()
        if body.startswith("#") or _OOB.match(body) or _AVG.match(body):
            return i
    return end


def _rows(lines: Sequence[Line], label: str | None, layout: _Layout) -> tuple[list[Row], list[Rejected]]:
    """The rows of ``lines`` that can be read and the refused ones (noise skipped); ``label``: the task of the
    column line, whose rows alone are the table's."""
    rows: list[Row] = []
    rejected: list[Rejected] = []
    for ln in lines:
        body = ln.body.strip()
        if not is_row_like(body):
            continue
        if ln.label is not None and label is not None and ln.label != label:
            rejected.append(Rejected(ln.number, f"from task {ln.label}; the table is task {label}'s"))
            continue
        row, reason = _row(ln.number, body.split(), layout)
        if row is None:
            rejected.append(Rejected(ln.number, reason))
        else:
            rows.append(row)
    return rows, rejected


def _footer(lines: Sequence[Line]) -> tuple[float | None, int | None]:
    """``# Avg bus bandwidth`` and ``# Out of bounds values`` below the rows (the first of each)."""
    avg: float | None = None
    oob: int | None = None
    for ln in lines:
        body = ln.body.strip()
        if (m := _OOB.match(body)) and oob is None:
            oob = int(m.group(1))
        elif (m := _AVG.match(body)) and avg is None:
            avg = parse_float(m.group(1))
    return avg, oob


def _why_no_row(rejected: Sequence[Rejected]) -> str:
    """The first refusals, or that there is no row at all."""
    return "; ".join(f"line {r.line}: {r.reason}" for r in rejected[:3]) or "no data row under it"


_Values = dict[tuple[int, str], str]
"""A row's fields by column: ``{(group, key): text}`` (the timestamp's two fields joined)."""


def _row(number: int, fields: list[str], layout: _Layout) -> tuple[Row | None, str]:
    """The row of line ``number``, or None and why it is refused."""
    if len(fields) != layout.width:
        return None, f"{len(fields)} fields where the column line has {layout.width}"
    values = _by_column(fields, layout.cols)
    prefix = {c.key: c for c in layout.cols if c.group == -1}
    ints, why = _prefix_counts(values, prefix)
    why = why or _prefix_names_bad(values, prefix)
    if why:
        return None, why
    halves: dict[str, Half] = {}
    for g, where in layout.place.items():
        half, why = _half(g, where, values, ints.get("size"), layout)
        if half is None:
            return None, why
        halves[where] = half
    return (
        Row(
            line=number,
            bytes=ints["size"],
            count=ints.get("count", 0),
            type=values.get((-1, "type"), ""),
            redop=values.get((-1, "redop")),
            root=ints.get("root"),
            out_of_place=halves.get("out-of-place"),
            in_place=halves.get("in-place"),
        ),
        "",
    )


def _by_column(fields: list[str], cols: list[_Column]) -> _Values:
    """Each column's field(s) of a row whose field count is the header's."""
    values: _Values = {}
    pos = 0
    for c in cols:
        values[(c.group, c.key)] = " ".join(fields[pos : pos + c.width])
        pos += c.width
    return values


def _not(c: _Column, values: _Values, what: str) -> str:
    """Why a row is refused: column ``c``'s field is not ``what``."""
    return f"{c.name} {values[(c.group, c.key)]!r} is not {what}"


def _prefix_counts(values: _Values, prefix: dict[str, _Column]) -> tuple[dict[str, int], str]:
    """The size, count and root of a row, or why one is not an integer (a count: not negative)."""
    ints: dict[str, int] = {}
    for key in ("size", "count", "root"):
        if key in prefix:
            tok = values[(-1, key)]
            if not _INT.match(tok) or (key != "root" and tok.startswith("-")):
                return {}, _not(
                    prefix[key], values, "an integer" if key == "root" else "a byte/element count"
                )
            ints[key] = int(tok)
    return ints, ""


def _prefix_names_bad(values: _Values, prefix: dict[str, _Column]) -> str:
    """Why a row's type or redop is not a name, or ``""``."""
    for key in ("type", "redop"):
        if key in prefix and not re.match(r"^[A-Za-z_][\w.]*$", values[(-1, key)]):
            return _not(prefix[key], values, "a name")
    return ""


def _half(g: int, where: str, values: _Values, size: int | None, layout: _Layout) -> tuple[Half | None, str]:
    """Column group ``g`` of a row (``where``: out-of-place or in-place), or None and why it is refused."""
    gcols = {c.key: c for c in layout.cols if c.group == g}
    nums, why = _group_numbers(g, values, gcols)
    if why:
        return None, why
    time_c = gcols["time"]
    time_us = nums["time"] * layout.scale.get(time_c.name, 1.0)
    if layout.check and time_c.name == "time" and size is not None:
        mismatch = algbw_mismatch(
            size,
            values[(g, "time")],
            layout.scale.get(time_c.name, 1.0),
            values[(g, "algbw")],
            values[(g, "busbw")],
        )
        if mismatch:
            return None, f"{where}: {mismatch}"
    return (
        Half(
            time_us=time_us,
            algbw_gbs=nums["algbw"],
            busbw_gbs=nums["busbw"],
            wrong=int(nums["wrong"]) if "wrong" in nums else None,
            error=nums.get("error"),
        ),
        "",
    )


def _group_numbers(g: int, values: _Values, gcols: dict[str, _Column]) -> tuple[dict[str, float], str]:
    """The numbers of column group ``g`` of a row (``N/A`` #wrong or error left out), or why one is not a
    number (a count of wrong elements for #wrong; not negative but for error)."""
    nums: dict[str, float] = {}
    for key, c in gcols.items():
        tok = values[(g, key)]
        if key in ("wrong", "error") and tok == "N/A":
            continue
        v = parse_float(tok)
        if key == "wrong":
            if v is None or v < 0 or v != int(v):
                return {}, _not(c, values, "a count of wrong elements or N/A")
        elif v is None or (key != "error" and v < 0):
            return {}, _not(c, values, "a number")
        nums[key] = v
    return nums, ""


def algbw_mismatch(nbytes: int, time_tok: str, scale: float, algbw_tok: str, busbw_tok: str) -> str | None:
    """Why ``algbw`` is not ``bytes / time`` within the printed rounding (time in µs once multiplied by
    ``scale``), or ``busbw`` above twice ``algbw`` (no collective's factor reaches 2); None when neither."""
    t, algbw, busbw = float(time_tok) * scale, float(algbw_tok), float(busbw_tok)
    if busbw > 2 * algbw + half_ulp(busbw_tok) + 2 * half_ulp(algbw_tok) + 1e-9:
        return f"busbw {busbw_tok} is above twice algbw {algbw_tok}: a field out of its column"
    dt = half_ulp(time_tok) * scale
    if t <= dt:  # printed as 0: no transfer takes under 5 ns; an empty one has algbw 0
        if nbytes == 0 and algbw == 0:
            return None
        return f"time {time_tok} with size {nbytes} and algbw {algbw_tok}: a field out of its column"
    expected = nbytes / (t * 1e3)
    slack = half_ulp(algbw_tok) + expected * (dt / t) * 1.01 + expected * 1e-6 + 1e-9
    if abs(algbw - expected) <= slack:
        return None
    return f"algbw {algbw_tok} is not size/time ({expected:.4g} GB/s): a field out of its column"


@dataclass
class _Info:
    collective: str | None = None
    ranks: int | None = None
    ranks_at_least: int | None = None
    hosts: tuple[str, ...] = ()
    n_gpus: int | None = None
    n_threads: int | None = None
    iters: int | None = None
    validation: int | None = None
    nccl_version: str | None = None


def _run_info(context: list[str], inside: list[str], notes: list[str]) -> _Info:
    """What the lines before a table (and NCCL INFO lines inside it) say about the run."""
    info = _Info()
    rank_hosts: dict[int, str] = {}
    programs: list[str] = []
    nranks: set[int] = set()
    for body in context:
        if m := _NTHREAD.search(body):
            info.n_threads, info.n_gpus = int(m.group(1)), int(m.group(2))
            if it := _ITERS.search(body):
                info.iters = int(it.group(1))
            if v := _VALIDATION.search(body):
                info.validation = int(v.group(1))
            continue
        if m := _RANK.match(body):
            rank_hosts.setdefault(int(m.group(1)), m.group(2))
            continue
        if m := _STARTING.search(body):
            programs.append(m.group(1))
            continue
        if m := _NCCL_VERSION.search(body):
            info.nccl_version = m.group(1).rstrip(".")
        if not body.startswith("#") and "NCCL INFO" not in body:
            programs.extend(_PROGRAM.findall(body))
    for body in (*context, *inside):
        if "NCCL INFO" in body and (m := _NRANKS.search(body)):
            nranks.add(int(m.group(1)))
    if programs:
        info.collective = programs[-1].removesuffix("_mpi").removesuffix("_perf")
    if rank_hosts:
        top = max(rank_hosts) + 1
        if sorted(rank_hosts) == list(range(top)):
            info.ranks = top
            info.hosts = tuple(dict.fromkeys(rank_hosts[r] for r in range(top)))
        else:
            info.ranks_at_least = top
            notes.append(
                f"the rank list is incomplete ({len(rank_hosts)} of at least {top} ranks): "
                "the rank count is not taken from it"
            )
    if info.ranks is None and len(nranks) == 1:
        info.ranks = nranks.pop()
        notes.append("rank count from NCCL INFO nranks")
    elif info.ranks is not None and nranks and nranks != {info.ranks}:
        notes.append(f"NCCL INFO says nranks {sorted(nranks)}, the rank list {info.ranks}")
    if info.ranks is not None:
        info.ranks_at_least = info.ranks
    return info
