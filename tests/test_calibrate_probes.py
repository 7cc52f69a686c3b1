"""calibrate --probe nccl|perftest|auto: which probe auto takes (and why not the others), which pairs and
commands each probe runs (GPU pairs per link class of real nvidia-smi captures, NIC pairs per rail), and
what the real outputs of nccl-tests and perftest in tests/fixtures/real/probes give as link figures. No GPU
nor RDMA device here: the tools' steps themselves are not run; the TCP path keeps its real-Slurm test
(tests/integration/test_calibrate_on_real_slurm.py)."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo.core.errors import InputError, PlacementError, SlurmTopoError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import DEFAULT_TABLE, parse_links
from slurm_topo.cost.calibrate import (
    ToolSettings,
    plan_tool_runs,
    run_calibration,
    tool_step_argv,
    tools_argv,
)
from slurm_topo.cost.calibrate_probes import (
    NodeTools,
    Result,
    Run,
    choose_probe,
    gpu_classes,
    level_figures,
    nccl_runs,
    perftest_runs,
    read_nccl,
    read_perftest_bw,
    read_perftest_lat,
    read_tools,
)
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.inventory import load_inventories
from slurm_topo.plumbing.runner import SubprocessRunner
from slurm_topo.probes.tools import parse_gpus, rdma_devices, tool_task, tools_task, visible_devices

FIXTURES = Path(__file__).parent / "fixtures" / "real"
TOPO = FIXTURES / "topo"
PROBES = FIXTURES / "probes"
DGX1 = "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
RTX_ALLREDUCE = "all_reduce_perf/rtx2080ti-2gpu-pcie-pix-no-p2p-g2-autodl-prompt.txt"
H100_2NODE = (
    "all_reduce_perf/h100-2rank-2node-roce-400g-single-nic-"
    "nccl-debug-info-interleaved-linear-step-raw-log.txt"
)
H100_16 = "all_reduce_perf/h100-16gpu-2node-ib-ndr-mpirun-xpmem-warning-interleaved-nccltests-issue309.txt"
BIDIR = (
    "ib_write_bw/rocm-d2d-bidirectional-b-a-report-gbits-"
    "use-rocm-localhost-rst-indented3-sanitized-devname.txt"
)
CX6_CLIENT = "ib_write_bw/cx6-ib-client-a-all-sizes-mbsec-conflicting-cpu-freq-interleaved-prompt.txt"
LAT = "ib_write_lat/dgx-spark-cx7-rdma-cm-force-link-ib-single-size-2B.txt"


def _text(name: str) -> str:
    return (PROBES / name).read_text()


def _topology(name: str):  # type: ignore[no-untyped-def]
    return parse_topo_matrix((TOPO / name).read_text())


def _fleet(capture: str = DGX1, gpu_type: str = "v100") -> Inventory:
    """Two leaves of one zone and another region: DGX-1 nodes with their real capture."""
    topo = _topology(capture)
    where = {
        "a1": ("eu", "z1", "l1"),
        "a2": ("eu", "z1", "l1"),
        "b1": ("eu", "z1", "l2"),
        "c1": ("us", "z9", "l9"),
    }
    return Inventory(
        tuple(
            Node(n, Location(*loc), gpus=len(topo.gpus), gpu_type=gpu_type, gpu_topology=topo)
            for n, loc in where.items()
        )
    )


def _tool_line(node: str, output: str, rank: int = 0, role: str = "run") -> str:
    """What `slurm-topo probe tool` prints for one task (tests/test_calibrate_probes.py checks it below)."""
    record = {"slurm_topo_probe": "tool", "node": node, "rank": rank, "role": role, "output": output}
    return json.dumps(record)


# ---- which probe


def _tools(node: str, nccl: bool, perftest: bool, device: bool) -> NodeTools:
    paths = {}
    if nccl:
        paths["all_reduce_perf"] = "/opt/nccl-tests/build/all_reduce_perf"
    if perftest:
        paths |= {"ib_write_bw": "/usr/bin/ib_write_bw", "ib_write_lat": "/usr/bin/ib_write_lat"}
    return NodeTools(node, paths, ("mlx5_0",) if device else (), {"mlx5_0": "InfiniBand"} if device else {})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=6)
)
def test_auto_takes_nccl_then_perftest_then_tcp(flags: list[tuple[bool, bool, bool, bool]]) -> None:
    """Over every mix of what the nodes have (a node may not report at all): the rule of the issue, and
    every probe not taken named with why."""
    nodes = [f"n{i}" for i in range(len(flags))]
    found = {n: _tools(n, *f[:3]) for n, f in zip(nodes, flags, strict=True) if f[3]}
    has = {
        n: (n in found, *(f[:3] if n in found else (False, False, False)))
        for n, f in zip(nodes, flags, strict=True)
    }
    nccl = all(h[0] and h[1] for h in has.values())
    perf = all(h[0] and h[2] and h[3] for h in has.values())
    choice = choose_probe("auto", found, nodes)
    assert choice.probe == ("nccl" if nccl else "perftest" if perf else "tcp")
    text = "\n".join(choice.reasons)
    assert text.count("not used") == {"nccl": 1, "perftest": 1, "tcp": 2}[choice.probe]
    if not nccl:
        missing = [n for n, h in has.items() if not (h[0] and h[1])]
        assert f"all_reduce_perf is not on the PATH of {missing[0]}" in text
    if any(n not in found for n in nodes):
        assert "did not report" in text


def test_a_named_probe_whose_tool_is_missing_is_refused() -> None:
    found = {"n1": _tools("n1", True, False, False), "n2": _tools("n2", False, True, True)}
    with pytest.raises(InputError, match=r"--probe nccl: all_reduce_perf is not on the PATH of n2"):
        choose_probe("nccl", found, ["n1", "n2"])
    with pytest.raises(InputError, match=r"--probe perftest: ib_write_bw is not on the PATH of n1"):
        choose_probe("perftest", found, ["n1", "n2"])
    assert choose_probe("tcp", {}, ["n1"]).probe == "tcp"
    with pytest.raises(InputError):
        choose_probe("mpi", found, ["n1"])


def test_the_tools_report_reads_back(tmp_path: Path) -> None:
    """`probe tools` on this machine (no tool on PATH), and a sysfs tree of one active and one down port."""
    for dev, state, layer in (("mlx5_0", "4: ACTIVE", "InfiniBand"), ("mlx5_1", "1: DOWN", "Ethernet")):
        port = tmp_path / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "link_layer").write_text(layer + "\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (tmp_path / "bad name;x").mkdir()
    assert [d["name"] for d in rdma_devices(tmp_path)] == ["mlx5_0"]
    line = tools_task({"SLURMD_NODENAME": "n7"}, SubprocessRunner(), which=lambda _: None, root=tmp_path)
    got = read_tools(line)["n7"]
    assert got.rdma == ("mlx5_0",) and got.link_layers == {"mlx5_0": "InfiniBand"} and got.paths == {}
    assert choose_probe("auto", {"n7": got}, ["n7"]).probe == "tcp"


# ---- which pairs and commands


def test_one_gpu_pair_per_link_class_of_a_real_capture() -> None:
    """Every class the capture prints is measured once, on its first pair, at the level the model gives it."""
    for path in sorted(TOPO.glob("*.txt")):
        try:
            topo = parse_topo_matrix(path.read_text())
        except SlurmTopoError:
            continue
        if not topo.has_links or len(topo.gpus) < 2:
            continue
        got = gpu_classes(topo)
        cells = {topo.link(i, j) for i in topo.gpus for j in topo.gpus if i < j}
        assert {c for _, c, _, _ in got} == cells, path.name
        for level, cls, i, j in got:
            assert topo.link(i, j) == cls
            assert not any(
                topo.link(x, y) == cls for x in topo.gpus for y in topo.gpus if x < y and (x, y) < (i, j)
            )
            assert level == ("nvlink" if cls.startswith("NV") else "sys" if cls in ("SYS", "SOC") else "pcie")
    dgx1 = [(lvl, cls) for lvl, cls, _, _ in gpu_classes(_topology(DGX1))]
    assert dgx1 == [("nvlink", "NV1"), ("nvlink", "NV2"), ("sys", "SYS")]


def test_nccl_runs_a_gpu_pair_per_class_and_a_gpu_on_each_node_per_level() -> None:
    inventory = _fleet()
    network = [("network_group", "a1", "a2"), ("zone", "a1", "b1"), ("any", "a1", "c1")]
    runs, notes = nccl_runs(inventory, ["a1", "a2", "b1", "c1"], network, DEFAULT_TABLE, nbytes=1 << 26)
    assert notes == []
    inside = [r for r in runs if len(r.nodes) == 1]
    assert [(r.level, r.what, r.gpus) for r in inside] == [
        ("nvlink", "NV1", {"a1": (0, 1)}),
        ("nvlink", "NV2", {"a1": (0, 3)}),
        ("sys", "SYS", {"a1": (0, 5)}),
    ]
    assert inside[0].argv == ("all_reduce_perf", "-b", "8", "-e", str(1 << 26), "-f", "2", "-g", "2")
    between = [r for r in runs if len(r.nodes) == 2]
    assert [(r.level, r.nodes, r.gpus) for r in between] == [
        (lvl, (a, b), {a: (0,), b: (0,)}) for lvl, a, b in network
    ]
    assert all(r.argv[-2:] == ("-g", "1") for r in between)


def test_a_network_pair_keeps_one_rail() -> None:
    """With the NICs named per rail, GPU 0 of one node meets the GPU of its rail on the other."""
    inventory = _fleet("dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt", "a100")
    topo = inventory.nodes[0].gpu_topology
    assert topo is not None and topo.nics
    nics = [n for n in topo.nics if n.startswith("mlx5")][:8]
    table = parse_links({"rails": {nic: k for k, nic in enumerate(nics)}})
    runs, _ = nccl_runs(inventory, ["a1", "a2"], [("network_group", "a1", "a2")], table, nbytes=1 << 20)
    (run,) = [r for r in runs if len(r.nodes) == 2]
    assert run.gpus is not None and run.gpus["a1"] == run.gpus["a2"]


def test_the_steps_run_through_srun_like_the_tcp_probe() -> None:
    runs, _ = nccl_runs(
        _fleet(), ["a1", "a2"], [("network_group", "a1", "a2")], DEFAULT_TABLE, nbytes=1 << 20
    )
    argv = tool_step_argv(
        runs[1], runs[1].argv, ["slurm-topo"], {}, time_limit_min=3, srun_args=["--mpi=pmix"]
    )
    assert argv[:10] == [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--nodelist=a1",
        "--job-name=slurm-topo-calibrate",
        "--time=3",
        "--kill-on-bad-exit=1",
        "--overlap",
        "--mpi=pmix",
    ]
    tail = argv[argv.index("slurm-topo") :]
    assert tail[: tail.index("--")] == [
        "slurm-topo", "probe", "tool", "--timeout", "180", "--gpus", "a1=0,3", "--env", "NCCL_DEBUG=VERSION",
    ]  # fmt: skip
    assert tail[tail.index("--") + 1 :] == list(runs[1].argv)
    net = next(r for r in runs if len(r.nodes) == 2)
    argv = tool_step_argv(net, net.argv, ["slurm-topo"], {}, time_limit_min=3)
    assert "--nodes=2" in argv and "--ntasks=2" in argv and "--ntasks-per-node=1" in argv
    assert tools_argv(["b", "a", "a"], ["slurm-topo"])[1:5] == [
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--nodelist=a,b",
    ]


def test_perftest_runs_each_rail_of_a_leaf_and_the_first_further_out() -> None:
    found = {
        n: NodeTools(
            n, {"ib_write_bw": "/usr/bin/ib_write_bw", "ib_write_lat": "/usr/bin/ib_write_lat"}, devs
        )
        for n, devs in (
            ("a1", ("mlx5_0", "mlx5_1", "mlx5_2")),
            ("a2", ("mlx5_0", "mlx5_1")),
            ("b1", ("mlx5_1", "mlx5_0")),
            ("c1", ()),
        )
    }
    table = parse_links({"rails": {"mlx5_1": 0, "mlx5_0": 1, "mlx5_2": 2}})
    network = [("network_group", "a1", "a2"), ("zone", "a1", "b1"), ("any", "a1", "c1")]
    runs, notes = perftest_runs(network, found, table, nbytes=1 << 30, port=18515)
    assert [(r.level, r.what) for r in runs] == [
        ("network_group", "mlx5_1"),
        ("network_group", "mlx5_0"),
        ("zone", "mlx5_1"),
    ]
    assert notes == ["any (a1 <-> c1): no RDMA device both nodes have: not measured"]
    run = runs[0]
    assert run.serve and run.argv == (
        "ib_write_bw", "-d", "mlx5_1", "-b", "-s", str(1 << 23), "-F", "--report_gbits", "-p", "18515",
    )  # fmt: skip
    assert run.companion == ("ib_write_lat", "-d", "mlx5_1", "-s", "2", "-F", "-p", "18515")
    argv = tool_step_argv(run, run.argv, ["slurm-topo"], {"a1": "10.0.0.1"})
    assert argv[argv.index("--serve") : argv.index("--serve") + 3] == ["--serve", "--address", "a1=10.0.0.1"]
    assert "NCCL_DEBUG=VERSION" not in argv
    no_rails, _ = perftest_runs(network[:1], found, DEFAULT_TABLE, nbytes=1 << 20, port=1)
    assert [r.what for r in no_rails] == ["mlx5_0", "mlx5_1"]


# ---- what the real outputs give


def _pair_run(nodes: tuple[str, ...], gpus: dict[str, tuple[int, ...]], level: str = "pcie") -> Run:
    return Run(level, nodes, "PIX" if len(nodes) == 1 else "", "all_reduce_perf", ("all_reduce_perf",), gpus)


def test_a_two_gpu_all_reduce_gives_busbw_and_half_the_small_time() -> None:
    """2× RTX 2080 Ti over PCIe: busbw 4.00 GB/s at 1 GiB; 8 bytes took 12.25 µs = 2(p−1)·α with p = 2."""
    run = _pair_run(("n1",), {"n1": (0, 1)})
    got = read_nccl(run, _tool_line("n1", _text(RTX_ALLREDUCE)))
    assert got.bandwidth == 4.00 and got.latency_us == pytest.approx(12.25 / 2)
    assert got.detail["busbw_at"] == 1073741824 and got.detail["latency_from_bytes"] == 8


def test_a_two_node_all_reduce_without_small_sizes_gives_no_latency() -> None:
    """2 nodes × 1 H100 on one 400G RoCE NIC (INDEX: 14.97-15.18 GB/s), swept from 1 GiB: the bandwidth of the
    largest size, the NCCL version from its INFO lines, and no latency (no small message was sent)."""
    run = _pair_run(("x", "y"), {"x": (0,), "y": (0,)}, "network_group")
    output = "\n".join([_tool_line("x", _text(H100_2NODE)), _tool_line("y", "", rank=1)])
    got = read_nccl(run, output)
    assert got.bandwidth == 14.97 and got.latency_us is None
    assert got.version == "2.26.2+cuda" and got.detail["hosts"] == ["MOC-R4PCC04U37", "MOC-R4PCC04U35"]


def test_an_all_reduce_of_other_ranks_or_elsewhere_is_refused() -> None:
    run = _pair_run(("x", "y"), {"x": (0,), "y": (0,)}, "network_group")
    with pytest.raises(InputError, match="16 ranks, not the 2 asked for"):
        read_nccl(run, "\n".join([_tool_line("x", _text(H100_16)), _tool_line("y", "", 1)]))
    with pytest.raises(PlacementError, match="ran on x,z, not x,y"):
        read_nccl(run, "\n".join([_tool_line("x", _text(H100_2NODE)), _tool_line("z", "", 1)]))
    inside = _pair_run(("x",), {"x": (0, 1)})
    with pytest.raises(PlacementError, match="2 host"):
        read_nccl(inside, _tool_line("x", _text(H100_2NODE)))
    with pytest.raises(InputError, match="no all_reduce table"):
        read_nccl(inside, _tool_line("x", "NCCL WARN nothing\n"))


def test_perftest_bidirectional_is_halved_and_latency_is_the_median() -> None:
    """RoCE loopback, -b: 204.59 Gb/s both directions summed = 12.79 GB/s each way at 8 MiB (perftest
    Gb/sec = 10^9 bit/s); a ConnectX-6 client without -b: 23 317.65 MB/sec (2^20 B) at 8 MiB; CX-7's 2-byte
    write t_typical 1.47 µs."""
    bw = Run("network_group", ("s", "c"), "dev", "ib_write_bw", ("ib_write_bw", "-b"), None, True)
    out = "\n".join([_tool_line("s", "", 0, "serve"), _tool_line("c", _text(BIDIR), 1, "connect")])
    got = read_perftest_bw(bw, out)
    assert got.bandwidth == pytest.approx(204.59e9 / 8 / 2 / 1e9)
    assert got.detail["bidirectional_sum"] == pytest.approx(204.59 / 8) and got.detail["bytes"] == 8388608
    one_way = Run("network_group", ("s", "c"), "mlx5_0", "ib_write_bw", ("ib_write_bw",), None, True)
    cx6 = "\n".join([_tool_line("s", "", 0, "serve"), _tool_line("c", _text(CX6_CLIENT), 1, "connect")])
    assert read_perftest_bw(one_way, cx6).bandwidth == pytest.approx(23317.65 * 2**20 / 1e9)
    with pytest.raises(InputError, match="not a bidirectional test"):
        read_perftest_bw(bw, cx6)
    lat = "\n".join([_tool_line("s", "", 0, "serve"), _tool_line("c", _text(LAT), 1, "connect")])
    assert read_perftest_lat(bw, lat) == 1.47
    with pytest.raises(InputError, match="no bandwidth row"):
        read_perftest_bw(
            bw, "\n".join([_tool_line("s", _text(BIDIR), 0, "serve"), _tool_line("c", "", 1, "connect")])
        )


def _result(level: str, what: str, bandwidth: float, latency: float | None = 2.0) -> Result:
    run = Run(level, ("a1",), what, "all_reduce_perf", ("all_reduce_perf", "-g", "2"), {"a1": (0, 1)})
    return Result(run, bandwidth, latency, "2.26.2", {})


def test_a_level_takes_its_slowest_class_but_a_mesh_keeps_the_plan() -> None:
    figures, notes = level_figures(
        [_result("nvlink", "NV1", 19.5), _result("nvlink", "NV2", 38.0), _result("pcie", "PIX", 11.0, 3.0)]
        + [_result("pcie", "NODE", 9.5, 4.0), _result("sys", "SYS", 8.0, None)],
        "nccl",
    )
    assert [(f.level, f.bandwidth, f.latency_us) for f in figures] == [("pcie", 9.5, 4.0), ("sys", 8.0, None)]
    assert set(figures[0].detail["classes"]) == {"PIX", "NODE"} and figures[0].detail["version"] == "2.26.2"
    assert len(notes) == 1 and "NV1 19.5 GB/s, NV2 38 GB/s" in notes[0] and "NCCL's ring plan" in notes[0]
    one, _ = level_figures([_result("nvlink", "NV18", 360.0)], "nccl")
    assert one[0].level == "nvlink" and one[0].bandwidth == 360.0


class FixtureSteps:
    """Answers each tool step with what `probe tool` prints around a real captured output (the GPU and RDMA
    steps cannot run here): nccl steps with the 2-GPU PCIe all-reduce inside a node, the 2-node RoCE one
    between nodes."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], timeout: float = 30.0) -> str:
        self.calls.append(list(argv))
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1].split(",")
        if len(nodes) == 1:
            return _tool_line(nodes[0], _text(RTX_ALLREDUCE))
        return "\n".join([_tool_line(nodes[0], _text(H100_2NODE)), _tool_line(nodes[1], "", 1)])


