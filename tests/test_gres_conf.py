"""gres.conf from real topo -m captures: Links, File minors, Cores, AutoDetect, and the node's Gres= count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo import InputError, load_inventories, render_all
from slurm_topo.gpu.affinity import gpu_sockets
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.render import RenderOptions
from slurm_topo.render.gres_conf import gres_warnings, slurm_cores

REPO = Path(__file__).resolve().parents[1]
TOPO = REPO / "tests" / "fixtures" / "real" / "topo"
MACHINES = {
    # machine: (fixture, slurm layout, gpu type)
    "dgx1-v100": (
        "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt",
        {"Sockets": 2, "CoresPerSocket": 12, "ThreadsPerCore": 2, "CPUs": 48},
        "v100",
    ),
    "dgx-a100": (
        "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt",
        {"Sockets": 2, "CoresPerSocket": 64, "ThreadsPerCore": 2, "CPUs": 256},
        "a100",
    ),
    "rtx3090-8": ("rtx3090-8gpu-pcie-node-sys-dualsocket.txt", {}, "rtx3090"),
    "t4-4": ("t4-4gpu-1plus3-sys-node-nolegend.txt", {}, "t4"),
    "hgx-h100-evenodd": (
        "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt",
        {"Sockets": 2, "CoresPerSocket": 56, "ThreadsPerCore": 2, "CPUs": 224},
        "h100",
    ),
    "power9-ac922": (
        "../power9/traverse-ac922-4gpu-nv3-numa0-8.txt",
        {"Sockets": 2, "CoresPerSocket": 16, "ThreadsPerCore": 4, "CPUs": 128},
        "v100",
    ),
}


def inventory(tmp_path: Path, machine: str) -> Path:
    fixture, layout, gtype = MACHINES[machine]
    slurm = "{" + ", ".join(f"{k}: {v}" for k, v in layout.items()) + "}"
    path = tmp_path / f"{machine}.yaml"
    path.write_text(
        f"nodes:\n  - {{name: 'node[01-02]', region: r1, gpu_type: {gtype}, "
        f"gpu_topology: '{TOPO / fixture}', slurm: {slurm}}}\n"
    )
    return path


def render(tmp_path: Path, machine: str, **opts: object) -> dict[str, str]:
    return render_all(load_inventories([inventory(tmp_path, machine)]), (22, 5), None, RenderOptions(**opts))  # type: ignore[arg-type]


def test_hybrid_cube_mesh_links_cores_and_files(tmp_path: Path) -> None:
    """DGX-1 V100: one line per GPU in index order, Links = NVLink counts, Cores = the GPU's socket."""
    gres = render(tmp_path, "dgx1-v100", assume_minor_equals_index=True)["gres.conf"]
    lines = [ln for ln in gres.splitlines() if not ln.startswith("#")]
    assert lines[0] == "NodeName=node[01-02] AutoDetect=off"
    assert lines[1] == (
        "NodeName=node[01-02] Name=gpu Type=v100 File=/dev/nvidia0 Cores=0-11 Links=-1,1,1,2,2,0,0,0"
    )
    assert lines[8] == (
        "NodeName=node[01-02] Name=gpu Type=v100 File=/dev/nvidia7 Cores=12-23 Links=0,0,0,1,2,1,2,-1"
    )
    assert len(lines) == 9


def test_nvswitch_box_is_all_to_all(tmp_path: Path) -> None:
    """DGX A100 (NVSwitch): every pair has 12 links, where AutoDetect=nvml would report none."""
    gres = render(tmp_path, "dgx-a100", assume_minor_equals_index=True)["gres.conf"]
    links = [ln.split("Links=")[1] for ln in gres.splitlines() if "Links=" in ln]
    assert links[3] == "12,12,12,-1,12,12,12,12"
    assert all(ln.count("12") == 7 for ln in links)


def test_unknown_layout_leaves_cores_out(tmp_path: Path) -> None:
    """Without Sockets/CoresPerSocket the CPU layout is unknown: no Cores= (never a guess)."""
    gres = render(tmp_path, "rtx3090-8", assume_minor_equals_index=True)["gres.conf"]
    assert not any(" Cores=" in ln for ln in gres.splitlines() if not ln.startswith("#"))
    assert "Links=-1,0,0,0,0,0,0,0" in gres


