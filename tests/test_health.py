"""slurm-topo health: NVML answers (documented structs, the real H200 capture), sysfs port trees, verdicts,
counter deltas, hysteresis, the state file, the record, and the drain/resume plan."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slurm_topo.access.text import parse_show_node
from slurm_topo.health.drain import REASON_PREFIX, NodeState, plan, read_health_records
from slurm_topo.health.ib import read_ports
from slurm_topo.health.node import node_health
from slurm_topo.health.nvml import capture_pynvml, fabric_flags, parse_nvml_doc
from slurm_topo.health.verdict import VERDICTS, Thresholds, evaluate, load_state, parse_thresholds
from slurm_topo.sources.records import load_records

FIX = Path(__file__).parent / "fixtures"
SYSFS = FIX / "health" / "sysfs-healthy"
HGX = FIX / "health" / "nvml-hgx-h100.json"
H200 = FIX / "real" / "h200-vm-1gpu" / "nvml.json"


def hgx() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(HGX.read_text())
    return doc


def sysfs(tmp_path: Path) -> Path:
    root = tmp_path / "sys"
    shutil.copytree(SYSFS, root)
    return root


def port_file(root: Path, dev: str, name: str) -> Path:
    return root / "class" / "infiniband" / dev / "ports" / "1" / name


class Node:
    """Passes of one node with its own state file and clock."""

    def __init__(self, tmp_path: Path, **limits: Any):
        self.state = tmp_path / "state" / "health.json"
        self.now = 1_000_000.0
        self.t = Thresholds(**limits)

    def run(self, doc: dict[str, Any] | None, root: Path | None, step: float = 60.0) -> dict[str, Any]:
        self.now += step
        prev, _ = load_state(self.state)
        gpus = None if doc is None else parse_nvml_doc(doc)
        ports = read_ports(root) if root is not None else ()
        record, state = evaluate("n1", gpus, ports, prev, self.t, now=self.now)
        self.state.parent.mkdir(parents=True, exist_ok=True)
        self.state.write_text(json.dumps(state))
        return record


def verdicts(obj: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "verdict":
                found.append(v)
            else:
                found.extend(verdicts(v))
    elif isinstance(obj, list):
        for v in obj:
            found.extend(verdicts(v))
    return found


def by_port(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{p['device']}/{p['port']}": p for p in record["ports"]}


# ----------------------------------------------------------------------------------------------- sysfs ports


def test_healthy_tree_reads_every_port_ok(tmp_path: Path) -> None:
    rec = Node(tmp_path).run(None, sysfs(tmp_path))
    ports = by_port(rec)
    assert sorted(ports) == ["mlx5_0/1", "mlx5_1/1", "mlx5_2/1"]
    assert [ports[k]["rate_gbps"] for k in sorted(ports)] == [400.0, 400.0, 200.0]
    assert ports["mlx5_2/1"]["link_layer"] == "Ethernet" and ports["mlx5_2/1"]["expected_gbps"] == 200.0
    assert {p["verdict"] for p in rec["ports"]} == {"ok"} and rec["verdict"] == "ok" and not rec["hard_fault"]


def test_one_port_down_is_a_hard_fault_naming_the_port(tmp_path: Path) -> None:
    root = sysfs(tmp_path)
    port_file(root, "mlx5_1", "state").write_text("1: DOWN\n")
    port_file(root, "mlx5_1", "phys_state").write_text("3: Disabled\n")
    rec = Node(tmp_path).run(None, root)
    ports = by_port(rec)
    assert ports["mlx5_1/1"]["verdict"] == "down"
    assert ports["mlx5_0/1"]["verdict"] == ports["mlx5_2/1"]["verdict"] == "ok"
    assert rec["hard_fault"] and rec["verdict"] == "down"
    assert rec["faults"][0]["reason"] == "mlx5_1/1 state DOWN"
    assert "mlx5_1/1 phys_state Disabled" in ports["mlx5_1/1"]["reasons"]


def test_rate_halved_is_degraded_not_down(tmp_path: Path) -> None:
    root = sysfs(tmp_path)
    port_file(root, "mlx5_0", "rate").write_text("200 Gb/sec (4X HDR)\n")
    rec = Node(tmp_path).run(None, root)
    ports = by_port(rec)
    assert ports["mlx5_0/1"]["verdict"] == "degraded"
    assert ports["mlx5_0/1"]["reasons"] == ["mlx5_0/1 rate 200 Gb/s, expected 400"]
    assert ports["mlx5_2/1"]["verdict"] == "ok"  # the RoCE port is compared with Ethernet ports only
    assert rec["verdict"] == "degraded" and not rec["hard_fault"]
    # An expected rate given explicitly applies to every port of its link layer.
    rec = Node(tmp_path / "b", ib_expected_gbps=400.0).run(None, sysfs(tmp_path / "b"))
    assert [p["verdict"] for p in rec["ports"]] == ["ok", "ok", "ok"]
    rec = Node(tmp_path / "c", roce_expected_gbps=400.0).run(None, sysfs(tmp_path / "c"))
    assert [p["verdict"] for p in rec["ports"]] == ["ok", "ok", "degraded"]
    assert rec["ports"][2]["reasons"] == ["mlx5_2/1 rate 200 Gb/s, expected 400"]


def test_rising_counters_degrade_by_delta_not_total(tmp_path: Path) -> None:
    root = sysfs(tmp_path)
    node = Node(tmp_path)
    symbol = port_file(root, "mlx5_0", "counters/symbol_error")
    symbol.write_text("5000\n")  # a large total from long ago: no verdict on the first pass
    first = node.run(None, root)
    assert (
        by_port(first)["mlx5_0/1"]["verdict"] == "ok" and by_port(first)["mlx5_0/1"]["counters_delta"] == {}
    )
    symbol.write_text("5009\n")  # +9: under the infiniband-diags limit of 10
    assert by_port(node.run(None, root))["mlx5_0/1"]["verdict"] == "ok"
    symbol.write_text("5059\n")  # +50
    rec = node.run(None, root)
    assert by_port(rec)["mlx5_0/1"]["counters_delta"]["symbol_error"] == 50
    assert by_port(rec)["mlx5_0/1"]["verdict"] == "degraded"
    assert "mlx5_0/1 symbol_error +50 in a pass (limit 10)" in by_port(rec)["mlx5_0/1"]["reasons"]
    link_downed = port_file(root, "mlx5_1", "counters/link_downed")
    link_downed.write_text("2\n")  # one flap since the last pass
    assert by_port(node.run(None, root))["mlx5_1/1"]["verdict"] == "degraded"


def test_counter_reset_counts_the_new_value(tmp_path: Path) -> None:
    root = sysfs(tmp_path)
    node = Node(tmp_path)
    symbol = port_file(root, "mlx5_0", "counters/symbol_error")
    symbol.write_text("900\n")
    node.run(None, root)
    symbol.write_text("3\n")  # perfquery -x -r, or a driver reload
    assert by_port(node.run(None, root))["mlx5_0/1"]["counters_delta"]["symbol_error"] == 3


def test_hysteresis_holds_a_fault_for_n_healthy_passes(tmp_path: Path) -> None:
    root = sysfs(tmp_path)
    node = Node(tmp_path, hysteresis=3)
    state = port_file(root, "mlx5_1", "state")
    state.write_text("1: DOWN\n")
    assert node.run(None, root)["hard_fault"]
    state.write_text("4: ACTIVE\n")
    seen = [node.run(None, root) for _ in range(3)]
    assert [r["hard_fault"] for r in seen] == [True, True, False]
    assert by_port(seen[0])["mlx5_1/1"]["reasons"][-1] == "recovering: healthy 1/3 passes"
    assert by_port(seen[1])["mlx5_1/1"]["reasons"][-1] == "recovering: healthy 2/3 passes"
    # a relapse in the middle starts the count again
    state.write_text("1: DOWN\n")
    node.run(None, root)
    state.write_text("4: ACTIVE\n")
    assert [node.run(None, root)["hard_fault"] for _ in range(3)] == [True, True, False]


def test_no_ports_and_no_nvml_still_makes_a_record(tmp_path: Path) -> None:
    rec = Node(tmp_path).run(None, tmp_path / "empty")
    assert (
        rec["ports"] == [] and rec["gpus"] == [] and rec["verdict"] == "ok" and rec["nvml"] == "unavailable"
    )


# ----------------------------------------------------------------------------------------------------- NVML


def test_hgx_board_all_links_to_nvswitch(tmp_path: Path) -> None:
    rec = Node(tmp_path).run(hgx(), None)
    assert len(rec["gpus"]) == 8
    for g in rec["gpus"]:
        assert (g["active_links"], g["nvswitch_links"], g["verdict"]) == (18, 18, "ok")
        assert len(g["p2p_nvlink"]) == 7 and g["fabric"] is None  # fabric NOT_SUPPORTED on HGX
        assert g["recovery_action"] == "none"
    assert rec["verdict"] == "ok"


def test_inactive_link_is_down_and_named(tmp_path: Path) -> None:
    doc = hgx()
    doc["devices"][3]["nvlinks"][7]["state"] = 0
    rec = Node(tmp_path).run(doc, None)
    g3 = rec["gpus"][3]
    assert g3["verdict"] == "down" and g3["active_links"] == 17 and g3["nvswitch_links"] == 17
    link = next(lk for lk in g3["links"] if lk["link"] == 7)
    assert (link["state"], link["verdict"], link["reasons"]) == (
        "inactive",
        "down",
        ["gpu3/nvlink7 inactive"],
    )
    assert rec["hard_fault"] and rec["faults"][0]["reason"] == "gpu3/nvlink7 inactive"
    assert all(g["verdict"] == "ok" for g in rec["gpus"] if g["index"] != 3)


def test_all_links_inactive_on_a_gpu_never_seen_active_is_not_a_fault(tmp_path: Path) -> None:
    """An NVLink bridge that is simply not fitted (PCIe cards) is not a failed link; once a link was seen
    active, or an expected count is set, it is."""
    doc = hgx()
    for lk in doc["devices"][0]["nvlinks"]:
        lk["state"] = 0
    assert Node(tmp_path).run(doc, None)["gpus"][0]["verdict"] == "ok"
    assert Node(tmp_path / "b", expected_nvlinks=18).run(doc, None)["gpus"][0]["verdict"] == "down"
    node = Node(tmp_path / "c")
    node.run(hgx(), None)  # active on the first pass
    assert node.run(doc, None)["gpus"][0]["verdict"] == "down"


def test_recovery_action_is_a_hard_fault(tmp_path: Path) -> None:
    doc = hgx()
    doc["devices"][5]["recovery_action"] = 4  # NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET
    rec = Node(tmp_path).run(doc, None)
    assert rec["gpus"][5]["recovery_action"] == "drain_and_reset" and rec["gpus"][5]["verdict"] == "down"
    assert rec["faults"] == [
        {"item": "gpu5/recovery", "verdict": "down", "reason": "gpu5 recovery action drain_and_reset"}
    ]


def test_p2p_disabled_by_regkey_is_degraded(tmp_path: Path) -> None:
    doc = hgx()
    doc["devices"][1]["p2p_nvlink"]["00000000:18:00.0"] = 4  # NVML_P2P_STATUS_DISABLED_BY_REGKEY
    rec = Node(tmp_path).run(doc, None)
    assert rec["gpus"][1]["verdict"] == "degraded" and not rec["hard_fault"]
    assert rec["faults"][0]["reason"] == "gpu1 P2P over NVLink to gpu0 status 4 (disabled by regkey)"


def test_nvlink_error_deltas(tmp_path: Path) -> None:
    node = Node(tmp_path)
    doc = hgx()
    node.run(doc, None)
    doc["devices"][2]["nvlinks"][4]["errors"]["replay"] = 1
    doc["devices"][6]["nvlinks"][0]["errors"]["crc_flit"] = 100 * 60  # 100/s over 60 s: at the limit
    rec = node.run(doc, None)
    assert rec["gpus"][2]["verdict"] == "degraded" and rec["gpus"][6]["verdict"] == "ok"
    assert rec["gpus"][2]["links"][4]["errors_delta"]["replay"] == 1
    doc["devices"][6]["nvlinks"][0]["errors"]["crc_flit"] += 101 * 60
    rec = node.run(doc, None)
    assert rec["gpus"][6]["verdict"] == "degraded"
    assert rec["gpus"][6]["links"][0]["reasons"] == ["gpu6/nvlink0 CRC errors 101/s (limit 100/s)"]


@pytest.mark.parametrize(
    ("fabric", "verdict", "flags"),
    [
        (
            {"version": 3, "state": 3, "status": 0, "cliqueId": 7, "healthMask": 0, "healthSummary": 1},
            "ok",
            [],
        ),
        (
            {"version": 3, "state": 2, "status": 0, "cliqueId": 7, "healthMask": 0, "healthSummary": 1},
            "degraded",
            [],
        ),
        (  # DEGRADED_BW = TRUE (1 << 0), summary LIMITED_CAPACITY
            {"version": 3, "state": 3, "status": 0, "cliqueId": 7, "healthMask": 1, "healthSummary": 3},
            "degraded",
            ["degraded_bw"],
        ),
        (  # INCORRECT_CONFIGURATION = INSUFFICIENT_NVLINKS (5 << 8), ROUTE_UNHEALTHY = TRUE (1 << 4)
            {
                "version": 4,
                "state": 3,
                "status": 0,
                "cliques": [{"type": 1, "id": 7}],
                "healthMask": (5 << 8) | (1 << 4),
            },
            "degraded",
            ["incorrect_configuration:insufficient_nvlinks", "route_unhealthy"],
        ),
        (  # every 2-bit flag FALSE (2): healthy
            {
                "version": 4,
                "state": 3,
                "status": 0,
                "cliques": [],
                "healthMask": 0b10101010 | (1 << 8),
                "healthSummary": 1,
            },
            "ok",
            [],
        ),
    ],
)
def test_fabric_v3_and_v4(tmp_path: Path, fabric: dict[str, Any], verdict: str, flags: list[str]) -> None:
    doc = hgx()
    doc["devices"][0]["fabric"] = fabric
    rec = Node(tmp_path).run(doc, None)
    f = rec["gpus"][0]["fabric"]
    assert (f["verdict"], f["health_flags"]) == (verdict, flags)
    want_clique = "7" if fabric["version"] == 3 else ("1:7" if fabric["cliques"] else None)
    assert f["clique"] == want_clique and f["version"] == fabric["version"]
    assert sorted(fabric_flags(fabric["healthMask"])) == flags


def test_a_gpu_or_port_that_disappears_is_down_until_back_for_n_passes(tmp_path: Path) -> None:
    node = Node(tmp_path, hysteresis=2)
    root = sysfs(tmp_path)
    assert node.run(hgx(), root)["verdict"] == "ok"
    gone = hgx()
    del gone["devices"][4]  # fallen off the bus (Xid 79)
    shutil.rmtree(root / "class/infiniband/mlx5_1")
    rec = node.run(gone, root)
    assert rec["hard_fault"] and len(rec["gpus"]) == 7
    assert {m["item"]: m["reasons"] for m in rec["missing"]} == {
        "gpu@00000000:9A:00.0": ["GPU 00000000:9A:00.0 missing (seen on an earlier pass)"],
        "ib:mlx5_1/1": ["mlx5_1/1 missing (seen on an earlier pass)"],
    }
    shutil.copytree(SYSFS / "class/infiniband/mlx5_1", root / "class/infiniband/mlx5_1")
    assert node.run(hgx(), root)["hard_fault"]  # back, healthy 1/2
    assert not node.run(hgx(), root)["hard_fault"]


def test_nvml_failing_where_gpus_were_seen_is_down(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.run(hgx(), None)
    prev, _ = load_state(node.state)
    rec, _ = evaluate("n1", None, (), prev, Thresholds(), now=node.now + 60)
    assert rec["hard_fault"] and rec["missing"][0]["item"] == "nvml"
    assert "8 GPU(s) seen on earlier passes" in rec["missing"][0]["reasons"][0]
    rec, _ = evaluate("n1", None, (), prev, Thresholds(), now=node.now + 60, nvml_asked=False)
    assert not rec["hard_fault"]  # --no-nvml: not asked, not judged


def test_real_h200_capture_has_no_link_data_and_no_verdict_from_it(tmp_path: Path) -> None:
    """The H200 VM answers NotSupported for NVLink state: nothing is judged, nothing is invented."""
    rec = Node(tmp_path).run(json.loads(H200.read_text()), None)
    (g,) = rec["gpus"]
    assert (g["name"], g["bus_id"], g["nvlink"], g["links"], g["verdict"]) == (
        "NVIDIA H200",
        "00000000:00:06.0",
        "unknown",
        [],
        "ok",
    )
    assert rec["verdict"] == "ok" and rec["nvml"] == "available"


def test_capture_from_a_pynvml_like_module_round_trips() -> None:
    """capture_pynvml asks the documented calls; a module answering like the H200 VM (NotSupported for
    NVLink, no fabric field) gives the capture's shape, and one like an HGX board gives its links."""

    class NVMLError(Exception):
        pass

    class Pci:
        def __init__(self, bus: str):
            self.busId = bus.encode()

    class Fake:
        NVML_NVLINK_MAX_LINKS = 18

        def __init__(self, links: bool):
            self.links = links
            self.NVMLError = NVMLError

        def nvmlInit(self) -> None: ...
        def nvmlShutdown(self) -> None: ...
        def nvmlDeviceGetCount(self) -> int:
            return 2

        def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
            return i

        def nvmlDeviceGetPciInfo(self, h: int) -> Pci:
            return Pci(f"00000000:{0x18 + h:02X}:00.0")

        def nvmlDeviceGetName(self, h: int) -> bytes:
            return b"NVIDIA H200"

        def nvmlDeviceGetUUID(self, h: int) -> str:
            return f"GPU-{h}"

        def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
            if not self.links:
                raise NVMLError("Not Supported")
            return 1

        def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
            return 2

        def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Pci:
            return Pci("00000000:05:00.0")

        def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, c: int) -> int:
            return 0

        def nvmlDeviceGetP2PStatus(self, a: int, b: int, cap: int) -> int:
            assert cap == 2
            return 0

        def nvmlSystemGetDriverVersion(self) -> str:
            return "580.159.04"

        class c_nvmlGpuFabricInfo_v3_t:  # noqa: N801 - pynvml's name
            version = state = status = cliqueId = healthMask = healthSummary = 0

        nvmlGpuFabricInfo_v3 = 0x3000000
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 250

        def nvmlDeviceGetGpuFabricInfoV(self, h: int, info: Any) -> None:
            if not self.links:
                raise NVMLError("Not Supported")
            assert info.version == self.nvmlGpuFabricInfo_v3
            info.state, info.cliqueId, info.healthSummary, info.healthMask = 3, 7, 3, 1

        def nvmlDeviceGetFieldValues(self, h: int, ids: list[int]) -> list[Any]:
            class Value:
                uiVal = {91: 18, 250: h}[ids[0]]  # GPU 1 asks for a GPU reset

            class Field:
                nvmlReturn = 0 if self.links else 3
                value = Value()

            return [Field()]

    doc = capture_pynvml(Fake(links=False))
    assert doc is not None
    gpus = parse_nvml_doc(doc)
    assert [g.bus_id for g in gpus] == ["00000000:18:00.0", "00000000:19:00.0"]
    assert all(lk.active is None for g in gpus for lk in g.links) and gpus[0].recovery_action is None
    doc = capture_pynvml(Fake(links=True))
    assert doc is not None
    gpus = parse_nvml_doc(doc)
    assert [len(g.links) for g in gpus] == [18, 18] and all(lk.remote == "nvswitch" for lk in gpus[0].links)
    assert [g.recovery_action for g in gpus] == [0, 1] and [g.link_count for g in gpus] == [18, 18]
    fabric = gpus[0].fabric
    assert fabric is not None and (fabric.version, fabric.state, fabric.summary, fabric.clique) == (
        3,
        "completed",
        "limited_capacity",
        "7",
    )


