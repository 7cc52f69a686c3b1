"""Rails in the cost model: the inventory's ``links: {rails: …}`` (NIC -> rail), each GPU's rail from its
closest NIC in ``nvidia-smi topo -m``, and a cross-rail hop inside one network group counted as a spine
(``zone``) hop — through the model, ``explain``'s prediction and ``slurm-topo cost``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Inventory, Location, Node
from slurm_topo.cost import DEFAULT_TABLE, Fabric, PlanSpec, pair_level, parse_links, ring_allreduce
from slurm_topo.cost.comm import gpu_rails, place_ranks, score_placement
from slurm_topo.cost.links import parse_rails
from slurm_topo.gpu.gpu_topology import GpuTopology
from slurm_topo.gpu.nvidia_smi import parse_topo_matrix
from slurm_topo.inventory import parse_inventory
from slurm_topo.reports.explain import predict_cost

REAL = Path(__file__).parent / "fixtures" / "real" / "topo"
DGX_A100 = REAL / "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt"
H800 = REAL / "h800-8gpu-nv18-10nic-merged-affinity-numa.txt"


def capture(nics: list[str], near: list[int]) -> str:
    """A 2-GPU ``nvidia-smi topo -m`` capture: GPU i is PIX to NIC ``near[i]``, SYS to the others, and
    every GPU is PXB to a last NIC (storage)."""
    n = len(nics)
    head = "\tGPU0\tGPU1\t" + "\t".join(f"NIC{c}" for c in range(n + 1)) + "\tCPU Affinity\tNUMA Affinity"
    rows = []
    for g in range(2):
        cells = ["PIX" if c == near[g] else "SYS" for c in range(n)] + ["PXB"]
        rows.append(
            f"GPU{g}\t" + ("X\tNV18" if g == 0 else "NV18\tX") + "\t" + "\t".join(cells) + "\t0-11\t0"
        )
    for c in range(n + 1):
        cells = ["PXB" if c == n else ("PIX" if near[g] == c else "SYS") for g in range(2)]
        cells += ["X" if d == c else "SYS" for d in range(n + 1)]
        rows.append(f"NIC{c}\t" + "\t".join(cells))
    legend = "\n".join(f"  NIC{c}: {name}" for c, name in enumerate([*nics, "mlx5_stor"]))
    return "\n".join([head, *rows, "", "Legend:", "", "  X    = Self", "", "NIC Legend:", "", legend, ""])


STRAIGHT = capture(["mlx5_0", "mlx5_1"], [0, 1])  # GPU0 on mlx5_0, GPU1 on mlx5_1
CROSSED = capture(["mlx5_0", "mlx5_1"], [1, 0])  # cabled the other way round
RAILS = {"mlx5_0": 0, "mlx5_1": 1}


def two_nodes(a: str = STRAIGHT, b: str = CROSSED) -> Fabric:
    loc = Location("r", "z", "g")
    nodes = (
        Node("a", loc, gpus=2, gpu_topology=parse_topo_matrix(a, source="a")),
        Node("b", loc, gpus=2, gpu_topology=parse_topo_matrix(b, source="b")),
    )
    return Fabric.of(Inventory(nodes))


# ---- the links.rails key


def test_rails_parse_numbers_and_labels_and_gpu_index() -> None:
    assert dict(parse_rails({"mlx5_0": 0, "mlx5_gdr_1": "rail-b"})) == {"mlx5_0": "0", "mlx5_gdr_1": "rail-b"}
    assert dict(parse_rails("gpu_index")) == {}
    table = parse_links({"rails": RAILS, "zone": {"bandwidth": 20}})
    assert dict(table.rails or {}) == {"mlx5_0": "0", "mlx5_1": "1"} and table["zone"].bandwidth == 20
    # a later links: mapping without rails keeps them; with_link keeps them; none given: no rails
    assert parse_links({"zone": {"bandwidth": 15}}, base=table).rails == table.rails
    assert table.with_link("any", table["any"]).rails == table.rails
    assert parse_links({"zone": {"bandwidth": 15}}).rails is None and DEFAULT_TABLE.rails is None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("yes", "must be a mapping NIC -> rail"),
        ({}, "must be a mapping NIC -> rail"),
        ([0, 1], "must be a mapping NIC -> rail"),
        ({"mlx5 0": 0}, "NIC name 'mlx5 0' must be 1-63 characters"),
        ({"mlx5_0=1": 0}, "NIC name"),
        ({3: 0}, "NIC name 3"),
        ({"mlx5_0": True}, "rail must be a whole number"),
        ({"mlx5_0": -1}, "rail must be a whole number"),
        ({"mlx5_0": 70000}, "rail must be a whole number"),
        ({"mlx5_0": 1.5}, "rail must be a whole number"),
        ({"mlx5_0": "rail a"}, "rail must be a whole number"),
        ({"mlx5_0": None}, "rail must be a whole number"),
        ({f"n{i}": i for i in range(1025)}, "more than 1024"),
    ],
)
def test_bad_rails_are_one_clear_line(raw: object, words: str) -> None:
    with pytest.raises(InputError, match=words) as info:
        parse_links({"rails": raw}, source="fleet.yaml: links")
    assert "fleet.yaml: links.rails" in str(info.value) and "\n" not in str(info.value)


def test_inventory_refuses_bad_rails() -> None:
    """The inventory's links: is validated at load (rails included), before anything is written."""
    text = "links: {rails: {mlx5_0: [0]}}\nnodes:\n  - {name: a, region: r, zone: z}\n"
    with pytest.raises(InputError, match=r"inv.yaml: links.rails.mlx5_0: rail must be"):
        parse_inventory(text, source="inv.yaml")
    good = "links: {rails: {mlx5_0: 0}}\nnodes:\n  - {name: a, region: r, zone: z}\n"
    assert [n.name for n in parse_inventory(good, source="inv.yaml").nodes] == ["a"]


