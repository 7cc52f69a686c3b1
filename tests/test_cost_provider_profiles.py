"""The providers' link profiles: `import gcp|aws|azure` writes its profile, `cost` and `explain` read it,
and a placement across zones costs what each provider's figures say (docs/cost.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_topo import merge, parse_inventory
from slurm_topo.access import text as slurm_text
from slurm_topo.cli.cost import _links_table
from slurm_topo.cost import DEFAULT_TABLE, Fabric, PlanSpec, ring_allreduce_seconds, score_placement
from slurm_topo.cost.links import (
    AWS_LINKS,
    AZURE_LINKS,
    DEFAULT_LINKS,
    FABRIC_LEVELS,
    GCP_LINKS,
    LINK_LEVELS,
    PROFILES,
    SWITCH_SAVING_US,
    parse_links,
)
from slurm_topo.reports.explain import predict_cost
from slurm_topo.sources.providers import LINK_PROFILES, Companion, import_listing

FIXTURES = Path(__file__).parent / "fixtures"
CLOUDS = FIXTURES / "clouds"
PROV = FIXTURES / "providers"

# (provider, listing, companion, two nodes of one region in different zones) from the import tests' fixtures
LISTINGS = {
    "aws": ("aws-describe-instances.json", None, ("gpu-use1a-01", "gpu-use1b-01")),
    "azure": ("azure-vm-list-d.json", None, ("gpu-weu1-01", "gpu-weu2-01")),
    "gcp": ("gcp-instances.json", None, None),
}


def _imported(provider: str) -> str:
    name, _, _ = LISTINGS[provider]
    return import_listing(provider, (CLOUDS / name).read_text(), source=name).text


def _aws_topology_import() -> str:
    topo = Companion((PROV / "aws-account-a-describe-instance-topology.json").read_text(), "topo-a.json")
    listing = (PROV / "aws-account-a-describe-instances.json").read_text()
    return import_listing("aws", listing, source="aws-a.json", topology=topo).text


def _without_links(text: str) -> str:
    assert "\nlinks:\n" in text
    return text.split("\nlinks:\n")[0] + "\n"


@pytest.mark.parametrize("provider", ["aws", "azure", "gcp"])
def test_an_import_writes_its_providers_profile_into_the_inventory(provider: str) -> None:
    inv = parse_inventory(_imported(provider))
    assert LINK_PROFILES[provider] == provider
    assert inv.links is not None and dict(inv.links.links) == dict(PROFILES[provider])
    assert inv.links.given == frozenset()  # the profile's figures, none the site's


def test_the_aws_import_with_its_topology_listing_writes_the_profile_too() -> None:
    inv = parse_inventory(_aws_topology_import())
    assert dict(inv.links.links) == dict(AWS_LINKS)


def test_every_profile_has_every_level_in_order_and_switch_two_hops_nearer() -> None:
    """Each profile is a whole table the monotone rule accepts, and its ``switch`` level is its network
    group's bandwidth at ``SWITCH_SAVING_US`` less latency (the stated choice)."""
    for name, table in PROFILES.items():
        assert set(table) == set(LINK_LEVELS), name
        parse_links({"profile": name})  # raises on a level further out that is faster or nearer
        for inner, outer in zip(FABRIC_LEVELS, FABRIC_LEVELS[1:], strict=False):
            assert table[inner].bandwidth >= table[outer].bandwidth, (name, inner)
            assert table[inner].latency_us <= table[outer].latency_us, (name, inner)
        group, switch = table["network_group"], table["switch"]
        assert switch.bandwidth == group.bandwidth
        assert math.isclose(switch.latency_us, group.latency_us - SWITCH_SAVING_US), name
        for level in ("nvlink", "node", "pcie", "sys"):  # inside a VM the defaults stay
            assert table[level] == DEFAULT_LINKS[level], (name, level)


