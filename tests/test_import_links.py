"""slurm-topo import writes the provider's link profile: an imported GCP fleet is costed as VMs over the VPC
(links: {profile: gcp}), not as one InfiniBand fabric; AWS and Azure write theirs
(links: {profile: aws|azure}: EFA/InfiniBand inside a group, TCP or the VM's Ethernet outside it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo import parse_inventory
from slurm_topo.cost.links import DEFAULT_LINKS, GCP_LINKS, PROFILES
from slurm_topo.sources.providers import import_listing

CLOUDS = Path(__file__).parent / "fixtures" / "clouds"


def test_a_gcp_import_carries_the_gcp_profile() -> None:
    result = import_listing("gcp", (CLOUDS / "gcp-instances.json").read_text(), source="gcp.json")
    loaded = parse_inventory(result.text)
    assert "profile: gcp" in result.text
    assert loaded.links is not None
    assert dict(loaded.links.links) == dict(GCP_LINKS)
    assert loaded.links.given == frozenset()  # a profile, not the site's own figures: GPU parts still apply


@pytest.mark.parametrize(
    ("provider", "listing"), [("aws", "aws-describe-instances.json"), ("azure", "azure-vm-list-d.json")]
)
def test_aws_and_azure_imports_carry_their_profiles(provider: str, listing: str) -> None:
    result = import_listing(provider, (CLOUDS / listing).read_text(), source=listing)
    assert f"profile: {provider}" in result.text
    loaded = parse_inventory(result.text).links
    assert loaded is not None and dict(loaded.links) == dict(PROFILES[provider])
    assert loaded.given == frozenset()
    # between zones the providers' figures are far below the one-fabric default (docs/cost.md)
    assert PROFILES[provider]["region"].bandwidth < DEFAULT_LINKS["region"].bandwidth
