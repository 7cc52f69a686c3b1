"""``cost``, ``capacity``, ``calibrate``, ``explain``, ``discover`` and the hidden ``probe`` commands through
the command line (in-process, CliRunner), on the real 24.11 capture with Slurm's answers scripted from it.
Figures are worked out by hand from the ring all-reduce (2(p-1)/p × bytes / bandwidth, latency 0) with the
link constants given here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import calibrate as calibrate_cli
from slurm_topo.cli import cost as cost_cli
from slurm_topo.cli import explain as explain_cli
from slurm_topo.core.errors import CommandError

REAL = Path(__file__).resolve().parent / "fixtures" / "real" / "slurm-24.11"
INVENTORY = str(REAL / "inventory.yaml")
NODE_LINES = (REAL / "scontrol-show-node-o.txt").read_text().splitlines(keepends=True)
LINKS = """links:
  nvlink:        {bandwidth: 450, latency_us: 0}
  node:          {bandwidth: 450, latency_us: 0}
  network_group: {bandwidth: 50,  latency_us: 0}
  zone:          {bandwidth: 25,  latency_us: 0}
  region:        {bandwidth: 12,  latency_us: 0}
  any:           {bandwidth: 5,   latency_us: 0}
"""


@pytest.fixture
def links(tmp_path: Path) -> str:
    path = tmp_path / "links.yaml"
    path.write_text(LINKS)
    return str(path)


def ring(ranks: int, gigabytes: float, bandwidth: float) -> float:
    return 2 * (ranks - 1) / ranks * gigabytes / bandwidth


# ---- cost


def test_cost_of_two_zones_against_one_rack_with_a_given_compute(links: str) -> None:
    """n01 (us-east-1a) and n05 (us-east-1b) meet at the region: 8 ranks of dp at 12 GB/s; the best
    two nodes share a rack (50 GB/s). With 0.45 s of compute the step is compute + communication."""
    args = ["cost", "-i", INVENTORY, "--links", links, "--nodes", "n01,n05", "--gpus-per-node", "4"]
    result = invoke(*args, "--allreduce-bytes", "1G", "--compute", "450ms", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    here, best = ring(8, 1, 12), ring(8, 1, 50)
    assert doc["seconds"] == pytest.approx(here) and doc["best_seconds"] == pytest.approx(best)
    assert doc["bottleneck"] == "region" and doc["best_level"] == "network_group"
    assert sorted(doc["best_nodes"]) in (["n01", "n02"], ["n01", "n03"], ["n02", "n03"])
    assert doc["compute_seconds"] == pytest.approx(0.45) and doc["step_seconds"] == pytest.approx(0.45 + here)
    assert doc["slowdown"] == pytest.approx((0.45 + here) / (0.45 + best))
    assert doc["comm_slowdown"] == pytest.approx(here / best) and doc["links_measured"] is None
    text = invoke(*args, "--allreduce-bytes", "1G", "--compute", "450ms").stdout.splitlines()
    assert text[0] == (
        f"placement: 2 nodes n[01,05] × 4 GPUs, tp 1 × pp 1 × dp 8: {here:.4f} s of communication per step"
    )
    assert f"step: {0.45 + here:.4f} s (assumed: compute 0.45 s per step (plan compute=))" in text
    slowdown = (0.45 + here) / (0.45 + best)
    assert text[-1] == (
        f"slowdown: {slowdown:.2f}× per step ({(slowdown - 1) * 100:.0f} % slower; "
        f"communication {here / best:.2f}×)"
    )


def test_cost_comm_share_fixes_the_compute_from_the_best_placement(links: str) -> None:
    """--comm-share 25%: communication is a quarter of the best placement's step, so compute is three times
    the best placement's communication."""
    result = invoke(
        "cost",
        "-i",
        INVENTORY,
        "--links",
        links,
        "--nodes",
        "n01,n05",
        "--gpus-per-node",
        "4",
        "--allreduce-bytes",
        "1G",
        "--comm-share",
        "25%",
        "--json",
    )
    doc = json.loads(result.stdout)
    assert doc["compute_seconds"] == pytest.approx(3 * ring(8, 1, 50))