def test_a_tool_calibration_writes_figures_and_provenance(tmp_path: Path) -> None:
    steps = FixtureSteps()
    done = run_calibration(
        _fleet(),
        ["a1", "a2", "b1"],
        steps,
        base=DEFAULT_TABLE,
        probe_command=["slurm-topo"],
        addresses={},
        port=47123,
        nbytes=1 << 30,
        repeats=1,
        now=datetime(2026, 12, 3, tzinfo=UTC),
        probe="nccl",
        choice=("nccl: all_reduce_perf is on every node's PATH",),
    )
    # 3 GPU pairs (NV1, NV2, SYS) + network_group + zone
    assert len(steps.calls) == 5 and all(shlex.join(c).startswith("srun ") for c in steps.calls)
    assert done.probe == "nccl"
    assert done.table["sys"].bandwidth == 4.0 and done.table["network_group"].bandwidth == 14.97
    assert done.table["zone"].bandwidth == 14.97  # 14.97 measured: not above the leaf's
    assert "nvlink" not in {m.pair.level for m in done.measured}  # the mesh keeps its plan (a note says)
    path = tmp_path / "links.yaml"
    path.write_text(done.text)
    doc = yaml.safe_load(done.text)["links"]["measured"]
    assert doc["probe"] == "nccl" and doc["probe_choice"] == ["nccl: all_reduce_perf is on every node's PATH"]
    sys_rec = doc["levels"]["sys"]
    assert sys_rec["tool"] == "all_reduce_perf" and sys_rec["gpus"] == [0, 5]
    assert sys_rec["command"].startswith("all_reduce_perf -b 8 -e 1073741824 -f 2 -g 2")
    assert doc["levels"]["network_group"]["version"] == "2.26.2+cuda"
    assert doc["levels"]["network_group"]["latency"].startswith("not measured")
    assert len(doc["runs"]) == 5 and {r["what"] for r in doc["runs"]} >= {"NV1", "NV2", "SYS"}
    inv = load_inventories([path])
    assert inv.links is not None and inv.links.measured is not None
    assert inv.links.measured.probe == "nccl" and inv.links.given == {"sys", "network_group", "zone"}


