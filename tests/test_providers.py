"""Provider records: cloud instance listings -> trusted inventory text, with a configurable name rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_topo import InputError, InventoryError, Location, Source, merge, parse_inventory
from slurm_topo.sources.providers import NameRule, import_listing

CLOUDS = Path(__file__).parent / "fixtures" / "clouds"


def placed(provider: str, text: str, **kw: object) -> dict[str, Location]:
    result = import_listing(provider, text, source="listing.json", **kw)  # type: ignore[arg-type]
    loaded = parse_inventory(result.text)
    assert all(n.source == Source.PROVIDER for n in loaded.nodes)
    return {n.name: n.location for n in loaded.nodes}


def test_gcp_listing_zone_url_gives_zone_and_region() -> None:
    """gcloud's zone URL ends in the zone; the region is the zone less its letter; stopped VMs are kept."""
    got = placed("gcp", (CLOUDS / "gcp-instances.json").read_text())
    assert got == {
        "gpu-ew4a-01": Location("europe-west4", "europe-west4-a"),
        "gpu-ew4a-02": Location("europe-west4", "europe-west4-a"),
        "gpu-ew1b-01": Location("europe-west1", "europe-west1-b"),
    }


def test_aws_listing_az_group_and_terminated_left_out() -> None:
    """AvailabilityZone gives zone and region, GroupName the network group; a terminated twin is left out."""
    result = import_listing("aws", (CLOUDS / "aws-describe-instances.json").read_text(), source="aws.json")
    got = {n.name: n.location for n in parse_inventory(result.text).nodes}
    assert got == {
        "gpu-use1a-01": Location("us-east-1", "us-east-1a", "pg-train-1"),
        "gpu-use1a-02": Location("us-east-1", "us-east-1a", "pg-train-1"),
        "gpu-use1b-01": Location("us-east-1", "us-east-1b"),
    }
    assert result.nodes == 3
    (warning,) = result.warnings  # no AvailabilityZoneId in this listing: zones keyed by their names
    assert "3 instance(s) without Placement.AvailabilityZoneId" in warning


def test_azure_listing_location_zone_and_proximity_group() -> None:
    """location + zones[0] -> <location>-<zone>; a proximity placement group is the network group; no zone
    ok."""
    got = placed("azure", (CLOUDS / "azure-vm-list-d.json").read_text())
    assert got == {
        "gpu-weu1-01": Location("westeurope", "westeurope-1", "ppg-train"),
        "gpu-weu2-01": Location("westeurope", "westeurope-2"),
        "login-ne": Location("northeurope"),
    }


def test_output_is_folded_and_deterministic() -> None:
    """Nodes at one place share one hostlist entry, and the same listing gives the same bytes."""
    text = (CLOUDS / "gcp-instances.json").read_text()
    a = import_listing("gcp", text).text
    shuffled = json.dumps(list(reversed(json.loads(text))))
    assert a == import_listing("gcp", shuffled).text
    assert "name: gpu-ew4a-[01-02]" in a and a.count("source: provider") == 2


def test_name_map_strip_suffix_and_unmatched_left_out_with_a_warning() -> None:
    """--name-map '(.*)-vm=\\1' maps gpu-1-vm to gpu-1; instances no rule matches are left out and counted."""
    doc = [
        {"name": "gpu-1-vm", "zone": "zones/us-central1-a"},
        {"name": "bastion", "zone": "zones/us-central1-a"},
    ]
    result = import_listing(
        "gcp", json.dumps(doc), source="l.json", name_rule=NameRule.parse([r"(.*)-vm=\1"])
    )
    assert [n.name for n in parse_inventory(result.text).nodes] == ["gpu-1"]
    assert result.warnings == ("l.json: 1 instance(s) matched no --name-map rule, left out: 'bastion'",)


def test_name_rules_first_whole_match_wins() -> None:
    """Rules are tried in order against the whole name; (.*)=\\1 last keeps the rest unchanged."""
    rule = NameRule.parse([r"gpu-vm-(\d+)=gpu\1", r"(.*)=\1"])
    assert (
        rule.map("gpu-vm-07") == "gpu07"
        and rule.map("login") == "login"
        and rule.map("xgpu-vm-1") == "xgpu-vm-1"
    )
    assert NameRule().map("any") == "any"
    assert NameRule.strip_suffix(".internal").map("n1.internal") == "n1"
    assert NameRule.strip_suffix(".internal").map("n2") == "n2"


@pytest.mark.parametrize("spec", ["noequals", "=x", "([a=\\1"])
def test_bad_name_map_is_an_input_error(spec: str) -> None:
    """A --name-map that is not REGEX=REPLACEMENT, or whose regex does not compile, is refused."""
    with pytest.raises(InputError, match="--name-map"):
        NameRule.parse([spec])