def test_cost_comm_only_compares_the_traffic_alone(links: str) -> None:
    result = invoke(
        "cost",
        "-i",
        INVENTORY,
        "--links",
        links,
        "--nodes",
        "n01,n05",
        "--gpus-per-node",
        "4",
        "--allreduce-bytes",
        "1G",
        "--comm-only",
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.startswith("step:")]
    ratio = ring(8, 1, 12) / ring(8, 1, 50)  # the same ring: the bandwidths' ratio, 50 / 12
    assert lines[-1] == f"slowdown: {ratio:.2f}× ({(ratio - 1) * 100:.0f} % slower)"
    assert "assumed: communication only" in result.stdout


def test_cost_names_where_the_best_placement_meets_in_words(links: str) -> None:
    """Two nodes fit in one rack (a network group); all 12 of the capture's nodes span us-east and us-west,
    so they meet at level ``any``: no group holds them, and the text says so instead of 'one any'. The 48
    ranks' ring then runs at the ``any`` bandwidth."""
    args = ["cost", "-i", INVENTORY, "--links", links, "--gpus-per-node", "4", "--allreduce-bytes", "1G"]
    rack = invoke(*args, "--nodes", "n01,n05", "--comm-only").stdout.splitlines()
    (best,) = [line for line in rack if line.startswith("best placement")]
    assert " (one network group): " in best
    fleet = invoke(*args, "--nodes", "n[01-12]", "--comm-only")
    assert fleet.exit_code == 0, fleet.stderr
    (best,) = [line for line in fleet.stdout.splitlines() if line.startswith("best placement")]
    assert best == f"best placement on the idle fleet: n[01-12] (no common region): {ring(48, 1, 5):.4f} s"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--compute", "1", "--comm-share", "0.3"],
            "give --compute or --comm-share, not both (one fixes the other)",
        ),
        (
            ["--comm-only", "--compute", "1"],
            "--comm-only leaves the compute out: not with --compute or --comm-share",
        ),
        (["--comm-only", "--comm-share", "0.3"], "--comm-only leaves the compute out"),
    ],
)
def test_cost_step_options_that_contradict_each_other(extra: list[str], message: str) -> None:
    result = invoke("cost", "-i", INVENTORY, "--nodes", "n01,n05", "--allreduce-bytes", "1G", *extra)
    assert result.exit_code == 2 and error_line(result).startswith(message)


def test_cost_links_given_twice_must_agree(tmp_path: Path) -> None:
    """The same links: in two inventories is one table; two different ones are refused, naming the
    second; a --links file may hold the mapping itself, without the links: key."""
    fleet = (REAL / "inventory.yaml").read_text()
    one, two, other = tmp_path / "one.yaml", tmp_path / "two.yaml", tmp_path / "other.yaml"
    one.write_text(fleet + LINKS)
    two.write_text("nodes: []\n" + LINKS)
    other.write_text("nodes: []\n" + LINKS.replace("bandwidth: 12", "bandwidth: 11"))
    args = [
        "cost",
        "--nodes",
        "n01,n05",
        "--gpus-per-node",
        "4",
        "--allreduce-bytes",
        "1G",
        "--comm-only",
        "--json",
    ]
    same = invoke(*args, "-i", str(one), "-i", str(two))
    assert same.exit_code == 0, same.stderr
    assert json.loads(same.stdout)["seconds"] == pytest.approx(ring(8, 1, 12))
    differ = invoke(*args, "-i", str(one), "-i", str(other))
    assert differ.exit_code == 2
    assert error_line(differ) == f"{other}: links: differs from an earlier inventory's; give links: once"
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(yaml.safe_load(LINKS)["links"]))
    plain = invoke(*args, "-i", INVENTORY, "--links", str(bare))
    assert json.loads(plain.stdout)["seconds"] == pytest.approx(ring(8, 1, 12))


