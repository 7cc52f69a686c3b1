"""What generation does with health records (slurm_topo/health/effects.py): a degraded node keeps no
location feature, gets ``linkdeg`` and a raised Weight, and is not counted by the submit filter; a down NVLink
leaves ``Links=`` and can split an NVLink island; stale or foreign records change nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from slurm_topo import load_inventories, render_all
from slurm_topo.gpu.links import islands
from slurm_topo.health.drain import load_effects
from slurm_topo.health.effects import (
    DEGRADED_FEATURE,
    DEGRADED_WEIGHT,
    apply_effects,
    effects_of,
)
from slurm_topo.health.nvml import parse_nvml_doc
from slurm_topo.health.verdict import Thresholds, evaluate
from slurm_topo.policy import JobRequest, decide
from slurm_topo.render import make_context

FIX = Path(__file__).parent / "fixtures"
TOPO = FIX / "real" / "topo"
DGX1 = TOPO / "dgx1-v100-8gpu-hybridcube-1nic-oneflow.txt"
HGX = TOPO / "hgx-h100-8gpu-12nic-evenodd-cpuaffinity.txt"
NOW = 2_000_000_000


def record(name: str, verdict: str = "ok", links: list[tuple[int, int | None]] = (), **kw: Any) -> dict:  # type: ignore[assignment]
    """A health record as `slurm-topo health` writes it (docs/health.md), with the given down links."""
    gpus: dict[int, list[dict[str, Any]]] = {}
    for gpu, peer in links:
        gpus.setdefault(gpu, []).append(
            {
                "link": len(gpus.get(gpu, [])),
                "state": "inactive",
                "remote": "gpu" if peer is not None else "nvswitch",
                "peer": peer,
                "verdict": "down",
                "reasons": [f"gpu{gpu} link inactive"],
            }
        )
    faults = [{"item": "x", "verdict": verdict, "reason": f"{name} {verdict}"}] if verdict != "ok" else []
    return {
        "name": name,
        "kind": "health",
        "source": "self",
        "time_epoch": kw.get("time", NOW),
        "verdict": verdict,
        "hard_fault": verdict == "down",
        "faults": faults,
        "gpus": [{"index": g, "links": lk, "verdict": "down"} for g, lk in gpus.items()],
        "ports": [],
    }


def fleet(tmp_path: Path, capture: Path | None = None) -> Path:
    gpu = f", gpus: 8, gpu_topology: '{capture}'" if capture else ""
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "nodes:\n"
        f"  - {{name: 'n[1-3]', region: r1, zone: z1, network_group: g1{gpu}}}\n"
        f"  - {{name: 'n[4-6]', region: r1, zone: z2, network_group: g2{gpu}}}\n"
    )
    return path


def node_line(nodes_conf: str, name: str) -> str:
    return next(ln for ln in nodes_conf.splitlines() if ln.startswith(f"NodeName={name} "))


def test_a_degraded_node_loses_its_location_features_and_is_weighted_last(tmp_path: Path) -> None:
    inv = load_inventories([fleet(tmp_path)])
    changed, lines = apply_effects(inv, effects_of({"n1": record("n1", "degraded")}, now=NOW))
    out = render_all(changed, (22, 5), None)
    line = node_line(out["slurm-topo-nodes.conf"], "n1")
    assert f"Weight={1 + DEGRADED_WEIGHT}" in line and f"Features={DEGRADED_FEATURE}" in line
    assert "zone_" not in line and "region_" not in line and "ng_" not in line
    assert "Features=region_r1,zone_z1,ng_z1.g1" in node_line(out["slurm-topo-nodes.conf"], "n[2-3]")
    assert any("n1: degraded (n1 degraded)" in ln for ln in lines)
    # the tree still places it
    assert "SwitchName=ng_z1.g1 Nodes=n[1-3]" in out["topology.conf"]
    # and unchanged without the record
    plain = render_all(inv, (22, 5), None)["slurm-topo-nodes.conf"]
    assert "NodeName=n[1-3] Features=region_r1,zone_z1,ng_z1.g1" in plain


def test_the_filter_does_not_count_a_degraded_node(tmp_path: Path) -> None:
    inv = load_inventories([fleet(tmp_path)])
    changed, _ = apply_effects(inv, effects_of({"n1": record("n1", "degraded")}, now=NOW))
    job = JobRequest(locality="zone", min_nodes=3)
    before = decide(make_context(inv, (22, 5)).policy, job)
    after = decide(make_context(changed, (22, 5)).policy, job)
    assert before.features == "[zone_z1|zone_z2]", before
    assert after.features == "[zone_z2]", after  # z1 has two healthy nodes left
    held = decide(make_context(changed, (22, 5)).policy, JobRequest(locality="zone:fail", min_nodes=4))
    assert held.action == "reject" and "3 nodes" in (held.message or ""), held


def test_a_down_direct_nvlink_leaves_links_and_splits_the_island(tmp_path: Path) -> None:
    """DGX-1 hybrid cube: the four links between the two quads down (both ends report them) -> two islands
    of four, and Links= has 0 where NVLinks were."""
    inv = load_inventories([fleet(tmp_path, DGX1)])
    bridges = [(0, 4), (0, 4), (1, 5), (1, 5), (2, 6), (3, 7)]
    both_ends = bridges + [(b, a) for a, b in bridges]
    changed, lines = apply_effects(inv, effects_of({"n2": record("n2", "down", both_ends)}, now=NOW))
    topo = next(n for n in changed.nodes if n.name == "n2").gpu_topology
    assert sorted(sorted(i) for i in islands(topo)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(sorted(i) for i in islands(inv.nodes[0].gpu_topology)) == [list(range(8))]
    assert "n2: gpu0-gpu4: 2 NVLink(s) down, 0 left" in lines
    gres = render_all(changed, (22, 5), None, _opts())["gres.conf"].splitlines()
    n2 = [ln for ln in gres if ln.startswith("NodeName=n2 ") and "Links=" in ln]
    assert n2[0].endswith("Links=-1,1,1,2,0,0,0,0") and n2[4].endswith("Links=0,0,0,0,-1,1,1,2")
    others = [ln for ln in gres if ln.startswith("NodeName=n[1,3-6] ") and "File=/dev/nvidia0 " in ln]
    assert others[0].endswith("Links=-1,1,1,2,2,0,0,0")


def test_one_link_of_a_bonded_pair_down_keeps_the_pair_with_one_fewer(tmp_path: Path) -> None:
    inv = load_inventories([fleet(tmp_path, DGX1)])
    changed, _ = apply_effects(inv, effects_of({"n1": record("n1", "down", [(0, 3), (3, 0)])}, now=NOW))
    topo = next(n for n in changed.nodes if n.name == "n1").gpu_topology
    assert topo.link(0, 3) == "NV1" and topo.link(3, 0) == "NV1" and topo.link(0, 4) == "NV2"


def test_nvswitch_lanes_down_from_a_real_record(tmp_path: Path) -> None:
    """The record `slurm-topo health` makes from NVML answers (HGX H100, every link to an NVSwitch): one
    lane of gpu3 down takes one NVLink off gpu3's pairs; all 18 down leave gpu3 an island of its own."""
    doc = json.loads((FIX / "health" / "nvml-hgx-h100.json").read_text())
    doc["devices"][3]["nvlinks"][7]["state"] = 0
    rec, _ = evaluate("n1", parse_nvml_doc(doc), (), {}, Thresholds(), now=NOW)
    inv = load_inventories([fleet(tmp_path, HGX)])
    assert inv.nodes[0].gpu_topology.link(3, 5) == "NV18"
    changed, _ = apply_effects(inv, effects_of({"n1": rec}, now=NOW))
    topo = changed.nodes[0].gpu_topology
    assert topo.link(3, 5) == "NV17" and topo.link(5, 3) == "NV17" and topo.link(4, 5) == "NV18"
    for lk in doc["devices"][3]["nvlinks"]:
        lk["state"] = 0
    rec, _ = evaluate("n1", parse_nvml_doc(doc), (), {}, Thresholds(expected_nvlinks=18), now=NOW)
    changed, _ = apply_effects(inv, effects_of({"n1": rec}, now=NOW))
    assert [3] in [sorted(i) for i in islands(changed.nodes[0].gpu_topology)]