def test_aws_name_from_private_dns_and_unnamed_left_out() -> None:
    """aws_name='private-dns' uses the first DNS label; with tag:Name an instance without one is left out."""
    inst = {
        "InstanceId": "i-1",
        "Placement": {"AvailabilityZone": "us-west-2-lax-1a", "GroupName": ""},
        "PrivateDnsName": "ip-10-0-0-5.us-west-2.compute.internal",
        "State": {"Name": "running"},
    }
    text = json.dumps({"Reservations": [{"Instances": [inst]}]})
    got = placed("aws", text, aws_name="private-dns")
    assert got == {"ip-10-0-0-5": Location("us-west-2", "us-west-2-lax-1a")}
    result = import_listing("aws", text, source="a.json")
    assert result.nodes == 0 and "without a Name tag" in result.warnings[0]


def test_mapped_name_collision_at_two_places_is_an_error() -> None:
    """Two instances that map to one node name at different zones are refused, naming the second."""
    doc = [{"name": "a-vm", "zone": "zones/us-central1-a"}, {"name": "a-vm2", "zone": "zones/us-central1-b"}]
    with pytest.raises(InventoryError, match=r"l.json: \[1\]: node a is at"):
        import_listing("gcp", json.dumps(doc), source="l.json", name_rule=NameRule.parse([r"(a)-vm\d*=\1"]))


@pytest.mark.parametrize(
    ("provider", "doc", "where"),
    [
        ("gcp", {"not": "a list"}, "l.json: must be a JSON list"),
        ("gcp", [{"name": "n1", "zone": "zones/us central1-a"}], r"l.json: \[0\].zone"),
        ("gcp", [{"name": "bad name", "zone": "zones/us-central1-a"}], r"l.json: \[0\]: instance 'bad name'"),
        ("aws", [], "Reservations list"),
        (
            "aws",
            {"Reservations": [{"Instances": [{"Placement": {"AvailabilityZone": "moon-1"}}]}]},
            r"Reservations\[0\].Instances\[0\].Placement.AvailabilityZone: is not an availability zone",
        ),
        (
            "aws",
            {
                "Reservations": [
                    {
                        "Instances": [
                            {"Placement": {"AvailabilityZone": "us-east-1a", "GroupName": "my group"}}
                        ]
                    }
                ]
            },
            r"Placement.GroupName: must be 1-63",
        ),
        ("azure", [{"name": "v", "location": "westeurope", "zones": ["1\n"]}], r"\[0\].zones\[0\]"),
    ],
    ids=[
        "gcp-not-list",
        "gcp-bad-zone",
        "gcp-bad-name",
        "aws-not-object",
        "aws-bad-az",
        "aws-bad-group",
        "azure-bad-zone",
    ],
)
def test_bad_listing_values_name_file_and_json_path(provider: str, doc: object, where: str) -> None:
    """A bad listing raises one InventoryError line naming the file and the JSON path of the value."""
    with pytest.raises(InventoryError, match=where):
        import_listing(provider, json.dumps(doc), source="l.json")


def test_not_json_and_unknown_provider() -> None:
    """Text that is not JSON names the file; an unknown provider is refused."""
    with pytest.raises(InventoryError, match="l.json: not valid JSON"):
        import_listing("gcp", "nodes: []", source="l.json")
    with pytest.raises(InputError, match="unknown provider"):
        import_listing("oci", "[]")


def test_provider_record_beats_operator_and_self() -> None:
    """Imported provider records win a merge against an operator record; the disagreement is a conflict."""
    result = import_listing("gcp", (CLOUDS / "gcp-instances.json").read_text(), source="gcp.json")
    op = parse_inventory(
        "nodes:\n  - {name: gpu-ew1b-01, region: europe-west4, zone: europe-west4-a}\n", source="op.yaml"
    )
    inv = merge([parse_inventory(result.text, source="gcp.yaml"), op])
    node = next(n for n in inv.nodes if n.name == "gpu-ew1b-01")
    assert node.location == Location("europe-west1", "europe-west1-b") and node.source == Source.PROVIDER
    assert [c.node for c in inv.conflicts] == ["gpu-ew1b-01"]


@pytest.mark.parametrize("tags", [5, 1.5, True, "Name=x"])
def test_aws_tags_that_are_not_a_list_leave_the_instance_unnamed(tags: object) -> None:
    """A listing whose Tags is not a list (found by tests/test_fuzz_inputs.py: `Tags: 5` was a TypeError) is
    an instance without a name: left out, with the warning that counts them."""
    inst = {"InstanceId": "i-1", "Tags": tags, "Placement": {"AvailabilityZone": "us-east-1a"}}
    result = import_listing("aws", json.dumps({"Reservations": [{"Instances": [inst]}]}), source="l.json")
    assert result.nodes == 0
    assert result.warnings == ("l.json: 1 instance(s) without a Name tag left out: 'i-1'",)
