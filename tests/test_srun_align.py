"""gpulayer-srun's replica alignment (``srun.plan._align_replicas``) tries only swaps inside one pipeline: a
swap inside one stage keeps that stage's nodes and GPUs, so it can never be kept. Checked against the search
over both kinds of swap, written out here, on random layouts (hypothesis)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo.access.text import parse_scontrol_topology
from slurm_topo.srun.plan import ALIGN_ROUNDS, _align_replicas, _hop

TREE = parse_scontrol_topology(
    "SwitchName=root Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=l1,l2\n"
    "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=n[1-2]\n"
    "SwitchName=l2 Level=0 LinkSpeed=1 Nodes=n[3-4]\n"
)


def both_kinds(
    at: dict[tuple[int, int], int], slots: list[tuple[str, tuple[int, ...]]], pp: int, dp: int
) -> dict:
    """The search over swaps inside a pipeline *or* a stage (the rule before), as its docstring says."""
    at = dict(at)
    keys = sorted(at)
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :] if a[0] == b[0] or a[1] == b[1]]

    def cost(d: int) -> int:
        return sum(_hop(TREE, slots[at[(s, d)]][0], slots[at[(s + 1, d)]][0], None) for s in range(pp - 1))

    def mismatch(s: int) -> int:
        nodes = Counter(slots[at[(s, d)]][0] for d in range(dp))
        gpus = Counter(slots[at[(s, d)]][1] for d in range(dp))
        return dp * (dp - 1) // 2 - sum(c * (c - 1) // 2 for c in (*nodes.values(), *gpus.values()))

    for _ in range(ALIGN_ROUNDS):
        improved = False
        for a, b in pairs:
            before = (sum(map(cost, {a[1], b[1]})), sum(map(mismatch, {a[0], b[0]})))
            at[a], at[b] = at[b], at[a]
            after = (sum(map(cost, {a[1], b[1]})), sum(map(mismatch, {a[0], b[0]})))
            if after[0] <= before[0] and after[1] < before[1]:
                improved = True
            else:
                at[a], at[b] = at[b], at[a]
        if not improved:
            break
    return at


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 4), st.integers(2, 5), st.randoms(use_true_random=False))
def test_pipeline_swaps_alone_align_as_both_kinds_do(pp: int, dp: int, rnd: object) -> None:
    slots = [(f"n{1 + k // 8}", (k % 8,)) for k in range(32)]
    cells = [(s, d) for s in range(pp) for d in range(dp)]
    chosen = rnd.sample(range(len(slots)), len(cells))  # type: ignore[attr-defined]
    at = dict(zip(cells, chosen, strict=True))
    assert _align_replicas(at, slots, TREE, pp, dp) == both_kinds(at, slots, pp, dp)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 6),
    st.integers(2, 16),
    st.sampled_from([(1,), (2,), (4,)]),
    st.randoms(use_true_random=False),
)
def test_counted_swaps_equal_the_recounted_search_on_larger_layouts(
    pp: int, dp: int, group: tuple[int], rnd: object
) -> None:
    """The alignment keeps per-stage counts of nodes and GPU groups and reads a swap's change off them
    (O(1) a swap, not O(dp)); on layouts of up to 6 × 16 cells over four nodes, with TP groups of 1, 2 and 4
    GPUs and GPU groups shared by several replicas, it keeps exactly the swaps the recounting search keeps."""
    size = group[0]
    slots = [
        (f"n{1 + k // (8 // size)}", tuple(range((k % (8 // size)) * size, (k % (8 // size) + 1) * size)))
        for k in range(4 * 8 // size)
    ]
    cells = [(s, d) for s in range(pp) for d in range(dp)]
    if len(cells) > len(slots):
        slots = slots * (len(cells) // len(slots) + 1)  # slots named alike: pairs that match on both counts
    chosen = rnd.sample(range(len(slots)), len(cells))  # type: ignore[attr-defined]
    at = dict(zip(cells, chosen, strict=True))
    got = _align_replicas(at, slots, TREE, pp, dp)
    want = both_kinds(at, slots, pp, dp)
    assert sorted(got.values()) == sorted(at.values())
    assert [
        sum(c * (c - 1) // 2 for c in Counter(slots[got[(s, d)]] for d in range(dp)).values())
        for s in range(pp)
    ] == [
        sum(c * (c - 1) // 2 for c in Counter(slots[want[(s, d)]] for d in range(dp)).values())
        for s in range(pp)
    ]
    assert got == want
