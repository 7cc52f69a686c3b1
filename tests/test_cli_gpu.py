"""``slurm-topo gpu parse|islands|pick`` through the command line (in-process, CliRunner) on real
``nvidia-smi topo -m`` captures: the matrix as the capture shows it, islands and picks worked out by hand from
the captures, warnings on stderr, refusals as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import error_line, invoke

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOPO = FIXTURES / "real" / "topo"
SYNTHETIC = FIXTURES / "synthetic" / "islands-2x4-nv18.txt"
HYBRID_CUBE = TOPO / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
MERGED = TOPO / "h800-8gpu-nv18-10nic-merged-affinity-numa.txt"


def capture_rows(path: Path, gpus: int) -> list[list[str]]:
    """The GPU rows of a tab-separated capture: the row's label, its N link cells and its CPU affinity."""
    rows = []
    for line in path.read_text().splitlines():
        if line.startswith("GPU"):
            cells = [c.strip() for c in line.split("\t")]
            rows.append(cells[: gpus + 2])
    return rows


def test_parse_prints_the_captures_rows_and_affinities() -> None:
    result = invoke("gpu", "parse", str(SYNTHETIC))
    assert result.exit_code == 0 and result.stderr == ""
    header, *rows = result.stdout.splitlines()
    assert header.split() == [f"GPU{i}" for i in range(8)] + ["CPU", "affinity"]
    assert [row.split() for row in rows] == capture_rows(SYNTHETIC, 8)


def test_parse_json_matrix_is_the_text_matrix() -> None:
    text = invoke("gpu", "parse", str(HYBRID_CUBE)).stdout.splitlines()[1:]
    doc = json.loads(invoke("gpu", "parse", str(HYBRID_CUBE), "--json").stdout)
    assert doc["gpus"] == list(range(8)) and doc["nics"] == ["mlx5_0"]
    assert [row.split()[1:9] for row in text] == doc["matrix"]
    assert [row.split()[9] for row in text] == doc["cpu_affinity"] == ["0-11,24-35"] * 4 + ["12-23,36-47"] * 4
    assert doc["nic_matrix"] == [["NODE"], ["NODE"], ["PIX"], ["PIX"], ["SYS"], ["SYS"], ["SYS"], ["SYS"]]


def test_parse_an_empty_affinity_is_a_dash() -> None:
    result = invoke("gpu", "parse", str(TOPO / "h800-4gpu-nv8-17nic-empty-affinity.txt"))
    assert result.exit_code == 0
    assert [row.split()[-1] for row in result.stdout.splitlines()[1:]] == ["-"] * 4


def test_a_captures_oddities_are_warnings_on_stderr_and_the_answer_stands() -> None:
    """The h800 capture runs CPU and NUMA affinity together on GPU0-GPU3's rows: each gets a warning naming
    the file and the line; stdout still holds only the JSON object."""
    result = invoke("gpu", "parse", str(MERGED), "--json")
    assert result.exit_code == 0
    warnings = result.stderr.splitlines()
    assert len(warnings) == 4
    assert all(w.startswith(f"warning: {MERGED}: line {i + 2}: GPU{i}: ") for i, w in enumerate(warnings))
    affinity = json.loads(result.stdout)["cpu_affinity"]
    assert affinity == ["0-45,92-137"] * 4 + ["46-91,138-183"] * 4


@pytest.mark.parametrize("command", ["parse", "islands", "pick"])
@pytest.mark.parametrize(
    ("capture", "message"),
    [
        ("nvlink-s-rtxa6000-3gpu.txt", "not `nvidia-smi topo -m` output"),
        ("p2p-2gpu-ns-indented.txt", "this is `nvidia-smi topo -p2p` output"),
        ("dgx2-16gpu-nv6-10nic-PARTIAL-first5rows.txt", "(truncated output?)"),
    ],
)
def test_every_gpu_command_refuses_what_is_not_a_whole_topo_m_capture(
    command: str, capture: str, message: str
) -> None:
    path = str(TOPO / capture)
    args = [path, "--count", "1"] if command == "pick" else [path]
    result = invoke("gpu", command, *args)
    assert result.exit_code == 2 and result.stdout == ""
    line = error_line(result)
    assert line.startswith(f"{path}:") and message in line