# ---- capacity


def detailed_nodes() -> str:
    """`scontrol -d show node -o` of the capture: job 1 holds 2 GPUs (IDX 0-1) on each of n01 and n02."""
    lines = []
    for line in NODE_LINES:
        if line.startswith(("NodeName=n01 ", "NodeName=n02 ")):
            line = line.replace("Gres=gpu:h100:8 ", "Gres=gpu:h100:8 GresUsed=gpu:h100:2(IDX:0-1) ")
        lines.append(line)
    return "".join(lines)


def test_capacity_scontrol_asks_for_details_and_counts_the_gpus_mixed_nodes_have_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """64 GPUs; n12 (4) drained, n01 and n02 use 2 each: 56 free. One 8-GPU node: n03 and n04 are the only
    nodes with 8 free, in two racks of one zone; 56 // 8 = 7 jobs is what the free GPUs alone suggest."""
    fake = FakeSlurm({"scontrol -d show node -o": detailed_nodes()})
    monkeypatch.setattr(cost_cli, "SubprocessRunner", lambda: fake)
    result = invoke("capacity", "-i", INVENTORY, "--scontrol", "--shape", "1x8", "--json")
    assert result.exit_code == 0, result.stderr
    assert fake.calls == [("scontrol", "-d", "show", "node", "-o")]
    doc = json.loads(result.stdout)
    assert (doc["free_gpus"], doc["total_gpus"], doc["nodes"]["drained"]) == (56, 64, 1)
    (shape,) = doc["shapes"]
    assert shape["naive_jobs"] == 7
    by_level = {lv["level"]: (lv["jobs"], lv["groups"]) for lv in shape["levels"]}
    assert by_level["network_group"] == (2, 2) and by_level["zone"] == (2, 1)


def test_capacity_table_without_gpu_use_counts_mixed_nodes_as_full() -> None:
    """Plain `show node -o` has no GresUsed: n01 and n02 (MIXED) count as having no free GPU, so 44 are
    free; 2 nodes × 4 GPUs fit once in each of rack-b1, rack-c1 and rack-d1 (n03 and n04 are alone in
    their racks), leaving 44 - 24 = 20 GPUs stranded at that level."""
    result = invoke(
        "capacity", "-i", INVENTORY, "--nodes-from", str(REAL / "scontrol-show-node-o.txt"), "--shape", "2x4"
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].endswith("free GPUs: 44 of 64")
    (row,) = [line.split() for line in lines if line.startswith("2x4    network_group")]
    assert row[2:] == ["3", "3", "5", "20"]


def test_capacity_nodes_from_and_scontrol_together_are_refused() -> None:
    result = invoke(
        "capacity",
        "-i",
        INVENTORY,
        "--nodes-from",
        str(REAL / "scontrol-show-node-o.txt"),
        "--scontrol",
        "--shape",
        "1x8",
    )
    assert result.exit_code == 2 and error_line(result) == "give --nodes-from or --scontrol, not both"


# ---- calibrate


class ProbeSteps(FakeSlurm):
    """The captured cluster's nodes, and calibrate's srun steps answered as the two probe tasks would
    (serve, then measure) with fixed figures per pair; every argv recorded."""

    FIGURES = {("n01", "n02"): (40.0, 8.0), ("n01", "n04"): (20.0, 15.0)}

    def run(self, argv, timeout: float = 30.0) -> str:  # type: ignore[no-untyped-def]
        argv = tuple(argv)
        if argv[0] != "srun":
            return super().run(argv, timeout)
        self.calls.append(argv)
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1].split(",")
        bandwidth, latency = self.FIGURES[(nodes[0], nodes[1])]
        return "\n".join(
            [
                json.dumps({"slurm_topo_probe": "serve", "node": nodes[0]}),
                json.dumps(
                    {
                        "slurm_topo_probe": "measure",
                        "node": nodes[1],
                        "bandwidth": bandwidth,
                        "latency_us": latency,
                    }
                ),
            ]
        )


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> ProbeSteps:
    fake = ProbeSteps({"scontrol show node -o": "".join(NODE_LINES)})
    monkeypatch.setattr(calibrate_cli, "SubprocessRunner", lambda: fake)
    return fake