def test_node_gres_count_matches_the_topology(tmp_path: Path) -> None:
    """The node definition's Gres=gpu:<type>:<n> counts the GPUs the capture shows."""
    nodes = render(tmp_path, "t4-4", assume_minor_equals_index=True)["slurm-topo-nodes.conf"]
    assert "NodeName=node[01-02] Gres=gpu:t4:4 Features=region_r1" in nodes


def test_topo_capture_needs_the_minor_flag(tmp_path: Path) -> None:
    """A topo -m capture has no minor numbers: without --assume-minor-equals-index gres.conf is refused."""
    with pytest.raises(InputError, match="assume-minor-equals-index"):
        render(tmp_path, "t4-4")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "generate",
            "-i",
            str(inventory(tmp_path, "t4-4")),
            "-o",
            str(tmp_path / "out"),
            "--slurm-version",
            "22.05",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "generate",
            "-i",
            str(inventory(tmp_path, "t4-4")),
            "-o",
            str(tmp_path / "out"),
            "--slurm-version",
            "22.05",
            "--assume-minor-equals-index",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: --assume-minor-equals-index" in proc.stderr
    assert (tmp_path / "out" / "gres.conf").exists()


def test_gpu_count_disagreeing_with_topology_is_an_error(tmp_path: Path) -> None:
    """gpus: 8 with a 4-GPU capture is a bad inventory."""
    path = tmp_path / "x.yaml"
    path.write_text(f"nodes:\n  - {{name: n1, gpus: 8, gpu_topology: '{TOPO / MACHINES['t4-4'][0]}'}}\n")
    with pytest.raises(InputError, match=r"nodes\[0\].gpus: says 8 but gpu_topology has 4 GPUs"):
        load_inventories([path])


def test_no_gpu_topology_means_no_gres_conf() -> None:
    """Fleets without any gpu_topology get no gres.conf (the admin's own stays in charge)."""
    assert "gres.conf" not in render_all(load_inventories([REPO / "examples/gcp-two-regions.yaml"]), (22, 5))


HGX_EVENODD = "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt"
POWER9 = REPO / "tests" / "fixtures" / "real" / "power9" / "traverse-ac922-4gpu-nv3-numa0-8.txt"


def gres_lines(tmp_path: Path, capture: Path, layout: dict[str, int], name: str = "n[1-2]") -> list[str]:
    """The generated gres.conf for two nodes of ``layout`` described by ``capture`` (comments included)."""
    slurm = "{" + ", ".join(f"{k}: {v}" for k, v in layout.items()) + "}"
    path = tmp_path / "inv.yaml"
    path.write_text(
        f"nodes:\n  - {{name: '{name}', region: r1, gpu_topology: '{capture}', slurm: {slurm}}}\n"
    )
    inv = load_inventories([path])
    opts = RenderOptions(assume_minor_equals_index=True)
    return render_all(inv, (22, 5), None, opts)["gres.conf"].splitlines()


def cores(lines: list[str]) -> list[str | None]:
    gpu = [ln for ln in lines if " Name=gpu " in ln]
    return [ln.split(" Cores=")[1].split()[0] if " Cores=" in ln else None for ln in gpu]


def warnings_of(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("# warning: ")]


HGX = {"Sockets": 2, "CoresPerSocket": 56, "ThreadsPerCore": 2, "CPUs": 224}


def test_hgx_even_odd_numbering_puts_gpus_4_to_7_on_the_other_socket(tmp_path: Path) -> None:
    """HGX capture with even/odd CPU numbering (GPU0-3 `4,6,8,10,12` NUMA 0, GPU4-7 `1,3,5,7,9,11` NUMA 1),
    node 2 × 56 × 2: GPUs 4-7 get socket 1's logical cores, not socket 0's (socket-major arithmetic put all on
    0)."""
    lines = gres_lines(tmp_path, TOPO / HGX_EVENODD, HGX)
    assert cores(lines) == ["0-55"] * 4 + ["56-111"] * 4
    assert warnings_of(lines) == []


def test_even_odd_full_lists_without_numa_column(tmp_path: Path) -> None:
    """The same capture with the uncut lists an HGX box prints outside a cpuset (`0,2,…,222` / `1,3,…,223`)
    and no NUMA column to help: the CPU lists alone say interleaved numbering."""
    text = (TOPO / HGX_EVENODD).read_text()
    evens = ",".join(str(c) for c in range(0, 224, 2))
    odds = ",".join(str(c) for c in range(1, 224, 2))
    text = text.replace("4,6,8,10,12      0  ", evens + "      N/A").replace(
        "1,3,5,7,9,11     1  ", odds + "     N/A"
    )
    capture = tmp_path / "hgx-full.txt"
    capture.write_text(text)
    assert cores(gres_lines(tmp_path, capture, HGX)) == ["0-55"] * 4 + ["56-111"] * 4


