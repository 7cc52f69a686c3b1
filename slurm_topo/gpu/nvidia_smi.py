"""Parse ``nvidia-smi topo -m`` into a :class:`~slurm_topo.gpu.gpu_topology.GpuTopology`.

The GPU×GPU block comes out exact or the text is refused with a :class:`ParseError` naming the line; NIC, CPU
affinity and NUMA cells are best effort and every guess or drop is recorded in ``GpuTopology.warnings``.

Algorithm overview (one pass over the lines, O(lines × columns)); each step is one function, called in order
by :func:`parse_topo_matrix`:

1. *Clean*: drop ANSI escapes, including remnants whose ESC byte was lost (``[4mGPU0``); lines keep their
   numbers. Other tools' outputs are recognised and refused by name when they come first (NCCL XML,
   ``nvidia-smi nvlink``, ``topo -p2p`` — the latter by its legend inside the first block). Only the first
   block is read: a valid matrix followed by a ``topo -p2p`` block, ``nvlink`` output or another matrix reads
   as that matrix.
2. *Header*: the first line whose first label is ``GPU0`` and which is not a row (the next thing is not a link
   class). Its labels are split at ``GPU<n>`` boundaries too, so a mangled ``GPU0GPU1…GPU7mlx5_0`` header
   reads. The labels before ``CPU Affinity`` / ``NUMA Affinity`` / ``GPU NUMA ID`` are the device columns; GPU
   labels must be ``GPU0 … GPU<n-1>`` in order.
3. *Rows*: a line whose first token is ``GPU<n>``, a header label, ``NIC<n>`` or ``mlx…``. A line starting
   with a link class, a digit or ``N/A`` continues the previous row (wrapped pastes); a blank line or
   ``Legend:`` ends the matrix. Indentation is ignored.
4. *Cells*: scanned with the legend's vocabulary (``X``, ``NV<n>``, ``PIX``, ``PXB``, ``PHB``, ``NODE``,
   ``SYS``/``SOC``), not split on whitespace, so glued cells (``NODENODE``, ``X PIX``) split correctly. A GPU
   row must hold one cell per device column; what follows is the affinity text.
5. *Check*: one row per header GPU, in order; ``X`` exactly on the diagonal; symmetric. Otherwise
   ``ParseError``.
6. *Best effort*: NIC rows (checked against the GPU rows' NIC cells), the NIC legend (``NIC3: mlx5_3``) and
   the affinity columns: tab-separated rows are split on tabs (nvidia-smi writes an empty field before ``GPU
   NUMA ID``); space-separated rows on whitespace, with ``GPU NUMA ID`` taken from the right and a CPU list
   run into its NUMA id (``0-45,92-1370``) split where both halves are valid and the CPU count matches the
   other rows.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..core import hostlist
from ..core.errors import ParseError
from .gpu_topology import GpuTopology

_ANSI_RE = re.compile(r"\x1b?\[[0-9;]*m")
_CELL_RE = re.compile(r"NV\d+|NODE|PIX|PXB|PHB|SYS|SOC|X")
_GPU_LABEL_RE = re.compile(r"GPU(\d+)")
_NIC_LABEL_RE = re.compile(r"(NIC\d+|mlx\d*_\S+)")
_P2P_TOKENS = frozenset({"OK", "CNS", "GNS", "TNS", "NS", "U"})
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CPU_LIST_RE = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
_NUMA_ID_RE = re.compile(r"0|[1-9]\d*")
_LEGEND_RE = re.compile(r"^(\S+)\s*=\s")
_NIC_LEGEND_RE = re.compile(r"^(NIC\d+)\s*:\s*(\S+)\s*$")
_KNOWN_LEGEND = frozenset({"X", "SYS", "SOC", "NODE", "PHB", "PXB", "PIX", "NV#"})
_NVLINK_GPU_RE = re.compile(r"GPU \d+: .*\(UUID: ")
_P2P_LEGEND_RE = re.compile(r"\s*OK\s*=\s*Status Ok")


@dataclass
class _Row:
    label: str
    lineno: int
    text: str  # the row after its label, continuation lines joined with a space
    cells: list[str] = field(default_factory=list)
    rest: str = ""


def _clean(text: str) -> list[str]:
    return [_ANSI_RE.sub("", line) for line in text.replace("\r\n", "\n").split("\n")]


def _refuse_other_formats(lines: list[str], source: str) -> None:
    """Name the tool when the text is clearly some other GPU output, so the error says what to run instead."""
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("<"):
            raise ParseError(
                source, lineno, "this is XML (an NCCL topology dump?), not `nvidia-smi topo -m` output"
            )
        if _NVLINK_GPU_RE.match(s):
            raise ParseError(
                source,
                lineno,
                "this is `nvidia-smi nvlink`/`-L` output (`GPU 0: … (UUID: …)`), "
                "not `nvidia-smi topo -m` output",
            )
        break


def _refuse_p2p(lines: list[str], first: int, source: str) -> None:
    """Refuse when the first block's legend is ``topo -p2p``'s (``OK = Status Ok``); ``lines``: that block."""
    for lineno, line in enumerate(lines, first):
        if _P2P_LEGEND_RE.match(line):
            raise ParseError(
                source,
                lineno,
                "this is `nvidia-smi topo -p2p` output (its legend has `OK = Status Ok`), "
                "not `nvidia-smi topo -m` output",
            )


def _split_labels(text: str) -> list[str]:
    """Header device labels; ``GPU<n>`` boundaries split glued labels (``GPU6GPU7mlx5_0``)."""
    out: list[str] = []
    for token in text.split():
        out.extend(part for part in re.split(r"(GPU\d+)", token) if part)
    return out


def _first_token(s: str) -> str:
    m = _GPU_LABEL_RE.match(s)
    if m:
        return m.group(0)
    return s.split()[0] if s.split() else ""


def _is_header(s: str) -> bool:
    if not s.startswith("GPU0"):
        return False
    after = s[4:].lstrip()
    return not after or not _CELL_RE.match(after)


def _scan_cells(row: _Row, count: int, source: str) -> None:
    """Read ``count`` link-class cells from the start of ``row.text``; the remainder is ``row.rest``."""
    text, pos = row.text, 0
    for c in range(count):
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        m = _CELL_RE.match(text, pos)
        if not m:
            found = text[pos:].split()[0] if text[pos:].split() else "end of line"
            if found.rstrip("\t") in _P2P_TOKENS:
                raise ParseError(
                    source,
                    row.lineno,
                    f"{row.label}: cell {found!r} is a P2P status: this is "
                    "`nvidia-smi topo -p2p` output, not `topo -m`",
                )
            raise ParseError(
                source,
                row.lineno,
                f"{row.label}: expected {count} link cells, cell {c + 1} is "
                f"{found!r} (truncated or misaligned row)",
            )
        row.cells.append("SYS" if m.group(0) == "SOC" else m.group(0))
        pos = m.end()
    row.rest = text[pos:]


def _valid_cpu_list(s: str) -> bool:
    if not _CPU_LIST_RE.fullmatch(s):
        return False
    last = -1
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if b < a or a <= last or (len(lo) > 1 and lo[0] == "0") or (len(hi) > 1 and hi[0] == "0"):
            return False
        last = b
    return True


def _cpu_count(s: str) -> int:
    return len(hostlist.expand_numbers(s))


def _value(s: str | None) -> str | None:
    if s is None:
        return None
    s = s.strip()
    return None if s in ("", "N/A") else s


def _affinity(rows: list[_Row], columns: list[str], warnings: list[str]) -> list[dict[str, str | None]]:
    """Best-effort split of each GPU row's remainder into the header's affinity columns: tab-separated cells
    (:func:`_tab_cells`), else space-separated tokens (:func:`_space_cells`); a CPU list glued to its NUMA
    node (``0-47,96-1430``) is split afterwards, by the CPU counts the other rows show (:func:`_unglue`)."""
    parsed: list[dict[str, str | None] | None] = []
    glued: list[tuple[int, str, str | None]] = []  # (row index, CPU+NUMA token, GPU NUMA ID)
    for i, row in enumerate(rows):
        rest = row.rest
        if "\t" in rest:
            values = _tab_cells(rest, columns)
        else:
            values, glue = _space_cells(rest, columns)
            if glue is not None:
                glued.append((i, *glue))
                parsed.append(None)
                continue
        if values is None:
            warnings.append(
                f"line {row.lineno}: {row.label}: could not split the affinity cells "
                f"{rest.strip()!r} into {', '.join(columns) or 'no columns'}; left unknown"
            )
            values = [""] * len(columns)
        parsed.append(dict(zip(columns, values, strict=True)))
    if glued:
        _unglue(rows, columns, parsed, glued, warnings)
    return [d if d is not None else {} for d in parsed]


def _tab_cells(rest: str, columns: list[str]) -> list[str] | None:
    fields = rest.strip(" ").split("\t")
    if fields and fields[0].strip() == "":
        fields = fields[1:]
    while len(fields) > len(columns) and fields[-1].strip() == "":
        fields.pop()
    if len(fields) == len(columns) + 1 and columns[-1] == "GPU NUMA ID" and fields[-2].strip() == "":
        del fields[-2]  # nvidia-smi prints two tabs before GPU NUMA ID
    return [f.strip() for f in fields] if len(fields) == len(columns) else None


def _space_cells(rest: str, columns: list[str]) -> tuple[list[str] | None, tuple[str, str | None] | None]:
    """(cells, None), or (None, (CPU+NUMA token, GPU NUMA ID)) when the CPU and NUMA cells run together."""
    tokens = rest.split()
    if len(tokens) == len(columns):
        return tokens, None
    if (
        len(tokens) == len(columns) - 1
        and columns[:2] == ["CPU Affinity", "NUMA Affinity"]
        and tokens
        and _CPU_LIST_RE.fullmatch(tokens[0])
    ):
        return None, (tokens[0], tokens[-1] if len(columns) == 3 else None)
    return ([""] * len(columns) if not tokens else None), None


def _unglue(
    rows: list[_Row],
    columns: list[str],
    parsed: list[dict[str, str | None] | None],
    glued: list[tuple[int, str, str | None]],
    warnings: list[str],
) -> None:
    """Split each glued CPU+NUMA token where exactly one split is a valid CPU list and NUMA id (among several,
    the one whose CPU count another row shows); else left unknown, with a warning either way."""
    counts = Counter(
        _cpu_count(d["CPU Affinity"] or "")
        for d in parsed
        if d is not None and d.get("CPU Affinity") and _valid_cpu_list(d["CPU Affinity"] or "")
    )
    for i, token, gnid in glued:
        row = rows[i]
        splits = [
            (token[:p], token[p:])
            for p in range(1, len(token))
            if _valid_cpu_list(token[:p]) and _NUMA_ID_RE.fullmatch(token[p:])
        ]
        if len(splits) > 1 and counts:
            splits = [sp for sp in splits if counts.get(_cpu_count(sp[0]))]
        out: dict[str, str | None] = {c: None for c in columns}
        if gnid is not None:
            out["GPU NUMA ID"] = gnid
        if len(splits) == 1:
            out["CPU Affinity"], out["NUMA Affinity"] = splits[0]
            warnings.append(
                f"line {row.lineno}: {row.label}: CPU affinity and NUMA affinity run together in "
                f"{token!r}; read as {splits[0][0]!r} and {splits[0][1]!r}"
            )
        else:
            warnings.append(
                f"line {row.lineno}: {row.label}: CPU and NUMA affinity run together in "
                f"{token!r} and cannot be split unambiguously; left unknown"
            )
        parsed[i] = out


def _find_header(lines: list[str], source: str) -> int:
    header_idx = next((i for i, line in enumerate(lines) if _is_header(line.strip())), None)
    if header_idx is None:
        raise ParseError(
            source, None, "no header line starting with `GPU0` found: not `nvidia-smi topo -m` output"
        )
    return header_idx


def _read_rows(lines: list[str], header_idx: int) -> tuple[str, list[_Row], int]:
    """The header (with its wrapped continuation lines), the rows under it, and the index where they end."""
    header = lines[header_idx].strip()
    rows: list[_Row] = []
    nic_labels_hint = set(_split_labels(header))
    i = header_idx + 1
    while i < len(lines):
        s = lines[i].strip()
        if not s or s.startswith("Legend"):
            break
        tok = _first_token(s)
        is_row = (
            bool(_GPU_LABEL_RE.fullmatch(tok)) or tok in nic_labels_hint or bool(_NIC_LABEL_RE.fullmatch(tok))
        )
        if not rows and not is_row:
            header += " " + s  # wrapped header
            nic_labels_hint = set(_split_labels(header))
        elif is_row:
            rows.append(_Row(tok, i + 1, s[len(tok) :]))
        elif _CELL_RE.match(s) or s[0].isdigit() or s.startswith("N/A"):
            rows[-1].text += " " + s  # wrapped row
        else:
            break
        i += 1
    return header, rows, i


def _block_end(lines: list[str], legend_start: int) -> int:
    """Where the first block's legend ends: at the next matrix header or other tool's output, else the end."""
    for i in range(legend_start, len(lines)):
        s = lines[i].strip()
        if _is_header(s) or _NVLINK_GPU_RE.match(s) or s.startswith("<"):
            return i
    return len(lines)


@dataclass(frozen=True)
class _Columns:
    labels: list[str]  # device columns: GPUs then NICs
    gpu_labels: list[str]
    nic_labels: list[str]
    affinity: list[str]  # affinity columns in printed order
    lineno: int


def _columns(header: str, lineno: int, source: str) -> _Columns:
    cut = min((header.find(c) for c in _AFFINITY_COLUMNS if c in header), default=len(header))
    labels = _split_labels(header[:cut])
    aff_columns = sorted((c for c in _AFFINITY_COLUMNS if c in header), key=header.find)
    gpu_labels = [lab for lab in labels if _GPU_LABEL_RE.fullmatch(lab)]
    nic_labels = [lab for lab in labels if not _GPU_LABEL_RE.fullmatch(lab)]
    if labels[: len(gpu_labels)] != gpu_labels:
        raise ParseError(
            source, lineno, f"header: GPU columns must come before NIC columns ({' '.join(labels)})"
        )
    expected = [f"GPU{n}" for n in range(len(gpu_labels))]
    if gpu_labels != expected:
        raise ParseError(
            source,
            lineno,
            f"header: GPU columns must be GPU0…GPU{len(gpu_labels) - 1} in order, "
            f"found {' '.join(gpu_labels)}",
        )
    return _Columns(labels, gpu_labels, nic_labels, aff_columns, lineno)


def _gpu_rows(rows: list[_Row], cols: _Columns, source: str) -> list[_Row]:
    """The GPU rows, checked to be GPU0…GPU<n-1> in order, before any NIC row."""
    expected, n_gpu = cols.gpu_labels, len(cols.gpu_labels)
    gpu_rows = [r for r in rows if _GPU_LABEL_RE.fullmatch(r.label)]
    seen = [r.label for r in gpu_rows]
    for k, r in enumerate(gpu_rows):
        if k >= n_gpu or r.label != expected[k]:
            if r.label in seen[:k]:
                what = "duplicate row"
            elif k < n_gpu and r.label in expected[k:]:
                what = f"row {expected[k]} is missing before it"
            else:
                what = "unexpected row"
            raise ParseError(
                source,
                r.lineno,
                f"{r.label}: {what}; header names {n_gpu} GPUs, rows must be GPU0…GPU{n_gpu - 1} in order",
            )
    if len(gpu_rows) < n_gpu:
        last = gpu_rows[-1].lineno if gpu_rows else cols.lineno
        missing = ", ".join(expected[len(gpu_rows) :])
        raise ParseError(
            source,
            last,
            f"header names {n_gpu} GPUs but the rows for {missing} are missing (truncated output?)",
        )
    if rows and not _GPU_LABEL_RE.fullmatch(rows[0].label):
        raise ParseError(source, rows[0].lineno, f"{rows[0].label}: NIC row before the GPU rows")
    return gpu_rows


def _gpu_matrix(gpu_rows: list[_Row], n_dev: int, source: str) -> tuple[tuple[str, ...], ...]:
    """Scan every GPU row's cells and check the GPU×GPU block: X exactly on the diagonal, symmetric."""
    n_gpu = len(gpu_rows)
    for r in gpu_rows:
        _scan_cells(r, n_dev, source)
        extra = r.rest.lstrip(" \t")
        if _CELL_RE.match(extra) and not extra.startswith("N/A"):
            raise ParseError(
                source, r.lineno, f"{r.label}: more link cells than the header's {n_dev} columns"
            )
    matrix = tuple(tuple(r.cells[:n_gpu]) for r in gpu_rows)
    for a in range(n_gpu):
        for b in range(n_gpu):
            cell = matrix[a][b]
            if (a == b) != (cell == "X"):
                what = "the diagonal must be X" if a == b else "X off the diagonal"
                raise ParseError(source, gpu_rows[a].lineno, f"GPU{a}: column GPU{b} is {cell!r}: {what}")
            if b < a and cell != matrix[b][a]:
                raise ParseError(
                    source,
                    gpu_rows[a].lineno,
                    f"GPU{a}→GPU{b} is {cell} but GPU{b}→GPU{a} is {matrix[b][a]}: matrix not symmetric",
                )
    return matrix


