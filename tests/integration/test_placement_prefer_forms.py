"""Which ``--prefer`` form keeps a job in one region on real Slurm 22.05 (benchmarks/results/placement.md).

A matching OR over one level (what the filter wrote: the zones that can hold the job) cannot start when no
zone has room now, and Slurm then places the job with the plain tree, which spans both regions in these busy
patterns of the benchmark fleet (6-node jobs, zones of 6). One matching OR over every level, finest first —
``[zone_…|…|region_us-east1|region_us-central1]`` — is tried alternative by alternative in the listed order,
so the job lands in the first region with room, in the fewest zones (2) those free nodes allow.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

FLEET = Path(__file__).resolve().parents[2] / "examples" / "benchmark-five-zones.yaml"
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "us-east1-b", "us-east1-c"]
ONE_LEVEL = "[" + "|".join(f"zone_{z}" for z in ZONES) + "]"
MIXED = ONE_LEVEL[:-1] + "|region_us-east1|region_us-central1]"
# busy patterns 2, 3 and 7 of bench_placement.py (seed 1): no zone has 6 free nodes, us-east1 has 6 or more
BUSY = [
    "n[05-06,09-10,15,17-18,20-21,23-25]",
    "n[01,03-05,08,11,17,22,24-25,27-29]",
    "n[03-04,10-11,13-14,20,23-24,29]",
]


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("placement-prefer", yaml.safe_load(FLEET.read_text()), nodes_max=32) as c:
        yield c


def place(slurm: slurmctl.Slurm, busy: str, prefer: str) -> tuple[str, ...]:
    slurm.quiesce()
    busy_nodes = slurm.hostnames(busy)
    filler = slurm.submit("--exclusive", f"-N{len(busy_nodes)}", f"--nodelist={busy}", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit("--exclusive", "-N6", f"--prefer={prefer}", "--wrap", "sleep 300")
    slurm.wait_state(job, "RUNNING", timeout=30)
    nodes = slurm.allocation_of(job).nodes
    slurm.cancel(job, filler)
    return nodes


def test_mixed_level_prefer_keeps_a_6_node_job_in_one_region_where_one_level_does_not(
    cluster: slurmctl.Cluster,
) -> None:
    slurm = cluster.slurm
    feats = slurm.all_node_features()
    region = {n: next(f for f in fs if f.startswith("region_")) for n, fs in feats.items()}
    zone = {n: next(f for f in fs if f.startswith("zone_")) for n, fs in feats.items()}
    one_level_spans = 0
    for busy in BUSY:
        free = [n for n in feats if n not in slurm.hostnames(busy)]
        assert max(sum(1 for n in free if zone[n] == z) for z in set(zone.values())) < 6, "precondition"
        nodes = place(slurm, busy, MIXED)
        assert {region[n] for n in nodes} == {"region_us-east1"}, f"{busy}: {nodes}"
        assert len({zone[n] for n in nodes}) == 2, f"{busy}: {nodes}"
        one_level_spans += len({region[n] for n in place(slurm, busy, ONE_LEVEL)}) > 1
    # the control: with the one-level form the same jobs fell back to the plain tree and spanned regions
    assert one_level_spans >= 1
