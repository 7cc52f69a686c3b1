"""The nccl-tests/rccl-tests and perftest parsers (slurm_topo/probes/nccl_tests.py, perftest.py) and
``slurm-topo probe parse``: every real output of tests/fixtures/real/probes/ (INDEX.md) read with figures
checked against numbers read off the files by eye, the published anchors of INDEX.md, each of its traps, and
property tests over tables printed with the tools' own printf formats (prefixes, noise, units) and over
corrupted ones, which must be refused with a reason and never give a number from the wrong column."""

# The tools' own printf formats are kept as their C source has them:
# ruff: noqa: UP031
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import error_line, invoke

from slurm_topo.core.errors import ParseError
from slurm_topo.probes.nccl_tests import NcclTable, parse_nccl_tests, split_lines
from slurm_topo.probes.perftest import BwRow, LatRow, PerftestTable, parse_perftest

PROBES = Path(__file__).resolve().parent / "fixtures" / "real" / "probes"


def text_of(rel: str) -> str:
    return (PROBES / rel).read_text(encoding="utf-8")


def nccl(rel: str) -> NcclTable:
    tables = parse_nccl_tests(text_of(rel), rel)
    assert len(tables) == 1 and parse_perftest(text_of(rel), rel) == ()
    return tables[0]


def perf(rel: str) -> PerftestTable:
    tables = parse_perftest(text_of(rel), rel)
    assert len(tables) == 1 and parse_nccl_tests(text_of(rel), rel) == ()
    return tables[0]


def by_size(t: NcclTable, nbytes: int) -> tuple[float, float, float, float, int | None, int | None]:
    """(o-o-p algbw, o-o-p busbw, in-place algbw, in-place busbw, o-o-p #wrong, in-place #wrong)."""
    (row,) = [r for r in t.rows if r.bytes == nbytes]
    o, i = row.out_of_place, row.in_place
    assert o is not None and i is not None
    return (o.algbw_gbs, o.busbw_gbs, i.algbw_gbs, i.busbw_gbs, o.wrong, i.wrong)


# ---- every real nccl-tests/rccl-tests output: values read off the file by eye

