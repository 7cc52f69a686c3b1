"""nvidia-smi topo -m parsing over every real capture in tests/fixtures/real (copied unedited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo.core.errors import ParseError
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


def read(name: str) -> str:
    return (REAL / name).read_text()


def parse(name: str) -> GpuTopology:
    return parse_topo_matrix(read(name), source=name)


# Expected GPU×GPU blocks, read off each fixture by hand ("SOC" written as the normalised "SYS").
MATRICES = [
    pytest.param(
        "topo/2gpu-node-indented-wrapped-legend.txt",
        (
            "X NODE",
            "NODE X",
        ),
        id="indented paste with shifted header and wrapped legend reads NODE pair",
    ),
    pytest.param(
        "topo/a100-2gpu-sys-2nic-della.txt",
        (
            "X SYS",
            "SYS X",
        ),
        id="tabs with mlx5 columns and empty NIC affinity fields",
    ),
    pytest.param(
        "topo/azure-nv12-2x-m60-soc-noheaderindent.txt",
        (
            "X SYS",
            "SYS X",
        ),
        id="old driver SOC is normalised to SYS, header not indented",
    ),
    pytest.param(
        "topo/consumer-2gpu-phb-no-nvlink.txt",
        (
            "X PHB",
            "PHB X",
        ),
        id="PHB pair without legend",
    ),
    pytest.param(
        "topo/dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt",
        (
            "X NV12 NV12 NV12 NV12 NV12 NV12 NV12",
            "NV12 X NV12 NV12 NV12 NV12 NV12 NV12",
            "NV12 NV12 X NV12 NV12 NV12 NV12 NV12",
            "NV12 NV12 NV12 X NV12 NV12 NV12 NV12",
            "NV12 NV12 NV12 NV12 X NV12 NV12 NV12",
            "NV12 NV12 NV12 NV12 NV12 X NV12 NV12",
            "NV12 NV12 NV12 NV12 NV12 NV12 X NV12",
            "NV12 NV12 NV12 NV12 NV12 NV12 NV12 X",
        ),
        id="DGX A100 NVSwitch NV12 all-to-all with 12 mlx5 columns",
    ),
    pytest.param(
        "topo/dgx-a100-oci-bm-8gpu-18nic-spaces.txt",
        (
            "X NV12 NV12 NV12 NV12 NV12 NV12 NV12",
            "NV12 X NV12 NV12 NV12 NV12 NV12 NV12",
            "NV12 NV12 X NV12 NV12 NV12 NV12 NV12",
            "NV12 NV12 NV12 X NV12 NV12 NV12 NV12",
            "NV12 NV12 NV12 NV12 X NV12 NV12 NV12",
            "NV12 NV12 NV12 NV12 NV12 X NV12 NV12",
            "NV12 NV12 NV12 NV12 NV12 NV12 X NV12",
            "NV12 NV12 NV12 NV12 NV12 NV12 NV12 X",
        ),
        id="18 NIC columns in spaces with narrow affinity columns",
    ),
    pytest.param(
        "topo/dgx1-8gpu-topo-mp-pcie-only.txt",
        (
            "X PIX PHB PHB SYS SYS SYS SYS",
            "PIX X PHB PHB SYS SYS SYS SYS",
            "PHB PHB X PIX SYS SYS SYS SYS",
            "PHB PHB PIX X SYS SYS SYS SYS",
            "SYS SYS SYS SYS X PIX PHB PHB",
            "SYS SYS SYS SYS PIX X PHB PHB",
            "SYS SYS SYS SYS PHB PHB X PIX",
            "SYS SYS SYS SYS PHB PHB PIX X",
        ),
        id="topo -mp PCIe-only view without NV legend line",
    ),
    pytest.param(
        "topo/dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt",
        (
            "X NV1 NV1 NV1 NV1 SYS SYS SYS",
            "NV1 X NV1 NV1 SYS NV1 SYS SYS",
            "NV1 NV1 X NV1 SYS SYS NV1 SYS",
            "NV1 NV1 NV1 X SYS SYS SYS NV1",
            "NV1 SYS SYS SYS X NV1 NV1 NV1",
            "SYS NV1 SYS SYS NV1 X NV1 NV1",
            "SYS SYS NV1 SYS NV1 NV1 X NV1",
            "SYS SYS SYS NV1 NV1 NV1 NV1 X",
        ),
        id="glued GPU0GPU1 header and unsorted mlx5 columns read the P100 cube mesh",
    ),
    pytest.param(
        "topo/dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt",
        (
            "X NV1 NV1 NV2 NV2 SYS SYS SYS",
            "NV1 X NV2 NV1 SYS NV2 SYS SYS",
            "NV1 NV2 X NV2 SYS SYS NV1 SYS",
            "NV2 NV1 NV2 X SYS SYS SYS NV1",
            "NV2 SYS SYS SYS X NV1 NV1 NV2",
            "SYS NV2 SYS SYS NV1 X NV2 NV1",
            "SYS SYS NV1 SYS NV1 NV2 X NV2",
            "SYS SYS SYS NV1 NV2 NV1 NV2 X",
        ),
        id="V100 hybrid cube-mesh NV1 NV2 mix",
    ),
    pytest.param(
        "topo/gh200-quad-4gpu-nv6-gpu-numa-id.txt",
        (
            "X NV6 NV6 NV6",
            "NV6 X NV6 NV6",
            "NV6 NV6 X NV6",
            "NV6 NV6 NV6 X",
        ),
        id="GPU NUMA ID column with numeric ids and shifted header",
    ),
    pytest.param(
        "topo/h100-4gpu-nv18-8nic-allphb-container.txt",
        (
            "X NV18 NV18 NV18",
            "NV18 X NV18 NV18",
            "NV18 NV18 X NV18",
            "NV18 NV18 NV18 X",
        ),
        id="NIC legend maps NIC columns, trailing space after X",
    ),
    pytest.param("topo/h100pcie-1gpu-1nic-kvm-vm.txt", ("X",), id="single GPU with one NIC"),
    pytest.param(
        "topo/h100pcie-2gpu-nv12-bridge-indented6.txt",
        (
            "X NV12",
            "NV12 X",
        ),
        id="six-space indented paste with whitespace-only blank lines",
    ),
    pytest.param(
        "topo/h800-4gpu-nv8-17nic-empty-affinity.txt",
        (
            "X NV8 NV8 NV8",
            "NV8 X NV8 NV8",
            "NV8 NV8 X NV8",
            "NV8 NV8 NV8 X",
        ),
        id="empty CPU and NUMA affinity cells in tabs",
    ),
    pytest.param(
        "topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt",
        (
            "X NV18 NV18 NV18 NV18 NV18 NV18 NV18",
            "NV18 X NV18 NV18 NV18 NV18 NV18 NV18",
            "NV18 NV18 X NV18 NV18 NV18 NV18 NV18",
            "NV18 NV18 NV18 X NV18 NV18 NV18 NV18",
            "NV18 NV18 NV18 NV18 X NV18 NV18 NV18",
            "NV18 NV18 NV18 NV18 NV18 X NV18 NV18",
            "NV18 NV18 NV18 NV18 NV18 NV18 X NV18",
            "NV18 NV18 NV18 NV18 NV18 NV18 NV18 X",
        ),
        id="CPU affinity run into NUMA id is split, odd NIC names",
    ),
    pytest.param(
        "topo/hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt",
        (
            "X NV18 NV18 NV18 NV18 NV18 NV18 NV18",
            "NV18 X NV18 NV18 NV18 NV18 NV18 NV18",
            "NV18 NV18 X NV18 NV18 NV18 NV18 NV18",
            "NV18 NV18 NV18 X NV18 NV18 NV18 NV18",
            "NV18 NV18 NV18 NV18 X NV18 NV18 NV18",
            "NV18 NV18 NV18 NV18 NV18 X NV18 NV18",
            "NV18 NV18 NV18 NV18 NV18 NV18 X NV18",
            "NV18 NV18 NV18 NV18 NV18 NV18 NV18 X",
        ),
        id="explicit comma CPU lists with 12 NICs",
    ),
    pytest.param(
        "topo/rtx3090-8gpu-pcie-node-sys-dualsocket.txt",
        (
            "X NODE NODE NODE SYS SYS SYS SYS",
            "NODE X NODE NODE SYS SYS SYS SYS",
            "NODE NODE X NODE SYS SYS SYS SYS",
            "NODE NODE NODE X SYS SYS SYS SYS",
            "SYS SYS SYS SYS X NODE NODE NODE",
            "SYS SYS SYS SYS NODE X NODE NODE",
            "SYS SYS SYS SYS NODE NODE X NODE",
            "SYS SYS SYS SYS NODE NODE NODE X",
        ),
        id="PCIe-only dual socket NODE and SYS",
    ),
    pytest.param(
        "topo/rtx4090-8gpu-all-sys-2nic-issue.txt",
        (
            "X SYS SYS SYS SYS SYS SYS SYS",
            "SYS X SYS SYS SYS SYS SYS SYS",
            "SYS SYS X SYS SYS SYS SYS SYS",
            "SYS SYS SYS X SYS SYS SYS SYS",
            "SYS SYS SYS SYS X SYS SYS SYS",
            "SYS SYS SYS SYS SYS X SYS SYS",
            "SYS SYS SYS SYS SYS SYS X SYS",
            "SYS SYS SYS SYS SYS SYS SYS X",
        ),
        id="NIC columns without NIC legend",
    ),
    pytest.param(
        "topo/rtx5090-2gpu-phb-tabs.txt",
        (
            "X PHB",
            "PHB X",
        ),
        id="tabs with the double tab before GPU NUMA ID",
    ),
    pytest.param(
        "topo/t4-4gpu-1plus3-sys-node-nolegend.txt",
        (
            "X SYS SYS SYS",
            "SYS X NODE NODE",
            "SYS NODE X NODE",
            "SYS NODE NODE X",
        ),
        id="no legend and no NUMA column, 1+3 socket split",
    ),
    pytest.param(
        "topo/titanrtx-2gpu-nv2-bridge.txt",
        (
            "X NV2",
            "NV2 X",
        ),
        id="NVLink bridge NV2 pair",
    ),
    pytest.param(
        "h200-vm-1gpu/topo-m.txt", ("X",), id="ANSI underline escapes around the header of a one-GPU VM"
    ),
]


@pytest.mark.parametrize(("name", "rows"), MATRICES)
def test_real_topo_m_gpu_block_is_exact(name: str, rows: tuple[str, ...]) -> None:
    """Every real topo -m capture yields exactly the GPU block printed in it."""
    topo = parse(name)
    expected = tuple(tuple(r.split()) for r in rows)
    assert topo.matrix == expected
    assert topo.gpus == tuple(range(len(rows)))
    assert topo.source == name


def test_every_topo_m_fixture_is_in_the_table() -> None:
    """No real topo -m capture is left out of the table (new captures must get an expected matrix)."""
    listed = {p.values[0] for p in MATRICES}
    on_disk = {
        f"topo/{p.name}"
        for p in (REAL / "topo").glob("*.txt")
        if not p.name.startswith(("nvlink-", "p2p-", "dgx2-"))
    }
    assert on_disk | {"h200-vm-1gpu/topo-m.txt"} == listed


@pytest.mark.parametrize(
    ("name", "nics"),
    [
        pytest.param(
            "topo/dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt",
            ("mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"),
            id="unsorted mlx5 columns keep their printed order",
        ),
        pytest.param(
            "topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt",
            ("mlx5_0", *(f"mlx5_gdr_{i}" for i in range(8)), "mlx5_stor_0"),
            id="NIC legend names replace NICn labels",
        ),
        pytest.param(
            "topo/rtx4090-8gpu-all-sys-2nic-issue.txt", ("NIC0", "NIC1"), id="no NIC legend keeps NICn labels"
        ),
        pytest.param("topo/t4-4gpu-1plus3-sys-node-nolegend.txt", (), id="no NIC columns"),
    ],
)
def test_nic_columns(name: str, nics: tuple[str, ...]) -> None:
    """NIC columns are named by the NIC legend when there is one, in printed order."""
    assert parse(name).nics == nics


def test_nic_cells_per_gpu() -> None:
    """GPU↔NIC classes come per GPU row, per NIC column (DGX-1 P100: mlx5_0 PIX to GPU0, SOC→SYS to GPU4)."""
    topo = parse("topo/dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt")
    assert topo.nic_matrix[0] == ("PIX", "SYS", "PHB", "SYS")
    assert topo.nic_matrix[7] == ("SYS", "PHB", "SYS", "PIX")
    assert "NIC" not in " ".join(topo.warnings)


@pytest.mark.parametrize(
    ("name", "cpu", "numa", "gnid"),
    [
        pytest.param(
            "topo/dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt",
            ("0-11,24-35",) * 4 + ("12-23,36-47",) * 4,
            (),
            (),
            id="CPU affinity only",
        ),
        pytest.param(
            "topo/rtx5090-2gpu-phb-tabs.txt",
            ("0-63", "0-63"),
            ("0", "0"),
            (None, None),
            id="tabs with N/A GPU NUMA ID",
        ),
        pytest.param(
            "topo/h800-4gpu-nv8-17nic-empty-affinity.txt",
            (None,) * 4,
            (None,) * 4,
            (None,) * 4,
            id="empty affinity cells are unknown",
        ),
        pytest.param(
            "topo/gh200-quad-4gpu-nv6-gpu-numa-id.txt",
            ("0-71", "72-143", "144-215", "216-287"),
            ("0,5-11", "1,13-19", "2,21-27", "3,29-35"),
            ("4", "12", "20", "28"),
            id="GH200 GPU NUMA ids",
        ),
        pytest.param(
            "topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt",
            ("0-45,92-137",) * 4 + ("46-91,138-183",) * 4,
            ("0",) * 4 + ("1",) * 4,
            (None,) * 8,
            id="affinity run into NUMA is split where the CPU count matches",
        ),
        pytest.param(
            "topo/dgx-a100-oci-bm-8gpu-18nic-spaces.txt",
            ("48-63", "48-63", "16-31", "16-31", "112-127", "112-127", "80-95", "80-95"),
            ("3", "3", "1", "1", "7", "7", "5", "5"),
            (None,) * 8,
            id="narrow columns in spaces",
        ),
        pytest.param("h200-vm-1gpu/topo-m.txt", ("0-15",), ("0",), (None,), id="VM capture with ANSI header"),
    ],
)
def test_affinity_cells(
    name: str, cpu: tuple[str | None, ...], numa: tuple[str | None, ...], gnid: tuple[str | None, ...]
) -> None:
    """CPU affinity, NUMA affinity and GPU NUMA ID come out per GPU, None when empty or N/A."""
    topo = parse(name)
    assert (topo.cpu_affinity, topo.numa_affinity, topo.gpu_numa_id) == (cpu, numa, gnid)


def test_merged_affinity_is_reported() -> None:
    """Splitting a CPU list run into its NUMA id is a guess, so a warning names the line."""
    warnings = parse("topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt").warnings
    assert len(warnings) == 4
    assert warnings[0].startswith(
        "line 2: GPU0: CPU affinity and NUMA affinity run together in '0-45,92-1370'"
    )


def test_clean_capture_has_no_warnings() -> None:
    """A well-formed capture parses without warnings."""
    assert parse("topo/dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt").warnings == ()


# -- refused inputs
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "lineno", "words"),
    [
        pytest.param(
            "topo/dgx2-16gpu-nv6-10nic-PARTIAL-first5rows.txt",
            6,
            "rows for GPU5, GPU6",
            id="truncated DGX-2 capture is refused",
        ),
        pytest.param(
            "topo/nvlink-s-rtxa6000-3gpu.txt", 1, "nvidia-smi nvlink", id="nvlink -s output is refused"
        ),
        pytest.param(
            "topo/nvlink-R-h100pcie-2gpu-bridge-indented.txt",
            1,
            "nvidia-smi nvlink",
            id="nvlink -R output is refused",
        ),
        pytest.param(
            "topo/nvlink-s-a100pcie-2gpu-no-nvlink-indented.txt",
            1,
            "nvidia-smi nvlink",
            id="nvlink -s without links is refused",
        ),
        pytest.param(
            "topo/nvlink-s-h100pcie-2gpu-bridge-inactive-links-indented.txt",
            1,
            "nvidia-smi nvlink",
            id="nvlink -s with inactive links is refused",
        ),
        pytest.param("topo/p2p-rw-rtx5090-2gpu-gns.txt", 8, "topo -p2p", id="p2p output with GNS is refused"),
        pytest.param("topo/p2p-2gpu-ns-indented.txt", 8, "topo -p2p", id="indented p2p output is refused"),
        pytest.param("topo/nccl-topo-dump-8xa100-5bond-nic.xml", 1, "XML", id="NCCL XML dump is refused"),
        pytest.param(
            "topo/nccl-topo-dump-h200-kvm-vm-PARTIAL.xml", 1, "XML", id="partial NCCL XML is refused"
        ),
        pytest.param(
            "topo/nccl-topo-dump-h200-baremetal-PARTIAL.xml", 1, "XML", id="partial bare-metal XML is refused"
        ),
    ],
)
def test_other_outputs_are_refused(name: str, lineno: int, words: str) -> None:
    """Other tools' outputs and truncated captures raise ParseError naming the line, never a wrong matrix."""
    with pytest.raises(ParseError) as e:
        parse(name)
    assert e.value.lineno == lineno
    assert words in e.value.reason
    assert str(e.value).startswith(f"{name}:{lineno}: ")