def test_an_unreadable_capture_is_one_line() -> None:
    missing = FIXTURES / "absent.txt"
    result = invoke("gpu", "islands", str(missing))
    assert (
        result.exit_code == 2 and error_line(result) == f"{missing}: cannot read: No such file or directory"
    )


@pytest.mark.parametrize(
    ("capture", "islands"),
    [
        (HYBRID_CUBE, [list(range(8))]),  # the hybrid cube joins every GPU
        (SYNTHETIC, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (TOPO / "rtx4090-8gpu-all-sys-2nic-issue.txt", [[i] for i in range(8)]),  # PCIe only
        (TOPO / "h100pcie-2gpu-nv12-bridge-indented6.txt", [[0, 1]]),  # an NVLink bridge
    ],
    ids=["hybrid-cube", "two-islands", "no-nvlink", "bridge"],
)
def test_islands_text_and_json(capture: Path, islands: list[list[int]]) -> None:
    doc = json.loads(invoke("gpu", "islands", str(capture), "--json").stdout)
    assert doc == {"islands": islands}
    text = invoke("gpu", "islands", str(capture)).stdout.splitlines()
    assert text == [f"island {i}: GPUs {','.join(map(str, g))}" for i, g in enumerate(islands)]


@pytest.mark.parametrize(
    ("count", "busy", "chosen"),
    [
        (2, "", "0,3"),  # NV2 is the fastest link; 0-3 the lowest such pair
        (4, "", "0,1,2,3"),  # both NVLinked quads hold 9 links; lowest ids
        (4, "0", "4,5,6,7"),  # the only quad left whose every pair is NVLinked
        (3, " 1, 5, ", "0,2,3"),  # spaces around the indices and a trailing comma are fine
    ],
)
def test_pick_on_the_hybrid_cube(count: int, busy: str, chosen: str) -> None:
    result = invoke("gpu", "pick", str(HYBRID_CUBE), "-k", str(count), "--busy", busy)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == chosen + "\n"


def test_pick_takes_the_capture_as_parse_and_islands_do_and_keeps_topology_working() -> None:
    """`gpu pick FILE`, like `gpu parse FILE` and `gpu islands FILE`; `--topology FILE` (the older form) still
    works, stays out of --help, and gives the same pick; both at once, or neither, is a usage error."""
    positional = invoke("gpu", "pick", str(SYNTHETIC), "-k", "4", "--busy", "0", "--json")
    assert positional.exit_code == 0, positional.output
    assert json.loads(positional.stdout) == {"gpus": [4, 5, 6, 7]}
    alias = invoke("gpu", "pick", "--topology", str(SYNTHETIC), "-k", "4", "--busy", "0", "--json")
    assert alias.exit_code == 0 and alias.stdout == positional.stdout
    both = invoke("gpu", "pick", str(SYNTHETIC), "--topology", str(SYNTHETIC), "-k", "1")
    assert both.exit_code == 2 and error_line(both).startswith(
        "give the capture once: FILE or --topology FILE"
    )
    neither = invoke("gpu", "pick", "-k", "1")
    assert neither.exit_code == 2 and "give a `nvidia-smi topo -m` capture FILE or --nvml" in error_line(
        neither
    )
    help_text = invoke("gpu", "pick", "--help").stdout
    assert "[OPTIONS] [FILE]" in help_text and "--topology" not in help_text


def test_pick_refusals() -> None:
    args = ["gpu", "pick", str(SYNTHETIC)]
    garbage = invoke(*args, "-k", "2", "--busy", "a,b")
    assert garbage.exit_code == 2
    assert error_line(garbage) == (
        "--busy: expected GPU indices like 0,3, got 'a,b' (see 'slurm-topo gpu pick --help')"
    )
    too_many = invoke(*args, "-k", "7", "--busy", "0,1", "--json")
    assert too_many.exit_code == 2 and too_many.stdout == ""
    assert error_line(too_many) == "cannot pick 7 GPUs: only 6 free ([2, 3, 4, 5, 6, 7])"
    zero = invoke(*args, "-k", "0")
    assert zero.exit_code == 2 and "'--count' / '-k'" in error_line(zero)