# file: (tool, collective, ranks, rows, {size: (algbw, busbw, in-place algbw, in-place busbw, wrong, wrong)})
NCCL_FILES: dict[str, tuple[str, str | None, int | None, int, dict[int, tuple[object, ...]]]] = {
    "all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt": (
        "nccl-tests",
        None,
        8,
        6,
        {
            134217728: (218.85, 382.99, 218.48, 382.34, 0, 0),
            4294967296: (270.63, 473.60, 272.30, 476.53, 0, 0),
        },
    ),
    "all_reduce_perf/h100-16gpu-2node-ib-srun-label-validation0-NA-nccltests-issue290.txt": (
        "nccl-tests",
        None,
        16,
        11,
        {
            8388608: (38.96, 73.04, 46.60, 87.38, None, None),
            8589934592: (82.97, 155.57, 82.96, 155.56, None, None),
        },
    ),
    "all_reduce_perf/h100-16gpu-2node-ib-ring-srun-label-starts-at-using-devices-nccltests-issue290.txt": (
        "nccl-tests",
        None,
        16,
        11,
        {
            536870912: (46.45, 87.10, 46.44, 87.07, None, None),
            8589934592: (47.95, 89.90, 47.68, 89.40, None, None),
        },
    ),
    "all_reduce_perf/h100-16gpu-2node-ib-ndr-mpirun-xpmem-warning-interleaved-nccltests-issue309.txt": (
        "nccl-tests",
        "all_reduce",
        16,
        32,
        {
            8: (0.00, 0.00, 0.00, 0.00, 0, 0),
            1048576: (14.58, 27.33, 14.67, 27.51, 0, 0),
            17179869184: (250.24, 469.21, 250.19, 469.10, 0, 0),
        },
    ),
    "all_reduce_perf/h100-16gpu-2node-roce-oci-bm-gpu-h100-8-1G-16G-prompt-lines.txt": (
        "nccl-tests",
        "all_reduce",
        16,
        5,
        {
            1073741824: (238.02, 446.28, 237.50, 445.32, 0, 0),
            17179869184: (247.77, 464.57, 247.89, 464.79, 0, 0),
        },
    ),
    "all_reduce_perf/a100-16gpu-2node-roce-oci-bm-gpu4-8-single-size-10G-cmdline-mismatch.txt": (
        "nccl-tests",
        "all_reduce",
        16,
        1,
        {10737418240: (118.87, 222.88, 116.78, 218.96, 0, 0)},
    ),
    "all_reduce_perf/"
    "h100-2rank-2node-roce-400g-single-nic-nccl-debug-info-interleaved-linear-step-raw-log.txt": (
        "nccl-tests",
        None,
        2,
        13,
        {
            1073741824: (15.12, 15.12, 15.13, 15.13, 0, 0),
            16106127360: (15.01, 15.01, 15.03, 15.03, 0, 0),
            26843545600: (14.97, 14.97, 15.00, 15.00, 0, 0),
        },
    ),
    "all_reduce_perf/h100-p5-1node-efa-mpirun-tag-output-prefix-elided-rows-aws-do-eks.txt": (
        "nccl-tests",
        None,
        None,
        1,
        {2147483648: (267.77, 468.60, 267.78, 468.62, 0, 0)},
    ),
    "all_reduce_perf/v100-azure-nd40rs-v2-2node-ib-old-format-no-preamble-nccl-info-line.txt": (
        "nccl-tests",
        None,
        None,
        9,
        {
            33554432: (7.64, 14.32, 7.65, 14.35, None, None),
            8589934592: (8.70, 16.31, 8.70, 16.32, None, None),
        },
    ),
    "all_reduce_perf/a100-azure-nd96amsr-v4-2node-ib-hdr-old-format-no-preamble-nccl-info-line.txt": (
        "nccl-tests",
        None,
        None,
        9,
        {
            268435456: (89.60, 167.99, 87.82, 164.66, None, None),
            8589934592: (100.22, 187.91, 100.98, 189.33, None, None),
        },
    ),
    "all_reduce_perf/a100-40gb-8gpu-1node-g8-old-format-error-col-validation0-NA-superbench.txt": (
        "nccl-tests",
        None,
        8,
        34,
        {
            4194304: (37.44, 65.52, 38.06, 66.60, None, None),
            8589934592: (134.44, 235.26, 134.30, 235.03, None, None),
        },
    ),
    "all_reduce_perf/gb200-nvl72-72gpu-single-rack-mnnvl-rank-list-truncated-to-last-rank-coreweave.txt": (
        "nccl-tests",
        None,
        None,
        5,
        {
            4294967296: (425.49, 839.16, 423.54, 835.32, 0, 0),
            8589934592: (423.16, 834.57, 429.37, 846.82, 0, 0),
        },
    ),
    "all_reduce_perf/rtx2080ti-2gpu-pcie-pix-no-p2p-g2-autodl-prompt.txt": (
        "nccl-tests",
        "all_reduce",
        2,
        28,
        {
            65536: (1.63, 1.63, 1.64, 1.64, 0, 0),
            1073741824: (4.00, 4.00, 4.00, 4.00, 0, 0),
        },
    ),
    "all_gather_perf/a100-40gb-8gpu-1node-g8-oldest-format-no-redop-col-nccl-info-line-superbench.txt": (
        "nccl-tests",
        None,
        8,
        34,
        {
            32: (0.00, 0.00, 0.00, 0.00, None, None),
            16777216: (100.03, 87.52, 101.94, 89.20, None, None),
            8589934592: (255.31, 223.39, 262.94, 230.07, None, None),
        },
    ),
    "all_gather_perf/mi250x-32rank-4node-rccl-slingshot-srun-label-no-header-rccl-issue1490.txt": (
        "rccl-tests",
        None,
        None,
        17,
        {
            2097152: (0.03, 0.03, 0.03, 0.03, 0, 0),
            8388608: (0.12, 0.11, 0.33, 0.32, 0, 0),
            4294967296: (95.65, 92.66, 95.73, 92.74, 0, 0),
        },
    ),
    "all_gather_perf/rtx2080ti-2gpu-pcie-no-p2p-g2-size0-rows-autodl-prompt.txt": (
        "nccl-tests",
        "all_gather",
        2,
        28,
        {
            32: (0.00, 0.00, 0.00, 0.00, 0, 0),
            1073741824: (7.58, 3.79, 7.69, 3.84, 0, 0),
        },
    ),
    "sendrecv_perf/"
    "h100-2node-1gpu-each-roce-400g-nccl-debug-info-interleaved-algo-matrix-linear-step-raw-log.txt": (
        "nccl-tests",
        None,
        2,
        13,
        {
            1073741824: (13.96, 13.96, 13.95, 13.95, 0, None),
            26843545600: (13.96, 13.96, 13.97, 13.97, 0, None),
        },
    ),
    "sendrecv_perf/a100-8gpu-1node-nvlink-g8-no-preamble-inplace-NA.txt": (
        "nccl-tests",
        "sendrecv",
        None,
        4,
        {
            134217728: (110.81, 110.81, 110.76, 110.76, 0, None),
            1073741824: (195.10, 195.10, 195.56, 195.56, 0, None),
        },
    ),
}


def test_every_real_nccl_tests_fixture_is_listed_here() -> None:
    found = {str(p.relative_to(PROBES)) for p in PROBES.glob("*_perf/*.txt")}
    assert found == set(NCCL_FILES)


@pytest.mark.parametrize("rel", sorted(NCCL_FILES))
def test_real_nccl_tests_output(rel: str) -> None:
    tool, collective, ranks, nrows, rows = NCCL_FILES[rel]
    t = nccl(rel)
    assert (t.tool, t.collective, t.ranks, len(t.rows)) == (tool, collective, ranks, nrows)
    assert t.rejected == ()
    for size, want in rows.items():
        assert by_size(t, size) == pytest.approx(want)


# ---- published figures of INDEX.md