# ------------------------------------------------------------------------------------------- CLI and records


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_cli_writes_the_record_beside_location_records(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    (records / "n1.yaml").write_text("nodes:\n- name: n1\n  region: r1\n  zone: z1\n  source: self\n")
    doc = hgx()
    doc["devices"][3]["nvlinks"][7]["state"] = 0
    nvml = tmp_path / "nvml.json"
    nvml.write_text(json.dumps(doc))
    args = ["--node-name", "n1", "--nvml-from", str(nvml), "--sysfs-root", str(SYSFS)]
    proc = cli("health", *args, "--state", str(tmp_path / "st.json"), "--records", str(records), "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert json.loads((records / "health" / "n1.json").read_text()) == rec
    assert rec["name"] == "n1" and rec["source"] == "self" and rec["hard_fault"]
    assert set(verdicts(rec)) <= set(VERDICTS) and len(verdicts(rec)) == 8 * 18 + 8 + 3 + 1 + len(
        rec["faults"]
    )
    assert not [p.name for p in (records / "health").iterdir() if p.name.startswith(".")]
    # generate --records DIR still reads the location record and says nothing about the health folder
    loaded, warnings = load_records(records)
    assert [x.nodes[0].name for x in loaded] == ["n1"] and warnings == []
    text = cli("health", *args, "--state", str(tmp_path / "st.json"))
    assert text.returncode == 0 and "down: gpu3/nvlink7 inactive" in text.stdout


def test_cli_without_nvml_reports_ports(tmp_path: Path) -> None:
    proc = cli(
        "health", "--node-name", "n1", "--sysfs-root", str(SYSFS), "--state", str(tmp_path / "s"), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert rec["nvml"] == "unavailable" and len(rec["ports"]) == 3  # this machine has no pynvml / driver


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "hysteresis=0"], "--threshold 'hysteresis=0': must be KEY=NUMBER"),
        (["--threshold", "nope=1"], "unknown key"),
        (["--nvml-from", "{garbage"], "not valid JSON"),
        (["--nvml-from", '{"devices": [{"index": -1}]}'], "devices[0].index"),
        (["--node-name", "bad name"], "node name"),
        (["--records", "/nonexistent/records"], "--records /nonexistent/records: not a directory"),
    ],
)
def test_cli_bad_input_one_line_nothing_written(tmp_path: Path, args: list[str], message: str) -> None:
    if args[0] == "--nvml-from":
        (tmp_path / "n.json").write_text(args[1])
        args = ["--nvml-from", str(tmp_path / "n.json")]
    records = tmp_path / "records"
    records.mkdir()
    proc = cli(
        "health",
        "--sysfs-root",
        str(SYSFS),
        "--state",
        str(tmp_path / "st.json"),
        "--records",
        str(records),
        *args,
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "st.json").exists() and not (records / "health").exists()


