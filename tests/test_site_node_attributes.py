"""``generate --nodes-from`` / ``--scontrol`` carries a site's own node definition into slurm-topo-nodes.conf
(issue 42): its features, less the generator's own, and the ``NodeName=`` attributes the generator does not
own, on what Slurm 22.05, 24.11 and 26.05 really print (tests/fixtures/real/site-nodes: a site's lines with
features, weight, temporary disk, specialized cores and memory, CPU binding, a cloud node, and a node an
earlier generated file defined). The inventory's own features and attributes win; run-time fields never
reach a ``NodeName=`` line. The same on a real cluster:
tests/integration/test_site_node_features_on_real_slurm.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_cli import FakeSlurm, invoke

from slurm_topo.access.text import parse_scontrol_nodes
from slurm_topo.cli import common
from slurm_topo.core.errors import InputError
from slurm_topo.core.model import LEVEL_FEATURE_PREFIXES, Inventory, Location, Node
from slurm_topo.inventory import load_inventory_file, with_slurm_nodes
from slurm_topo.inventory.slurm_nodes import site_features
from slurm_topo.slurmconfig.slurmconf import split_pairs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real"
SITE = FIXTURES / "site-nodes"
RELEASES = ("22.05", "24.11", "26.05")
LOCATION = ["region_r1", "zone_r1-a", "ng_r1-a.rack-1"]
RUN_TIME = {"State", "Reason", "BootTime", "SlurmdStartTime", "CPUAlloc", "CPULoad", "FreeMem", "Partitions"}


def fleet(tmp_path: Path, **per_node: dict[str, object]) -> Path:
    """s1-s4 in one rack, nothing else said of them (``per_node``: an entry's extra keys for one node)."""
    entries = [
        {
            "name": f"s{i}",
            "region": "r1",
            "zone": "r1-a",
            "network_group": "rack-1",
            **per_node.get(f"s{i}", {}),
        }
        for i in range(1, 5)
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"nodes": entries}, sort_keys=False))
    return path


def node_lines(out: Path) -> dict[str, dict[str, str]]:
    """slurm-topo-nodes.conf: node name -> its NodeName= attributes (each line names one node here)."""
    lines = (out / "slurm-topo-nodes.conf").read_text().splitlines()
    pairs = [split_pairs(line) for line in lines if line.startswith("NodeName=")]
    return {p.pop("NodeName"): p for p in pairs}


def captured(release: str) -> dict[str, dict[str, str]]:
    return {
        r["NodeName"]: r
        for r in parse_scontrol_nodes((SITE / f"slurm-{release}" / "scontrol-show-node-o.txt").read_text())
    }