def test_published_anchor_figures_nccl() -> None:
    ar = "all_reduce_perf/"
    assert by_size(nccl(ar + "h100-8gpu-1node-g8-nvls-nccltests-issue290.txt"), 4 << 30)[:4] == (
        270.63,
        473.60,
        272.30,
        476.53,
    )
    p5 = nccl(ar + "h100-p5-1node-efa-mpirun-tag-output-prefix-elided-rows-aws-do-eks.txt")
    assert by_size(p5, 2 << 30)[1] == 468.60
    xe = nccl(ar + "h100-16gpu-2node-ib-ndr-mpirun-xpmem-warning-interleaved-nccltests-issue309.txt")
    assert by_size(xe, 16 << 30)[1] == 469.21 and xe.avg_busbw_gbs == 139.56
    na = nccl(ar + "h100-16gpu-2node-ib-srun-label-validation0-NA-nccltests-issue290.txt")
    assert by_size(na, 8 << 30)[1] == 155.57
    ring = nccl(ar + "h100-16gpu-2node-ib-ring-srun-label-starts-at-using-devices-nccltests-issue290.txt")
    assert by_size(ring, 8 << 30)[:2] == (47.95, 89.90)
    assert (
        by_size(nccl(ar + "h100-16gpu-2node-roce-oci-bm-gpu-h100-8-1G-16G-prompt-lines.txt"), 16 << 30)[1]
        == 464.57
    )
    a100 = nccl(ar + "a100-40gb-8gpu-1node-g8-old-format-error-col-validation0-NA-superbench.txt")
    assert by_size(a100, 8 << 30)[:2] == (134.44, 235.26)
    ag = nccl(
        "all_gather_perf/a100-40gb-8gpu-1node-g8-oldest-format-no-redop-col-nccl-info-line-superbench.txt"
    )
    assert by_size(ag, 8 << 30)[1] == 223.39
    sr = nccl("sendrecv_perf/a100-8gpu-1node-nvlink-g8-no-preamble-inplace-NA.txt")
    assert by_size(sr, 1 << 30)[1] == 195.10
    az = nccl(ar + "a100-azure-nd96amsr-v4-2node-ib-hdr-old-format-no-preamble-nccl-info-line.txt")
    assert by_size(az, 8 << 30)[1] == 187.91
    oci = nccl(ar + "a100-16gpu-2node-roce-oci-bm-gpu4-8-single-size-10G-cmdline-mismatch.txt")
    assert by_size(oci, 10 << 30)[1] == 222.88
    v100 = nccl(ar + "v100-azure-nd40rs-v2-2node-ib-old-format-no-preamble-nccl-info-line.txt")
    assert by_size(v100, 8 << 30)[1] == 16.31
    gb = nccl(ar + "gb200-nvl72-72gpu-single-rack-mnnvl-rank-list-truncated-to-last-rank-coreweave.txt")
    assert by_size(gb, 8 << 30)[1] == 834.57 and by_size(gb, 4 << 30)[1] == 839.16
    pair = nccl(
        "sendrecv_perf/h100-2node-1gpu-each-roce-400g-nccl-debug-info-interleaved-algo-matrix-linear-step-raw-log.txt"
    )
    assert {r.out_of_place.busbw_gbs for r in pair.rows if r.out_of_place} <= {
        13.93,
        13.94,
        13.95,
        13.96,
        13.97,
    }
    assert by_size(pair, 1 << 30)[1] == 13.96
    two = nccl(
        ar + "h100-2rank-2node-roce-400g-single-nic-nccl-debug-info-interleaved-linear-step-raw-log.txt"
    )
    assert all(14.97 <= r.out_of_place.busbw_gbs <= 15.18 for r in two.rows if r.out_of_place)
    mi = nccl("all_gather_perf/mi250x-32rank-4node-rccl-slingshot-srun-label-no-header-rccl-issue1490.txt")
    assert by_size(mi, 4 << 30)[1] == 92.66
    rtx = nccl(ar + "rtx2080ti-2gpu-pcie-pix-no-p2p-g2-autodl-prompt.txt")
    assert all(r.out_of_place and r.out_of_place.busbw_gbs == 4.00 for r in rtx.rows if r.bytes >= 128 << 20)


# ---- every real perftest output

BW_FILES: dict[str, tuple[str, str | None, bool, str, int, dict[int, tuple[float | None, float]]]] = {
    # file: (test, side, bidirectional, units, rows, {bytes: (peak, average) as printed, in the file's unit})
    "ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt": (
        "ib_write_bw",
        "client",
        False,
        "MB/sec",
        23,
        {2: (4.96, 4.94), 4096: (12938.64, 10281.32), 8388608: (23326.82, 23317.65)},
    ),
    "ib_write_bw/cx6-ib-server-a-all-sizes-mbsec-prints-only-last-size.txt": (
        "ib_write_bw",
        "server",
        False,
        "MB/sec",
        1,
        {8388608: (23326.82, 23317.65)},
    ),
    "ib_write_bw/dgx-spark-cx7-rdma-cm-R-q4-report-gbits-force-link-ib-no-rkey-fields.txt": (
        "ib_write_bw",
        "client",
        False,
        "Gb/sec",
        1,
        {65536: (111.72, 111.71)},
    ),
    "ib_write_bw/gb200-cx7-roce-400g-use-cuda-dmabuf-report-gbits-bw-min-6th-column-tabs.txt": (
        "ib_write_bw",
        None,
        False,
        "Gb/sec",
        1,
        {65536: (368.67, 368.48)},
    ),
    "ib_write_bw/roce-post-list-8B-duration-60s-gbsec-partial-banner-perftest-issue273.txt": (
        "ib_write_bw",
        "client",
        False,
        "Gb/sec",
        1,
        {8: (None, 0.48)},
    ),
    "ib_write_bw/"
    "rocm-d2d-bidirectional-b-a-report-gbits-use-rocm-localhost-rst-indented3-sanitized-devname.txt": (
        "ib_write_bw",
        "client",
        True,
        "Gb/sec",
        23,
        {2: (0.142947, 0.012281), 256: (17.57, 16.32), 8388608: (204.59, 204.59)},
    ),
    "ib_write_bw/soft-roce-rxe-default-no-flags-65536-mbsec-ethernet-gid-lines.txt": (
        "ib_write_bw",
        "client",
        False,
        "MB/sec",
        1,
        {65536: (103.71, 90.04)},
    ),
    "ib_send_bw/h100-nebius-ndr-ib-send-bw-65536-gbsec-ib-no-gid-lines.txt": (
        "ib_send_bw",
        "client",
        False,
        "Gb/sec",
        1,
        {65536: (357.12, 353.53)},
    ),
}
LAT_FILES: dict[str, tuple[str, tuple[float, ...]]] = {
    # file: (test, (bytes, iterations, t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9%) as printed)
    "ib_write_lat/dgx-spark-cx7-rdma-cm-force-link-ib-single-size-2B.txt": (
        "ib_write_lat",
        (2, 1000, 1.42, 1.93, 1.47, 1.47, 0.00, 1.57, 1.93),
    ),
    "ib_send_lat/soft-roce-rxe-default-2B-ethernet-gid-lines.txt": (
        "ib_send_lat",
        (2, 1000, 16.55, 59.50, 21.27, 21.69, 2.18, 31.37, 59.50),
    ),
}
UNIT = {"MB/sec": 1048576 / 1e9, "Gb/sec": 1 / 8}