# ---- GPU -> rail from the closest NIC


def test_gpu_rails_from_the_real_dgx_a100_capture() -> None:
    """DGX A100: two GPUs and two compute NICs behind each PCIe switch (all PXB): GPU k takes the k-th compute
    NIC; the storage NICs (mlx5_4, 5, 10, 11) are not in the map and carry no job traffic."""
    topo = parse_topo_matrix(DGX_A100.read_text(), source=DGX_A100.name)
    compute = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    rails = parse_rails({nic: k for k, nic in enumerate(compute)})
    assert dict(gpu_rails(topo, rails)) == {g: str(g) for g in range(8)}


def test_gpu_rails_prefer_pix_over_pxb_and_skip_unmapped_nics() -> None:
    """H800: GPU 0 is PIX to mlx5_gdr_0 and PXB to gdr_1-3 and the storage NIC: its rail is gdr_0's."""
    topo = parse_topo_matrix(H800.read_text(), source=H800.name)
    rails = parse_rails({f"mlx5_gdr_{k}": f"r{k}" for k in range(8)})
    got = gpu_rails(topo, rails)
    assert got[0] == "r0" and got[1] == "r1" and len(set(got.values())) == 8
    # a map naming only the storage NIC: it is PXB to GPU 0, so GPU 0 sits on its rail
    assert gpu_rails(topo, parse_rails({"mlx5_stor_0": "storage"}))[0] == "storage"


# ---- the model


def test_cross_rail_hop_inside_one_group_is_a_spine_hop() -> None:
    """a's GPU 0 and b's GPU 0 are cabled to different rails: a ring between them crosses rails (zone) once
    the inventory names the rails; b's GPU 1 is on a's GPU 0's rail."""
    fabric = two_nodes()
    rails = parse_links({"rails": RAILS})
    index = parse_links({"rails": "gpu_index"})
    ring = [("a", 0), ("b", 0)]
    assert ring_allreduce(fabric, ring, 1e9, DEFAULT_TABLE)[1].level == "network_group"
    assert ring_allreduce(fabric, ring, 1e9, rails)[1].level == "zone"
    assert ring_allreduce(fabric, ring, 1e9, index)[1].level == "network_group"  # same index, rail = index
    assert ring_allreduce(fabric, [("a", 0), ("b", 1)], 1e9, rails)[1].level == "network_group"
    assert ring_allreduce(fabric, [("a", 0), ("b", 1)], 1e9, index)[1].level == "zone"
    assert pair_level(fabric, ("a", 0), ("b", 0), rails) == "zone"
    assert pair_level(fabric, ("a", 0), ("b", 1), rails) == "network_group"
    assert pair_level(fabric, ("a", 0), ("b", 0)) == "network_group"
    # both nodes cabled alike: no cross-rail hop
    assert ring_allreduce(two_nodes(b=STRAIGHT), ring, 1e9, rails)[1].level == "network_group"


