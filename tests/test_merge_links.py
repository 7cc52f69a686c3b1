"""Merging the `links:` of several inventories (`inventory/merge.py`): each provider's import writes its
profile, so a fleet across clouds (a GCP and an AWS import) is one table, per level the slower of the
profiles (lower bandwidth, higher latency: what a job that may span both costs), with a note naming them;
two different tables a site wrote are still refused. The `cost`/`explain` commands read the same rule."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from test_cli import invoke

from slurm_topo import merge, parse_inventory
from slurm_topo.core.errors import InputError, InventoryError
from slurm_topo.core.model import Inventory
from slurm_topo.cost.comm import Fabric, PlanSpec, ring_allreduce_seconds, score_placement
from slurm_topo.cost.links import FABRIC_LEVELS, LINK_LEVELS, PROFILES, LinkTable, parse_links, profile_of
from slurm_topo.inventory.document import Loaded
from slurm_topo.inventory.merge import MergedInventory
from slurm_topo.sources.providers import Companion, import_listing

PROV = Path(__file__).parent / "fixtures" / "providers"


def _gcp_text() -> str:
    return import_listing("gcp", (PROV / "gcp-instances-physical-topology.json").read_text()).text


def _aws_text() -> str:
    topo = Companion((PROV / "aws-account-a-describe-instance-topology.json").read_text(), "topo-a.json")
    listing = (PROV / "aws-account-a-describe-instances.json").read_text()
    return import_listing("aws", listing, topology=topo).text


def _gpus(text: str) -> str:
    """The import with 8 GPUs a node (the listings name machine types, not GPU counts)."""
    assert "\n- name: " in text and "gpus:" not in text
    return text.replace("\n- name: ", "\n- gpus: 8\n  name: ")


def _profile_doc(name: str, node: str) -> Loaded:
    return parse_inventory(f"nodes:\n  - name: {node}\nlinks:\n  profile: {name}\n", source=f"{name}.yaml")


def _merged_gcp_aws() -> Inventory:
    gcp = parse_inventory(_gpus(_gcp_text()), source="gcp.yaml")
    aws = parse_inventory(_gpus(_aws_text()), source="aws.yaml")
    return merge([gcp, aws])


def test_a_gcp_and_an_aws_import_merge_into_the_slower_table() -> None:
    inv = _merged_gcp_aws()
    gcp, aws = parse_links({"profile": "gcp"}), parse_links({"profile": "aws"})
    table: LinkTable = inv.links
    for level in LINK_LEVELS:
        assert table[level].bandwidth == min(gcp[level].bandwidth, aws[level].bandwidth)
        assert table[level].latency_us == max(gcp[level].latency_us, aws[level].latency_us)
    # the slower differs by level and by figure: the zone takes gcp's bandwidth (2 GB/s, aws 25) and aws's
    # latency (100 µs, gcp 50), the region aws's bandwidth (0.625 GB/s, gcp 2)
    assert (table["zone"].bandwidth, table["zone"].latency_us) == (
        gcp["zone"].bandwidth,
        aws["zone"].latency_us,
    )
    assert table["region"].bandwidth == aws["region"].bandwidth < gcp["region"].bandwidth
    assert profile_of(table) is None and table != gcp and table != aws
    (note,) = [w for w in inv.warnings if w.startswith("links:")]
    assert "gcp (gcp.yaml) and aws (aws.yaml)" in note and "slower" in note
    assert isinstance(inv, MergedInventory) and dict(inv.sections)["links"] == "gcp.yaml"  # the first


def test_the_merged_fleet_costs_each_level_at_least_as_either_profile() -> None:
    """Every pair of the merged fleet's nodes (GCE and AWS), a data-parallel step on them and a 4 GB ring
    at each network level: at least what either profile alone gives, equal to the slower one's."""
    inv = _merged_gcp_aws()
    fabric = Fabric.of(inv)
    profiles = [parse_links({"profile": name}) for name in ("gcp", "aws")]
    plan = PlanSpec(gpus_per_node=8, allreduce_bytes=4e9)
    levels = set()
    for a, b in itertools.combinations(sorted(fabric.nodes), 2):
        merged = score_placement(fabric, [a, b], plan, inv.links)
        alone = [score_placement(fabric, [a, b], plan, t) for t in profiles]
        assert merged.seconds >= max(c.seconds for c in alone) * (1 - 1e-12)
        levels |= {t.level for t in merged.terms}
    assert {"switch", "network_group", "zone", "any"} <= levels  # GCE and AWS nodes meet at `any`
    for level in FABRIC_LEVELS:
        seconds = ring_allreduce_seconds(16, 4e9, inv.links[level])
        assert seconds >= max(ring_allreduce_seconds(16, 4e9, t[level]) for t in profiles)