def test_garbled_state_file_starts_afresh(tmp_path: Path) -> None:
    state = tmp_path / "st.json"
    state.write_text("{not json")
    rec, warnings = node_health("n1", use_nvml=False, sysfs_root=SYSFS, state_file=state)
    assert rec["pass"] == 1 and any("unreadable" in w for w in warnings)
    assert json.loads(state.read_text())["pass"] == 1


# --------------------------------------------------------------------------------------- drain / resume plan


def rec(name: str, hard: bool, t: int = 1000, reason: str = "mlx5_0/1 state DOWN") -> dict[str, Any]:
    faults = [{"item": "ib:mlx5_0/1", "verdict": "down", "reason": reason}] if hard else []
    return {
        "name": name,
        "kind": "health",
        "hard_fault": hard,
        "time_epoch": t,
        "faults": faults,
        "hysteresis": 3,
    }


def test_plan_drains_resumes_ours_only_and_never_an_admin_drain() -> None:
    ours = f"{REASON_PREFIX} gpu0/nvlink3 inactive [root@2026-01-01T00:00:00]"
    nodes = {
        "a": NodeState("a", "IDLE", None),
        "b": NodeState("b", "IDLE+DRAIN", ours),
        "c": NodeState("c", "IDLE+DRAIN", "bad dimm [admin@2026-01-01T00:00:00]"),
        "d": NodeState("d", "MIXED+DRAIN", "cable swap"),
        "e": NodeState("e", "IDLE", None),
    }
    records = {
        "a": rec("a", True),
        "b": rec("b", False),
        "c": rec("c", False),
        "d": rec("d", True),
        "e": rec("e", False),
    }
    actions = {a.node: a for a in plan(copy.deepcopy(records), nodes, now=1010, max_age=900)}
    assert actions["a"].argv == (
        "scontrol",
        "update",
        "NodeName=a",
        "State=DRAIN",
        f"Reason={REASON_PREFIX} mlx5_0/1 state DOWN",
    )
    assert actions["b"].argv == ("scontrol", "update", "NodeName=b", "State=RESUME")
    assert actions["c"].argv == () and "admin" in actions["c"].why
    assert actions["d"].argv == () and "admin" in actions["d"].why
    assert "e" not in actions
    # stale records change nothing
    assert all(not a.argv for a in plan(records, nodes, now=1000 + 901, max_age=900))


