"""`slurm-topo cost`: the concept's numbers through the command line, JSON keys, slowdown, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NV18 = FIXTURES / "real/topo/h800-8gpu-nv18-10nic-merged-affinity-numa.txt"

FLEET = f"""
nodes:
  - name: a1
    region: us-east
    zone: us-east-1a
    network_group: rack-1
    gpus: 8
    gpu_topology: {NV18}
  - name: n[1-8]
    region: us-east
    zone: us-east-1a
    network_group: rack-2
    gpus: 1
  - name: m[1-4]
    region: us-east
    zone: us-east-1b
    network_group: rack-3
    gpus: 8
  - name: w[1-2]
    region: us-west
    zone: us-west-2a
    network_group: rack-9
    gpus: 8
"""
LINKS = """
links:                # keyed by the level at which two ranks meet
  nvlink:        {bandwidth: 450, latency_us: 0}
  network_group: {bandwidth: 50,  latency_us: 0}
  zone:          {bandwidth: 25,  latency_us: 0}
  region:        {bandwidth: 12,  latency_us: 0}
  any:           {bandwidth: 5,   latency_us: 0}
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "fleet.yaml").write_text(FLEET)
    (tmp_path / "links.yaml").write_text(LINKS)
    return str(tmp_path / "fleet.yaml"), str(tmp_path / "links.yaml")


def test_concept_numbers_through_the_cli(fleet: tuple[str, str]) -> None:
    inv, links = fleet
    one = run("cost", "-i", inv, "--links", links, "--nodes", "a1", "--dp", "8", "--allreduce-bytes", "1e10")
    assert one.returncode == 0, one.stderr
    assert "0.0389 s" in one.stdout and "nvlink" in one.stdout
    eight = run(
        "cost", "-i", inv, "--links", links, "--nodes", "n[1-8]", "--dp", "8", "--allreduce-bytes", "10G"
    )
    assert eight.returncode == 0, eight.stderr
    assert "0.3500 s" in eight.stdout and "network_group" in eight.stdout
    data = json.loads(
        run(
            "cost", "-i", inv, "--links", links, "--nodes", "n[1-8]", "--allreduce-bytes", "1e10", "--json"
        ).stdout
    )
    assert data["seconds"] == pytest.approx(0.35)
    assert data["terms"] == [
        {
            "kind": "dp",
            "ranks": 8,
            "groups": 1,
            "bytes": 1e10,
            "level": "network_group",
            "bandwidth": 50.0,
            "latency_us": 0.0,
            "seconds": pytest.approx(0.35),
        }
    ]
    assert {"seconds", "terms", "bottleneck", "best_seconds", "slowdown"} <= set(data)
    assert data["bottleneck"] == "network_group"