def _legend(lines: list[str], warnings: list[str]) -> dict[str, str]:
    """The NIC legend (``NIC3: mlx5_3``) of the first block; unknown link classes in its legend are warned."""
    nic_names: dict[str, str] = {}
    for line in lines:
        s = line.strip()
        m = _NIC_LEGEND_RE.match(s)
        if m:
            nic_names[m.group(1)] = m.group(2)
            continue
        m = _LEGEND_RE.match(s)
        if m and m.group(1) not in _KNOWN_LEGEND:
            warnings.append(f"legend names an unknown link class {m.group(1)!r}")
    return nic_names


def _nic_block(
    rows: list[_Row],
    gpu_rows: list[_Row],
    cols: _Columns,
    nic_names: dict[str, str],
    source: str,
    warnings: list[str],
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """NIC names and the GPU×NIC classes (best effort: NIC rows checked against the GPU rows' NIC cells)."""
    if not cols.nic_labels:
        return (), ()
    n_gpu, n_dev, nic_labels = len(gpu_rows), len(cols.labels), cols.nic_labels
    nic_rows = [r for r in rows if not _GPU_LABEL_RE.fullmatch(r.label)]
    nics = tuple(nic_names.get(lab, lab) for lab in nic_labels)
    nic_matrix = tuple(tuple(r.cells[n_gpu:]) for r in gpu_rows)
    if [r.label for r in nic_rows] != nic_labels:
        warnings.append(
            f"NIC rows ({' '.join(r.label for r in nic_rows) or 'none'}) do not match the NIC "
            f"columns ({' '.join(nic_labels)}); NIC rows not checked"
        )
    else:
        for c, r in enumerate(nic_rows):
            try:
                _scan_cells(r, n_dev, source)
            except ParseError as e:
                warnings.append(f"line {r.lineno}: NIC row unreadable: {e.reason}")
                continue
            col = [nic_matrix[g][c] for g in range(n_gpu)]
            if r.cells[:n_gpu] != col:
                warnings.append(
                    f"line {r.lineno}: {r.label} row disagrees with the GPU rows' {r.label} column"
                )
    unnamed = [lab for lab in nic_labels if re.fullmatch(r"NIC\d+", lab) and lab not in nic_names]
    if unnamed:
        warnings.append(f"no NIC legend for {' '.join(unnamed)}: NICs named by their column labels")
    return nics, nic_matrix


def parse_topo_matrix(text: str, *, source: str = "nvidia-smi topo -m") -> GpuTopology:
    """``nvidia-smi topo -m`` text -> :class:`GpuTopology`; raises :class:`ParseError` naming the line.

    See the module docstring for what is accepted. Only the first block is read (the header, its rows and its
    legend); whatever follows it — another matrix, ``topo -p2p`` output — is ignored. The GPU block is exact
    (checked: count, order, diagonal, symmetry); NIC and affinity cells are best effort with ``warnings``.
    """
    lines = _clean(text)
    _refuse_other_formats(lines, source)
    warnings: list[str] = []
    header_idx = _find_header(lines, source)
    header, rows, legend_start = _read_rows(lines, header_idx)
    block_end = _block_end(lines, legend_start)
    _refuse_p2p(lines[header_idx:block_end], header_idx + 1, source)
    cols = _columns(header, header_idx + 1, source)
    gpu_rows = _gpu_rows(rows, cols, source)
    matrix = _gpu_matrix(gpu_rows, len(cols.labels), source)
    nic_names = _legend(lines[legend_start:block_end], warnings)
    nics, nic_matrix = _nic_block(rows, gpu_rows, cols, nic_names, source, warnings)
    aff = _affinity(gpu_rows, cols.affinity, warnings)

    def column(name: str) -> tuple[str | None, ...]:
        if name not in cols.affinity:
            return ()
        return tuple(_value(d.get(name)) for d in aff)

    cpu, numa, gnid = column("CPU Affinity"), column("NUMA Affinity"), column("GPU NUMA ID")
    for r, value in zip(gpu_rows, cpu, strict=False):
        if value is not None and not _valid_cpu_list(value):
            warnings.append(f"line {r.lineno}: {r.label}: CPU affinity {value!r} is not a CPU list")
    return GpuTopology(
        gpus=tuple(range(len(gpu_rows))),
        matrix=matrix,
        nics=nics,
        nic_matrix=nic_matrix,
        cpu_affinity=cpu,
        numa_affinity=numa,
        gpu_numa_id=gnid,
        warnings=tuple(warnings),
        source=source,
    )