def _swap_cell(text: str, row: str, col: int, new: str) -> str:
    """Replace one whitespace-separated cell (col 1: the first after the label) of the row ``row``."""
    out = []
    for line in text.split("\n"):
        if line.split()[:1] == [row]:
            parts = line.split()
            parts[col] = new
            line = "\t".join(parts)
        out.append(line)
    return "\n".join(out)


V100 = "topo/dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"


@pytest.mark.parametrize(
    ("text", "lineno", "words"),
    [
        pytest.param(_swap_cell(read(V100), "GPU5", 1, "NV1"), 7, "not symmetric", id="asymmetric-bad"),
        pytest.param(
            read(V100).replace(
                "GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     PIX     "
                "0-11,24-35\n",
                "",
            ),
            5,
            "row GPU3 is missing",
            id="missing-row-bad",
        ),
        pytest.param(
            _swap_cell(read(V100), "GPU2", 3, "NV2"), 4, "diagonal must be X", id="bad-diagonal-bad"
        ),
        pytest.param(
            _swap_cell(read(V100), "GPU2", 2, "X"), 4, "X off the diagonal", id="x-off-diagonal-bad"
        ),
        pytest.param(
            read(V100).replace(
                "GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X ", "GPU7    SYS"
            ),
            9,
            "expected 9 link cells",
            id="short-row-bad",
        ),
        pytest.param(read(V100).replace("\nGPU7 ", "\nGPU6 "), 9, "duplicate row", id="duplicate-row-bad"),
        pytest.param(
            read(V100).split("\nGPU6")[0] + "\nGPU6    SYS     SYS     NV1",
            8,
            "rows for GPU7 are missing",
            id="cut-mid-row-bad",
        ),
        pytest.param("", None, "no header", id="empty-input-bad"),
        pytest.param(
            read("topo/titanrtx-2gpu-nv2-bridge.txt").replace("GPU1    NV2      X", "GPU1    NV2      NVX"),
            3,
            "cell 2",
            id="unknown-class-bad",
        ),
    ],
)
def test_bad_matrices_are_refused(text: str, lineno: int | None, words: str) -> None:
    """A GPU block that is asymmetric, short, misnumbered or has a bad diagonal raises ParseError naming the
    line."""
    with pytest.raises(ParseError) as e:
        parse_topo_matrix(text, source="bad")
    assert e.value.lineno == lineno
    assert words in e.value.reason