def test_every_real_perftest_fixture_is_listed_here() -> None:
    found = {str(p.relative_to(PROBES)) for p in PROBES.glob("ib_*/*.txt")}
    assert found == set(BW_FILES) | set(LAT_FILES)


@pytest.mark.parametrize("rel", sorted(BW_FILES))
def test_real_perftest_bw_output(rel: str) -> None:
    test, side, bi, units, nrows, rows = BW_FILES[rel]
    t = perf(rel)
    assert (t.test, t.kind, t.side, t.bidirectional, t.units, len(t.rows)) == (
        test,
        "bw",
        side,
        bi,
        units,
        nrows,
    )
    assert t.rejected == ()
    got = {r.bytes: r for r in t.rows if isinstance(r, BwRow)}
    for size, (peak, avg) in rows.items():
        row = got[size]
        assert row.bw_average_gbs == pytest.approx(avg * UNIT[units])
        if peak is None:
            assert row.bw_peak_gbs is None
        else:
            assert row.bw_peak_gbs == pytest.approx(peak * UNIT[units])


@pytest.mark.parametrize("rel", sorted(LAT_FILES))
def test_real_perftest_lat_output(rel: str) -> None:
    test, want = LAT_FILES[rel]
    t = perf(rel)
    assert (t.test, t.kind, t.side) == (test, "lat", "client")
    (row,) = t.rows
    assert isinstance(row, LatRow)
    got = (row.bytes, row.iterations, row.t_min_us, row.t_max_us, row.t_typical_us, row.t_avg_us)
    got += (row.t_stdev_us, row.p99_us, row.p99_9_us)  # type: ignore[assignment]
    assert got == want


def test_published_anchor_figures_perftest() -> None:
    (send,) = perf("ib_send_bw/h100-nebius-ndr-ib-send-bw-65536-gbsec-ib-no-gid-lines.txt").rows
    assert isinstance(send, BwRow) and send.bw_average_gbs * 8 == pytest.approx(353.53)
    assert send.bw_peak_gbs is not None and send.bw_peak_gbs * 8 == pytest.approx(357.12)
    (gb,) = perf(
        "ib_write_bw/gb200-cx7-roce-400g-use-cuda-dmabuf-report-gbits-bw-min-6th-column-tabs.txt"
    ).rows
    assert isinstance(gb, BwRow) and gb.bw_average_gbs * 8 == pytest.approx(368.48) and gb.bw_min_gbs == 0.0
    cx6 = perf("ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt")
    last = cx6.rows[-1]
    assert isinstance(last, BwRow) and last.bw_average_gbs * 8 == pytest.approx(195.6, abs=0.05)
    (spark,) = perf(
        "ib_write_bw/dgx-spark-cx7-rdma-cm-R-q4-report-gbits-force-link-ib-no-rkey-fields.txt"
    ).rows
    assert isinstance(spark, BwRow) and spark.bw_average_gbs * 8 == pytest.approx(111.71)
    rocm = perf(
        "ib_write_bw/rocm-d2d-bidirectional-b-a-report-gbits-use-rocm-localhost-rst-indented3-sanitized-devname.txt"
    )
    top = rocm.rows[-1]
    assert rocm.bidirectional and isinstance(top, BwRow) and top.bw_average_gbs * 8 == pytest.approx(204.59)
    (lat,) = perf("ib_write_lat/dgx-spark-cx7-rdma-cm-force-link-ib-single-size-2B.txt").rows
    assert isinstance(lat, LatRow) and lat.t_typical_us == 1.47


# ---- the traps of INDEX.md, one by one


def test_trap_line_prefixes_are_stripped() -> None:
    lines = split_lines(" 0: # Using devices\n 0:\n[1,0]<stdout>:  2147483648  5\n12: x\n   $ cmd\n")
    assert [(ln.label, ln.body) for ln in lines] == [
        ("0", "# Using devices"),
        ("0", ""),
        ("1,0", " 2147483648  5"),
        ("12", "x"),
        (None, "   $ cmd"),
    ]
    # a row from another task than the table's is refused, not mixed in
    text = text_of("all_reduce_perf/h100-p5-1node-efa-mpirun-tag-output-prefix-elided-rows-aws-do-eks.txt")
    row = "  1073741824     268435456     float     sum      -1   4010.0  267.77  468.60      0"
    row += "   4010.0  267.77  468.60      0"
    text = text.replace(
        "[1,0]<stdout>:# Avg",
        f"[1,3]<stdout>:{row}\n[1,0]<stdout>:# Avg",
    )
    (t,) = parse_nccl_tests(text)
    assert len(t.rows) == 1 and "from task 1,3" in t.rejected[0].reason