def test_plan_cleans_the_reason_it_copies() -> None:
    nodes = {"a": NodeState("a", "IDLE", None)}
    (action,) = plan(
        {"a": rec("a", True, reason='x"; rm -rf / #\n' + "y" * 500)}, nodes, now=1000, max_age=60
    )
    reason = action.argv[-1].removeprefix("Reason=")
    assert len(reason) <= len(REASON_PREFIX) + 1 + 160 and '"' not in reason and "\n" not in reason


def test_parse_show_node_reads_state_and_reason() -> None:
    text = (
        "NodeName=a1 Arch=x86_64 CoresPerSocket=4\n   State=IDLE+DRAIN ThreadsPerCore=1\n"
        "   Reason=slurm-topo-health: mlx5_0/1 state DOWN [root@2026-11-30T12:00:00]\n\n"
        "NodeName=a2 Arch=x86_64\n   State=IDLE ThreadsPerCore=1\n"
    )
    nodes = parse_show_node(text)
    assert nodes["a1"].ours and nodes["a1"].drained and not nodes["a2"].drained and nodes["a2"].reason is None


# ``scontrol show node n01 n02`` of Slurm 24.11.5 (Debian trixie), n01 drained by health-sync: a line of
# blanks before ``Reason=`` (22.05 has none), which had split n01's reason off its node
SHOW_NODE_24_11 = "\n".join(
    [
        "NodeName=n01 Arch=x86_64 CoresPerSocket=8 ",
        "   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=5.12",
        "   Gres=gpu:h100:8",
        "   NodeAddr=127.0.0.1 NodeHostName=localhost Port=25401 Version=24.11.5",
        "   RealMemory=64000 AllocMem=0 FreeMem=22617 Sockets=2 Boards=1",
        "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "   Partitions=main ",
        "   BootTime=2026-11-30T11:06:12 SlurmdStartTime=2026-11-30T12:54:55",
        "   LastBusyTime=2026-11-30T12:54:55 ResumeAfterTime=None",
        "   CfgTRES=cpu=16,mem=62.50G,billing=16",
        "   AllocTRES=",
        "   CurrentWatts=0 AveWatts=0",
        "   ",
        "   Reason=slurm-topo-health: mlx5_1/1 state DOWN [root@2026-11-30T12:54:56]",
        "",
        "NodeName=n02 Arch=x86_64 CoresPerSocket=8 ",
        "   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        "   LastBusyTime=2026-11-30T12:54:55 ResumeAfterTime=None",
        "   CurrentWatts=0 AveWatts=0",
        "   ",
        "",
        "",
    ]
)


