"""`sbatch --locality=prefer -N8` through the submit filter on the benchmark fleet: the filter's `--prefer`
bracket carries zone unions (`(zone_a|zone_b)`) after the zones and around the regions, so an 8-node job no
zone can hold lands on the fewest regions, then zones, the free nodes allow — the busy patterns where the
region cascade alone spread it (tests/integration/test_placement_zone_sets.py measures the same forms as raw
strings). Assertions read `scontrol show job -d`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import slurmctl
import yaml
from test_placement_zone_sets import BUSY, FLEET, N, fewest

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster(
        "zone-unions-filter", yaml.safe_load(FLEET.read_text()), "--with-filter", nodes_max=32
    ) as c:
        yield c


def test_prefer_through_the_filter_reaches_the_fewest_regions_then_zones(cluster: slurmctl.Cluster) -> None:
    slurm = cluster.slurm
    feats = slurm.all_node_features()
    region = {n: next(f for f in fs if f.startswith("region_")) for n, fs in feats.items()}
    zone = {n: next(f for f in fs if f.startswith("zone_")) for n, fs in feats.items()}
    for busy in BUSY:
        slurm.quiesce()
        busy_nodes = slurm.hostnames(busy)
        free = [n for n in feats if n not in busy_nodes]
        filler = slurm.submit("--locality=any", "--exclusive", f"-N{len(busy_nodes)}", f"--nodelist={busy}",
                              "--wrap", "sleep 300")  # fmt: skip
        slurm.wait_state(filler, "RUNNING")
        job = slurm.submit("--locality=prefer", "--exclusive", f"-N{N}", "--wrap", "sleep 300")
        info = slurm.wait_state(job, "RUNNING", timeout=30)
        # a running job that got its preferred features shows them as Features= (22.05) or Prefer=
        assert "(zone_" in info.get("Prefer", "") + info.get("Features", ""), info
        nodes = slurm.allocation_of(job).nodes
        got = (len({region[n] for n in nodes}), len({zone[n] for n in nodes}))
        assert got == fewest(free, region, zone, N), f"{busy}: {nodes}"
        slurm.cancel(job, filler)
    slurm.quiesce()