def test_calibrate_measures_one_pair_per_level_and_writes_a_table_cost_reads(
    steps: ProbeSteps, tmp_path: Path
) -> None:
    """n01, n02 (rack-a1) and n04 (rack-a2, same zone): a network-group pair and a zone pair, each one srun
    step with the nodes' NodeAddr; the table written holds the measured figures, and cost runs on it."""
    table = tmp_path / "links.yaml"
    result = invoke(
        "calibrate",
        "-i",
        INVENTORY,
        "--nodes",
        "n[01-02],n04",
        "-o",
        str(table),
        "--bytes",
        "1M",
        "--probe-command",
        "slurm-topo",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("probe tcp: "), lines[0]  # no --probe: tcp, said first
    assert lines[1].split()[:2] == ["network_group", "n01"] and "40.000 GB/s" in lines[1]
    assert lines[2].split()[:2] == ["zone", "n01"] and "20.000 GB/s" in lines[2]
    assert lines[-1] == f"wrote {table}"
    srun = [c for c in steps.calls if c[0] == "srun"]
    assert len(srun) == 2 and all("--address" in c and "n01=127.0.0.1" in c for c in srun)
    written = yaml.safe_load(table.read_text())["links"]
    assert written["network_group"]["bandwidth"] == 40.0 and written["zone"]["bandwidth"] == 20.0
    cost = invoke(
        "cost",
        "-i",
        INVENTORY,
        "--links",
        str(table),
        "--nodes",
        "n01,n04",
        "--gpus-per-node",
        "8",
        "--allreduce-bytes",
        "1G",
        "--comm-only",
        "--json",
    )
    doc = json.loads(cost.stdout)
    assert doc["terms"][0]["level"] == "zone" and doc["terms"][0]["bandwidth"] == 20.0
    assert doc["links_measured"]["probe"] == "tcp"


def test_calibrate_json_to_stdout_names_no_output(steps: ProbeSteps) -> None:
    result = invoke("calibrate", "-i", INVENTORY, "--nodes", "n[01-02]", "--json", "--probe-command", "x")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "output" not in doc
    (measured,) = doc["measured"]
    assert (measured["level"], measured["pair"], measured["bandwidth"]) == (
        "network_group",
        ["n01", "n02"],
        40.0,
    )
    assert doc["links"]["network_group"]["bandwidth"] == 40.0


def test_calibrate_that_measures_nothing_says_why_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step failed: exit 3 and one error line holding each step's reason whole (the probe task's own
    error, then srun's lines), however long the srun line (the probe command here is 400 characters)."""
    stderr = (
        "slurm-topo: error: probe tcp: cannot connect to n01 at 127.0.0.1:47123 within 120 s: [Errno 111] "
        "Connection refused\nsrun: error: n02: task 1: Exited with exit code 3\n"
        "srun: Terminating StepId=9.1\n"
    )
    fake = FakeSlurm(
        {"scontrol show node -o": "".join(NODE_LINES), "srun": CommandError(["srun"], 1, stderr)}
    )
    monkeypatch.setattr(calibrate_cli, "SubprocessRunner", lambda: fake)
    command = "/opt/" + "v" * 400 + "/bin/slurm-topo"
    result = invoke("calibrate", "-i", INVENTORY, "--nodes", "n[01-02],n04", "--probe-command", command)
    assert result.exit_code == 3 and result.stdout == ""
    assert error_line(result) == (
        "calibrate: no level could be measured: network_group (n01 <-> n02), zone (n01 <-> n04): srun exited "
        "1: slurm-topo: error: probe tcp: cannot connect to n01 at 127.0.0.1:47123 within 120 s: [Errno 111] "
        "Connection refused / srun: error: n02: task 1: Exited with exit code 3 / srun: Terminating "
        "StepId=9.1"
    )


def test_calibrate_needs_nodes_and_a_sane_transfer_size(steps: ProbeSteps) -> None:
    nowhere = invoke("calibrate", "-i", INVENTORY, env={"SLURM_JOB_NODELIST": None})
    assert nowhere.exit_code == 2 and error_line(nowhere).startswith("give --nodes HOSTLIST, or run inside")
    from_env = invoke("calibrate", "-i", INVENTORY, "--json", env={"SLURM_JOB_NODELIST": "n[01-02]"})
    assert from_env.exit_code == 0 and json.loads(from_env.stdout)["measured"][0]["pair"] == ["n01", "n02"]
    asked = len(steps.calls)
    for size in ("0", "65Gi"):
        result = invoke("calibrate", "-i", INVENTORY, "--nodes", "n[01-02]", "--bytes", size)
        assert result.exit_code == 2 and error_line(result) == "--bytes: 1 byte to 64 GiB"
    assert len(steps.calls) == asked


def test_calibrate_names_a_failed_address_lookup_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate_cli, "SubprocessRunner", lambda: FakeSlurm({}))
    result = invoke("calibrate", "-i", INVENTORY, "--nodes", "n[01-02]")
    assert result.exit_code == 3
    assert error_line(result).count("exited 1") == 1
    assert error_line(result) == (
        "scontrol show node -o exited 1: reading the nodes' addresses: no answer scripted for this command"
    )