def test_parse_show_node_of_24_11_keeps_the_reason_after_a_blank_line() -> None:
    nodes = parse_show_node(SHOW_NODE_24_11)
    assert sorted(nodes) == ["n01", "n02"]
    n01 = nodes["n01"]
    assert n01.state == "IDLE+DRAIN" and n01.drained and n01.ours
    assert n01.reason == "slurm-topo-health: mlx5_1/1 state DOWN [root@2026-11-30T12:54:56]"
    assert not nodes["n02"].drained and nodes["n02"].reason is None
    # healthy again: our own drain is resumed, not kept as an admin's
    (action,) = plan({"n01": rec("n01", False)}, nodes, now=1000, max_age=60)
    assert action.verb == "resume", action


def test_health_records_are_untrusted(tmp_path: Path) -> None:
    folder = tmp_path / "health"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({**rec("a", True), "source": "operator"}))
    (folder / "b.json").write_text(json.dumps(rec("other", True)))  # names another node
    (folder / "c.json").write_text("[1, 2")
    (folder / ".d.json.tmp").write_text("half")
    found, log = read_health_records(tmp_path)
    assert sorted(found) == ["a"] and found["a"]["source"] == "self"
    assert len(log) == 2 and all(line.startswith("skip ") for line in log)


def test_thresholds_parse() -> None:
    t = parse_thresholds(["hysteresis=5", "ib_expected_gbps=400", "ib.symbol_error=3"])
    assert (t.hysteresis, t.ib_expected_gbps, t.ib_counters["symbol_error"]) == (5, 400.0, 3)