# -- damaged pastes built from real files
# ---------------------------------------------------------------------------


def test_ansi_remnants_without_esc_byte() -> None:
    """`[4mGPU0` (the ESC byte lost in a paste) reads like the real escape."""
    raw = read("h200-vm-1gpu/topo-m.txt")
    assert "\x1b[4m" in raw
    assert parse_topo_matrix(raw.replace("\x1b", ""), source="x") == parse_topo_matrix(raw, source="x")


def test_glued_cells_split_by_legend_tokens() -> None:
    """Cells run together where alignment broke (`NODENODE`, `X NV18`, `NODE64-127`) split by the class
    vocabulary."""
    raw = read("topo/rtx3090-8gpu-pcie-node-sys-dualsocket.txt")
    glued = raw.replace("\tNODE\tNODE", "\tNODENODE").replace("NODE\t64-127", "NODE64-127")
    assert "NODENODE" in glued and "NODE64-127" in glued
    got, want = parse_topo_matrix(glued, source="x"), parse_topo_matrix(raw, source="x")
    assert got.matrix == want.matrix
    nic = read("topo/h100-4gpu-nv18-8nic-allphb-container.txt").replace(
        "NIC0    PHB     PHB     PHB     PHB      X", "NIC0    PHB PHB PHB PHB X"
    )
    nic = nic.replace(" X      NV18 ", "X NV18")
    assert (
        parse_topo_matrix(nic, source="x").matrix
        == parse("topo/h100-4gpu-nv18-8nic-allphb-container.txt").matrix
    )