def test_a_plan_over_crossed_nodes_costs_the_spine() -> None:
    """DP 4 over two 2-GPU nodes (tp 1): the DP ring goes a0 a1 b0 b1; with the rails known and b cabled the
    other way round, its rails per node still match ({0, 1} on both) — the same cost; with tp 2 × pp 2 the
    pipeline hop a -> b joins GPU 0 to GPU 0 on different rails: a spine hop."""
    fabric = two_nodes()
    rails = parse_links({"rails": RAILS})
    dp = PlanSpec(allreduce_bytes=1e10)
    assert (
        score_placement(fabric, ["a", "b"], dp, rails).seconds
        == score_placement(fabric, ["a", "b"], dp).seconds
    )
    pp = PlanSpec(tp=2, pp=2, tp_bytes=1e9, pp_bytes=1e9)
    plain = {t.kind: t.level for t in score_placement(fabric, ["a", "b"], pp).terms}
    railed = {t.kind: t.level for t in score_placement(fabric, ["a", "b"], pp, rails).terms}
    assert plain["pp"] == "network_group" and railed["pp"] == "zone"


def test_explain_prediction_uses_the_rails() -> None:
    """explain's cost lines (predict_cost, with the link table the command reads from the inventories)."""
    fabric = two_nodes()
    inv = Inventory(tuple(fabric.nodes.values()))
    job = {"JobId": "7", "NodeList": "a,b", "Comment": "plan=tp=2,pp=2,pp_bytes=1G,tp_bytes=1G"}
    plain = predict_cost(job, inv, None)
    railed = predict_cost(job, inv, None, table=parse_links({"rails": RAILS}))
    assert any("bottleneck: pp at network group" in ln for ln in plain.lines), plain.lines
    assert any("bottleneck: pp at zone" in ln for ln in railed.lines), railed.lines


# ---- slurm-topo cost


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_cost_command_reads_rails_from_the_inventory(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(STRAIGHT)
    (tmp_path / "b.txt").write_text(CROSSED)
    d = tmp_path
    nodes = "nodes:\n" + "".join(
        f"  - {{name: {n}, region: r, zone: z, network_group: g, gpus: 2, gpu_topology: {d / n}.txt}}\n"
        for n in ("a", "b")
    )
    (tmp_path / "plain.yaml").write_text(nodes)
    (tmp_path / "rails.yaml").write_text(nodes + "links:\n  rails: {mlx5_0: 0, mlx5_1: 1}\n")
    (tmp_path / "bad.yaml").write_text(nodes + "links:\n  rails: {mlx5_0: -3}\n")
    args = [
        "--nodes",
        "a,b",
        "--tp",
        "2",
        "--pp",
        "2",
        "--pp-bytes",
        "1G",
        "--allreduce-bytes",
        "1G",
        "--json",
    ]
    levels = {}
    for name in ("plain", "rails"):
        proc = run("cost", "-i", str(tmp_path / f"{name}.yaml"), *args)
        assert proc.returncode == 0, proc.stderr
        levels[name] = {t["kind"]: t["level"] for t in json.loads(proc.stdout)["terms"]}
    assert levels["plain"]["pp"] == "network_group" and levels["rails"]["pp"] == "zone"
    bad = run("cost", "-i", str(tmp_path / "bad.yaml"), *args)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "links.rails.mlx5_0: rail must be" in bad.stderr, bad.stderr


def test_the_model_lays_a_job_on_the_same_local_gpus_as_gpulayer_srun() -> None:
    """Node a's best 4 GPUs are its fast island 4-7; node b's two islands are alike, so b takes 4-7 too (rule
    3a) and the DP rings between them stay on one rail: network_group, not zone."""

    def islands(first: str, second: str) -> tuple[tuple[str, ...], ...]:
        return tuple(
            tuple(
                "X" if i == j else (first if i < 4 else second) if (i < 4) == (j < 4) else "SYS"
                for j in range(8)
            )
            for i in range(8)
        )

    loc = Location("r", "z", "g")
    a = Node("a", loc, gpus=8, gpu_topology=GpuTopology(tuple(range(8)), islands("NV4", "NV18")))
    b = Node("b", loc, gpus=8, gpu_topology=GpuTopology(tuple(range(8)), islands("NV4", "NV4")))
    fabric = Fabric.of(Inventory((a, b)))
    spec = PlanSpec(tp=4, gpus_per_node=4, allreduce_bytes=1e10)
    ranks = place_ranks(fabric, ["a", "b"], spec)
    assert {r.gpu for r in ranks if r.node == "b"} == {4, 5, 6, 7}
    dp = {
        t.kind: t.level
        for t in score_placement(fabric, ["a", "b"], spec, parse_links({"rails": "gpu_index"})).terms
    }
    assert dp["dp"] == "network_group"