def test_trap_root_prompt_and_rst_indentation() -> None:
    t = nccl("all_reduce_perf/rtx2080ti-2gpu-pcie-pix-no-p2p-g2-autodl-prompt.txt")
    assert t.collective == "all_reduce" and t.n_gpus == 2
    p = perf(
        "ib_write_bw/rocm-d2d-bidirectional-b-a-report-gbits-use-rocm-localhost-rst-indented3-sanitized-devname.txt"
    )
    assert p.device == "<RDMA-NIC-2>" and p.link_type == "Ethernet"


def test_trap_noise_between_header_and_rows() -> None:
    raw = nccl(
        "sendrecv_perf/h100-2node-1gpu-each-roce-400g-nccl-debug-info-interleaved-algo-matrix-linear-step-raw-log.txt"
    )
    assert raw.ranks == 2 and raw.nccl_version == "2.26.2+cuda" and raw.rows[0].line > raw.header_line + 3
    xp = nccl(
        "all_reduce_perf/h100-16gpu-2node-ib-ndr-mpirun-xpmem-warning-interleaved-nccltests-issue309.txt"
    )
    assert xp.nccl_version == "2.26.2+cuda12.8" and xp.hosts == ("bm-h100-01", "bm-h100-02")
    cx6 = perf("ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt")
    assert [r.bytes for r in cx6.rows] == [2 << k for k in range(23)]


def test_trap_header_variants() -> None:
    old = nccl("all_reduce_perf/v100-azure-nd40rs-v2-2node-ib-old-format-no-preamble-nccl-info-line.txt")
    assert "root" not in old.columns and "error" in old.columns
    assert old.rows[0].root is None and old.rows[0].redop == "sum"
    assert old.rows[0].out_of_place is not None and old.rows[0].out_of_place.error == 4e-07
    oldest = nccl(
        "all_gather_perf/a100-40gb-8gpu-1node-g8-oldest-format-no-redop-col-nccl-info-line-superbench.txt"
    )
    assert "redop" not in oldest.columns and oldest.rows[0].redop is None
    assert oldest.iters == 20 and oldest.validation == 0
    new = nccl("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt")
    assert new.columns[-1] == "#wrong" and new.iters == 2
    # the column line with its last #wrong missing and rows of 12 fields
    text = text_of("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt").splitlines()
    text = [ln.rsplit(" ", 1)[0] if i >= 12 and not ln.startswith("#") else ln for i, ln in enumerate(text)]
    text[13] = text[13].rsplit("#wrong", 1)[0]
    (t,) = parse_nccl_tests("\n".join(text))
    assert len(t.rows) == 6 and t.rows[-1].in_place is not None and t.rows[-1].in_place.wrong is None
    assert t.rows[-1].in_place.busbw_gbs == 476.53


def test_trap_rank_list_truncated_and_no_preamble() -> None:
    gb = nccl(
        "all_reduce_perf/gb200-nvl72-72gpu-single-rack-mnnvl-rank-list-truncated-to-last-rank-coreweave.txt"
    )
    assert gb.ranks is None and gb.ranks_at_least == 72 and "incomplete" in gb.notes[0]
    ring = nccl(
        "all_reduce_perf/h100-16gpu-2node-ib-ring-srun-label-starts-at-using-devices-nccltests-issue290.txt"
    )
    assert ring.ranks == 16 and ring.n_gpus is None
    mi = nccl("all_gather_perf/mi250x-32rank-4node-rccl-slingshot-srun-label-no-header-rccl-issue1490.txt")
    assert "out-of-place first" in mi.notes[0]


def test_trap_values_na_wrong_size0() -> None:
    sr = nccl("sendrecv_perf/a100-8gpu-1node-nvlink-g8-no-preamble-inplace-NA.txt")
    assert all(
        r.in_place and r.in_place.wrong is None and r.out_of_place and r.out_of_place.wrong == 0
        for r in sr.rows
    )
    ag = nccl("all_gather_perf/rtx2080ti-2gpu-pcie-no-p2p-g2-size0-rows-autodl-prompt.txt")
    assert [r.bytes for r in ag.rows[:3]] == [0, 0, 32]
    text = text_of("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt")
    text = text.replace("473.60      0", "473.60     12")
    (t,) = parse_nccl_tests(text)
    assert t.rows[-1].out_of_place is not None and t.rows[-1].out_of_place.wrong == 12


def test_trap_avg_bus_bandwidth_is_not_a_link_figure() -> None:
    xp = nccl(
        "all_reduce_perf/h100-16gpu-2node-ib-ndr-mpirun-xpmem-warning-interleaved-nccltests-issue309.txt"
    )
    assert xp.avg_busbw_gbs == 139.56 and by_size(xp, 16 << 30)[1] == 469.21
    p5 = nccl("all_reduce_perf/h100-p5-1node-efa-mpirun-tag-output-prefix-elided-rows-aws-do-eks.txt")
    assert p5.avg_busbw_gbs == 114.556 and by_size(p5, 2 << 30)[1] == 468.60


def test_trap_command_line_is_not_the_output() -> None:
    oci = nccl("all_reduce_perf/a100-16gpu-2node-roce-oci-bm-gpu4-8-single-size-10G-cmdline-mismatch.txt")
    assert oci.ranks == 16 and oci.n_gpus == 1 and [r.bytes for r in oci.rows] == [10737418240]