def test_power9_smt_adjacent_numbering(tmp_path: Path) -> None:
    """POWER9 AC922 (2 × 16 cores, SMT4; CPU lists `0-63` / `64-127`, NUMA nodes 0 and 8): GPU0-1 on socket 0,
    GPU2-3 on socket 1 (socket-major arithmetic read both lists as both sockets and left Cores= out)."""
    lines = gres_lines(
        tmp_path, POWER9, {"Sockets": 2, "CoresPerSocket": 16, "ThreadsPerCore": 4, "CPUs": 128}
    )
    assert cores(lines) == ["0-15", "0-15", "16-31", "16-31"]
    assert warnings_of(lines) == []


def test_power9_numa_column_alone(tmp_path: Path) -> None:
    """POWER9 capture with its CPU Affinity cells emptied: the NUMA column (0 / 8, one node per socket) still
    places the GPUs."""
    text = POWER9.read_text().replace("\t0-63\t", "\t\t").replace("\t64-127\t", "\t\t")
    capture = tmp_path / "p9-numa-only.txt"
    capture.write_text(text)
    lines = gres_lines(tmp_path, capture, {"Sockets": 2, "CoresPerSocket": 16, "ThreadsPerCore": 4})
    assert cores(lines) == ["0-15", "0-15", "16-31", "16-31"]