def test_wrapped_rows_are_joined() -> None:
    """A row hard-wrapped in a paste continues on the next line."""
    raw = read("topo/dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt")
    wrapped = raw.replace("NV12\tPXB\tPXB\tSYS", "NV12\n    PXB\tPXB\tSYS")
    assert wrapped != raw
    got = parse_topo_matrix(wrapped, source="x")
    assert got.matrix == parse_topo_matrix(raw, source="x").matrix
    assert got.cpu_affinity == parse_topo_matrix(raw, source="x").cpu_affinity


def test_crlf_and_indentation() -> None:
    """Windows line ends and a whole-block indent do not change the result."""
    raw = read("topo/t4-4gpu-1plus3-sys-node-nolegend.txt")
    shifted = "\r\n".join("   " + line for line in raw.split("\n"))
    assert parse_topo_matrix(shifted, source="x").matrix == parse_topo_matrix(raw, source="x").matrix


@pytest.mark.parametrize(
    "after",
    [
        "topo/p2p-rw-rtx5090-2gpu-gns.txt",  # `topo -p2p rw` of the same machine, pasted after the matrix
        "topo/nvlink-s-rtxa6000-3gpu.txt",
        "topo/dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt",  # a second matrix
    ],
)
def test_first_block_is_read_and_what_follows_is_ignored(after: str) -> None:
    """A valid `topo -m` matrix followed by other output (a `topo -p2p` block, `nvlink -s`, another matrix)
    reads as the first matrix alone: same matrix, same affinity, no extra warnings."""
    first = "topo/rtx5090-2gpu-phb-tabs.txt"
    alone = parse(first)
    both = parse_topo_matrix(read(first) + "\n" + read(after), source="joined")
    assert (both.matrix, both.cpu_affinity, both.numa_affinity) == (
        alone.matrix,
        alone.cpu_affinity,
        alone.numa_affinity,
    )
    assert both.warnings == alone.warnings


def test_p2p_block_first_is_still_refused() -> None:
    """Only the first block decides: `topo -p2p` output then a `topo -m` matrix is refused at its legend."""
    text = read("topo/p2p-rw-rtx5090-2gpu-gns.txt") + "\n" + read("topo/rtx5090-2gpu-phb-tabs.txt")
    with pytest.raises(ParseError, match="topo -p2p") as e:
        parse_topo_matrix(text, source="joined")
    assert e.value.lineno == 8


def test_cli_parses_a_matrix_followed_by_p2p_output(tmp_path: Path) -> None:
    """`slurm-topo gpu parse FILE --json` accepts the joined file (exit 0) and prints the first matrix."""
    import json
    import subprocess
    import sys

    path = tmp_path / "topo-and-p2p.txt"
    path.write_text(read("topo/rtx5090-2gpu-phb-tabs.txt") + "\n" + read("topo/p2p-rw-rtx5090-2gpu-gns.txt"))
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "gpu", "parse", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["matrix"] == [
        list(r) for r in parse("topo/rtx5090-2gpu-phb-tabs.txt").matrix
    ]