def test_trap_perftest_banner_units_sides() -> None:
    server = perf("ib_write_bw/cx6-ib-server-a-all-sizes-mbsec-prints-only-last-size.txt")
    assert server.side == "server" and "only the last size" in server.notes[0]
    spark = perf("ib_write_bw/dgx-spark-cx7-rdma-cm-R-q4-report-gbits-force-link-ib-no-rkey-fields.txt")
    assert spark.qps == 4 and spark.link_type == "IB"
    post = perf("ib_write_bw/roce-post-list-8B-duration-60s-gbsec-partial-banner-perftest-issue273.txt")
    assert post.title == "RDMA_Write Post List BW Test" and "not measured" in post.notes[0]
    assert perf("ib_send_lat/soft-roce-rxe-default-2B-ethernet-gid-lines.txt").title == "Send Latency Test"
    # MB/sec is 2^20 B/s: 23317.65 MB/sec is 195.6 Gb/s, not 186.5
    cx6 = perf("ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt")
    assert cx6.rows[-1].bw_average_gbs == pytest.approx(23317.65 * 1048576 / 1e9)  # type: ignore[union-attr]


# ---- the tools' printf formats, generated

NOISE = st.sampled_from(
    [
        "host:123:456 [0] NCCL INFO Channel 00/02 : 0 1",
        "host:123:456 [1] NCCL WARN NET/IB : something",
        "[host:29250] 15 more processes have sent help message help-btl-vader.txt / xpmem-make-failed",
        "[1700000000.123456] [host:1:0]  ucx  WARN  some warning",
        "    AllReduce |        1         2         1   |             0              1",
        "NCCL version 2.26.2+cuda12.8",
        "Warning: Permanently added 'node2' (ED25519) to the list of known hosts.",
        "Conflicting CPU frequency values detected: 3393.665000 != 1500.000000. CPU Frequency is not max.",
        "libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so'",
        "",
    ]
)
PREFIX = st.sampled_from(["", " 0: ", "0: ", "[1,0]<stdout>:", "[1,0]<stdout>: ", "   "])


def _g(value: float, width: int) -> str:
    """nccl-tests' getFloatStr."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        s = fmt % value
        if len(s) <= width:
            return s
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


@st.composite
def nccl_table(draw: st.DrawFn) -> tuple[str, list[tuple[int, float, float, float, float, int | None]]]:
    """A table as nccl-tests 2.13+ prints it (util.cu's writeResultHeader and writeBenchmarkLine*):
    rows of (size, o-o-p algbw, busbw, in-place algbw, busbw, #wrong or None)."""
    prefix = draw(PREFIX)
    cputime = draw(st.booleans())
    tname = "cputime" if cputime else "time"
    factor = draw(st.sampled_from([1.0, 2 * 15 / 16, 7 / 8]))
    out = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg "
        "iters: 1 validation: 1 graph: 0",
        "#",
        "#  Rank  0 Group  0 Pid  12 on      node1 device  0 [0000:19:00] NVIDIA H100 80GB HBM3",
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
        % ("", "", "", "", ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
        % (
            "size",
            "count",
            "type",
            "redop",
            "root",
            tname,
            "algbw",
            "busbw",
            "#wrong",
            tname,
            "algbw",
            "busbw",
            "#wrong",
        ),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s "
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
    ]
    want = []
    for k in draw(st.lists(st.integers(0, 34), min_size=1, max_size=8, unique=True)):
        size = 1 << k
        cells = []
        halves = []
        validation = draw(st.booleans())
        for _ in range(2):
            t = draw(st.floats(1.0, 5e6))
            alg = size / (t * 1e3)
            time_s, alg_s, bus_s = _g(t, 7), _g(alg, 6), _g(alg * factor, 6)
            if cputime:
                time_s = _g(draw(st.floats(1.0, 5e6)), 7)
            wrong = draw(st.integers(0, 10**7)) if validation else None
            wrong_s = "%6g" % wrong if wrong is not None else "   N/A"
            cells.append("  %7s  %6s  %6s  %s" % (time_s, alg_s, bus_s, wrong_s))
            halves += [float(alg_s), float(bus_s)]
            last_wrong = None if wrong is None else int(float("%6g" % wrong))
        row = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1) + "".join(cells)
        if draw(st.booleans()):
            out.append(draw(NOISE))
        out.append(row)
        want.append((size, halves[0], halves[1], halves[2], halves[3], last_wrong))
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 12.5 ", "#"]
    return "\n".join(prefix + ln if not ln.startswith("host:") else ln for ln in out) + "\n", want


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(nccl_table())
def test_generated_nccl_tests_tables_parse_to_exactly_their_numbers(
    case: tuple[str, list[tuple[int, float, float, float, float, int | None]]],
) -> None:
    text, want = case
    (t,) = parse_nccl_tests(text)
    assert t.rejected == () and t.avg_busbw_gbs == 12.5 and t.ranks == 1
    got = []
    for r in t.rows:
        assert r.out_of_place is not None and r.in_place is not None
        got.append(
            (
                r.bytes,
                r.out_of_place.algbw_gbs,
                r.out_of_place.busbw_gbs,
                r.in_place.algbw_gbs,
                r.in_place.busbw_gbs,
                r.in_place.wrong,
            )
        )
    assert got == want


@st.composite
def perftest_table(draw: st.DrawFn) -> tuple[str, str, list[tuple[int, int, float | None, float]]]:
    """A bandwidth table as perftest prints it (REPORT_FMT / REPORT_FMT_EXT, RESULT_FMT / _G, banner)."""
    unit = draw(st.sampled_from(["MB/sec", "MiB/sec", "Gb/sec"]))
    per = {"MB/sec": 1048576.0, "MiB/sec": 1048576.0, "Gb/sec": 1.25e8}[unit]
    prefix = draw(PREFIX)
    bi = draw(st.booleans())
    rule = "-" * 87
    out = [
        rule,
        "                    RDMA_Write %sBW Test" % ("Bidirectional " if bi else ""),
        " Dual-port       : OFF\t\tDevice         : mlx5_0",
        " TX depth        : 128",
        " Link type       : IB",
        rule,
        " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]" % (unit, unit),
    ]
    want = []
    for k in draw(st.lists(st.integers(1, 23), min_size=1, max_size=6, unique=True)):
        size = 1 << k
        iters = draw(st.integers(1, 10**8))
        rate = draw(st.floats(1e-3, 20.0))  # Mpps
        avg = rate * 1e6 * size / per
        peak = draw(st.sampled_from([0.0, avg * 1.01]))
        ext = unit == "Gb/sec" and avg < 0.1
        if ext:
            line = " %-7lu    %d           %-7.6f            %-7.6f            %-7.6f" % (
                size,
                iters,
                peak,
                avg,
                rate,
            )
            pk, av = float("%.6f" % peak), float("%.6f" % avg)
        else:
            line = " %-7lu    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f" % (
                size,
                iters,
                peak,
                avg,
                rate,
            )
            pk, av = float("%.2f" % peak), float("%.2f" % avg)
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(NOISE))
        out.append(line)
        want.append((size, iters, pk * per / 1e9 if pk else None, av * per / 1e9))
    out.append(rule)
    return "\n".join(prefix + ln for ln in out) + "\n", unit, want


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(perftest_table())
def test_generated_perftest_tables_parse_to_exactly_their_numbers(
    case: tuple[str, str, list[tuple[int, int, float | None, float]]],
) -> None:
    text, unit, want = case
    (t,) = parse_perftest(text)
    assert t.rejected == () and t.units == unit and t.side == "client"
    got = [(r.bytes, r.iterations, r.bw_peak_gbs, r.bw_average_gbs) for r in t.rows if isinstance(r, BwRow)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:2] == w[:2] and g[3] == pytest.approx(w[3], rel=1e-9, abs=1e-9)
        assert (g[2] is None) == (w[2] is None) and (
            g[2] is None or g[2] == pytest.approx(w[2], rel=1e-9, abs=1e-9)
        )


