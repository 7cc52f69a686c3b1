"""slurm-topo import writes the provider's link profile: an imported GCP fleet is costed as VMs over the VPC
(links: {profile: gcp}), not as one InfiniBand fabric; AWS and Azure keep the default table."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo import parse_inventory
from slurm_topo.cost.links import DEFAULT_LINKS, GCP_LINKS
from slurm_topo.providers import import_listing

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
def test_aws_keeps_the_default_table(provider: str, listing: str) -> None:
    result = import_listing(provider, (CLOUDS / listing).read_text(), source=listing)
    assert "links" not in result.text
    assert parse_inventory(result.text).links is None
    assert DEFAULT_LINKS["network_group"].bandwidth > GCP_LINKS["network_group"].bandwidth
