"""The step around the communication (slurm_topo.cost.step): compute=, comm=, overlap=, the slowdown of the
step in `cost`/`explain`/the `:auto` budgets, the GCP profile, and the ADR's measurement as a regression."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from slurm_topo.core.errors import InputError
from slurm_topo.core.model import Node
from slurm_topo.cost import (
    DEFAULT_COMM_SHARE,
    DEFAULT_TABLE,
    Fabric,
    LinkTable,
    PlanSpec,
    StepCost,
    Term,
    parse_links,
    parse_plan,
    ring_allreduce_seconds,
    score_placement,
    step_model,
)
from slurm_topo.cost.budget import auto_budget
from slurm_topo.cost.links import GCP_LINKS
from slurm_topo.cost.step import compute_from_share, exposed_seconds
from slurm_topo.inventory import load_inventory_file

ADR = Path(__file__).resolve().parents[1] / "examples" / "adr-gcp-locality.yaml"


def _cost(**seconds: float) -> StepCost:
    terms = tuple(Term(k, 1, 2, 1.0, "zone", 1.0, 1.0, v) for k, v in seconds.items())
    return StepCost(("a", "b"), (), terms)


def test_plan_keys_for_the_step() -> None:
    spec = parse_plan("tp=2,bytes=1G,compute=450ms,overlap=50%")
    assert spec.compute_s == pytest.approx(0.45) and spec.overlap == 0.5 and spec.comm_share is None
    assert parse_plan("bytes=1G,comm=0.3").comm_share == pytest.approx(0.3)
    assert parse_plan("compute=2min").compute_s == 120.0
    assert parse_plan("compute=1.5").compute_s == 1.5
    for bad, words in (
        ("compute=fast", "expected seconds"),
        ("compute=-1s", "expected seconds"),
        ("compute=2000000s", "out of range"),
        ("comm=0", "share"),
        ("comm=1.5", "share"),
        ("overlap=nan", "share"),
        ("comm=0.3,compute=1s", "not both"),
    ):
        with pytest.raises(InputError, match=words):
            parse_plan(bad)


def test_overlap_hides_dp_only() -> None:
    cost = _cost(tp=0.1, pp=0.2, dp=0.5)
    assert exposed_seconds(cost, 1.0, 0.0) == pytest.approx(0.8)
    assert exposed_seconds(cost, 1.0, 0.3) == pytest.approx(0.1 + 0.2 + 0.2)
    assert exposed_seconds(cost, 1.0, 1.0) == pytest.approx(0.3)  # DP fully hidden, TP/PP never


@given(
    st.floats(0.0, 5.0),
    st.floats(0.001, 5.0),
    st.floats(0.01, 0.99),
    st.floats(0.0, 1.0),
)
def test_compute_from_share_gives_the_share_back(a: float, d: float, share: float, overlap: float) -> None:
    cost = _cost(tp=a, dp=d)
    c = compute_from_share(cost, share, overlap)
    assert c >= 0
    e = exposed_seconds(cost, c, overlap)
    if e > 0:
        assert e / (c + e) == pytest.approx(share, rel=1e-6, abs=1e-9)


def test_step_model_sources() -> None:
    best = _cost(dp=1.0)
    assert step_model(PlanSpec(compute_s=2.0), best).compute_s == 2.0
    assert "plan compute=" in step_model(PlanSpec(compute_s=2.0), best).source
    m = step_model(PlanSpec(comm_share=0.5), best)
    assert m.compute_s == pytest.approx(1.0) and "plan comm=" in m.source
    m = step_model(PlanSpec(), best)
    assert m.compute_s == pytest.approx(1.0 * (1 - DEFAULT_COMM_SHARE) / DEFAULT_COMM_SHARE)
    assert "site default" in m.source
    assert step_model(PlanSpec(), best, None).compute_s is None


def _adr() -> tuple[Fabric, LinkTable]:
    loaded = load_inventory_file(str(ADR))
    doc = yaml.safe_load(ADR.read_text())
    return Fabric({n.name: n for n in loaded.nodes}), parse_links(doc["links"])


def test_the_adr_measurement_on_gcp() -> None:
    """The ADR: 4 machines × 4 gloo processes; two zones of one region as fast as one zone, two regions
    56.2 s against 45.0-48.6 s (1.16-1.25×). The inventory's own plan and the GCP profile."""
    fabric, table = _adr()
    assert table["any"] == GCP_LINKS["any"]
    spec = parse_plan(yaml.safe_load(ADR.read_text())["policy"]["plan"])
    one_zone = ["w1b-1", "w1b-2", "w1b-3", "w1b-4"]
    two_zones = ["w1b-1", "w1b-2", "w1c-1", "w1c-2"]
    two_regions = ["w1b-1", "w1b-2", "w4a-1", "w4a-2"]
    model = step_model(spec, score_placement(fabric, one_zone, spec, table))
    steps = {
        name: model.step(score_placement(fabric, nodes, spec, table))
        for name, nodes in (("one", one_zone), ("zones", two_zones), ("regions", two_regions))
    }
    assert abs(steps["zones"] / steps["one"] - 1) <= 0.05, steps
    assert 1.1 <= steps["regions"] / steps["one"] <= 1.35, steps
    # the same numbers from the ring formula and the profile's constants, by hand
    ring = {lvl: ring_allreduce_seconds(16, 1e8, GCP_LINKS[lvl]) for lvl in ("zone", "any")}
    assert steps["regions"] / steps["one"] == pytest.approx((1.2 + ring["any"]) / (1.2 + ring["zone"]))
    # communication alone is what the old model compared: far from the measurement
    comm = (
        score_placement(fabric, two_regions, spec, table).seconds
        / score_placement(fabric, one_zone, spec, table).seconds
    )
    assert comm > 3