def test_generated_latency_table_in_the_tools_format() -> None:
    text = (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
        + " %-7lu %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
        "\t%-7.2f\t\t%-7.2f \t\t%-7.2f\n" % (8, 1000, 1.5, 9.25, 1.75, 1.8, 0.25, 3.5, 9.0)
    )
    (t,) = parse_perftest(" 0: " + text.replace("\n", "\n 0: "))
    (row,) = t.rows
    assert isinstance(row, LatRow)
    assert (row.t_min_us, row.t_max_us, row.t_typical_us, row.t_avg_us, row.p99_us, row.p99_9_us) == (
        1.5,
        9.25,
        1.75,
        1.8,
        3.5,
        9.0,
    )


# ---- corrupted tables: refused with a reason, never a wrong number


Want = list[tuple[int, float, float, float, float, int | None]]


def body_of(line: str) -> str:
    """A line as the parser sees it, its srun/mpirun prefix taken off."""
    return split_lines(line + "\n")[0].body


@st.composite
def corrupted_nccl(draw: st.DrawFn) -> tuple[str, int, Want]:
    """A good table (of the generator above) with one row corrupted: a field dropped, a field inserted
    (the columns after it shifted), or text in a number field. Returns the text, the corrupted line's
    number and the good rows' numbers."""
    text, want = draw(nccl_table())
    lines = text.splitlines()
    rows = [i for i, ln in enumerate(lines) if (body_of(ln).split() or ["-"])[0].isdigit()]
    k = draw(st.integers(0, len(rows) - 1))
    i = rows[k]
    fields = body_of(lines[i]).split()
    how = draw(st.sampled_from(["drop", "shift", "text"]))
    if how == "drop":  # a column missing
        del fields[draw(st.integers(0, len(fields) - 1))]
    elif how == "shift":  # the fields after one point moved a column right
        j = draw(st.integers(0, len(fields)))
        fields.insert(j, draw(st.sampled_from(["0", "1.00", "float", "N/A", "12345"])))
    else:  # text in a number field
        j = draw(st.sampled_from([0, 1, 4, 5, 6, 7, 9, 10, 11]))
        fields[j] = draw(st.sampled_from(["abc", "1.2.3", "--", "nan", "inf", "12a"]))
    lines[i] = "    ".join(fields)
    return "\n".join(lines) + "\n", i + 1, want[:k] + want[k + 1 :]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted_nccl())