def test_calibrate_says_a_timed_out_address_lookup_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scontrol that did not answer in time ran: it is not 'could not be started'."""
    argv = ["scontrol", "show", "node", "-o"]
    fake = FakeSlurm({"scontrol show node -o": CommandError(argv, None, timeout=30.0)})
    monkeypatch.setattr(calibrate_cli, "SubprocessRunner", lambda: fake)
    result = invoke("calibrate", "-i", INVENTORY, "--nodes", "n[01-02]")
    assert result.exit_code == 3
    assert error_line(result).startswith("scontrol show node -o did not answer within 30 s")
    assert "could not be started" not in error_line(result)


def test_probes_outside_a_slurm_step_refuse_to_run() -> None:
    env = {"SLURM_PROCID": None, "SLURM_STEP_NODELIST": None}
    tcp = invoke("probe", "tcp", "--port", "47123", env=env)
    assert tcp.exit_code == 2 and "run it as a two-task srun step" in error_line(tcp)
    ring_probe = invoke("probe", "ring", "--port", "47123", "--bytes", "16", env=env)
    assert ring_probe.exit_code == 2 and "run it as an srun step, one task per node" in error_line(ring_probe)


# ---- explain


def squeue_answer(job: str) -> str:
    """`squeue --json --states=all --jobs=JOB` made from the capture's listing of every job."""
    doc = json.loads((REAL / "squeue-json.txt").read_text())
    doc["jobs"] = [j for j in doc["jobs"] if str(j["job_id"]) == job]
    return json.dumps(doc)