class ScriptedScontrol:
    """Stands in for scontrol in a unit test (the real one is exercised in
    tests/integration/test_health_drain_on_real_slurm.py): answers `show node`, fails one update."""

    def __init__(self, show: str, fail_for: str):
        self.show, self.fail_for, self.calls = show, fail_for, []  # type: ignore[var-annotated]

    def run(self, argv: Any, timeout: float = 30.0) -> str:
        from slurm_topo.core.errors import CommandError

        self.calls.append(list(argv))
        if argv[:3] == ["scontrol", "show", "node"]:
            return self.show
        if f"NodeName={self.fail_for}" in argv:
            raise CommandError(argv, 1, "slurm_update error: Invalid node state specified")
        return ""


def test_sync_goes_on_after_a_failed_update_then_fails(tmp_path: Path) -> None:
    from slurm_topo.core.errors import CommandError
    from slurm_topo.health.drain import sync

    (tmp_path / "health").mkdir()
    for n in ("a", "b"):
        (tmp_path / "health" / f"{n}.json").write_text(json.dumps(rec(n, True, t=1000)))
    show = "NodeName=a Arch=x\n   State=IDLE\n\nNodeName=b Arch=x\n   State=IDLE\n"
    runner = ScriptedScontrol(show, fail_for="a")
    log: list[str] = []
    with pytest.raises(CommandError):
        sync(tmp_path, runner, now=1010, log=log)
    assert log[0].startswith("failed drain a: ") and log[1] == f"drain b: {REASON_PREFIX} mlx5_0/1 state DOWN"
    dry = ScriptedScontrol(show, fail_for="-")
    actions = sync(tmp_path, dry, now=1010, dry_run=True)
    assert [a.verb for a in actions] == ["drain", "drain"]
    # reads only: the nodes, and whether Slurm has the block topology nvl (25.05+; here it has none)
    assert dry.calls == [["scontrol", "show", "node"], ["scontrol", "show", "topology", "nvl"]]