@pytest.mark.parametrize("names", list(itertools.product(sorted(PROFILES), repeat=3)))
def test_any_profiles_in_any_order_merge_to_the_slowest_per_level(names: tuple[str, ...]) -> None:
    inv = merge([_profile_doc(name, f"n{i}") for i, name in enumerate(names)])
    tables = [parse_links({"profile": name}) for name in names]
    for level in LINK_LEVELS:
        assert inv.links[level].bandwidth == min(t[level].bandwidth for t in tables)
        assert inv.links[level].latency_us == max(t[level].latency_us for t in tables)
    notes = [w for w in inv.warnings if w.startswith("links:")]
    if len(set(names)) == 1:  # one profile, given more than once: that profile, nothing to say
        assert not notes and profile_of(inv.links) == names[0]
    else:
        (note,) = notes
        assert all(f"{name} ({name}.yaml)" in note for name in set(names))
    # the order of the files does not change the table
    again = merge([_profile_doc(name, f"n{i}") for i, name in reversed(list(enumerate(names)))])
    assert again.links == inv.links
    # the merged table is still one parse_links accepts (monotone going out), as the site would write it
    written = {
        lvl: {"bandwidth": inv.links[lvl].bandwidth, "latency_us": inv.links[lvl].latency_us}
        for lvl in LINK_LEVELS
    }
    assert {lvl: parse_links(written)[lvl] for lvl in LINK_LEVELS} == {
        lvl: inv.links[lvl] for lvl in LINK_LEVELS
    }


SITE_A = "links:\n  zone: {bandwidth: 20}\n"
SITE_B = "links:\n  zone: {bandwidth: 21}\n"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (SITE_A, SITE_B),  # two site tables
        ("links:\n  profile: gcp\n", SITE_A),  # an import and a site's table
        (SITE_A, "links:\n  profile: aws\n"),
        ("links:\n  profile: gcp\n", "links:\n  profile: aws\n  zone: {bandwidth: 1}\n"),  # a profile changed
        ("links:\n  profile: aws\n  rails: gpu_index\n", "links:\n  profile: gcp\n"),
    ],
)
def test_tables_a_site_wrote_are_still_given_once(first: str, second: str) -> None:
    a = parse_inventory("nodes:\n  - name: a1\n" + first, source="a.yaml")
    b = parse_inventory("nodes:\n  - name: b1\n" + second, source="b.yaml")
    with pytest.raises(InventoryError, match="differs from the links: in a.yaml; give links: once") as err:
        merge([a, b])
    assert err.value.source == "b.yaml"
    assert merge([a, parse_inventory("nodes:\n  - name: b1\n" + first)]).links == a.links  # alike: one table


def test_profile_of_names_only_a_profile_left_as_it_is() -> None:
    for name in PROFILES:
        assert profile_of(parse_links({"profile": name})) == name
        assert profile_of(parse_links({"profile": name, "any": {"latency_us": 1e6}})) is None
        assert profile_of(parse_links({"profile": name, "rails": "gpu_index"})) is None


# ---- the commands that read links: from the files (cost, explain, calibrate)


def test_cost_reads_a_gcp_and_an_aws_import_as_the_merge_does(tmp_path: Path) -> None:
    gcp, aws = tmp_path / "gcp.yaml", tmp_path / "aws.yaml"
    gcp.write_text(_gpus(_gcp_text()))
    aws.write_text(_gpus(_aws_text()))
    args = ["cost", "-i", str(gcp), "-i", str(aws), "--gpus-per-node", "8", "--allreduce-bytes", "4G"]
    result = invoke(*args, "--nodes", "a3u-01,p5-a-01", "--comm-only", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    inv = _merged_gcp_aws()
    want = score_placement(
        Fabric.of(inv), ["a3u-01", "p5-a-01"], PlanSpec(gpus_per_node=8, allreduce_bytes=4e9), inv.links
    )
    assert doc["seconds"] == pytest.approx(want.seconds)
    assert "links: the provider profiles gcp" in result.stderr
    site = tmp_path / "site.yaml"
    site.write_text("nodes: []\n" + SITE_A)
    refused = invoke(*args, "-i", str(site), "--nodes", "a3u-01,p5-a-01", "--comm-only")
    assert refused.exit_code == 2
    with pytest.raises(InputError):  # the merge refuses it too
        merge([parse_inventory(gcp.read_text()), parse_inventory(site.read_text())])
