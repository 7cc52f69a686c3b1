"""gres.conf from real topo -m captures: Links, File minors, Cores, AutoDetect, and the node's Gres= count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo import InputError, load_inventories, render_all
from slurm_topo.render import RenderOptions
from slurm_topo.render.gres_conf import slurm_cores

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


@pytest.mark.parametrize(
    ("affinity", "layout", "want"),
    [
        ("0-11,24-35", (2, 12, 2), "0-11"),
        ("12-23,36-47", (2, 12, 2), "12-23"),
        ("0-47", (2, 12, 2), None),  # every CPU: nothing to say
        ("0-5", (2, 12, 2), "0-11"),  # part of a socket: the whole socket (Slurm wants whole sockets)
        ("4,6,8,10,12", (2, 12, 1), None),  # touches both sockets: every socket, nothing to say
        ("0-63", (2, 16, 1), None),  # more CPUs than the layout: layout is wrong, say nothing
        (None, (2, 12, 2), None),
        ("0-11", None, None),
    ],
)
def test_cores_from_cpu_affinity(
    affinity: str | None, layout: tuple[int, int, int] | None, want: str | None
) -> None:
    """CPU affinity -> Slurm core ids of whole sockets, or nothing when it would be a guess or cover everything."""
    assert slurm_cores(affinity, layout) == want


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_gres_examples_are_current(tmp_path: Path, machine: str, update_golden: bool) -> None:
    """gres/examples/<machine>.gres.conf is what the generator writes for that real capture."""
    gres = render(tmp_path, machine, assume_minor_equals_index=True)["gres.conf"]
    gres = gres.replace(str(TOPO) + "/", "")
    example = REPO / "gres" / "examples" / f"{machine}.gres.conf"
    if update_golden:
        example.write_text(gres)
    assert example.read_text() == gres