BLOCKS = FIX / "real" / "topology-blocks-26.05"


def live_26_05() -> Any:
    from slurm_topo.health.drain import parse_live_blocks

    return parse_live_blocks(
        (BLOCKS / "show-topology-nvl.txt").read_text(), (BLOCKS / "show-topology-fabric.txt").read_text()
    )


def test_live_blocks_from_real_26_05_output() -> None:
    live = live_26_05()
    assert live.block_of == {
        "g01": "nvl_rack-01",
        "g02": "nvl_rack-01",
        "g03": "nvl_rack-02",
        "g04": "nvl_rack-02",
    }
    assert live.path_of["g02"] == ("root", "region_r1", "zone_z1", "ng_z1.ib-1")


def test_a_degraded_node_leaves_its_block_and_keeps_its_tree_path() -> None:
    live = live_26_05()
    nodes = {n: NodeState(n, "IDLE", None) for n in ("g01", "g02", "g03", "g04")}
    rec = {"name": "g02", "kind": "health", "time_epoch": 1000, "hard_fault": False, "verdict": "degraded",
           "faults": [{"verdict": "degraded", "reason": "mlx5_0/1 rate 200 Gb/s, expected 400"}]}  # fmt: skip
    ok = {
        "name": "g03",
        "kind": "health",
        "time_epoch": 1000,
        "hard_fault": False,
        "verdict": "ok",
        "faults": [],
    }
    actions = plan({"g02": rec, "g03": ok}, nodes, now=1000, max_age=900, live=live)
    assert [(a.node, a.verb) for a in actions] == [("g02", "unblock")]
    assert actions[0].argv == (
        "scontrol", "update", "NodeName=g02", "Topology=fabric:root:region_r1:zone_z1:ng_z1.ib-1"
    )  # fmt: skip
    assert actions[0].line() == "unblock g02: mlx5_0/1 rate 200 Gb/s, expected 400; leaves block nvl_rack-01"
    # without a live block topology (before 25.05, topology.conf): nothing
    assert plan({"g02": rec}, nodes, now=1000, max_age=900, live=None) == []
    # once out of the block (or back in after a reconfigure: then again)
    gone = type(live)({k: v for k, v in live.block_of.items() if k != "g02"}, live.path_of)
    assert plan({"g02": rec}, nodes, now=1000, max_age=900, live=gone) == []