def test_stale_foreign_and_clean_records_change_nothing(tmp_path: Path) -> None:
    inv = load_inventories([fleet(tmp_path)])
    effects = effects_of(
        {
            "n1": record("n1", "degraded", time=NOW - 901),
            "zz9": record("zz9", "degraded"),
            "n2": record("n2"),
        },
        now=NOW,
    )
    changed, lines = apply_effects(inv, effects)
    assert render_all(changed, (22, 5), None) == render_all(inv, (22, 5), None)
    assert "health record of n1 is older than 900 s: ignored" in lines
    assert "health record of zz9: not in the inventory, ignored" in lines


def test_a_record_with_wrong_types_is_never_trusted(tmp_path: Path) -> None:
    inv = load_inventories([fleet(tmp_path, DGX1)])
    bad = record("n1", "down")
    bad["gpus"] = [
        {"index": "0", "links": [{"verdict": "down", "state": "inactive", "remote": "gpu", "peer": 1}]},
        {"index": 1, "links": [{"verdict": "down", "state": "inactive", "remote": "gpu", "peer": "2"}]},
        "x",
        {"index": 2, "links": "nope"},
    ]
    changed, _ = apply_effects(inv, effects_of({"n1": bad}, now=NOW))
    assert changed.nodes[0].gpu_topology == inv.nodes[0].gpu_topology