def _cross_zone(provider: str, links: str | None) -> tuple[float, float]:
    """Seconds of a DP all-reduce of 10 GB over the provider's two nodes in two zones (8 GPUs each), with the
    imported inventory's own links (``links`` None) or with them stripped (the default table)."""
    text = _imported(provider)
    inv = merge([parse_inventory(text if links is None else _without_links(text))])
    table = inv.links or DEFAULT_TABLE
    nodes = LISTINGS[provider][2]
    assert nodes is not None
    cost = score_placement(
        Fabric.of(inv), list(nodes), PlanSpec(gpus_per_node=8, allreduce_bytes=1e10), table
    )
    (term,) = cost.terms
    assert term.level == "region"  # two zones of one region
    return cost.seconds, ring_allreduce_seconds(16, 1e10, table["region"])


@pytest.mark.parametrize("provider", ["aws", "azure"])
def test_a_cross_zone_placement_costs_what_the_providers_figures_say(provider: str) -> None:
    """The imported fleet is costed with its profile: the ring's slowest hop is between zones, at the
    profile's ``region`` figures, and it differs from the default table's in the direction they say (AWS:
    TCP over ENA at 5 Gbps a flow across AZs, Azure: the VM's 80 Gb/s Ethernet shared by 8 GPUs — both
    slower than the default's 12 GB/s)."""
    with_profile, formula = _cross_zone(provider, None)
    default, default_formula = _cross_zone(provider, "strip")
    assert math.isclose(with_profile, formula) and math.isclose(default, default_formula)
    profile = PROFILES[provider]["region"]
    slower = profile.bandwidth < DEFAULT_LINKS["region"].bandwidth
    nearer = profile.latency_us <= DEFAULT_LINKS["region"].latency_us
    assert slower and nearer  # what the figures say: the same round trip, much less bandwidth
    assert with_profile > default


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("provider", ["aws", "azure"])
def test_cost_and_explain_read_the_profile_from_the_imported_inventory(provider: str, tmp_path: Path) -> None:
    path = tmp_path / f"{provider}.yaml"
    path.write_text(_imported(provider))
    table = _links_table((str(path),), None)  # what `cost` and `explain` build from -i FILE
    assert dict(table.links) == dict(PROFILES[provider])
    a, b = LISTINGS[provider][2] or ("", "")
    out = _run(
        "cost", "-i", str(path), "--nodes", f"{a},{b}", "--gpus-per-node", "8", "--allreduce-bytes", "10G",
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (term,) = json.loads(out.stdout)["terms"]
    region = PROFILES[provider]["region"]
    assert (term["level"], term["bandwidth"], term["latency_us"]) == (
        "region",
        region.bandwidth,
        region.latency_us,
    )
    line = (
        f"JobId=31 JobState=RUNNING Reason=None NodeList={a},{b} NumNodes=2 Features=(null) "
        "AdminComment=(null) Comment=plan=bytes=10G,gpus_per_node=8 StdErr=/dev/null"
    )
    view = predict_cost(
        slurm_text.parse_record_line(line), merge([parse_inventory(path.read_text())]), None, table=table
    )
    actual = view.lines[1]
    assert "bottleneck: dp at region" in actual, view.lines
    seconds = float(actual.split(": ", 1)[1].split(" s per step")[0])
    assert math.isclose(seconds, ring_allreduce_seconds(16, 1e10, region), rel_tol=1e-3), actual


def test_the_gcp_profile_regression_figures_stand() -> None:
    """The ADR's regression (tests/test_cost_step.py) rests on these: unchanged by the new profiles."""
    assert (GCP_LINKS["zone"], GCP_LINKS["region"], GCP_LINKS["any"]) == (
        PROFILES["gcp"]["zone"],
        PROFILES["gcp"]["region"],
        PROFILES["gcp"]["any"],
    )
    assert GCP_LINKS["network_group"].bandwidth == GCP_LINKS["region"].bandwidth == 2.0
    assert AZURE_LINKS["zone"].bandwidth < AZURE_LINKS["network_group"].bandwidth  # out of the scale set