def test_explain_a_running_job_names_where_it_landed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture's job 1 (--locality=zone -N2 -C ib) runs on n01-n02, both in rack-a1."""
    fake = FakeSlurm(
        {
            "squeue --json --states=all --jobs=1": squeue_answer("1"),
            # explain asks for component 1 by name; 22.05's squeue answers JOBID+1 of a job that has no
            # components with the job itself (checked live), which names no het job
            "squeue --json --states=all --jobs=1+1": squeue_answer("1"),
            "scontrol show node -o n[01-02]": "".join(NODE_LINES[:2]),
        }
    )
    monkeypatch.setattr(explain_cli, "SubprocessRunner", lambda: fake)
    result = invoke("explain", "1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "job 1: RUNNING on n[01-02]"
    assert "  landed:   same network group us-east-1a.rack-a1 (2 nodes)" in lines
    assert not [line for line in lines if "BROKEN" in line]
    doc = json.loads(invoke("explain", "1", "--json").stdout)
    assert (doc["known"], doc["state"], doc["nodes"], doc["broken"]) == (True, "RUNNING", "n[01-02]", None)


def test_explain_a_held_job_says_why_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(
        {
            "squeue --json --states=all --jobs=3": squeue_answer("3"),
            "squeue --json --states=all --jobs=3+1": squeue_answer("3"),  # as 22.05 answers it
        }
    )
    monkeypatch.setattr(explain_cli, "SubprocessRunner", lambda: fake)
    lines = invoke("explain", "3").stdout.splitlines()
    assert lines[0] == "job 3: PENDING"
    assert lines[-1].startswith("  waiting:  Reason=JobHeldUser, held by the locality filter")


@pytest.mark.parametrize(
    "answer",
    [
        CommandError(["squeue"], 1, "slurm_load_jobs error: Invalid job id specified"),  # 22.05-24.x
        json.dumps({"jobs": []}),  # a squeue that answers an unknown id with an empty listing
    ],
    ids=["invalid-job-id", "empty-listing"],
)
def test_explain_a_job_slurm_does_not_know_is_an_error(
    answer: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown job id is bad input handed to the command: exit 2 and one error line, nothing on stdout
    (README "Exit codes"); it was exit 0 with a line on stdout."""
    monkeypatch.setattr(explain_cli, "SubprocessRunner", lambda: FakeSlurm({"squeue": answer}))
    result = invoke("explain", "77")
    assert result.exit_code == 2 and result.stdout == ""
    assert error_line(result).startswith("job 77: not known to slurmctld")


def test_explain_json_of_a_job_slurm_does_not_know_prints_its_object_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--json: the object with "known": false on stdout (README "JSON output"), the error line on stderr, and
    the same exit code as the text form."""
    unknown = CommandError(["squeue"], 1, "slurm_load_jobs error: Invalid job id specified")
    monkeypatch.setattr(explain_cli, "SubprocessRunner", lambda: FakeSlurm({"squeue": unknown}))
    result = invoke("explain", "77", "--json")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert (doc["known"], doc["job_id"], doc["state"]) == (False, "77", "")
    assert error_line(result).startswith("job 77: not known to slurmctld")


@pytest.mark.parametrize("job", ["12ab", "1;2", "1_x"])
def test_explain_refuses_what_is_not_a_job_id_before_asking_slurm(
    job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm({})
    monkeypatch.setattr(explain_cli, "SubprocessRunner", lambda: fake)
    result = invoke("explain", job)
    assert result.exit_code == 2 and f"not {job!r}" in error_line(result)
    assert fake.calls == []


# ---- discover


def test_discover_takes_the_environment_where_no_flag_is_given(tmp_path: Path) -> None:
    """GPULAYER_* and SLURMD_NODENAME (README "Commands"); a flag wins over its variable."""
    env = {
        "SLURMD_NODENAME": "g5",
        "GPULAYER_REGION": "eu",
        "GPULAYER_ZONE": "eu-1",
        "GPULAYER_NETWORK_GROUP": "r7",
    }
    result = invoke("discover", "--json", "--zone", "eu-2", "--dmi-root", str(tmp_path), env=env)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["name"], doc["region"], doc["zone"], doc["network_group"]) == ("g5", "eu", "eu-2", "r7")
    assert doc["found_by"] == {
        "name": "env:SLURMD_NODENAME",
        "region": "env:GPULAYER_REGION",
        "zone": "flag",
        "network_group": "env:GPULAYER_NETWORK_GROUP",
    }
    as_yaml = yaml.safe_load(
        invoke("discover", "--zone", "eu-2", "--dmi-root", str(tmp_path), env=env).stdout
    )
    (node,) = as_yaml["nodes"]
    assert {k: node[k] for k in ("name", "region", "zone", "network_group", "source")} == {
        "name": "g5",
        "region": "eu",
        "zone": "eu-2",
        "network_group": "r7",
        "source": "self",
    }
