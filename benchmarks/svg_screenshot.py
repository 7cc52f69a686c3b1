#!/usr/bin/env python3
"""Open ``slurm-topo show --svg`` pictures in a real browser (headless Chromium) and check the screenshots.

Renders SVGs with the command itself — the captured Slurm 22.05 fleet with its live node states
(tests/fixtures/real/slurm-22.05) and synthetic fleets of 30, 422 and 10 000 nodes with seeded states
(idle, allocated, drained, MIXED with GPUs left) — then has
Chromium screenshot each one and checks every PNG: the size asked for, and not blank (the legend colours
and more than a handful of distinct colours appear). Prints one line per picture; exits 1 on a failed check.

Needs Debian's ``chromium`` (``apt-get install chromium``). Look at the PNGs yourself: they are written
next to the SVGs in ``--out`` (default: a temporary folder, printed).

    python benchmarks/svg_screenshot.py [--out DIR] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
REAL = ROOT / "tests/fixtures/real/slurm-22.05"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace or colour not in (2, 6):
                raise ValueError(f"{path}: PNG depth {depth}, colour type {colour}, interlace {interlace}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows] if channels == 3 else [_rgb(r) for r in rows]


def _rgb(row: bytes) -> bytes:
    return b"".join(row[i : i + 3] for i in range(0, len(row), 4))


def colours(rows: list[bytes]) -> set[bytes]:
    seen: set[bytes] = set()
    for row in rows[::3]:
        for i in range(0, len(row), 9):
            seen.add(row[i : i + 3])
    return seen


def synthetic(out: Path, n: int) -> tuple[Path, Path]:
    """A fleet of ``n`` nodes (bench_cost's shape) with seeded states: idle, allocated, drained, and MIXED
    nodes with some GPUs left (``GresUsed``), as ``scontrol show node -o`` prints them."""
    from bench_cost import fleet_yaml, make_fleet

    inv = make_fleet(n)
    rng = random.Random(7)
    lines = []
    for node in inv.nodes:
        g = node.gpus or 0
        x = rng.random()
        if x < 0.45:
            state, used = "ALLOCATED", g
        elif x < 0.5:
            state, used = "IDLE+DRAIN", 0
        elif x < 0.65 and g > 1:
            state, used = "MIXED", rng.randint(1, g - 1)
        else:
            state, used = "IDLE", 0
        idx = f"0-{used - 1}" if used else "N/A"
        lines.append(f"NodeName={node.name} State={state} Gres=gpu:{g} GresUsed=gpu:{used}(IDX:{idx})")
    (out / f"fleet{n}.yaml").write_text(fleet_yaml(n))
    (out / f"nodes{n}.txt").write_text("\n".join(lines) + "\n")
    return out / f"fleet{n}.yaml", out / f"nodes{n}.txt"


def svg_height(svg: Path) -> int:
    head = svg.read_text()[:400]
    return int(head.split("height='", 1)[1].split("'", 1)[0])


def shoot(chromium: str, svg: Path, png: Path, height: int) -> None:
    argv = [chromium, *FLAGS, f"--window-size=1240,{height}", f"--screenshot={png}", svg.as_uri()]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="Folder for the SVGs and PNGs (default: a new temporary folder).")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--max-height", type=int, default=4000, help="Screenshot at most this many pixels high.")
    ap.add_argument("--results", help="Also write the lines as Markdown to this file (with the command).")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="slurm-topo-svg-"))
    out.mkdir(parents=True, exist_ok=True)
    cases = [("real-22.05", REAL / "inventory.yaml", REAL / "scontrol-show-node-o.txt")]
    for n in (30, 422, 10_000):
        cases.append((f"synthetic-{n}", *synthetic(out, n)))
    failed = 0
    report: list[str] = []
    for name, inventory, nodes in cases:
        svg, png = out / f"{name}.svg", out / f"{name}.png"
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "slurm_topo", "show", "-i", str(inventory), "--nodes-from", str(nodes),
             "--svg", str(svg)],
            check=True, capture_output=True, timeout=300, cwd=ROOT,
        )  # fmt: skip
        rendered = time.perf_counter() - t0
        full = svg_height(svg)
        height = min(full, args.max_height)
        shoot(args.chromium, svg, png, height)
        width, got_height, rows = read_png(png)
        seen = colours(rows)
        legend = {bytes.fromhex(c) for c in ("2b8a3e", "1c5fb8", "e8590c")}
        if name != "real-22.05":
            legend.add(bytes.fromhex("94d82d"))  # partly free: MIXED nodes with GPUs left
        ok = width == 1240 and got_height == height and len(seen) > 8 and legend <= seen
        failed += not ok
        report.append(
            f"{'ok  ' if ok else 'FAIL'} {name}: svg {svg.stat().st_size // 1024} KiB in {rendered:.2f} s "
            f"(show, end to end), {full} px high; png {width}x{got_height}"
            f"{' (the top)' if got_height < full else ''}, {len(seen)} colours sampled, "
            f"legend colours {'all' if legend <= seen else 'missing'}: {png}"
        )
        print(report[-1])
    if args.results:
        version = subprocess.run([args.chromium, "--version"], capture_output=True, text=True, check=False)
        Path(args.results).write_text(
            "# SVG picture in a real browser\n\n"
            f"Command: `python benchmarks/svg_screenshot.py {' '.join(sys.argv[1:])}`\n\n"
            f"Browser: {version.stdout.strip() or args.chromium}, headless; "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}.\n\n"
            + "".join(f"- {line.split(': ' + str(out))[0]}\n" for line in report)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