def test_one_affinity_for_every_gpu_is_said(tmp_path: Path) -> None:
    """DGX-1 P100 capture printing `1-1` on all 8 GPUs: the same Cores= everywhere, and a warning (in the file
    and for stderr) that the GPUs cannot be told apart by CPU."""
    capture = TOPO / "dgx1-p100-8gpu-nv1-cube-soc-mangled-header.txt"
    layout = {"Sockets": 2, "CoresPerSocket": 20, "ThreadsPerCore": 2, "CPUs": 80}
    lines = gres_lines(tmp_path, capture, layout)
    assert len(set(cores(lines))) == 1 and cores(lines)[0] is not None
    (warning,) = [w for w in warnings_of(lines) if "same CPU affinity" in w]
    assert "all 8 GPUs print the same CPU affinity '1-1'" in warning
    inv = load_inventories([tmp_path / "inv.yaml"])
    assert any("n[1-2]: all 8 GPUs print the same CPU affinity" in w for w in gres_warnings(inv))
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "generate", "-i", str(tmp_path / "inv.yaml")]
        + ["-o", str(tmp_path / "out"), "--slurm-version", "22.05", "--assume-minor-equals-index"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: gres.conf: n[1-2]: all 8 GPUs print the same CPU affinity" in proc.stderr


def test_no_affinity_printed_leaves_cores_out_with_a_warning(tmp_path: Path) -> None:
    """H800 capture with empty CPU and NUMA affinity cells: no Cores=, and a warning saying why."""
    capture = TOPO / "h800-4gpu-nv8-17nic-empty-affinity.txt"
    lines = gres_lines(tmp_path, capture, {"Sockets": 2, "CoresPerSocket": 48, "ThreadsPerCore": 2})
    assert cores(lines) == [None] * 4
    assert any("no CPU affinity printed" in w for w in warnings_of(lines))


def test_affinity_beyond_the_layout_leaves_cores_out_with_a_warning(tmp_path: Path) -> None:
    """DGX-1 V100 lists CPUs up to 35 on GPU0; a node said to have 2 × 8 × 2 = 32 CPUs cannot hold them."""
    capture = TOPO / MACHINES["dgx1-v100"][0]
    lines = gres_lines(tmp_path, capture, {"Sockets": 2, "CoresPerSocket": 8, "ThreadsPerCore": 2})
    assert cores(lines) == [None] * 8
    assert any(
        "GPU0: CPU affinity '0-11,24-35' names CPU 35 but the node has 32 CPUs" in w
        for w in warnings_of(lines)
    )


@pytest.mark.parametrize(
    ("cpu", "numa", "layout", "numbering", "want"),
    [
        # socket-major x86, hyper-threads in a second block (DGX-1 V100)
        (("0-11,24-35", "12-23,36-47"), (), (2, 12, 2), "socket-major", ({0}, {1})),
        # NPS4 (DGX A100): four NUMA nodes, two per socket
        (
            ("48-63,176-191", "16-31,144-159", "112-127,240-255"),
            ("3", "1", "7"),
            (2, 64, 2),
            "socket-major",
            ({0}, {0}, {1}),
        ),
        # no hyper-thread siblings listed (OCI): 112-127 is socket 1 under socket-major, socket 0 if
        # SMT-adjacent
        (("48-63", "112-127"), (), (2, 64, 2), "socket-major", ({0}, {1})),
        # interleaved, cut by a cpuset, settled by the NUMA column
        (("4,6,8", "1,3,5"), ("0", "1"), (2, 56, 2), "interleaved", ({0}, {1})),
        # POWER SMT4
        (("0-63", "64-127"), ("0", "8"), (2, 16, 4), "smt-adjacent", ({0}, {1})),
        # four sockets, NUMA sets with GPU memory nodes (GH200)
        (("0-71", "72-143"), ("0,5-11", "1,13-19"), (4, 72, 1), "socket-major", ({0}, {1})),
        # every CPU: both sockets (Cores= then left out)
        (("0-47",), (), (2, 12, 2), "socket-major", ({0, 1},)),
    ],
)
def test_sockets_from_printed_affinity(
    cpu: tuple[str, ...],
    numa: tuple[str, ...],
    layout: tuple[int, int, int],
    numbering: str,
    want: tuple[set[int], ...],
) -> None:
    """The numbering that explains the printed lists best, and the socket of each GPU under it."""
    n = len(cpu)
    topo = GpuTopology(gpus=tuple(range(n)), matrix=(), cpu_affinity=cpu, numa_affinity=numa or (None,) * n)
    found = gpu_sockets(topo, layout)
    assert (found.numbering, found.sockets) == (numbering, tuple(frozenset(s) for s in want))


def test_numa_disagreeing_with_every_numbering_is_unknown() -> None:
    """CPU lists saying socket 0 then 1 under every numbering, NUMA column saying the opposite: no guess."""
    topo = GpuTopology(gpus=(0, 1), matrix=(), cpu_affinity=("0-11", "12-23"), numa_affinity=("1", "0"))
    found = gpu_sockets(topo, (2, 12, 1))
    assert found.sockets == (None, None) and "disagree" in found.warnings[0]


def test_nvml_affinity_reads_the_same_way() -> None:
    """NVML's masks come as the same lists (``_mask_to_list``): an even/odd box read through NVML gets the
    same sockets as its capture."""
    from slurm_topo.gpu.nvml import _mask_to_list

    even = _mask_to_list([sum(1 << b for b in range(0, 64, 2))] * 2 + [0])
    odd = _mask_to_list([sum(1 << b for b in range(1, 64, 2))] * 2 + [0])
    topo = GpuTopology(
        gpus=(0, 1), matrix=(), cpu_affinity=(even, odd), numa_affinity=(None, None), source="nvml"
    )
    assert gpu_sockets(topo, (2, 32, 2)).sockets == (frozenset({0}), frozenset({1}))


@pytest.mark.parametrize(
    ("sockets", "layout", "want"),
    [
        ({0}, (2, 12, 2), "0-11"),
        ({1}, (2, 12, 2), "12-23"),
        ({0, 1}, (2, 12, 2), None),  # every socket: nothing to say
        ({1, 3}, (4, 8, 1), "8-15,24-31"),
        (None, (2, 12, 2), None),
        ({0}, None, None),
    ],
)
def test_cores_are_whole_sockets(
    sockets: set[int] | None, layout: tuple[int, int, int] | None, want: str | None
) -> None:
    """Sockets -> Slurm's logical core ids of those whole sockets, or nothing when it covers everything."""
    assert slurm_cores(frozenset(sockets) if sockets is not None else None, layout) == want


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_gres_examples_are_current(tmp_path: Path, machine: str, update_golden: bool) -> None:
    """gres/examples/<machine>.gres.conf is what the generator writes for that real capture."""
    gres = render(tmp_path, machine, assume_minor_equals_index=True)["gres.conf"]
    gres = gres.replace(str(TOPO) + "/", "")
    example = REPO / "gres" / "examples" / f"{machine}.gres.conf"
    if update_golden:
        example.write_text(gres)
    assert example.read_text() == gres
