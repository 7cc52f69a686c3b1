"""8-node jobs that no zone can hold: zone unions in the ``--prefer`` bracket reach the fewest zones on
real Slurm (benchmarks/results/placement.md, "Zone unions").

With the cascade the filter writes today (``[region_us-east1|region_us-central1]`` for 8 nodes on the
benchmark fleet) Slurm's topology/tree places the job inside the first region with room, or with the plain
tree when no region has room, and its leaf choice spreads it: it takes the last nodes from the
tightest-fitting rack even in a third zone (busy pattern 3 of bench_placement.py, seed 1: 3 zones where 2
were free) or fills the larger region with all its zone fragments first (pattern 6: 2 regions and 4 zones
where 3 zones would do). Slurm reads a parenthesised OR inside the matching-OR bracket as one alternative
(``[(zone_a|zone_b)|…]``) and tries the alternatives in the listed order, so listing zone unions ordered by
(regions, zones) spanned, before the regions when they lie in one region and after them when they span
several, lands the job on the fewest regions, then zones, that the free nodes allow.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

FLEET = Path(__file__).resolve().parents[2] / "examples" / "benchmark-five-zones.yaml"
N = 8
# busy patterns 3 and 6 of bench_placement.py (seed 1): no zone has 8 free nodes; in 6 no region has either
BUSY = ["n[01,03-05,08,11,17,22,24-25,27-29]", "n[03-04,06-09,11-12,14-16,19,21-26]"]


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("placement-zone-sets", yaml.safe_load(FLEET.read_text()), nodes_max=32) as c:
        yield c


def groups(feats: dict[str, tuple[str, ...]], prefix: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for node, fs in feats.items():
        for f in fs:
            if f.startswith(prefix):
                out.setdefault(f, set()).add(node)
    return out


def zone_set_form(feats: dict[str, tuple[str, ...]], n: int) -> list[str]:
    """Zones, unions of 2-3 zones and regions that can ever hold n, by (regions, zones) spanned."""
    zones, regions = groups(feats, "zone_"), groups(feats, "region_")
    region_of = {z: next(r for r, v in regions.items() if v >= nodes) for z, nodes in zones.items()}
    alts: list[tuple[tuple[int, int, int, int], str]] = []
    alts += [((1, 1, 0, len(v)), z) for z, v in zones.items() if len(v) >= n]
    alts += [((1, len(zones) + 1, 2, len(v)), r) for r, v in regions.items() if len(v) >= n]
    for k in (2, 3):
        for combo in itertools.combinations(sorted(zones), k):
            size = sum(len(zones[z]) for z in combo)
            if size >= n:
                spread = len({region_of[z] for z in combo})
                alts.append(((spread, k, 1, size), "(" + "|".join(combo) + ")"))
    alts.sort(key=lambda a: a[0])
    return [text for _, text in alts]


def fewest(free: list[str], region: dict[str, str], zone: dict[str, str], n: int) -> tuple[int, int]:
    """(regions, zones) of the placement with the fewest regions, then zones, among the free nodes."""
    count: dict[str, int] = {}
    for x in free:
        count[zone[x]] = count.get(zone[x], 0) + 1
    reg = {zone[x]: region[x] for x in free}
    best: tuple[int, int] | None = None
    for k in range(1, len(count) + 1):
        for combo in itertools.combinations(count, k):
            if sum(count[z] for z in combo) >= n:
                cand = (len({reg[z] for z in combo}), k)
                best = cand if best is None or cand < best else best
    assert best is not None
    return best


def place(slurm: slurmctl.Slurm, busy: str, prefer: str) -> tuple[str, ...]:
    slurm.quiesce()
    busy_nodes = slurm.hostnames(busy)
    filler = slurm.submit("--exclusive", f"-N{len(busy_nodes)}", f"--nodelist={busy}", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit("--exclusive", f"-N{N}", f"--prefer={prefer}", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING", timeout=30)
    nodes = slurm.allocation_of(job).nodes
    slurm.cancel(job, filler)
    return nodes


def test_zone_unions_in_the_prefer_bracket_reach_the_fewest_zones_where_the_region_cascade_does_not(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    feats = slurm.all_node_features()
    region = {n: next(f for f in fs if f.startswith("region_")) for n, fs in feats.items()}
    zone = {n: next(f for f in fs if f.startswith("zone_")) for n, fs in feats.items()}
    regions = groups(feats, "region_")
    cascade = "[" + "|".join(
        sorted((r for r in regions if len(regions[r]) >= N), key=lambda r: len(regions[r]))
    )
    cascade += "]"
    alternatives = zone_set_form(feats, N)
    form = "[" + "|".join(alternatives) + "]"
    assert len(form) <= 1024 and len(alternatives) <= 64  # Slurm's limits
    cascade_misses = 0
    for busy in BUSY:
        free = [n for n in feats if n not in slurm.hostnames(busy)]
        assert max(sum(1 for n in free if zone[n] == z) for z in set(zone.values())) < N, "precondition"
        want = fewest(free, region, zone, N)
        nodes = place(slurm, busy, form)
        assert (len({region[n] for n in nodes}), len({zone[n] for n in nodes})) == want, f"{busy}: {nodes}"
        got = place(slurm, busy, cascade)
        cascade_misses += (len({region[n] for n in got}), len({zone[n] for n in got})) != want
    # the control: the region cascade spread both jobs over more zones than the free nodes required
    assert cascade_misses == len(BUSY)
