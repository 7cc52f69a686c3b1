"""``slurm-topo lint``, ``check`` and ``import`` through the command line (in-process, CliRunner): their
answers, their exit codes (0 ok, 1 problems or reject, 2 bad input) and what they print on each stream."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import common

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "real" / "slurm-24.11"
BLOCKS = REPO / "tests" / "fixtures" / "real" / "topology-blocks-26.05"
CLOUDS = REPO / "tests" / "fixtures" / "clouds"
NODES = str(REAL / "scontrol-show-node-o.txt")


# ---- lint


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("SwitchName=root Nodes=n1\n", "1 switch, 1 node"),
        (
            "SwitchName=s1 Nodes=n[1-3]\nSwitchName=s2 Nodes=n4\nSwitchName=root Switches=s[1-2]\n",
            "3 switches, 4 nodes",
        ),
    ],
)
def test_lint_ok_counts_switches_and_nodes_in_words(tmp_path: Path, text: str, sizes: str) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(text)
    result = invoke("lint", "--topology", str(conf))
    assert result.exit_code == 0 and result.stdout == f"{conf}: ok ({sizes})\n"


def test_lint_against_slurms_nodes_names_strangers_and_the_unplaced(tmp_path: Path) -> None:
    """One leaf with n01 and a node Slurm does not know: the stranger is named, and each of the other 11
    nodes the capture lists is on no switch (never allocated under topology/tree); exit 1."""
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=root Nodes=n01,x9\n")
    result = invoke("lint", "--topology", str(conf), "--nodes-from", NODES)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert f"{conf}: unknown-node: node x9 is not a node Slurm knows" in lines
    unplaced = sorted(line.split()[3] for line in lines if ": unplaced-node: " in line)
    assert unplaced == [f"n{i:02}" for i in range(2, 13)]
    assert len(lines) == 12


def test_lint_the_live_topology_against_its_own_cluster_is_clean() -> None:
    result = invoke("lint", "--topology", str(REAL / "topology.conf"), "--nodes-from", NODES, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "file": str(REAL / "topology.conf"),
        "ok": True,
        "problems": [],
        "switches": 15,
        "nodes": 12,
    }


def test_lint_slurm_conf_finds_a_node_defined_twice(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nNodeName=n01 CPUs=16\nNodeName=n01 CPUs=16\n")
    result = invoke("lint", "--topology", str(REAL / "topology.conf"), "--slurm-conf", str(conf))
    assert result.exit_code == 1
    topology = REAL / "topology.conf"
    assert result.stdout == (
        f"{topology}: node-defined-twice: node n01 is defined twice in {conf} (fatal to slurmctld)\n"
    )


def test_lint_problem_lines_carry_the_line_number(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n")
    result = invoke("lint", "--topology", str(conf))
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{conf}:2: duplicate-switch: ")


def swapped_blocks(tmp_path: Path) -> Path:
    """The captured topology.yaml with its two NVLink blocks in the other order."""
    docs = yaml.safe_load((BLOCKS / "topology.yaml").read_text())
    (nvl,) = [d for d in docs if d["topology"] == "nvl"]
    nvl["block"]["blocks"].reverse()
    path = tmp_path / "previous.yaml"
    path.write_text(yaml.safe_dump(docs))
    return path


def test_lint_previous_refuses_blocks_that_moved(tmp_path: Path) -> None:
    """Block order is fixed (aggregates are consecutive blocks): against a live file with the two blocks the
    other way round, both blocks moved; exit 1. Against itself the file is ok."""
    previous = swapped_blocks(tmp_path)
    current = str(BLOCKS / "topology.yaml")
    result = invoke("lint", "--topology", current, "--previous", str(previous), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and "switches" not in doc
    moved = {p["message"].split()[3]: p for p in doc["problems"]}
    assert set(moved) == {"nvl_rack-01", "nvl_rack-02"}
    assert all(p["code"] == "block-moved" and p["line"] is None for p in moved.values())
    same = invoke("lint", "--topology", current, "--previous", current)
    assert same.exit_code == 0 and same.stdout == f"{current}: ok\n"


def test_lint_unreadable_file_or_bad_release_is_bad_input(tmp_path: Path) -> None:
    missing = invoke("lint", "--topology", str(tmp_path / "topology.conf"))
    assert missing.exit_code == 2
    assert error_line(missing) == f"{tmp_path / 'topology.conf'}: cannot read: No such file or directory"
    release = invoke("lint", "--topology", str(BLOCKS / "topology.yaml"), "--slurm-version", "new")
    assert release.exit_code == 2 and "not a Slurm version: 'new'" in error_line(release)


def test_lint_scontrol_asks_slurm_for_its_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm({"scontrol show node -o": (REAL / "scontrol-show-node-o.txt").read_text()})
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    result = invoke("lint", "--topology", str(REAL / "topology.conf"), "--scontrol")
    assert result.exit_code == 0 and fake.calls == [("scontrol", "show", "node", "-o")]


# ---- check


def check(*args: str) -> tuple[int, list[str]]:
    result = invoke("check", "-i", str(REAL / "inventory.yaml"), *args)
    return result.exit_code, result.stdout.splitlines()


def test_check_a_gpu_type_narrows_the_candidates_to_its_nodes() -> None:
    """h100s are only n01-n04, all in us-east-1a: one zone fits 2 nodes of 8 h100, the four others have
    none of them (the inventory, counted by hand)."""
    code, lines = check("--locality", "zone", "-N", "2", "--gpus-per-node", "h100:8", "-v")
    assert code == 0 and lines[0] == "accept"
    assert lines[1] == "features: [zone_us-east-1a]"
    assert "candidates: us-east-1a (4 nodes, 32 GPUs)" in lines
    (excluded,) = [line for line in lines if line.startswith("excluded: ")]
    assert excluded.startswith("excluded: 4 zones too small: ")
    groups = re.findall(r"([\w-]+) \((\d+) nodes, (\d+) GPUs\)", excluded)
    assert sorted(groups) == [(z, "0", "0") for z in ("us-east-1b", "us-west-2a", "us-west-2b", "us-west-2c")]


def test_check_a_constraint_counts_only_the_nodes_that_have_it() -> None:
    """nvme nodes per zone: us-east-1a n01-n03, us-east-1b n05, us-west-2a n07-n08, us-west-2b n10-n11,
    us-west-2c none. Two nodes fit in three zones, and the constraint stays in front of the bracket."""
    code, lines = check("--locality", "zone", "-N", "2", "-C", "nvme", "--json")
    assert code == 0
    doc = json.loads("\n".join(lines))
    assert doc["decision"] == "accept" and doc["level"] == "zone"
    assert sorted((c["group"], c["nodes"]) for c in doc["candidates"]) == [
        ("us-east-1a", 3),
        ("us-west-2a", 2),
        ("us-west-2b", 2),
    ]
    assert sorted((c["group"], c["nodes"]) for c in doc["excluded"]) == [("us-east-1b", 1), ("us-west-2c", 0)]
    assert doc["features"].startswith("nvme&[") and doc["features"].count("|") == 2


def test_check_names_a_group_of_one_node_in_the_singular() -> None:
    code, lines = check("--locality", "zone", "-N", "2", "-C", "nvme", "-v")
    (excluded,) = [line for line in lines if line.startswith("excluded: ")]
    assert "us-east-1b (1 node, 4 GPUs)" in excluded


def alternatives(bracket: str) -> list[str]:
    """The top-level alternatives of ``[a|(b|c)|d]``."""
    out, depth, word = [], 0, ""
    for ch in bracket.removeprefix("[").removesuffix("]"):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            out.append(word)
            word = ""
        else:
            word += ch
    return [*out, word]


def test_check_prefer_never_constrains_and_lists_finest_smallest_first() -> None:
    """README: prefer never delays a job (no --constraint), and its --prefer lists the groups of every level
    that can ever hold it, finest level first, smallest first. Racks holding 2 nodes: rack-b1, rack-c1,
    rack-d1 (2 each), then rack-a1 (3); zones: us-east-1b and us-west-2b (2), us-west-2a (3), us-east-1a (4);
    regions come after the zones (their unions inside a region first)."""
    code, lines = check("--locality", "prefer", "-N", "2")
    assert code == 0 and lines[0] == "accept"
    assert not [line for line in lines if line.startswith("features:")]
    (prefer,) = [line.removeprefix("prefer: ") for line in lines if line.startswith("prefer: ")]
    found = alternatives(prefer)
    racks = [a for a in found if a.startswith("ng_")]
    assert racks[-1] == "ng_us-east-1a.rack-a1"
    assert sorted(racks[:3]) == ["ng_us-east-1b.rack-b1", "ng_us-west-2a.rack-c1", "ng_us-west-2b.rack-d1"]
    zones = [a for a in found if a.startswith("zone_")]
    assert sorted(zones[:2]) == ["zone_us-east-1b", "zone_us-west-2b"]
    assert zones[2:] == ["zone_us-west-2a", "zone_us-east-1a"]
    assert found[: len(racks) + len(zones)] == racks + zones
    regions = [found.index(a) for a in ("region_us-east", "region_us-west")]
    unions_in_a_region = [i for i, a in enumerate(found) if a in ("(zone_us-west-2b|zone_us-west-2c)",)]
    assert unions_in_a_region and max(unions_in_a_region) < min(regions)


def test_check_regions_keeps_only_the_named_regions_nodes() -> None:
    code, lines = check("--locality", "zone", "-N", "2", "--regions", "us-west", "--json")
    doc = json.loads("\n".join(lines))
    assert code == 0 and sorted(c["group"] for c in doc["candidates"]) == ["us-west-2a", "us-west-2b"]
    assert all(c["group"].startswith("us-west") for c in doc["excluded"])


def test_check_wait_that_can_never_fit_holds_the_job_but_accepts_it() -> None:
    """:wait on a request no zone can ever hold: the job is held, not rejected (exit 0), and the lines say
    how an operator gets it going; the largest zone is us-east-1a with its 4 nodes."""
    code, lines = check("--locality", "zone:wait", "-N", "5")
    assert code == 0 and lines[0] == "accept"
    assert lines[1].startswith("held: the job would wait")
    assert "the largest is us-east-1a with 4 nodes (32 GPUs)" in lines[2]
    assert (
        lines[-1] == "record: slurm-topo: zone:wait: held; the largest is us-east-1a with 4 nodes (32 GPUs)"
    )


def test_check_a_partition_limits_the_nodes_counted(tmp_path: Path) -> None:
    """A partition of the us-east nodes only (n01-n06): a region-level job of 6 nodes fits there and
    nowhere else, although us-west also has 6 nodes."""
    parts = tmp_path / "parts.txt"
    parts.write_text(
        "PartitionName=east Default=YES Nodes=n[01-06] State=UP\nPartitionName=all Nodes=n[01-12] State=UP\n"
    )
    code, lines = check("--locality", "region", "-N", "6", "--partitions-from", str(parts), "--json")
    doc = json.loads("\n".join(lines))
    assert code == 0 and [c["group"] for c in doc["candidates"]] == ["us-east"]
    code, lines = check(
        "--locality", "region", "-N", "6", "--partitions-from", str(parts), "-p", "all", "--json"
    )
    assert sorted(c["group"] for c in json.loads("\n".join(lines))["candidates"]) == ["us-east", "us-west"]


def test_check_reads_partitions_from_slurm_with_scontrol(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm({"scontrol show partition -o": (REAL / "scontrol-show-partition-o.txt").read_text()})
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    code, lines = check("--locality", "zone", "-N", "2", "--scontrol")
    assert code == 0 and lines[0] == "accept"
    assert fake.calls == [("scontrol", "show", "partition", "-o")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "8", "--gpus-per-node", "4"], "give --gpus or --gpus-per-node, not both"),
        (["--gpus-per-node", "h100:x"], "--gpus-per-node: expected [TYPE:]N, got 'h100:x'"),
        (["--gpus-per-node", "h100:0"], "--gpus-per-node: expected [TYPE:]N, got 'h100:0'"),
    ],
)
def test_check_gpu_request_errors_are_usage_errors(args: list[str], message: str) -> None:
    result = invoke("check", "-i", str(REAL / "inventory.yaml"), "--locality", "zone", *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert error_line(result) == f"{message} (see 'slurm-topo check --help')"


def test_check_takes_any_partition_name_slurm_takes(tmp_path: Path) -> None:
    """``gpu;rm`` is a name Slurm takes (``scontrol create``): read as it is, never a refusal
    (tests/test_partition_names.py)."""
    parts = tmp_path / "parts.txt"
    parts.write_text("PartitionName=gpu;rm Nodes=n01 Default=YES State=UP\n")
    result = invoke(
        "check", "-i", str(REAL / "inventory.yaml"), "--locality", "zone", "--partitions-from", str(parts)
    )
    assert result.exit_code in (0, 1) and "error" not in result.stderr, result.stderr


# ---- import


def test_import_name_map_renames_and_leaves_out_what_no_rule_matches() -> None:
    result = invoke(
        "import", "gcp", str(CLOUDS / "gcp-instances.json"), "--name-map", r"gpu-(ew4a)-(\d+)=\1n\2"
    )
    assert result.exit_code == 0
    inventory = yaml.safe_load(result.stdout)
    assert [n["name"] for n in inventory["nodes"]] == ["ew4an[01-02]"]
    (warning,) = result.stderr.splitlines()
    assert (
        warning.startswith("warning: ") and "matched no --name-map rule, left out: 'gpu-ew1b-01'" in warning
    )


def test_import_json_carries_the_warnings_and_prints_nothing_on_stderr() -> None:
    result = invoke(
        "import", "aws", str(CLOUDS / "aws-describe-instances.json"), "--aws-name", "tag:Nope", "--json"
    )
    assert result.exit_code == 0 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["inventory"]["nodes"] == []
    (warning,) = doc["warnings"]
    assert "3 instance(s) without an instance name (tag:Nope) left out" in warning


def test_import_strip_suffix_names_nodes_without_it() -> None:
    result = invoke("import", "gcp", str(CLOUDS / "gcp-instances.json"), "--strip-suffix", "-01", "--json")
    names = {n["zone"]: n["name"] for n in json.loads(result.stdout)["inventory"]["nodes"]}
    assert names == {"europe-west1-b": "gpu-ew1b", "europe-west4-a": "gpu-ew4a,gpu-ew4a-02"}


def test_an_imported_aws_placement_group_becomes_a_leaf_switch(tmp_path: Path) -> None:
    """aws: the placement group is the network group (the listing's README); generate takes the inventory
    import printed as it is."""
    imported = invoke("import", "aws", str(CLOUDS / "aws-describe-instances.json"))
    assert imported.exit_code == 0, imported.stderr
    inv = tmp_path / "aws.yaml"
    inv.write_text(imported.stdout)
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(inv), "-o", str(out), "--slurm-version", "24.11")
    assert result.exit_code == 0, result.stderr
    assert (
        "SwitchName=ng_us-east-1a.pg-train-1 Nodes=gpu-use1a-[01-02]" in (out / "topology.conf").read_text()
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d, "cannot read: Is a directory"),
        (lambda d: (d / "l.json").write_bytes(b'{"\xff"}') and d / "l.json", "cannot read: "),
    ],
    ids=["folder", "not-utf8"],
)
def test_import_an_unreadable_listing_is_one_error_line(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    listing = make(tmp_path)
    result = invoke("import", "gcp", str(listing))
    assert result.exit_code == 2 and result.stdout == ""
    assert error_line(result).startswith(f"{listing}: {message}")


def test_import_name_rules_are_one_or_the_other() -> None:
    result = invoke(
        "import", "gcp", str(CLOUDS / "gcp-instances.json"), "--name-map", "a=b", "--strip-suffix", "x"
    )
    assert result.exit_code == 2
    assert (
        error_line(result) == "give --name-map or --strip-suffix, not both (see 'slurm-topo import --help')"
    )
    bad = invoke("import", "gcp", str(CLOUDS / "gcp-instances.json"), "--name-map", "gpu-(=x")
    assert bad.exit_code == 2 and error_line(bad).startswith("--name-map 'gpu-(=x': bad regular expression")


def test_import_an_unknown_provider_is_named_plainly_with_the_known_ones() -> None:
    result = invoke("import", "ibm", str(CLOUDS / "gcp-instances.json"))
    assert result.exit_code == 2 and result.stdout == ""
    line = error_line(result)
    assert line.startswith("invalid value for 'PROVIDER': 'ibm' is not one of 'gcp', 'aws', 'azure'")
    assert "{" not in line