def test_settings_plan_the_chosen_probe() -> None:
    settings_ = ToolSettings("perftest", DEFAULT_TABLE, ["slurm-topo"], {}, 1, 1 << 20)
    found = {n: NodeTools(n, {"ib_write_bw": "x"}, ("mlx5_0",)) for n in ("a1", "a2", "b1", "c1")}
    runs, notes = plan_tool_runs(_fleet(), ["a1", "a2", "b1", "c1"], settings_, found)
    assert [r.level for r in runs] == ["network_group", "zone", "any"]  # c1: another region
    assert all(r.companion is None for r in runs)  # no ib_write_lat: latency not measured
    assert any("perftest cannot measure GPU links" in n for n in notes)


# ---- on the node


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_visible_devices_follow_the_steps_numbering(data: st.DataObject) -> None:
    """SLURM_STEP_GPUS names the node's GPUs; CUDA_VISIBLE_DEVICES lists them, renumbered from 0 under the
    device cgroup: a GPU is the entry at its position, and one the step was not given is refused."""
    allocated = sorted(data.draw(st.sets(st.integers(0, 15), min_size=1, max_size=8)))
    renumbered = data.draw(st.booleans())
    visible = [str(k) for k in range(len(allocated))] if renumbered else [str(g) for g in allocated]
    env = {"SLURM_STEP_GPUS": ",".join(map(str, allocated)), "CUDA_VISIBLE_DEVICES": ",".join(visible)}
    want = data.draw(st.lists(st.sampled_from(allocated), min_size=1, max_size=2, unique=True))
    got = visible_devices(env, want).split(",")
    assert [allocated[int(x)] if renumbered else int(x) for x in got] == want
    outside = (
        data.draw(st.integers(0, 15).filter(lambda g: g not in allocated)) if len(allocated) < 16 else None
    )
    if outside is not None:
        with pytest.raises(InputError, match=f"GPU {outside} is not among"):
            visible_devices(env, [outside])
    assert visible_devices({}, want) == ",".join(map(str, want))