def test_corrupted_nccl_rows_are_refused_with_a_reason(case: tuple[str, int, Want]) -> None:
    text, bad_line, good = case
    try:
        tables = parse_nccl_tests(text)
    except ParseError as exc:  # the only row was the corrupted one
        assert not good and "no row could be read" in str(exc)
        return
    (t,) = tables
    got = [
        (
            r.bytes,
            r.out_of_place.algbw_gbs,
            r.out_of_place.busbw_gbs,
            r.in_place.algbw_gbs,
            r.in_place.busbw_gbs,
        )
        for r in t.rows
        if r.out_of_place and r.in_place
    ]
    assert got == [w[:5] for w in good]  # the good rows, each with its own numbers; never the corrupted one
    corrupted = body_of(text.splitlines()[bad_line - 1])
    if (corrupted.split() or ["-"])[0].lstrip("-").isdigit():  # still a row: refused with a reason
        assert [r.line for r in t.rejected] == [bad_line] and t.rejected[0].reason
    else:  # text where the size was: the line is noise to the parser, and nothing is taken from it
        assert t.rejected == ()


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda s: s.replace("busbw #wrong     time", "busbw #wrong  bogus   time"),
            "unknown column 'bogus'",
        ),
        (
            lambda s: s.replace("(GB/s)  (GB/s)            (us)", "(MB/s)  (GB/s)            (us)"),
            r"not \(GB/s\)",
        ),
        (
            lambda s: s.replace("(us)  (GB/s)  (GB/s)            (us)", "(us)  (GB/s)  (GB/s)"),
            r"'time' is in \(GB/s\)",
        ),
        (lambda s: s.replace("out-of-place                       in-place", "in-place"), "title names 1"),
    ],
)
def test_corrupted_nccl_headers_refuse_the_table(edit: object, reason: str) -> None:
    text = text_of("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt")
    with pytest.raises(ParseError, match=reason):
        parse_nccl_tests(edit(text))  # type: ignore[operator]


def test_shifted_header_and_fields_out_of_their_column_are_refused() -> None:
    text = text_of("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt")
    with pytest.raises(ParseError, match="13 fields where the column line has 12"):  # a header name lost
        parse_nccl_tests(text.replace("redop    root", "redop        "))
    # busbw above twice algbw; algbw that is not size/time; a time of 0 for a non-empty message
    for good, bad, why in [
        ("218.85  382.99", "382.99  218.85", "algbw 382.99 is not size/time"),
        ("4038.8  265.85  465.25", "4038.8  265.85  565.25", "above twice algbw"),
        ("613.3  218.85", "0.00  218.85", "time 0.00 with size 134217728"),
    ]:
        (t,) = parse_nccl_tests(text.replace(good, bad, 1))
        assert len(t.rows) == 5 and why in t.rejected[0].reason, t.rejected


def test_one_column_group_without_title_is_refused() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
        "     8388608       2097152     float     sum      -1    215.3   38.96   73.04    N/A\n"
    )
    with pytest.raises(ParseError, match="cannot tell which"):
        parse_nccl_tests(text)


def test_corrupted_perftest_rows_and_headers_are_refused() -> None:
    rel = "ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt"
    text = text_of(rel)
    # peak and average swapped on one row: average no longer MsgRate x bytes
    bad = text.replace("23326.82            23317.65", "23317.65            23326.82")
    t = parse_perftest(bad)[0]
    assert [r.line for r in t.rejected] == [66] and "MsgRate" in t.rejected[0].reason
    assert len(t.rows) == 22
    # a field missing
    t = parse_perftest(text.replace(" 64         5000             158.46", " 64         158.46"))[0]
    assert "4 fields where the column line has 5" in t.rejected[0].reason
    # text in a number field
    t = parse_perftest(text.replace("21163.79", "21163.7x"))[0]
    assert "'21163.7x' is not a number" in t.rejected[0].reason
    with pytest.raises(ParseError, match="unknown bandwidth unit"):
        parse_perftest(
            text.replace("BW peak[MB/sec]    BW average[MB/sec]", "BW peak[kB/sec]    BW average[kB/sec]")
        )
    with pytest.raises(ParseError, match="unknown column"):
        parse_perftest(text.replace("MsgRate[Mpps]", "Rate[Mpps]"))
    lat = text_of("ib_send_lat/soft-roce-rxe-default-2B-ethernet-gid-lines.txt")
    with pytest.raises(ParseError, match="outside t_min..t_max"):
        parse_perftest(lat.replace("16.55          59.50        21.27", "16.55          21.27        59.50"))


# ---- slurm-topo probe parse


def test_probe_parse_prints_the_rows_and_json() -> None:
    rel = "all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt"
    res = invoke("probe", "parse", str(PROBES / rel))
    assert res.exit_code == 0, res.output
    assert "nccl-tests ?, 8 ranks on 1 host(s)" in res.output
    assert "  4294967296    float       270.63   473.60      0       272.30   476.53      0" in res.output
    doc = json.loads(invoke("probe", "parse", str(PROBES / rel), "--json").output)
    (table,) = doc["tables"]
    assert table["rows"][-1]["out_of_place"]["busbw_gbs"] == 473.60 and table["tool"] == "nccl-tests"
    lat = invoke(
        "probe", "parse", str(PROBES / "ib_write_lat/dgx-spark-cx7-rdma-cm-force-link-ib-single-size-2B.txt")
    )
    assert "t_typical 1.47" in lat.output


def test_probe_parse_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n 2 3 4\n")
    res = invoke("probe", "parse", str(other))
    assert res.exit_code == 2 and error_line(res).startswith(f"{other}: no nccl-tests")
    bad = tmp_path / "bad.txt"
    bad.write_text(
        text_of("all_reduce_perf/h100-8gpu-1node-g8-nvls-nccltests-issue290.txt").replace("(GB/s)", "(MB/s)")
    )
    res = invoke("probe", "parse", str(bad), "--json")
    assert res.exit_code == 2 and res.stdout == "" and error_line(res).startswith(f"{bad}: line 14: ")
