"""Node records in a directory: read as self, bad ones skipped with one line, never overriding trusted
records."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_topo import InputError, Location, Source, merge, parse_inventory
from slurm_topo.core.model import LEVELS
from slurm_topo.inventory import Loaded
from slurm_topo.sources.discover import discover_node, record_json, record_yaml
from slurm_topo.sources.providers import import_listing
from slurm_topo.sources.records import load_record_file, load_records

NOWHERE = Path("/nonexistent/dmi")


def write_record(d: Path, name: str, *, form: str = "yaml", **levels: str) -> Path:
    rec = discover_node(node_name=name, environ={}, dmi_root=NOWHERE, **levels)  # type: ignore[arg-type]
    path = d / f"{name}.{form}"
    path.write_text(record_yaml(rec) if form == "yaml" else record_json(rec))
    return path


def test_yaml_and_json_records_load_as_self(tmp_path: Path) -> None:
    """Both forms discover prints are read, one node each, source self."""
    write_record(tmp_path, "n1", region="dc1", zone="hall-a")
    write_record(tmp_path, "n2", form="json", region="dc1", zone="hall-b", network_group="row-2")
    loaded, warnings = load_records(tmp_path)
    nodes = {item.nodes[0].name: item.nodes[0] for item in loaded}
    assert warnings == []
    assert nodes["n1"].location == Location("dc1", "hall-a")
    assert nodes["n2"].location == Location("dc1", "hall-b", "row-2")
    assert all(n.source == Source.SELF for n in nodes.values())


def test_a_record_claiming_provider_is_read_as_self_with_a_warning(tmp_path: Path) -> None:
    """A node cannot promote itself: source: provider in a record is demoted to self, and said so."""
    (tmp_path / "n1.json").write_text(json.dumps({"name": "n1", "region": "dc1", "source": "provider"}))
    loaded, warnings = load_records(tmp_path)
    assert loaded[0].nodes[0].source == Source.SELF
    assert warnings == [
        f"{tmp_path / 'n1.json'}: says source: provider; a node record is always read as self"
    ]


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("a.yaml", "nodes: [\n", "not valid YAML"),
        ("b.json", "{", "not valid JSON"),
        ("c.yaml", "nodes:\n  - {name: c, region: 'bad region'}\n", "region: must be 1-63"),
        ("d.json", '{"name": "d", "region": "r1\\n"}', "region: must be 1-63"),
        (
            "e.yaml",
            "nodes:\n  - {name: e, region: r1, slurm: {NodeAddr: 10.0.0.1}}\n",
            "not allowed in a node record: slurm",
        ),
        ("f.yaml", "nodes:\n  - {name: f, region: r1, gpu_topology: /etc/shadow}\n", "not allowed"),
        ("g.yaml", "policy: {default: zone}\nnodes:\n  - {name: g, region: r1}\n", "may only hold 'nodes'"),
        ("h.yaml", "nodes:\n  - {name: 'h[1-2]', region: r1}\n", "name: must be one node name"),
        ("i.yaml", "nodes:\n  - {name: i1, region: r1}\n  - {name: i2, region: r1}\n", "exactly one entry"),
        ("j.json", "[1, 2]", "must be a node record"),
        ("k.yaml", "nodes:\n  - {name: k, zone: hall-a}\n", "zone: needs a region"),
        (
            "l.json",
            '{"name": "l", "region": "r1", "source": "root"}',
            "source: must be provider, operator or self",
        ),
        # Hostile documents: each one warning line, never an exception, bounded in time and memory.
        ("m.yaml", "nodes:\n  - {name: m, region: !!timestamp x}\n", "not valid YAML: a tagged value"),
        ("n.yaml", "nodes:\n  - {name: n, region: !!int x}\n", "not valid YAML: a tagged value"),
        ("o.yaml", "nodes:\n  - {name: o, region: !!python/name:os.system x}\n", "not valid YAML"),
        (
            "p.yaml",
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
            + "nodes: [{name: p, region: *i}]\n",
            "not valid YAML: aliases expand to more than",
        ),
        ("q.yaml", "nodes:\n  - {name: q, region: r1, region: r2}\n", "duplicate key 'region'"),
        ("r.json", "[" * 30_000 + "]" * 30_000, "not valid JSON"),
        ("v.yaml", "nodes:\n" + "[" * 30_000 + "]" * 30_000 + "\n", "not valid YAML"),
        ("s.yaml", "nodes:\n  - {name: s, region: r1, features: [zone_x]}\n", "not allowed in a node record"),
        ("t.yaml", 'nodes:\n  - {name: "t\\n", region: r1}\n', "name: must be one node name"),
        ("u.json", '{"name": "u", "region": "r1", "found_by": {"x": ' + "9" * 5000 + "}}", "not valid JSON"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.endswith(("yaml", "json")) else "",
)
def test_bad_record_is_skipped_with_one_line_naming_the_file(
    tmp_path: Path, name: str, text: str, reason: str
) -> None:
    """A bad record is left out with one warning line naming the file; the good records are all kept."""
    write_record(tmp_path, "good", region="dc1")
    (tmp_path / name).write_text(text)
    loaded, warnings = load_records(tmp_path)
    assert [item.nodes[0].name for item in loaded] == ["good"]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith(str(tmp_path / name) + ": ") and warnings[0].endswith("; record skipped")
    assert reason in warnings[0]


def test_load_record_file_raises_one_line_input_error(tmp_path: Path) -> None:
    """The single-file loader raises InputError naming the file (load_records turns it into a skip)."""
    path = tmp_path / "x.yaml"
    path.write_text("nodes: 3\n")
    with pytest.raises(InputError, match=r"x.yaml: a node record must hold exactly one entry"):
        load_record_file(path)


def test_oversized_hidden_and_other_files(tmp_path: Path) -> None:
    """Files over 64 KiB are skipped; hidden temporaries and other suffixes are not read at all."""
    (tmp_path / "big.yaml").write_text("# " + "x" * 70000 + "\nnodes: []\n")
    (tmp_path / ".n1.yaml.tmp").write_text("garbage")
    (tmp_path / ".n2.yaml").write_text("garbage")
    (tmp_path / "README.txt").write_text("garbage")
    write_record(tmp_path, "n3", region="dc1")
    loaded, warnings = load_records(tmp_path)
    assert [item.nodes[0].name for item in loaded] == ["n3"]
    assert len(warnings) == 1 and "larger than 65536 bytes" in warnings[0]


def test_disagreeing_records_of_one_node_are_all_skipped(tmp_path: Path) -> None:
    """Two records of one node at two places would stop generate: both are skipped with one warning."""
    write_record(tmp_path, "n1", region="dc1")
    write_record(tmp_path, "n1", form="json", region="dc2")
    write_record(tmp_path, "n2", region="dc1")
    loaded, warnings = load_records(tmp_path)
    assert [item.nodes[0].name for item in loaded] == ["n2"]
    assert len(warnings) == 1 and warnings[0].startswith("node n1: its records disagree")
    merge(loaded)  # and the rest merges


def test_missing_directory_is_an_input_error_and_empty_one_a_warning(tmp_path: Path) -> None:
    """A wrong --records path raises; an empty directory only warns."""
    with pytest.raises(InputError, match="records directory"):
        load_records(tmp_path / "absent")
    assert load_records(tmp_path) == (
        [],
        [f"records directory {tmp_path}: no *.yaml, *.yml or *.json records"],
    )


def test_self_record_never_overrides_operator_and_conflict_is_listed(tmp_path: Path) -> None:
    """An operator record keeps its place against a self record; the disagreement is a Conflict."""
    write_record(tmp_path, "n1", region="dc2", zone="hall-z")
    op = parse_inventory("nodes:\n  - {name: n1, region: dc1, zone: hall-a}\n", source="op.yaml")
    loaded, _ = load_records(tmp_path)
    inv = merge([op, *loaded])
    assert inv.nodes[0].location == Location("dc1", "hall-a") and inv.nodes[0].source == Source.OPERATOR
    (c,) = inv.conflicts
    assert c.ignored_source == Source.SELF and c.ignored == Location("dc2", "hall-z")
    assert "region: self says dc2, operator says dc1" in c.message()


def test_self_record_fills_a_finer_level_it_agrees_with(tmp_path: Path) -> None:
    """A self record agreeing on region and zone may add the network group the trusted record lacks."""
    write_record(tmp_path, "n1", region="dc1", zone="hall-a", network_group="row-4")
    op = parse_inventory("nodes:\n  - {name: n1, region: dc1, zone: hall-a}\n", source="op.yaml")
    inv = merge([op, *load_records(tmp_path)[0]])
    assert inv.nodes[0].location == Location("dc1", "hall-a", "row-4") and inv.conflicts == ()


# ------------------------------------------------------------------------------------------------ property

AZS = ["us-east-1a", "us-east-1b", "eu-west-1a"]
GROUPS = [None, "g1", "g2"]


def _aws_listing(places: dict[str, tuple[str, str | None]]) -> str:
    return json.dumps(
        {
            "Reservations": [
                {
                    "Instances": [
                        {
                            "InstanceId": f"i-{i}",
                            "Placement": {"AvailabilityZone": az, "GroupName": group or ""},
                            "State": {"Name": "running"},
                            "Tags": [{"Key": "Name", "Value": name}],
                        }
                        for i, (name, (az, group)) in enumerate(sorted(places.items()))
                    ]
                }
            ]
        }
    )


# A location any source might claim: partial or full, from the same small alphabet as the provider's.
locations = st.one_of(
    st.just(Location()),
    st.sampled_from(["us-east-1", "eu-west-1"]).map(Location),
    st.tuples(st.sampled_from(AZS), st.sampled_from(GROUPS)).map(lambda t: Location(t[0][:-1], t[0], t[1])),
    st.tuples(st.sampled_from(["us-east-1", "eu-west-1"]), st.sampled_from(["g1", "g2"])).map(
        lambda t: Location(t[0], None, t[1])
    ),
)
node_names = st.sampled_from(["n1", "n2", "n3"])


def _entry(name: str, loc: Location, source: str) -> str:
    levels = "".join(f", {lvl}: {loc.value(lvl)}" for lvl in LEVELS if loc.value(lvl) is not None)
    return f"  - {{name: {name}{levels}, source: {source}}}\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.dictionaries(
        node_names, st.tuples(st.sampled_from(AZS), st.sampled_from(GROUPS)), max_size=3
    ),
    operator=st.dictionaries(node_names, locations, max_size=3),
    selves=st.lists(
        st.tuples(
            node_names,
            locations,
            st.sampled_from(["yaml", "json"]),
            st.sampled_from(["self", "provider", "operator"]),
        ),
        max_size=6,
    ),
)
def test_no_self_value_overrides_a_trusted_one_and_every_disagreement_is_listed(
    provider: dict[str, tuple[str, str | None]],
    operator: dict[str, Location],
    selves: list[tuple[str, Location, str, str]],
) -> None:
    """For any mix of provider (imported), operator and self (records dir) records over the same nodes, the
    merged location agrees with the trusted-only merge on every level that merge sets, a level filled from a
    self record only extends a location it agrees with, and each self record that disagrees is a Conflict."""
    loaded_trusted: list[Loaded] = []
    if provider:
        loaded_trusted.append(
            parse_inventory(import_listing("aws", _aws_listing(provider)).text, source="aws")
        )
    if operator:
        text = "nodes:\n" + "".join(_entry(n, loc, "operator") for n, loc in sorted(operator.items()))
        loaded_trusted.append(parse_inventory(text, source="op.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for i, (name, loc, form, claimed) in enumerate(selves):
            doc = {"name": name, **{lvl: loc.value(lvl) for lvl in LEVELS}, "source": claimed}
            path = d / f"{i:02d}-{name}.{form}"
            if form == "json":
                path.write_text(json.dumps(doc))
            else:
                path.write_text("nodes:\n" + _entry(name, loc, claimed))
        records, _ = load_records(d)
    assert all(item.nodes[0].source == Source.SELF for item in records)

    trusted = {n.name: n for n in merge(loaded_trusted).nodes}
    inv = merge([*loaded_trusted, *records])
    merged = {n.name: n for n in inv.nodes}
    for name, t in trusted.items():
        final = merged[name]
        assert final.source == t.source  # a self record never becomes the kept record of a trusted node
        for lvl in LEVELS:
            if t.location.value(lvl) is not None:
                assert final.location.value(lvl) == t.location.value(lvl), (name, lvl)
        if final.location != t.location:  # something was filled from a self record: it agreed with t
            assert t.location.covers(final.location)
    conflicted = {(c.node, c.ignored_origin) for c in inv.conflicts}
    for item in records:
        node = item.nodes[0]
        if node.name not in trusted or node.location == Location():
            continue
        final = merged[node.name].location
        disagrees = any(
            node.location.value(lvl) is not None
            and final.value(lvl) is not None
            and node.location.value(lvl) != final.value(lvl)
            for lvl in LEVELS
        )
        if disagrees:
            assert (node.name, node.origin) in conflicted
        assert all(c.ignored_source < c.kept_source for c in inv.conflicts)


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_a_discovered_nvlink_domain_is_read_from_the_record(tmp_path: Path, form: str) -> None:
    """discover writes nvlink_domain into the record; the records folder carries it (it skipped the
    record before)."""
    write_record(tmp_path, "n1", form=form, region="dc1", zone="hall-a", nvlink_domain="rack-07")
    loaded, warnings = load_records(tmp_path)
    assert warnings == []
    assert [item.nodes[0].nvlink_domain for item in loaded] == ["rack-07"]


def test_a_bad_nvlink_domain_in_a_record_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "n1.json").write_text(json.dumps({"name": "n1", "nvlink_domain": "rack 07\nNodeName=x"}))
    loaded, warnings = load_records(tmp_path)
    assert loaded == [] and len(warnings) == 1 and "nvlink_domain" in warnings[0]