def generate(tmp_path: Path, inventory: Path, release: str) -> tuple[dict[str, dict[str, str]], str]:
    out = tmp_path / "out"
    result = invoke(
        "generate", "-i", str(inventory), "-o", str(out), "--slurm-version", release,
        "--nodes-from", str(SITE / f"slurm-{release}" / "scontrol-show-node-o.txt"),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    return node_lines(out), result.stderr


@pytest.mark.parametrize("release", RELEASES)
def test_a_sites_own_node_definition_is_carried_over(tmp_path: Path, release: str) -> None:
    """What the site's lines said is what the generated lines say: features (site ones first, then the
    location's), weight, temporary disk, the specialized CPUs in Slurm's exact list, memory set aside, CPU
    binding, the cloud state; the generator's own earlier features (s3: old location, leaf, NVLink, bucket,
    linkdeg) and the weight health added are not carried; nothing Slurm keeps at run time is."""
    lines, stderr = generate(tmp_path, fleet(tmp_path), release)
    rec = captured(release)
    hardware = {
        "NodeAddr": "127.0.0.1",
        "CPUs": "4",
        "Boards": "1",
        "Sockets": "1",
        "CoresPerSocket": "4",
        "ThreadsPerCore": "1",
        "RealMemory": "4000",
    }

    def want(name: str, **attrs: str) -> dict[str, str]:
        host = {"NodeHostname": "localhost"} if rec[name]["NodeHostName"] == "localhost" else {}
        return {**host, **hardware, "Port": rec[name]["Port"], "TmpDisk": "0", "Weight": "1", **attrs}

    location = ",".join(LOCATION)
    assert lines == {
        "s1": want(
            "s1", TmpDisk="100", CpuSpecList="3", MemSpecLimit="500", CpuBind="cores", Weight="7",
            Features=f"ib,fast,{location}",
        ),
        "s2": want("s2", CpuSpecList=rec["s2"]["CPUSpecList"], Features=f"ib,{location}"),
        "s3": want("s3", Weight="5", Features=f"ib,{location}"),
        "s4": want("s4", Features=location, State="CLOUD"),
    }  # fmt: skip
    assert rec["s2"]["CPUSpecList"] in ("0,1", "0-1") and rec["s1"]["CoreSpecCount"] == "1"
    assert not any("CoreSpecCount" in attrs for attrs in lines.values())  # the list says which CPUs
    assert not any(RUN_TIME & set(attrs) - {"State"} for attrs in lines.values())
    assert "not carried" not in stderr, stderr


def test_the_scontrol_path_carries_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--scontrol`` reads the same listing from the running Slurm (here its captured answer)."""
    fake = FakeSlurm(
        {
            "scontrol show node -o": (SITE / "slurm-26.05" / "scontrol-show-node-o.txt").read_text(),
            "scontrol show partition -o": (
                FIXTURES / "slurm-26.05" / "scontrol-show-partition-o.txt"
            ).read_text(),
        }
    )
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    out = tmp_path / "out"
    inventory = fleet(tmp_path)
    result = invoke(
        "generate", "-i", str(inventory), "-o", str(out), "--slurm-version", "26.05", "--scontrol"
    )
    assert result.exit_code == 0, result.stderr
    via_file, _ = generate(tmp_path / "file", inventory, "26.05")
    assert node_lines(out) == via_file
    assert node_lines(out)["s1"]["Features"].startswith("ib,fast,")


def test_the_inventorys_features_and_attributes_win(tmp_path: Path) -> None:
    """An inventory that gives a node features gives all of them (Slurm's ib,fast are not added, and a line on
    stderr names them); an attribute it gives is its own (Weight, the specialized cores in either spelling:
    Slurm's CPUSpecList is then not carried)."""
    inventory = fleet(
        tmp_path,
        s1={"features": ["nvme"], "slurm": {"Weight": 3, "CoreSpecCount": 2}},
        s2={"features": ["ib"]},
    )
    lines, stderr = generate(tmp_path, inventory, "24.11")
    s1 = lines["s1"]
    assert s1["Features"] == "nvme," + ",".join(LOCATION)
    assert (s1["Weight"], s1["CoreSpecCount"]) == ("3", "2") and "CpuSpecList" not in s1
    assert (s1["MemSpecLimit"], s1["TmpDisk"], s1["CpuBind"]) == ("500", "100", "cores")  # not given: carried
    assert lines["s2"]["Features"] == "ib," + ",".join(LOCATION)
    warned = [line for line in stderr.splitlines() if "not carried" in line]
    assert warned == [
        f"warning: {SITE / 'slurm-24.11' / 'scontrol-show-node-o.txt'}: s1: Slurm's feature(s) ib,fast not "
        "carried over: the inventory gives these nodes' features (list them there to keep them)"
    ]


def test_a_node_moved_in_the_inventory_keeps_none_of_its_old_location(tmp_path: Path) -> None:
    """The 22.05 capture: every node's Slurm features are the generator's (region_us-east, zone_…, ng_…) and
    the inventory's ib/nvme. An inventory that gives no features and moves n01 elsewhere: n01 keeps ib and
    nvme from Slurm and only its new location's features; the drained n12 gets no State or Reason."""
    real = FIXTURES / "slurm-22.05"
    doc = yaml.safe_load((real / "inventory.yaml").read_text())
    for entry in doc["nodes"]:
        entry.pop("features", None)
        if entry["name"] == "n01":
            entry.update(region="eu", zone="eu-1a", network_group="rack-z")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    result = invoke(
        "generate", "-i", str(inventory), "-o", str(out), "--slurm-version", "22.05",
        "--nodes-from", str(real / "scontrol-show-node-o.txt"),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    lines = node_lines(out)
    assert lines["n01"]["Features"] == "ib,nvme,region_eu,zone_eu-1a,ng_eu-1a.rack-z"
    slurm = {r["NodeName"]: r for r in parse_scontrol_nodes((real / "scontrol-show-node-o.txt").read_text())}
    for name, attrs in lines.items():
        site = [
            f for f in slurm[name]["AvailableFeatures"].split(",") if not f.startswith(LEVEL_FEATURE_PREFIXES)
        ]
        assert attrs["Features"].split(",")[: len(site)] == site, name
        assert not RUN_TIME & set(attrs), name
    assert "DRAIN" in slurm["n12"]["State"] and "Reason" in slurm["n12"]


def test_site_features_leave_the_generators_own() -> None:
    """The one list of the generator's prefixes (model.LEVEL_FEATURE_PREFIXES) and the health feature."""
    s3 = captured("26.05")["s3"]
    assert s3["AvailableFeatures"].split(",")[1:] == [
        "region_old", "zone_old-a", "ng_old-a.rack-9", "leaf_old", "nvl_old", "zone_old-a.torch-2", "linkdeg",
    ]  # fmt: skip
    assert site_features(s3) == (("ib",), ())
    assert site_features(captured("26.05")["s4"]) == ((), ())
    assert site_features({"NodeName": "x", "ActiveFeatures": "a,b,a"}) == (("a", "b"), ())  # no Available


def test_a_feature_no_inventory_could_name_is_named_not_carried() -> None:
    line = (SITE / "slurm-22.05" / "scontrol-show-node-o.txt").read_text().splitlines()[1]  # s2: ib
    odd = line.replace("AvailableFeatures=ib ", "AvailableFeatures=ib,big+fast ")
    inv = Inventory(nodes=(Node("s2", Location("r1", "r1-a", "rack-1")),))
    out = with_slurm_nodes(inv, parse_scontrol_nodes(odd + "\n"), "nodes.txt")
    assert out.nodes[0].features == ("ib",)
    assert out.warnings == (
        "nodes.txt: s2: Slurm's feature 'big+fast' not carried over: not 1-63 characters from [A-Za-z0-9._-]",
    )


@pytest.mark.parametrize(
    ("weight", "carried"),
    [("1000005", "5"), ("1000000", "0"), ("4294967294", None), ("7", "7")],
)
def test_a_health_raised_weight_is_carried_without_its_raise(weight: str, carried: str | None) -> None:
    """A node with ``linkdeg`` got ``DEGRADED_WEIGHT`` added by the generator; at the cap the weight before
    cannot be told, so none is carried (Slurm's default, or the inventory's, applies)."""
    line = (SITE / "slurm-26.05" / "scontrol-show-node-o.txt").read_text().splitlines()[2]  # s3
    rec = parse_scontrol_nodes(line.replace("Weight=1000005", f"Weight={weight}") + "\n")
    out = with_slurm_nodes(Inventory(nodes=(Node("s3", Location("r1")),)), rec)
    assert out.nodes[0].slurm_attr("Weight") == carried


@pytest.mark.parametrize(
    ("state", "carried"),
    [
        ("IDLE+CLOUD", "CLOUD"),
        ("IDLE+CLOUD+POWERED_DOWN", "CLOUD"),
        ("FUTURE", "FUTURE"),
        ("IDLE+DRAIN", None),
        ("DOWN*", None),
        ("MIXED", None),
    ],
)
def test_only_the_states_a_node_line_gives_are_carried(state: str, carried: str | None) -> None:
    line = (SITE / "slurm-26.05" / "scontrol-show-node-o.txt").read_text().splitlines()[3]  # s4
    rec = parse_scontrol_nodes(line.replace("State=IDLE+CLOUD", f"State={state}") + "\n")
    out = with_slurm_nodes(Inventory(nodes=(Node("s4", Location("r1")),)), rec)
    assert out.nodes[0].slurm_attr("State") == carried


@pytest.mark.parametrize(
    ("slurm", "problem"),
    [
        ({"CoreSpecCount": 2, "CpuSpecList": "0,2-3", "MemSpecLimit": 2048, "CpuBind": "threads"}, None),
        ({"CpuSpecList": "3-1"}, "slurm.CpuSpecList: 3-1: not a range"),
        ({"CpuSpecList": "0;1"}, "slurm.CpuSpecList: not a valid value"),
        ({"CpuBind": "rank"}, "slurm.CpuBind: must be one of none, boards, ldoms, sockets, cores, threads"),
        ({"CoreSpecCount": "02"}, "slurm.CoreSpecCount: no leading zeros"),
        ({"MemSpecLimit": -1}, "slurm.MemSpecLimit: must be a non-negative integer"),
    ],
)
def test_the_inventory_takes_the_carried_attributes_too(
    tmp_path: Path, slurm: dict[str, object], problem: str | None
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "s1", "region": "r1", "slurm": slurm}]}))
    if problem is None:
        (node,) = load_inventory_file(str(path)).nodes
        assert dict(node.slurm) == {k: str(v) for k, v in slurm.items()}
        return
    with pytest.raises(InputError, match=problem.replace("(", r"\(")):
        load_inventory_file(str(path))


