"""The shaped testbed's gloo check (tests/integration/gloo_check.py) over seeded tables, placements and noise:
a table right within the noise passes, the same table with its bandwidth or latency off by 2x fails, where
that term sets the size's time, as on the testbed (bandwidths 0.02-0.15 GB/s: 4 MiB is the rate's; a
software α of 100-1000 µs: 256 B is α's). The integration test runs it on real gloo measurements; this
one proves the check's power and its tolerance on placements of every kind the testbed's fleet allows."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent / "integration"))
import gloo_check  # noqa: E402

from slurm_topo.cost import Fabric, parse_links  # noqa: E402
from slurm_topo.inventory import load_inventories  # noqa: E402

HW = {
    "CPUs": 4,
    "Boards": 1,
    "SocketsPerBoard": 1,
    "CoresPerSocket": 4,
    "ThreadsPerCore": 1,
    "RealMemory": 4000,
}
FLEET = {  # the testbed's fleet (tests/integration/test_calibrate_on_a_shaped_network.py)
    "nodes": [
        {"name": "a[1-2]", "region": "r1", "zone": "r1-a", "network_group": "leaf-1", "gpus": 4, "slurm": HW},
        {"name": "b1", "region": "r1", "zone": "r1-a", "network_group": "leaf-2", "gpus": 4, "slurm": HW},
        {"name": "c1", "region": "r1", "zone": "r1-b", "network_group": "leaf-3", "gpus": 4, "slurm": HW},
        {"name": "d1", "region": "r2", "zone": "r2-a", "network_group": "leaf-4", "gpus": 4, "slurm": HW},
    ]
}
NODES = ("a1", "a2", "b1", "c1", "d1")
SIZES = {"large": 4 * 2**20, "small": 256}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Fabric:
    path = tmp_path_factory.mktemp("gloo") / "fleet.yaml"
    path.write_text(yaml.safe_dump(FLEET, sort_keys=False))
    return Fabric.of(load_inventories([path]))


def _world(
    seed: int,
) -> tuple[dict[str, dict[str, float]], dict[tuple[str, int], float], list[gloo_check.Case]]:
    """A calibrated wire table (bandwidths falling outwards, 0.02-0.15 GB/s; latency 5-50 µs, rising), gloo's
    α per (op, ranks) 100-1000 µs, and 6-12 placements of 2-5 of the fleet's nodes in a random rank order,
    each op at both sizes (measured filled in later)."""
    rng = random.Random(seed)
    bws = sorted((rng.uniform(0.02, 0.15) for _ in range(4)), reverse=True)
    lats = sorted(rng.uniform(5, 50) for _ in range(4))
    links = {
        lvl: {"bandwidth": bw, "latency_us": lat}
        for lvl, bw, lat in zip(gloo_check.NETWORK_LEVELS, bws, lats, strict=True)
    }
    alphas = {(op, p): rng.uniform(100, 1000) for op in ("allreduce", "chain") for p in range(2, 6)}
    cases = []
    for i in range(rng.randint(6, 12)):
        nodes = tuple(rng.sample(NODES, rng.randint(2, 5)))
        for op in ("allreduce", "chain"):
            for size, nbytes in SIZES.items():
                cases.append(gloo_check.Case(op, f"p{i}", nodes, nbytes, size, 0.0))
    return links, alphas, cases


def _predict(
    fabric: Fabric,
    links: dict[str, dict[str, float]],
    alphas: dict[tuple[str, int], float],
    cases: list[gloo_check.Case],
    bw: float = 1.0,
    lat: float = 1.0,
) -> list[float]:
    out = []
    for c in cases:
        doc = gloo_check.gloo_table(links, alphas[c.op, len(c.nodes)], bandwidth_scale=bw, latency_scale=lat)
        out.append(gloo_check.predict(fabric, parse_links(doc["links"]), c))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), noise=st.floats(1.0, 1.25))
def test_a_right_table_passes_and_one_off_by_2x_fails(fabric: Fabric, seed: int, noise: float) -> None:
    links, alphas, cases = _world(seed)
    rng = random.Random(seed + 1)
    truth = _predict(fabric, links, alphas, cases)
    measured = [
        gloo_check.Case(c.op, c.placement, c.nodes, c.nbytes, c.size, t * rng.uniform(1 / noise, noise))
        for c, t in zip(cases, truth, strict=True)
    ]
    assert gloo_check.failures(measured, truth) == []
    for bw, lat, term in ((2, 1, "large"), (0.5, 1, "large"), (1, 2, "small"), (1, 0.5, "small")):
        found = gloo_check.failures(measured, _predict(fabric, links, alphas, cases, bw, lat))
        # every op fails at the size whose term is off: its mean leaves the band
        for op in ("allreduce", "chain"):
            assert any(line.startswith(f"{op} {term}: geometric mean") for line in found), (bw, lat, found)


def test_a_case_far_off_fails_alone(fabric: Fabric) -> None:
    """One placement 3.5x slow at 256 B fails its own bound while the mean of the six stays in band."""
    links, alphas, cases = _world(7)
    truth = _predict(fabric, links, alphas, cases)
    slow = next(i for i, c in enumerate(cases) if c.size == "small")
    measured = [
        gloo_check.Case(c.op, c.placement, c.nodes, c.nbytes, c.size, t * (3.5 if i == slow else 1.0))
        for i, (c, t) in enumerate(zip(cases, truth, strict=True))
    ]
    found = gloo_check.failures(measured, truth)
    assert len(found) == 1 and "x3.50, outside x0.33-x3.00" in found[0], found