def test_cost_cli_step_and_comm_only() -> None:
    def run(*args: str) -> dict[str, object]:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "slurm_topo",
                "cost",
                "-i",
                str(ADR),
                "--gpus-per-node",
                "4",
                "--json",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    nodes = "w1b-[1-2],w4a-[1-2]"
    data = run("--nodes", nodes, "--allreduce-bytes", "100M", "--compute", "1.2s")
    assert data["compute_seconds"] == 1.2 and "plan compute=" in str(data["assumed"])
    assert data["step_seconds"] == pytest.approx(1.2 + float(data["seconds"]))  # type: ignore[arg-type]
    only = run("--nodes", nodes, "--allreduce-bytes", "100M", "--comm-only")
    assert only["compute_seconds"] is None and "communication only" in str(only["assumed"])
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "cost",
            "-i",
            str(ADR),
            "--nodes",
            nodes,
            "--gpus-per-node",
            "4",
            "--allreduce-bytes",
            "1G",
            "--compute",
            "1s",
            "--comm-share",
            "0.2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "not both" in bad.stderr and "Traceback" not in bad.stderr


def test_budgets_follow_the_plans_step() -> None:
    """A job that mostly computes is worth less waiting; with the compute fixed, DP hidden behind backward
    less still; comm=0.25 is the site default exactly."""
    template = Node("t", gpus=8)
    base = auto_budget("zone", 4, "bytes=10G", 3600, template)
    same = auto_budget("zone", 4, "bytes=10G,comm=0.25", 3600, template)
    assert base.budgets == same.budgets
    heavy = auto_budget("zone", 4, "bytes=10G,comm=0.05", 3600, template)
    plain = auto_budget("zone", 4, "bytes=10G,compute=10s", 3600, template)
    hidden = auto_budget("zone", 4, "bytes=10G,compute=10s,overlap=0.5", 3600, template)
    for level in ("region", "any"):
        b, h, p, x = base.of(level), heavy.of(level), plain.of(level), hidden.of(level)
        assert b is not None and h is not None and p is not None and x is not None
        assert 0 < h < b and x < p
    # compute= gives the step directly: the budget is R · (step_L / step_zone - 1)
    table = DEFAULT_TABLE
    ring = {lvl: ring_allreduce_seconds(32, 1e10, table[lvl]) for lvl in ("region", "any")}
    zone = ring_allreduce_seconds(32, 1e10, table["zone"])
    fixed = auto_budget("zone", 4, "bytes=10G,compute=30s", 3600, template)
    for level, seconds in ring.items():
        assert fixed.of(level) == round(3600 * ((30 + seconds) / (30 + zone) - 1))


def test_gcp_profile_and_bad_profiles() -> None:
    table = parse_links({"profile": "gcp", "any": {"latency_us": 5000}})
    assert table["zone"] == GCP_LINKS["zone"] and table["any"].latency_us == 5000
    assert table["any"].bandwidth == GCP_LINKS["any"].bandwidth
    with pytest.raises(InputError, match="not a known profile"):
        parse_links({"profile": "oci"})
    with pytest.raises(InputError, match="not a known profile"):
        parse_links({"profile": ["gcp"]})