def test_a_hard_fault_drains_first_and_leaves_the_block_the_pass_after() -> None:
    live = live_26_05()
    rec = {"name": "g01", "kind": "health", "time_epoch": 1000, "hard_fault": True, "verdict": "down",
           "faults": [{"verdict": "down", "reason": "mlx5_0/1 state DOWN"}]}  # fmt: skip
    first = plan({"g01": rec}, {"g01": NodeState("g01", "IDLE", None)}, now=1000, max_age=900, live=live)
    assert [a.verb for a in first] == ["drain"]
    drained = NodeState("g01", "IDLE+DRAIN", f"{REASON_PREFIX} mlx5_0/1 state DOWN")
    second = plan({"g01": rec}, {"g01": drained}, now=1000, max_age=900, live=live)
    assert [a.verb for a in second] == ["unblock"]


def test_a_record_from_the_future_is_refused_not_fresh_for_ever() -> None:
    """A node whose record says it was written an hour from now is neither drained nor resumed, nor does
    its degraded verdict reach the cost model; within the clock skew it counts as fresh."""
    from slurm_topo.health.drain import MAX_CLOCK_SKEW
    from slurm_topo.health.effects import effects_of

    nodes = {"a": NodeState("a", "IDLE", None), "b": NodeState("b", "IDLE", None)}
    records = {"a": rec("a", True, t=1000 + 3600), "b": rec("b", True, t=1000 + MAX_CLOCK_SKEW - 1)}
    actions = {a.node: a for a in plan(copy.deepcopy(records), nodes, now=1000, max_age=900)}
    assert actions["a"].argv == () and "from the future" in actions["a"].why
    assert actions["b"].argv[:4] == ("scontrol", "update", "NodeName=b", "State=DRAIN")
    degraded = {n: {**r, "verdict": "degraded"} for n, r in records.items()}
    effects = effects_of(degraded, now=1000, max_age=900)
    assert "a" not in effects.degraded and "b" in effects.degraded
    assert any("a is from the future" in n for n in effects.notes)


def test_a_healthy_node_outside_its_block_is_put_back_live() -> None:
    """After an unblock, a record that says ok again (the hysteresis passed) puts the node back into the
    block its nvl_ feature names, keeping its tree path; a drained node, or one without a domain, is not."""
    from slurm_topo.health.drain import LiveBlocks

    live = LiveBlocks(
        {"g01": "nvl_rack-01"},
        {"g01": ("root", "ib-1"), "g02": ("root", "ib-1"), "c1": ("root", "ib-1")},
        frozenset({"nvl_rack-01"}),
    )
    nodes = {
        "g02": NodeState("g02", "IDLE", None, features=("zone_z1", "nvl_rack-01")),
        "c1": NodeState("c1", "IDLE", None, features=("zone_z1",)),
    }
    ok = {n: {**rec(n, False), "verdict": "ok"} for n in nodes}
    actions = {a.node: a for a in plan(ok, nodes, now=1000, max_age=900, live=live)}
    assert actions["g02"].argv == (
        "scontrol",
        "update",
        "NodeName=g02",
        "Topology=nvl:nvl_rack-01,fabric:root:ib-1",
    ), actions
    assert "c1" not in actions
    degraded = {"g02": {**rec("g02", False), "verdict": "degraded"}}
    assert [a.verb for a in plan(degraded, nodes, now=1000, max_age=900, live=live)] != ["reblock"]
