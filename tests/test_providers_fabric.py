"""The provider's own fabric and zone identity (issue 47): GCE physical host topology, AWS zone ids and
instance topology, Azure's logical -> physical zone map. Listings: tests/fixtures/providers/ (its README says
which API reference each follows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import InventoryError, Location, Source, merge, parse_inventory
from slurm_topo.core.topology import build_topology
from slurm_topo.sources.providers import Companion, import_listing

HERE = Path(__file__).parent / "fixtures"
PROV = HERE / "providers"


def _read(name: str) -> str:
    return (PROV / name).read_text()


def _aws_a(topology: bool = True):  # type: ignore[no-untyped-def]
    topo = (
        Companion(_read("aws-account-a-describe-instance-topology.json"), "topo-a.json") if topology else None
    )
    return import_listing(
        "aws", _read("aws-account-a-describe-instances.json"), source="aws-a.json", topology=topo
    )


def _nodes(text: str):  # type: ignore[no-untyped-def]
    return {n.name: n for n in parse_inventory(text).nodes}


def _shared(paths: dict[str, tuple[object, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """Each node's layers as the import keeps them: the longest start of its path that another node at the
    same place shares (a layer holding one node of the listing groups nothing)."""
    out = {}
    for name, (place, path) in paths.items():
        best = 0
        for other, (where, theirs) in paths.items():
            if other != name and where == place:
                common = next(
                    (i for i, (a, b) in enumerate(zip(path, theirs, strict=False)) if a != b),
                    min(len(path), len(theirs)),
                )
                best = max(best, common)
        out[name] = path[:best]
    return out


def test_gcp_block_is_the_network_group_and_an_a4x_sub_block_the_nvlink_domain() -> None:
    result = import_listing("gcp", _read("gcp-instances-physical-topology.json"), source="gcp.json")
    nodes = _nodes(result.text)
    doc = json.loads(_read("gcp-instances-physical-topology.json"))
    layers = _shared(
        {
            inst["name"]: (topo["block"], (topo["subblock"], topo["host"]))
            for inst in doc
            if (topo := inst.get("resourceStatus", {}).get("physicalHostTopology"))
        }
    )
    assert (
        layers["a3h-01"]
        == layers["a3h-02"]
        == ("9a8b7c6d5e4f30211f2e3d4c5b6a7988", "c0ffee00h07aa11bb22cc33dd44ee55ff")
    )
    assert layers["a3u-01"] == ("9a8b7c6d5e4f30211f2e3d4c5b6a7988",)  # alone on its host
    for inst in doc:
        node = nodes[inst["name"]]
        assert node.source == Source.PROVIDER
        topo = inst.get("resourceStatus", {}).get("physicalHostTopology")
        assert node.location.network_group == (topo["block"] if topo else None)
        nvl = inst["machineType"].rsplit("/", 1)[1].startswith("a4x-")
        assert node.nvlink_domain == (topo["subblock"] if topo and nvl else None)
        assert node.switches == layers.get(inst["name"], ())
    assert result.warnings == ()
    assert "cluster: us-central1-cluster-7f3q" in result.text  # kept in found_by
    topo = build_topology(merge([parse_inventory(result.text)]))
    assert len(topo.blocks) == 2  # two A4X sub-blocks; the A3 Ultra sub-block is not an NVLink domain


def test_aws_zones_keyed_by_az_id_and_two_accounts_us_east_1a_stay_two_zones() -> None:
    a = _aws_a(topology=False)
    b = import_listing("aws", _read("aws-account-b-describe-instances.json"), source="aws-b.json")
    assert b.warnings == ()
    fleet = merge([parse_inventory(a.text, source="a.yaml"), parse_inventory(b.text, source="b.yaml")])
    zones = {n.name: n.location.zone for n in fleet.nodes}
    assert zones["p5-a-01"] == "use1-az1" and zones["p5-b-01"] == "use1-az4"
    topo = build_topology(fleet)
    assert topo.node_features["p5-a-01"] != topo.node_features["p5-b-01"]
    assert {sw.name for sw in topo.switches} >= {"zone_use1-az1", "zone_use1-az4", "zone_use1-az2"}
    assert "zone_name: us-east-1a" in a.text and "zone_name: us-east-1a" in b.text  # the name stays a label


def test_aws_topology_top_network_node_capacity_block_and_notes() -> None:
    result = _aws_a()
    nodes = _nodes(result.text)
    topo = json.loads(_read("aws-account-a-describe-instance-topology.json"))["Instances"]
    names = {
        inst["InstanceId"]: inst["Tags"][0]["Value"]
        for inst in json.loads(_read("aws-account-a-describe-instances.json"))["Reservations"][0]["Instances"]
    }
    layers = _shared(
        {rec["InstanceId"]: (rec["NetworkNodes"][0], tuple(rec["NetworkNodes"][1:])) for rec in topo}
    )
    assert layers["i-0ab0000000000001"] == ("nn-2c77777777example", "nn-3c88888888example")  # p6-b200
    assert layers["i-0aa0000000000005"] == ("nn-2a34343434example", "nn-3a55555555example")
    assert layers["i-0aa0000000000001"] == ("nn-2a33333333example",)  # alone on its leaf
    for rec in topo:
        node = nodes[names[rec["InstanceId"]]]
        assert node.location.network_group == rec["NetworkNodes"][0]
        assert node.switches == layers[rec["InstanceId"]]
        assert node.location.zone == rec["ZoneId"]
        assert node.nvlink_domain == rec.get("CapacityBlockId")
        assert any("CapacityBlockId is null" in n for n in node.notes) == (
            "CapacityBlockId" in rec and rec["CapacityBlockId"] is None
        )
    missing = nodes["p5-a-09"]  # in describe-instances only: placed by its zone, a note, no group
    assert missing.location == Location("us-east-1", "use1-az2")
    assert any("not in the describe-instance-topology listing" in n for n in missing.notes)
    assert result.warnings == ()


def test_topology_instances_not_in_describe_instances_are_a_warning() -> None:
    doc = json.loads(_read("aws-account-a-describe-instance-topology.json"))
    doc["Instances"].append(dict(doc["Instances"][0], InstanceId="i-0ffffffffffffff01"))
    result = import_listing(
        "aws",
        _read("aws-account-a-describe-instances.json"),
        topology=Companion(json.dumps(doc), "topo.json"),
    )
    assert any(
        "1 instance(s) of the topology listing are not in describe-instances" in w for w in result.warnings
    )


def test_a_zone_id_that_disagrees_is_refused_and_a_name_keyed_zone_takes_the_topologys_id() -> None:
    doc = json.loads(_read("aws-account-a-describe-instance-topology.json"))
    doc["Instances"][0]["ZoneId"] = "use1-az6"
    with pytest.raises(InventoryError, match=r"Instances\[0\]\.ZoneId.*describe-instances"):
        import_listing(
            "aws",
            _read("aws-account-a-describe-instances.json"),
            topology=Companion(json.dumps(doc), "t.json"),
        )
    listing = json.loads(_read("aws-account-a-describe-instances.json"))
    for inst in listing["Reservations"][0]["Instances"]:
        del inst["Placement"]["AvailabilityZoneId"]
    result = import_listing(
        "aws",
        json.dumps(listing),
        topology=Companion(_read("aws-account-a-describe-instance-topology.json"), "t.json"),
    )
    nodes = _nodes(result.text)
    assert nodes["p5-a-01"].location.zone == "use1-az1"  # from the topology listing's ZoneId
    assert nodes["p5-a-09"].location.zone == "us-east-1b"  # nothing says its id: its name, with a warning
    assert any("1 instance(s) without Placement.AvailabilityZoneId" in w for w in result.warnings)


@given(
    field=st.sampled_from(["NetworkNodes", "ZoneId", "CapacityBlockId", "InstanceId"]),
    value=st.one_of(st.just("bad value"), st.just("x" * 64), st.integers(), st.just({"a": 1})),
)
def test_a_bad_topology_value_is_refused_by_its_path(field: str, value: object) -> None:
    doc = json.loads(_read("aws-account-a-describe-instance-topology.json"))
    doc["Instances"][5][field] = [value] if field == "NetworkNodes" and not isinstance(value, dict) else value
    with pytest.raises(InventoryError, match=rf"t\.json: Instances\[5\]\.{field}"):
        import_listing(
            "aws",
            _read("aws-account-a-describe-instances.json"),
            topology=Companion(json.dumps(doc), "t.json"),
        )


def test_azure_logical_zone_becomes_the_subscriptions_physical_zone() -> None:
    vms = (HERE / "clouds" / "azure-vm-list-d.json").read_text()
    zones = Companion(_read("azure-account-list-locations.json"), "locations.json")
    result = import_listing("azure", vms, source="vms.json", zone_map=zones)
    nodes = _nodes(result.text)
    mapping = {
        (loc["name"], m["logicalZone"]): m["physicalZone"]
        for loc in json.loads(zones.text)
        for m in loc.get("availabilityZoneMappings") or []
    }
    for vm in json.loads(vms):
        node = nodes[vm["name"]]
        logical = (vm.get("zones") or [None])[0]
        want = mapping.get((vm["location"], logical)) if logical else None
        assert node.location.zone == want
    assert result.warnings == ()
    assert "zone_name: westeurope-1" in result.text
    plain = _nodes(import_listing("azure", vms).text)
    assert plain["gpu-weu1-01"].location.zone == "westeurope-1"  # without a map: the logical zone, as before


def test_companion_listings_belong_to_their_provider() -> None:
    from slurm_topo import InputError

    with pytest.raises(InputError, match="aws only"):
        import_listing("gcp", "[]", topology=Companion("{}", "t.json"))
    with pytest.raises(InputError, match="azure only"):
        import_listing("aws", '{"Reservations": []}', zone_map=Companion("[]", "z.json"))


def test_a_self_record_does_not_move_a_provider_node_out_of_its_block() -> None:
    result = import_listing("gcp", _read("gcp-instances-physical-topology.json"))
    self_doc = (
        "nodes:\n  - {name: a4x-01, region: us-central1, zone: us-central1-b, network_group: rack-9, "
        "nvlink_domain: other, source: self}\n"
    )
    fleet = merge([parse_inventory(result.text, source="p.yaml"), parse_inventory(self_doc, source="s.yaml")])
    node = next(n for n in fleet.nodes if n.name == "a4x-01")
    assert node.location.network_group == "a1b2c3d4e5f60718293a4b5c6d7e8f90"
    assert node.nvlink_domain == "5e1c0a93d7b24f6e8a1b2c3d4e5f6071"


def test_the_providers_layers_below_the_block_are_switches_and_features() -> None:
    """GCE: block > sub-block > host; AWS: NetworkNodes[0] > [1] > [2] (> [3]). Each layer a switch under the
    network group (``leaf_<zone>.<id>``), a feature of the nodes under it; a layer that holds one node of the
    listing is left out, so nodes alone on their host or leaf hang from the layer above."""
    gcp = parse_inventory(import_listing("gcp", _read("gcp-instances-physical-topology.json")).text)
    # the tree alone: the AWS listing's inventory without its links (two providers' profiles would merge per
    # level into the slower, with a note: inventory/merge.py, tests/test_merge_links.py)
    aws = _aws_a().text
    assert aws.endswith("links:\n  profile: aws\n")
    fleet = merge([gcp, parse_inventory(aws.split("\nlinks:\n")[0] + "\n")])
    topo = build_topology(fleet)
    sw = {s.name: s for s in topo.switches}
    assert sw["ng_use1-az1.nn-1a11111111example"].switches == (
        "leaf_use1-az1.nn-2a33333333example",
        "leaf_use1-az1.nn-2a34343434example",
    )
    assert sw["leaf_use1-az1.nn-2a33333333example"].nodes == ("p5-a-01", "p5-a-02")
    assert sw["leaf_use1-az1.nn-2a34343434example"].switches == ("leaf_use1-az1.nn-3a55555555example",)
    assert sw["leaf_use1-az1.nn-3a55555555example"].nodes == ("p5-a-05", "p5-a-06")
    assert sw["leaf_use1-az1.nn-3d00000002example"].nodes == ("gb200-a-01", "gb200-a-02", "gb200-a-03")
    assert topo.node_features["b200-a-01"][3:] == (
        "leaf_use1-az1.nn-2c77777777example",
        "leaf_use1-az1.nn-3c88888888example",
    )
    b1 = "ng_us-central1-b.a1b2c3d4e5f60718293a4b5c6d7e8f90"
    assert sw[b1].switches == (
        "leaf_us-central1-b.5e1c0a93d7b24f6e8a1b2c3d4e5f6071",
        "leaf_us-central1-b.7d2e4f6a8b0c1d3e5f708192a3b4c5d6",
    )
    assert sw["leaf_us-central1-b.7d2e4f6a8b0c1d3e5f708192a3b4c5d6"].nodes == ("a4x-03", "a4x-04")
    s3 = (
        "leaf_us-central1-b.9a8b7c6d5e4f30211f2e3d4c5b6a7988"  # two VMs alone on their hosts, two sharing one
    )
    assert sw[s3].switches == (f"{s3}.nodes", "leaf_us-central1-b.c0ffee00h07aa11bb22cc33dd44ee55ff")
    assert sw[f"{s3}.nodes"].nodes == ("a3u-01", "a3u-02")
    assert sw["leaf_us-central1-b.c0ffee00h07aa11bb22cc33dd44ee55ff"].nodes == ("a3h-01", "a3h-02")
    assert topo.node_features["login-01"] == ("region_us-central1", "zone_us-central1-b")
    assert topo.node_features["p5-a-09"] == ("region_us-east-1", "zone_use1-az2")


def test_a_self_report_never_moves_an_imported_node_to_other_switches() -> None:
    me = parse_inventory(
        "nodes:\n  - {name: p5-a-01, zone: use1-az1, region: us-east-1, network_group: nn-1a11111111example,"
        " switches: [nn-2a34343434example, mine], source: self}\n",
        source="self.yaml",
    )
    fleet = merge([parse_inventory(_aws_a().text, source="aws.yaml"), me])
    node = next(n for n in fleet.nodes if n.name == "p5-a-01")
    assert node.switches == ("nn-2a33333333example",)
    assert any(
        "switches: self says nn-2a34343434example/mine, provider says nn-2a33333333example" in c.message()
        for c in fleet.conflicts
    )


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        ([f"nn-{i}" for i in range(6)], "more than 4 layers below the top one"),
        (["nn-1", "nn-2", "nn-2"], "names one layer twice"),
        (["nn-1", "nn-2", "nn-1"], "names one layer twice"),
    ],
)
def test_network_nodes_the_tree_cannot_take_are_refused(nodes: list[str], reason: str) -> None:
    doc = json.loads(_read("aws-account-a-describe-instance-topology.json"))
    doc["Instances"][0]["NetworkNodes"] = nodes
    with pytest.raises(InventoryError, match=rf"t\.json: Instances\[0\]\.NetworkNodes: {reason}"):
        import_listing(
            "aws",
            _read("aws-account-a-describe-instances.json"),
            topology=Companion(json.dumps(doc), "t.json"),
        )


def test_a_gce_sub_block_without_a_block_is_a_note_not_a_switch() -> None:
    doc = json.loads(_read("gcp-instances-physical-topology.json"))
    del doc[0]["resourceStatus"]["physicalHostTopology"]["block"]
    node = _nodes(import_listing("gcp", json.dumps(doc)).text)[doc[0]["name"]]
    assert node.switches == () and node.location.network_group is None
    assert any("no block: no switches" in n for n in node.notes)


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["b1", "b2"]), st.sampled_from(["s1", "s2", "s3"]), st.sampled_from(["h1", "h2"])
        ),
        min_size=1,
        max_size=14,
    )
)
def test_leaving_out_lone_layers_keeps_every_pair_of_vms_as_close_as_the_listing_says(
    places: list[tuple[str, str, str]],
) -> None:
    """Random GCE listings: two VMs share as many layers after the import as in the listing (so the tree
    groups them alike), and each kept layer holds two VMs or more."""
    doc = json.loads(_read("gcp-instances-physical-topology.json"))[0]
    listing = []
    for i, (block, sub, host) in enumerate(places):
        inst = json.loads(json.dumps(doc))
        inst["name"], inst["id"] = f"vm{i}", str(i)
        inst["machineType"] = "zones/us-central1-b/machineTypes/a3-ultragpu-8g"
        inst["resourceStatus"]["physicalHostTopology"].update(block=block, subblock=sub, host=f"{sub}{host}")
        listing.append(inst)
    nodes = _nodes(import_listing("gcp", json.dumps(listing)).text)
    full = {f"vm{i}": (block, (sub, f"{sub}{host}")) for i, (block, sub, host) in enumerate(places)}
    for a, (block_a, path_a) in full.items():
        for b, (block_b, path_b) in full.items():
            if a != b and block_a == block_b:  # layers are scoped by their block: only same-block pairs meet
                assert _common(nodes[a].switches, nodes[b].switches) == _common(path_a, path_b)
    for name, node in nodes.items():
        for depth in range(1, len(node.switches) + 1):
            assert (
                sum(
                    1
                    for other in nodes.values()
                    if other.location == node.location and other.switches[:depth] == node.switches[:depth]
                )
                >= 2
            ), name