@pytest.mark.parametrize("still_degraded", [True, False])
def test_a_degraded_nodes_weight_does_not_grow_run_after_run(tmp_path: Path, still_degraded: bool) -> None:
    """``apply --scontrol --records DIR`` every few minutes: s3's Slurm record is what the last run wrote for
    a degraded node (linkdeg, its weight 5 raised to 1000005). Still degraded, it gets 1000005 again, not
    2000005 (the file would change, and slurmctld reconfigure, on every run); healthy again, its own 5 and
    no linkdeg."""
    import json
    import time

    from test_health_effects import record

    records = tmp_path / "records"
    (records / "health").mkdir(parents=True)
    if still_degraded:
        (records / "health" / "s3.json").write_text(
            json.dumps(record("s3", "degraded", time=int(time.time())))
        )
    out = tmp_path / "out"
    result = invoke(
        "generate", "-i", str(fleet(tmp_path)), "--records", str(records), "-o", str(out),
        "--slurm-version", "26.05", "--nodes-from", str(SITE / "slurm-26.05" / "scontrol-show-node-o.txt"),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    s3 = node_lines(out)["s3"]
    if still_degraded:
        assert (s3["Weight"], s3["Features"]) == ("1000005", "ib,linkdeg")
    else:
        assert (s3["Weight"], s3["Features"]) == ("5", "ib," + ",".join(LOCATION))


def test_specialized_cpus_and_memory_beyond_the_inventorys_hardware_are_not_carried(tmp_path: Path) -> None:
    """s1 sets aside CPU 3 and 500 MB; an inventory that gives s1 two CPUs and 400 MB would get a line
    slurmctld resets with an error: neither is carried there (s2's CPUs 0,1 still fit two CPUs)."""
    small = {"CPUs": 2, "Boards": 1, "SocketsPerBoard": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1}
    inventory = fleet(tmp_path, s1={"slurm": {**small, "RealMemory": 400}}, s2={"slurm": small})
    lines, _ = generate(tmp_path, inventory, "26.05")
    assert "MemSpecLimit" not in lines["s1"] and "CpuSpecList" not in lines["s1"]
    assert (lines["s1"]["RealMemory"], lines["s1"]["CPUs"]) == ("400", "2")
    assert lines["s2"]["CpuSpecList"] == "0,1" and lines["s2"]["RealMemory"] == "4000"
