"""The locality filter's ``--prefer`` cascade on real Slurm 22.05, through sbatch, the SPANK plugin and
job_submit/lua (``cluster up --with-filter``) on the benchmark fleet (examples/benchmark-five-zones.yaml).

``test_placement_prefer_forms.py`` shows with raw strings that one matching OR over every level, finest first,
keeps a 6-node job in one region in busy patterns where the one-level form (what the filter wrote before)
falls back to the plain tree and spans both regions. Here the filter writes that form itself: the default
locality and ``--locality=prefer`` put the same string in the job's Prefer, and the job lands in the fewest
regions, then the fewest zones. A required region keeps its bracket (smallest region first) and gets a
``--prefer`` of the zones inside it: a 4-node job then starts in one free zone, where the bracket alone takes
the smaller region first and spreads the job over two of its zones. (Zone unions in the cascade:
test_prefer_zone_unions_through_the_filter.py.)
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
# the zones, the unions of two zones of one region (us-east1's two zones are the region itself), the regions,
# then unions across the regions (test_prefer_zone_unions_through_the_filter.py)
CASCADE_6 = (
    "[" + "|".join(f"zone_{z}" for z in ZONES) + "|(zone_us-central1-a|zone_us-central1-b)|"
    "(zone_us-central1-a|zone_us-central1-c)|(zone_us-central1-b|zone_us-central1-c)|region_us-east1|"
    "region_us-central1|(zone_us-central1-a|zone_us-east1-b)|"
)
# busy patterns 2, 3 and 7 of bench_placement.py (seed 1): no zone has 6 free nodes, us-east1 has 6 or more
BUSY = [
    "n[05-06,09-10,15,17-18,20-21,23-25]",
    "n[01,03-05,08,11,17,22,24-25,27-29]",
    "n[03-04,10-11,13-14,20,23-24,29]",
]
# us-east1 (the smaller region, first in a region bracket) has 6 free nodes, 3 a zone; us-central1 is free
EAST_SPLIT = "n[19-21,25-27]"


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    fleet = yaml.safe_load(FLEET.read_text())
    with scratch_cluster("prefer-cascade", fleet, "--with-filter", nodes_max=32) as c:
        yield c


def _where(slurm: slurmctl.Slurm) -> tuple[dict[str, str], dict[str, str]]:
    feats = slurm.all_node_features()
    region = {n: next(f for f in fs if f.startswith("region_")) for n, fs in feats.items()}
    zone = {n: next(f for f in fs if f.startswith("zone_")) for n, fs in feats.items()}
    return region, zone


def _run(slurm: slurmctl.Slurm, busy: str, *args: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Fill ``busy``, submit the job held (to read what the filter wrote while it pends), release it, and
    return what Slurm recorded at submit and the nodes it got."""
    slurm.quiesce()
    busy_nodes = slurm.hostnames(busy)
    filler = slurm.submit(
        "--exclusive", f"-N{len(busy_nodes)}", f"--nodelist={busy}", "--locality=any", "--wrap", "sleep 300"
    )
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit("--hold", "--exclusive", *args, "--wrap", "sleep 300")
    info = slurm.wait_state(job, "PENDING")
    info["shown"] = slurm.out("scontrol", "show", "job", job)  # AdminComment holds spaces
    slurm.out("scontrol", "release", job)
    slurm.wait_state(job, "RUNNING", timeout=30)
    nodes = slurm.allocation_of(job).nodes
    slurm.cancel(job, filler)
    return info, nodes


@pytest.mark.parametrize("locality", [None, "prefer"], ids=["default", "prefer"])
def test_prefer_cascade_lands_6_node_jobs_in_one_region_then_fewest_zones(
    cluster: slurmctl.Cluster, locality: str | None
) -> None:
    slurm = cluster.slurm
    region, zone = _where(slurm)
    args = ["-N6"] + ([f"--locality={locality}"] if locality else [])
    for busy in BUSY:
        free = [n for n in region if n not in slurm.hostnames(busy)]
        assert max(sum(1 for n in free if zone[n] == z) for z in set(zone.values())) < 6, "precondition"
        info, nodes = _run(slurm, busy, *args)
        assert info.get("Prefer", "").startswith(CASCADE_6), info.get("Prefer")
        assert info.get("Features") == "(null)", "prefer must not require anything"
        assert "AdminComment=slurm-topo: prefer zone+region+unions [us-central1-a(6n)," in info["shown"]
        assert len({region[n] for n in nodes}) == 1, f"{busy}: {nodes}"
        assert len({zone[n] for n in nodes}) == 2, f"{busy}: {nodes}"


def test_required_region_keeps_its_bracket_and_prefers_one_zone_inside_it(cluster: slurmctl.Cluster) -> None:
    slurm = cluster.slurm
    region, zone = _where(slurm)
    info, nodes = _run(slurm, EAST_SPLIT, "-N4", "--locality=region")
    assert info.get("Features") == "[region_us-east1|region_us-central1]", info.get("Features")
    assert info.get("Prefer") == (
        "[" + "|".join(f"zone_{z}" for z in ZONES) + "|region_us-east1|region_us-central1]"
    ), info.get("Prefer")
    assert len({region[n] for n in nodes}) == 1 and len({zone[n] for n in nodes}) == 1, nodes
    # the control: the same bracket without the --prefer takes the smaller region and spans two of its zones
    info, nodes = _run(
        slurm, EAST_SPLIT, "-N4", "--locality=any", "--constraint=[region_us-east1|region_us-central1]"
    )
    assert {region[n] for n in nodes} == {"region_us-east1"} and len({zone[n] for n in nodes}) == 2, nodes