def test_slowdown_against_the_best_placement(fleet: tuple[str, str]) -> None:
    inv, _ = fleet
    out = run("cost", "-i", inv, "--nodes", "m1,w1", "--tp", "8", "--allreduce-bytes", "10G", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["bottleneck"] == "any"
    assert data["best_level"] == "network_group" and sorted(data["best_nodes"]) in (
        ["m1", "m2"],
        ["w1", "w2"],
    )
    assert data["comm_slowdown"] == pytest.approx(data["seconds"] / data["best_seconds"])
    assert data["comm_slowdown"] > 5
    # no --compute: communication is the site default 25 % of the best placement's step
    compute = 3 * data["best_seconds"]
    assert data["compute_seconds"] == pytest.approx(compute)
    assert data["step_seconds"] == pytest.approx(compute + data["seconds"])
    assert data["slowdown"] == pytest.approx((compute + data["seconds"]) / (compute + data["best_seconds"]))
    assert "site default" in data["assumed"]
    text = run("cost", "-i", inv, "--nodes", "m1,w1", "--tp", "8", "--allreduce-bytes", "10G").stdout
    assert "slowdown:" in text and "bottleneck: dp at any" in text


def test_tp_pp_dp_terms_in_json(fleet: tuple[str, str]) -> None:
    inv, _ = fleet
    out = run(
        "cost", "-i", inv, "--nodes", "m[1-2]", "--tp", "4", "--pp", "2", "--allreduce-bytes", "8G",
        "--tp-bytes", "1G", "--pp-bytes", "100M", "--json",
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert [(t["kind"], t["groups"], t["ranks"]) for t in data["terms"]] == [
        ("tp", 4, 4),
        ("pp", 8, 2),
        ("dp", 8, 2),
    ]
    assert data["plan"]["dp"] == 2
    assert data["seconds"] == pytest.approx(sum(t["seconds"] for t in data["terms"]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "zz1", "--allreduce-bytes", "1G"], "not in the inventory"),
        (["--nodes", "n[1-", "--allreduce-bytes", "1G"], "hostlist"),
        (["--nodes", "a1", "--allreduce-bytes", "lots"], "--allreduce-bytes"),
        (["--nodes", "a1", "--tp", "3", "--allreduce-bytes", "1G"], "does not divide"),
        (["--nodes", "n1", "--gpus-per-node", "2", "--allreduce-bytes", "1G"], "fewer than --gpus-per-node"),
    ],
)
def test_bad_input_is_one_line_exit_2(fleet: tuple[str, str], args: list[str], message: str) -> None:
    inv, _ = fleet
    out = run("cost", "-i", inv, *args)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_bad_links_file(fleet: tuple[str, str], tmp_path: Path) -> None:
    inv, _ = fleet
    bad = tmp_path / "bad.yaml"
    bad.write_text("links:\n  zone: {bandwidth: 80}\n")
    out = run("cost", "-i", inv, "--links", str(bad), "--nodes", "a1", "--allreduce-bytes", "1G")
    assert out.returncode == 2 and "zone bandwidth (80) is above network_group" in out.stderr


def test_links_in_the_inventory(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET + LINKS)
    out = run("cost", "-i", str(tmp_path / "fleet.yaml"), "--nodes", "n[1-8]", "--allreduce-bytes", "1e10")
    assert out.returncode == 0, out.stderr
    assert "0.3500 s" in out.stdout


def test_bad_links_in_the_inventory_is_one_input_error(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET + "links:\n  zone: {bandwidth: -1}\n")
    out = run(
        "generate",
        "-i",
        str(tmp_path / "fleet.yaml"),
        "-o",
        str(tmp_path / "out"),
        "--slurm-version",
        "22.05",
    )
    assert out.returncode == 2, out.stderr
    assert "links" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists()


def test_a_measured_port_rate_slows_the_nodes_hops(fleet: tuple[str, str], tmp_path: Path) -> None:
    """A health record with n3's port at 200 of 400 Gb/s (`slurm-topo health`'s `ports[]`): the 8-node ring
    runs at half the network_group bandwidth (0.35 s -> 0.70 s), and the idle fleet's best placement (which
    avoids n3 where it can) is not slowed."""
    import time

    inv, links = fleet
    records = tmp_path / "records"
    (records / "health").mkdir(parents=True)
    port = {"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "state": "ACTIVE",
            "phys_state": "LinkUp", "rate_gbps": 200.0, "expected_gbps": 400.0, "verdict": "degraded",
            "reasons": ["mlx5_0/1 rate 200 Gb/s, expected 400"]}  # fmt: skip
    record = {"name": "n3", "kind": "health", "source": "self", "time_epoch": int(time.time()),
              "verdict": "degraded", "hard_fault": False, "gpus": [], "ports": [port],
              "faults": [{"item": "mlx5_0/1", "verdict": "degraded", "reason": "slow"}]}  # fmt: skip
    (records / "health" / "n3.json").write_text(json.dumps(record))
    args = ["cost", "-i", inv, "--links", links, "--nodes", "n[1-8]", "--allreduce-bytes", "1e10", "--json"]
    plain = json.loads(run(*args).stdout)
    got = run(*args, "--records", str(records))
    assert got.returncode == 0, got.stderr
    measured = json.loads(got.stdout)
    assert plain["seconds"] == pytest.approx(0.35)
    assert measured["seconds"] == pytest.approx(0.70)
    assert measured["terms"][0]["bandwidth"] == pytest.approx(25.0)
    assert measured["terms"][0]["level"] == "network_group"
    assert "health: n3: degraded" in got.stderr
