"""gpu.rings.gpu_order's cache: keyed by what decides the order (the GPUs and the levels between them), so a
topology freed and another made at the same address never gets the first one's order."""

from __future__ import annotations

from slurm_topo.gpu import links as links_module
from slurm_topo.gpu import rings
from slurm_topo.gpu.gpu_topology import GpuTopology


def _topo(nvlink: set[frozenset[int]], n: int = 4) -> GpuTopology:
    """``n`` GPUs; the pairs in ``nvlink`` on NV4, every other pair across SYS."""
    matrix = tuple(
        tuple("X" if i == j else ("NV4" if frozenset((i, j)) in nvlink else "SYS") for j in range(n))
        for i in range(n)
    )
    return GpuTopology(gpus=tuple(range(n)), matrix=matrix)


CHAIN_A = {frozenset(p) for p in ((0, 2), (2, 1), (1, 3))}  # NVLink path 0-2-1-3
CHAIN_B = {frozenset(p) for p in ((0, 3), (3, 1), (1, 2))}  # NVLink path 0-3-1-2


def test_a_freed_topology_s_order_is_not_given_to_the_next_one() -> None:
    """Make, order and free a topology many times, alternating two link layouts: CPython hands the next one
    the freed one's address (``id``) again and again; every answer is still that topology's own chain. (The
    per-topology memo keeps a topology alive while it holds its answers and drops them all when full, so
    addresses come back after each drop: the loop runs past it several times.)"""
    rings._ORDER_CACHE.clear()
    reused = 0
    seen: set[int] = set()
    for k in range(4 * links_module._PER_TOPOLOGY_MAX + 8):
        links, want = (CHAIN_A, (0, 2, 1, 3)) if k % 2 == 0 else (CHAIN_B, (0, 3, 1, 2))
        topo = _topo(links)
        reused += id(topo) in seen
        assert rings.gpu_order(topo, range(4), closed=False) == want, (k, reused)
        seen.add(id(topo))
        del topo
    assert reused, "the test never saw an address reused; it proves nothing here"


def test_equal_links_share_one_entry_and_the_cache_holds_no_topology() -> None:
    rings._ORDER_CACHE.clear()
    one, two = _topo(CHAIN_A), _topo(CHAIN_A)
    assert rings.gpu_order(one, range(4), closed=False) == rings.gpu_order(two, range(4), closed=False)
    assert len(rings._ORDER_CACHE) == 1
    assert not any(isinstance(x, GpuTopology) for key in rings._ORDER_CACHE for x in key)


def test_real_captures_made_and_freed_in_turn_keep_their_own_order() -> None:
    """Real 8-GPU captures (a DGX-1 hybrid cube-mesh, a two-socket PCIe box, an NVSwitch box): a topology of
    each made (a copy of the parsed one), ordered and freed in turn 300 times: each order is the one that
    capture gets alone (computed first with an empty cache), whatever address the topology lands at."""
    from dataclasses import replace
    from pathlib import Path

    from slurm_topo.gpu.nvidia_smi import parse_topo_matrix

    topo_dir = Path(__file__).resolve().parent / "fixtures" / "real" / "topo"
    names = (
        "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt",
        "rtx3090-8gpu-pcie-node-sys-dualsocket.txt",
        "dgx-a100-8gpu-12mlx5-numa-noGpuNumaId.txt",
    )
    parsed = {name: parse_topo_matrix((topo_dir / name).read_text()) for name in names}
    alone = {}
    for name, topo in parsed.items():
        rings._ORDER_CACHE.clear()
        alone[name] = (
            rings.gpu_order(topo, range(8), closed=True),
            rings.gpu_order(topo, (0, 3, 4, 7), closed=False),
        )
    assert len({order for order, _ in alone.values()}) > 1, "the captures' rings should differ"
    rings._ORDER_CACHE.clear()
    seen: set[int] = set()
    reused = 0
    for i in range(300):
        name = names[i % len(names)]
        topo = replace(parsed[name])
        reused += id(topo) in seen
        seen.add(id(topo))
        got = (
            rings.gpu_order(topo, range(8), closed=True),
            rings.gpu_order(topo, (0, 3, 4, 7), closed=False),
        )
        assert got == alone[name], (i, name)
        del topo
    assert reused, "no address was reused; the test proves nothing here"


def test_one_topology_s_memo_stays_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A long-lived process (report, metrics) asks many orders of one node model: the topology's memo is
    dropped past its bound, and the answers stay right after the drop."""
    from itertools import combinations

    from slurm_topo.gpu.links import remembered

    monkeypatch.setattr(rings, "_ASKED_PER_TOPOLOGY", 8)
    topo = _topo(CHAIN_A | {frozenset((0, 3))}, n=6)
    for gpus in combinations(range(6), 4):
        got = rings.gpu_order(topo, gpus, closed=False)
        assert sorted(got) == list(gpus)
        assert len(remembered(topo)) <= 8 + 3  # the orders and at most rows, islands, fastest
    assert rings.gpu_order(topo, range(4), closed=False) == (0, 2, 1, 3)