def test_a_tool_task_reports_its_node_and_the_whole_output() -> None:
    env = {"SLURM_PROCID": "1", "SLURM_STEP_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2"}
    line = tool_task(
        env,
        SubprocessRunner(),
        ["sh", "-c", 'printf "%s|%s\\n" "$CUDA_VISIBLE_DEVICES" "$X_Y" "$@"', "sh"],
        gpus=parse_gpus(["n2=3,1", "n1=0"]),
        variables={"X_Y": "v"},
        serve=True,
        addresses={"n1": "10.1.1.1"},
        timeout=20,
    )
    doc = json.loads(line)
    assert doc["node"] == "n2" and doc["role"] == "connect" and doc["cuda_visible_devices"] == "3,1"
    assert doc["output"] == "3,1|v\n10.1.1.1|\n"  # the server's address appended to the client's argv


def test_a_perftest_client_waits_for_its_server(tmp_path: Path) -> None:
    """The client is refused until the server listens: tried again each second, on the injected clock."""
    flag = tmp_path / "listening"
    now = [0.0]
    tries: list[float] = []

    def sleep(seconds: float) -> None:
        tries.append(now[0])
        now[0] += seconds
        if len(tries) == 3:
            flag.touch()

    env = {"SLURM_PROCID": "1", "SLURM_STEP_NODELIST": "s,c", "SLURMD_NODENAME": "c"}
    argv = ["sh", "-c", f'test -e {flag} && echo "connected to $1"', "sh"]
    line = tool_task(env, SubprocessRunner(), argv, serve=True, timeout=30, clock=lambda: now[0], sleep=sleep)
    assert json.loads(line)["output"] == "connected to s\n" and tries == [0.0, 1.0, 2.0]
    flag.unlink()
    now[0] = 0.0
    tries.clear()
    with pytest.raises(SlurmTopoError, match=r" s exited 1\Z"):  # the tool's own argv, not env(1)'s
        tool_task(env, SubprocessRunner(), argv, serve=True, timeout=2.5, clock=lambda: now[0], sleep=sleep)
    assert tries == [0.0, 1.0]  # given up before the deadline: no third try