def test_generate_reads_the_health_folder(tmp_path: Path) -> None:
    records = tmp_path / "records"
    (records / "health").mkdir(parents=True)
    rec = record("n4", "degraded", time=int(__import__("time").time()))
    (records / "health" / "n4.json").write_text(json.dumps(rec))
    assert load_effects(records).degraded == {"n4": "n4 degraded"}
    out = tmp_path / "out"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_topo",
            "generate",
            "-i",
            str(fleet(tmp_path)),
            "--records",
            str(records),
            "--slurm-version",
            "22.05",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "health: n4: degraded (n4 degraded)" in p.stderr
    line = node_line((out / "slurm-topo-nodes.conf").read_text(), "n4")
    assert "Features=linkdeg" in line and "Weight=1000001" in line


def _opts() -> Any:
    from slurm_topo.render import RenderOptions

    return RenderOptions(assume_minor_equals_index=True)


def test_a_degraded_node_leaves_its_nvlink_block_from_25_05_only(tmp_path: Path) -> None:
    """26.05 (topology.yaml): the node leaves its block, every block keeps its position; 24.11 (block
    topology.conf): a short block is fatal there, so the node stays (it still loses its nvl_ feature)."""
    path = tmp_path / "nvl.yaml"
    path.write_text(
        "nodes:\n"
        "  - {name: 'g[01-04]', region: r1, zone: z1, network_group: ib-1, nvlink_domain: rack-01}\n"
        "  - {name: 'g[05-08]', region: r1, zone: z1, network_group: ib-2, nvlink_domain: rack-02}\n"
    )
    inv = load_inventories([path])
    changed, _ = apply_effects(inv, effects_of({"g02": record("g02", "degraded")}, now=NOW))
    yaml_before = render_all(inv, (26, 5), None)["topology.yaml"]
    yaml_after = render_all(changed, (26, 5), None)["topology.yaml"]
    assert 'block: nvl_rack-01\n        nodes: "g[01-04]"' in yaml_before
    assert 'block: nvl_rack-01\n        nodes: "g[01,03-04]"' in yaml_after
    assert yaml_after.index("nvl_rack-01") < yaml_after.index("nvl_rack-02")
    conf = render_all(changed, (24, 11), None)["topology.conf"]
    assert "BlockName=nvl_rack-01 Nodes=g[01-04]" in conf
    nodes = render_all(changed, (24, 11), None)["slurm-topo-nodes.conf"]
    assert "nvl_rack-01" not in node_line(nodes, "g02")
