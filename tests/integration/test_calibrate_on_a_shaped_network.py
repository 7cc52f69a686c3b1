"""The shaped testbed: a real Slurm cluster whose every slurmd (and slurmctld) runs in a network namespace of
its own (``docker-slurm/cluster up --netns SHAPE``: veths on a private bridge, addresses only there), with
each node's links to the others shaped per level by tc htb. `slurm-topo calibrate`, run as a batch job,
measures one pair per level through srun steps; the rates it recovers are compared with the rates the test
gave tc, and the cost model, given the calibrated table, ranks placements of every class in the measured
order.

The rates are what tc enforces on the wire; a TCP flow carries about 95 % of them as payload (headers), and
the probe is one Python process on a shared 2-core machine, so the bound is 15 % (the issue's goal).
Latency is not shaped (this kernel has no netem): the measured latencies are the veths', a few µs to tens
of µs, not asserted.

Then a real job: torch.distributed (gloo, CPU; the ``testbed`` extra) through ``gpulayer-srun`` on a
placement of every class, an all-reduce and a send/recv chain at 4 MiB and 256 B, against the model on the
calibrated table plus gloo's software α per exchange (measured in each job on its first node); the same
measurements must fail against a table whose bandwidth is off by 2x or latency by 3x (``gloo_check.py``,
benchmarks/results/shaped_network.md)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import gloo_check
import pytest
import slurmctl
import yaml
from preconditions import say

from slurm_topo.cost import Fabric, PlanSpec, score_placement
from slurm_topo.inventory import load_inventories

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.netns,
    pytest.mark.native_only(reason="the launcher's --netns mode runs the host's Slurm"),
]

HW = slurmctl.SMALL_NODE
FLEET = {
    "nodes": [
        {"name": "a[1-2]", "region": "r1", "zone": "r1-a", "network_group": "leaf-1", "gpus": 4, "slurm": HW},
        {"name": "b1", "region": "r1", "zone": "r1-a", "network_group": "leaf-2", "gpus": 4, "slurm": HW},
        {"name": "c1", "region": "r1", "zone": "r1-b", "network_group": "leaf-3", "gpus": 4, "slurm": HW},
        {"name": "d1", "region": "r2", "zone": "r2-a", "network_group": "leaf-4", "gpus": 4, "slurm": HW},
    ]
}
RATES_MBIT = {"network_group": 1200, "zone": 600, "region": 300, "any": 150}
SHAPE = ",".join(f"{level}={mbit}mbit" for level, mbit in RATES_MBIT.items())
PAIRS = {"network_group": ("a1", "a2"), "zone": ("a1", "b1"), "region": ("a1", "c1"), "any": ("a1", "d1")}


def _netns_possible() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "tc", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (iproute2, util-linux)"
    return None


@pytest.fixture(scope="module")
def shaped(scratch_cluster):  # type: ignore[no-untyped-def]
    why = _netns_possible()
    if why:
        pytest.fail(f"the shaped testbed cannot run here: {why}")  # CI must run it: never a skip
    with scratch_cluster("shaped", FLEET, "--netns", SHAPE, nodes_max=5) as cluster:
        yield cluster.slurm, cluster.base.parent


def test_the_nodes_live_in_their_own_namespaces(shaped) -> None:  # type: ignore[no-untyped-def]
    """Slurm's view: every node's address is on the private net, and slurmd really answers from there."""
    slurm, _ = shaped
    out = slurm.out("scontrol", "show", "node", "-o")
    addrs = {
        line.split("NodeName=")[1].split()[0]: line.split("NodeAddr=")[1].split()[0]
        for line in out.splitlines()
    }
    assert set(addrs) == {"a1", "a2", "b1", "c1", "d1"}
    assert all(a.startswith("10.231.0.") for a in addrs.values()), addrs
    assert set(slurm.node_states().values()) == {"idle"}


def _calibrate(slurm: slurmctl.Slurm, work: Path) -> dict[str, Any]:
    """Run ``slurm-topo calibrate`` as a batch job on every node; its measured levels (links.yaml)."""
    port = slurmctl.free_port_block(1)
    script = work / "calibrate.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        f"{slurmctl.slurm_topo_cli()[0]} calibrate -i {work}/fleet.yaml -o {work}/links.yaml --bytes 16M "
        f"--repeats 3 --time 3 --port {port} --probe-command '{sys.executable} -m slurm_topo'\n"
    )
    slurm.quiesce()
    job = slurm.submit("-o", str(work / "out.txt"), "-t", "8", "-N5", str(script))
    try:
        slurm.wait_state(job, "COMPLETED", timeout=300)
    except AssertionError:
        out = (work / "out.txt").read_text() if (work / "out.txt").exists() else "(no output)"
        raise AssertionError(f"calibrate job {job} did not complete:\n{out}") from None
    assert len(slurm.allocation_of(job).nodes) == 5  # Slurm's view: the job held every node
    levels: dict[str, Any] = yaml.safe_load((work / "links.yaml").read_text())["links"]["measured"]["levels"]
    return levels


def _off_rate(measured: dict[str, float]) -> list[str]:
    """The levels whose measured rate is more than 15 % off the rate tc shapes."""
    return [
        f"{lvl}: {measured[lvl] * 8000:.0f} of {mbit} Mbit/s"
        for lvl, mbit in RATES_MBIT.items()
        if abs(measured[lvl] - mbit / 8000) > 0.15 * mbit / 8000  # Mbit/s -> GB/s
    ]


@pytest.mark.quiet  # rates and latencies: nothing else runs meanwhile
def test_calibrate_recovers_each_shaped_rate_and_the_model_ranks_by_it(shaped, request) -> None:  # type: ignore[no-untyped-def]
    slurm, work = shaped
    (work / "fleet.yaml").write_text(yaml.safe_dump(FLEET, sort_keys=False))
    levels = _calibrate(slurm, work)
    assert {lvl: tuple(rec["pair"]) for lvl, rec in levels.items()} == PAIRS
    # A stall of the shared two cores slows a probe's receiver below the shaped rate (1 000 of 1 200 Mbit/s
    # once in CI): a calibration that misses runs once more, and the second one is judged (a probe that
    # misreads the rate misses both)
    first = _off_rate({lvl: rec["bandwidth"] for lvl, rec in levels.items()})
    if first:
        # in the summary too (a worker's output is captured): a retry that passes is still seen
        say(
            request.config,
            f"{request.node.name}: first calibration missed ({'; '.join(first)}); calibrated again",
        )
        levels = _calibrate(slurm, work)
        assert {lvl: tuple(rec["pair"]) for lvl, rec in levels.items()} == PAIRS
    measured = {lvl: rec["bandwidth"] for lvl, rec in levels.items()}
    report = {lvl: f"{measured[lvl] * 8000:.0f} of {mbit} Mbit/s" for lvl, mbit in RATES_MBIT.items()}
    assert not _off_rate(measured), report
    # the cost model on the calibrated table: one 10 GB all-reduce over two nodes of each class costs in
    # the order the network really ran
    inv = load_inventories([work / "fleet.yaml", work / "links.yaml"])
    fabric = Fabric.of(inv)
    spec = PlanSpec(gpus_per_node=1, allreduce_bytes=1e10)
    seconds = {
        lvl: score_placement(fabric, list(pair), spec, inv.links).seconds for lvl, pair in PAIRS.items()
    }
    by_model = sorted(seconds, key=seconds.__getitem__)
    by_network = sorted(measured, key=measured.__getitem__, reverse=True)
    assert by_model == by_network == list(RATES_MBIT), (seconds, report)
    cost = subprocess.run(
        [*slurmctl.slurm_topo_cli(), "cost", "-i", str(work / "fleet.yaml"), "-i", str(work / "links.yaml")]
        + ["--nodes", "a1,d1", "--gpus-per-node", "1", "--allreduce-bytes", "10G", "--comm-only"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cost.returncode == 0, cost.stderr
    assert "links measured by slurm-topo calibrate (tcp, " in cost.stdout


RINGS = {  # placements of every class, as Slurm will list them (its node order)
    "network_group": ("a1", "a2"),
    "zone": ("a1", "b1"),
    "region": ("a1", "c1"),
    "any": ("a1", "d1"),
    "three nodes, two leaves": ("a1", "a2", "b1"),
    "all five": ("a1", "a2", "b1", "c1", "d1"),
}
RING_BYTES = 24_000_000


def _ring(slurm: slurmctl.Slurm, nodes: tuple[str, ...], port: int) -> dict[str, object]:
    """A plain-Python ring all-reduce (slurm-topo probe ring) as an srun step on ``nodes``; rank 0's record,
    after checking every rank ran where Slurm was asked to put it."""
    import json

    addrs = {
        line.split("NodeName=")[1].split()[0]: line.split("NodeAddr=")[1].split()[0]
        for line in slurm.out("scontrol", "show", "node", "-o").splitlines()
    }
    argv = ["timeout", "120", "srun", f"-N{len(nodes)}", f"-n{len(nodes)}", "--ntasks-per-node=1"]
    argv += [f"--nodelist={','.join(nodes)}", "-t", "3", sys.executable, "-m", "slurm_topo", "probe", "ring"]
    argv += ["--port", str(port), "--bytes", str(RING_BYTES), "--repeats", "3"]
    for n in nodes:
        argv += ["--address", f"{n}={addrs[n]}"]
    out = slurm.run(argv, timeout=130).stdout
    recs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert sorted(r["node"] for r in recs) == sorted(nodes), out  # slurmd's SLURMD_NODENAME per rank
    return next(r for r in recs if r["rank"] == 0)


@pytest.mark.quiet  # rates and latencies: nothing else runs meanwhile
def test_a_real_ring_allreduce_takes_what_the_calibrated_model_predicts(shaped) -> None:  # type: ignore[no-untyped-def]
    """The step of a data-parallel job (its ring all-reduce, run as one task per node) on a placement of
    every class: its measured seconds within ±25 % of the model's prediction on the calibrated table, and the
    model orders the placements as the measurements do. Needs the calibrated table of the test above."""
    slurm, work = shaped
    if not (work / "links.yaml").exists():
        pytest.fail(
            "needs links.yaml from test_calibrate_recovers_each_shaped_rate_and_the_model_ranks_by_it"
        )
    inv = load_inventories([work / "fleet.yaml", work / "links.yaml"])
    fabric = Fabric.of(inv)
    spec = PlanSpec(gpus_per_node=1, allreduce_bytes=RING_BYTES)
    port = slurmctl.free_port_block(1)
    measured, predicted = {}, {}
    for name, nodes in RINGS.items():
        measured[name] = float(_ring(slurm, nodes, port)["seconds"])  # type: ignore[arg-type]
        predicted[name] = score_placement(fabric, list(nodes), spec, inv.links).seconds
    table = {n: f"measured {measured[n]:.3f} s, predicted {predicted[n]:.3f} s" for n in RINGS}
    for name in RINGS:
        assert abs(measured[name] - predicted[name]) <= 0.25 * predicted[name], table
    assert sorted(RINGS, key=measured.__getitem__) == sorted(RINGS, key=predicted.__getitem__), table


# ---- a real torch.distributed (gloo) job through gpulayer-srun (gloo_job.py; the check: gloo_check.py)

GLOO_JOB = Path(__file__).with_name("gloo_job.py")
# bytes, timed repeats. The small size is 256 B, not 4 KiB: tc's htb lets a burst of a few KiB through at
# the veth's speed once its bucket has refilled (a 4 KiB chain hop took 71 µs where region's rate allows
# 114), so a 4 KiB time is the rate's or not by chance; 256 B is α's alone (the rate's share <= 14 µs).
GLOO_SIZES = {"large": (4 * 2**20, 3), "small": (256, 30)}
# A large message's time is the median of its repeats (the wire's rate sets it: steady); a small one's the
# minimum: on the shared two cores another process only ever adds to an exchange's own cost, and a median
# of small operations moved 2-5x with the machine's load (benchmarks/results/shaped_network.md).
GLOO_STAT = {"large": statistics.median, "small": min}


def _launcher() -> str:
    """The venv's gpulayer-srun (the shaped testbed runs the host's Slurm only)."""
    cand = Path(sys.executable).parent / "gpulayer-srun"
    return str(
        cand if cand.exists() else Path(__file__).resolve().parents[2] / ".venv" / "bin" / "gpulayer-srun"
    )


def _gloo_submit(slurm: slurmctl.Slurm, work: Path, name: str, lines: list[str], sbatch: list[str]) -> None:
    """Run ``lines`` as a batch job (``sbatch`` its options) and wait for it to complete."""
    script, out = work / f"gloo-{name}.sh", work / f"gloo-{name}.out"
    head = [
        "#!/bin/bash",
        "set -e",
        f"export TMPDIR={work}  # the SLURM_HOSTFILE goes away with the work dir",
    ]
    script.write_text("\n".join(head + lines) + "\n")
    slurm.quiesce()
    job = slurm.submit("-o", str(out), "-t", "8", *sbatch, str(script))
    try:
        slurm.wait_state(job, "COMPLETED", timeout=400)
    except AssertionError:
        text = out.read_text() if out.exists() else "(no output)"
        raise AssertionError(f"gloo job {job} ({name}) did not complete:\n{text}") from None
    nodes = sbatch[sbatch.index("-w") + 1].split(",")
    assert sorted(slurm.allocation_of(job).nodes) == sorted(nodes)  # Slurm's view: where the job ran


def _gloo_step(work: Path, store: str, ops: str, sizes: str) -> str:
    """The job's command line of ``gloo_job.py`` with a fresh rendezvous file (old records removed)."""
    for old in work.glob(f"{store}*"):
        old.unlink()
    return f"{sys.executable} {GLOO_JOB} {work / store} {ops} {sizes}"


def _gloo_records(work: Path, store: str, ranks: int) -> list[dict[str, Any]]:
    import json

    recs = [json.loads(p.read_text()) for p in work.glob(f"{store}.rank*.json")]
    recs.sort(key=lambda r: r["rank"])
    assert [r["rank"] for r in recs] == list(range(ranks)), (store, recs)
    return recs


def _seconds(recs: list[dict[str, Any]], spec: str, size: str, p: int) -> float:
    """An all-reduce among ranks 0..p-1: rank 0's seconds per operation; a chain: rank p-1's end - rank 0's
    start; over the repeats, ``GLOO_STAT`` of the size."""
    key = str(GLOO_SIZES[size][0])
    first = recs[0]["results"][spec][key]
    if spec.startswith("allreduce"):
        return float(GLOO_STAT[size](first))
    last = recs[p - 1]["results"][spec][key]
    return float(GLOO_STAT[size]([e[1] - s[0] for s, e in zip(first, last, strict=True)]))


def _alpha_step(work: Path, tag: str, nodes: tuple[str, ...]) -> str:
    """The step that measures gloo's software α for a placement's job: as many ranks as the placement has,
    all on its first node (no shaped link among them: the wire costs nothing there), the all-reduce and the
    chain at the small size, one plain srun step (overcommitted: the job has one CPU a node)."""
    nbytes, repeats = GLOO_SIZES["small"]
    step = _gloo_step(work, f"gloo-{tag}-alpha.store", "allreduce+chain", f"{nbytes}:{repeats}")
    return f"timeout 300 srun -N1 -n {len(nodes)} -O -w {nodes[0]} {step}"


def _alphas(work: Path, tag: str, nodes: tuple[str, ...]) -> dict[str, float]:
    """gloo's software α per exchange in µs, by op, from the placement's α step: an all-reduce per ring step
    (its seconds / 2(p-1)), a chain per send (/ (p-1))."""
    p = len(nodes)
    recs = _gloo_records(work, f"gloo-{tag}-alpha.store", p)
    assert {r["node"] for r in recs} == {nodes[0]}, recs
    return {
        "allreduce": _seconds(recs, "allreduce", "small", p) / (2 * (p - 1)) * 1e6,
        "chain": _seconds(recs, "chain", "small", p) / (p - 1) * 1e6,
    }


def gloo_cases(
    slurm: slurmctl.Slurm, work: Path
) -> tuple[list[gloo_check.Case], dict[tuple[str, str], float]]:
    """Every placement of ``RINGS``, one job each, one task a node: gloo's α measured on the placement's first
    node (``_alpha_step``), then the gloo all-reduce through ``gpulayer-srun --tp 1`` (every rank a DP
    replica) and the chain through ``gpulayer-srun --tp 1 --pp N`` (the stages in the order the plan laid them
    out), at both sizes, measured. Returns the cases and each (placement, op)'s α in µs.

    The α is the job's own, taken seconds before its cases: a one-off α shared by the four two-node
    placements moved 158-527 µs a ring step between runs of the test, and every two-node ratio moved with it
    (x1.05-2.49 in a CI run, x0.58-0.80 in a run here); measured per job, an α's error meets one placement
    only and the geometric mean averages it."""
    sizes = ",".join(f"{b}:{r}" for b, r in GLOO_SIZES.values())
    cases, alphas = [], {}
    for name, nodes in RINGS.items():
        tag = name.replace(" ", "-").replace(",", "")
        steps = {"allreduce": "--tp 1", "chain": f"--tp 1 --pp {len(nodes)}"}
        lines = [_alpha_step(work, tag, nodes)] + [
            f"timeout 300 {_launcher()} {opts} -- {_gloo_step(work, f'gloo-{tag}-{op}.store', op, sizes)}"
            for op, opts in steps.items()
        ]
        sbatch = [f"-N{len(nodes)}", "-w", ",".join(nodes), "--ntasks-per-node=1", "--gres=gpu:1"]
        _gloo_submit(slurm, work, tag, lines, sbatch)
        for op, us in _alphas(work, tag, nodes).items():
            alphas[name, op] = us
        for op in steps:
            recs = _gloo_records(work, f"gloo-{tag}-{op}.store", len(nodes))
            order = tuple(
                r["node"] for r in recs
            )  # slurmd's SLURMD_NODENAME per rank: gpulayer-srun's layout
            assert sorted(order) == sorted(nodes), recs
            for size, (nbytes, _) in GLOO_SIZES.items():
                seconds = _seconds(recs, op, size, len(nodes))
                cases.append(gloo_check.Case(op, name, order, nbytes, size, seconds))
    return cases, alphas


def gloo_predictions(
    work: Path,
    cases: list[gloo_check.Case],
    alphas: dict[tuple[str, str], float],
    bw: float = 1.0,
    lat: float = 1.0,
) -> list[float]:
    """The model's seconds per case on its gloo table (calibrate's links + the α its job measured for its
    op), written as inventory files and read as any links: table is; ``bw``/``lat`` scale the terms."""
    links = yaml.safe_load((work / "links.yaml").read_text())["links"]
    out = []
    for c in cases:
        tag = c.placement.replace(" ", "-").replace(",", "")
        path = work / f"gloo-links-{tag}-{c.op}-bw{bw:g}-lat{lat:g}.yaml"
        doc = gloo_check.gloo_table(links, alphas[c.placement, c.op], bandwidth_scale=bw, latency_scale=lat)
        path.write_text(yaml.safe_dump({**doc, "nodes": []}, sort_keys=False))
        inv = load_inventories([work / "fleet.yaml", path])
        out.append(gloo_check.predict(Fabric.of(inv), inv.links, c))
    return out


@pytest.mark.quiet  # rates and latencies: nothing else runs meanwhile
def test_a_real_gloo_job_through_gpulayer_srun_takes_what_the_model_predicts(shaped, request) -> None:  # type: ignore[no-untyped-def]
    """torch.distributed (gloo, CPU) through gpulayer-srun on a placement of every class: an all-reduce over
    every rank and a send/recv chain through the pipeline stages gpulayer-srun laid out, at 4 MiB (the
    bandwidth term) and 256 B (the latency term: gloo's software α per exchange, measured in the same job
    on the placement's first node, added to calibrate's wire latency; gloo_check.py). The calibrated model
    passes the check; the same table with its bandwidth off by 2x or its latency by 3x, either way, fails
    it on the same measurements; the 4 MiB chains rank the placements as the model does."""
    slurm, work = shaped
    if not (work / "links.yaml").exists():
        pytest.fail(
            "needs links.yaml from test_calibrate_recovers_each_shaped_rate_and_the_model_ranks_by_it"
        )
    if importlib.util.find_spec("torch") is None:
        pytest.fail("torch is not installed here: pip install '.[testbed]' (.ci/run: torch==2.13.0+cpu)")

    def measure():  # type: ignore[no-untyped-def]
        cases, alphas = gloo_cases(slurm, work)
        return alphas, cases, gloo_predictions(work, cases, alphas)

    def missed(cases, predicted) -> list[str]:  # type: ignore[no-untyped-def]
        chains = [
            (c, p) for c, p in zip(cases, predicted, strict=True) if c.op == "chain" and c.size == "large"
        ]
        by_model = [c.placement for c, _ in sorted(chains, key=lambda cp: cp[1])]
        ranked = by_model == [c.placement for c, _ in sorted(chains, key=lambda cp: cp[0].measured)]
        return gloo_check.failures(cases, predicted) + ([] if ranked else ["the 4 MiB chains rank otherwise"])

    # A load spike on the shared 2-core machine moves a 256 B run 2-5x: a measurement that misses is taken
    # once more, from the α on, and the second one is judged (a model off by 2x misses both: the broken tables
    # below are judged on the same measurement)
    alphas, cases, predicted = measure()
    first = missed(cases, predicted)
    if first:
        say(
            request.config,
            f"{request.node.name}: first measurement missed ({'; '.join(first)}); measured again",
        )
        alphas, cases, predicted = measure()
    table = "\n".join(
        [
            "gloo α per exchange (µs): "
            + ", ".join(f"{op}@{pl} {us:.0f}" for (pl, op), us in alphas.items()),
            "| placement | ranks' nodes | op | bytes | predicted (ms) | measured (ms) | measured/predicted |",
            *gloo_check.table_lines(cases, predicted),
        ]
    )
    print(table)  # pytest -s: the table benchmarks/results/shaped_network.md shows
    assert not gloo_check.failures(cases, predicted), (gloo_check.failures(cases, predicted), table)
    chains = [(c, p) for c, p in zip(cases, predicted, strict=True) if c.op == "chain" and c.size == "large"]
    by_model = [c.placement for c, _ in sorted(chains, key=lambda cp: cp[1])]
    assert by_model == [c.placement for c, _ in sorted(chains, key=lambda cp: cp[0].measured)], table
    # a term off by the factor its size's band is half of (gloo_check.MEAN_BAND): bandwidth 2x, latency 3x
    for bw, lat, broken in ((2, 1, "large"), (0.5, 1, "large"), (1, 3, "small"), (1, 1 / 3, "small")):
        found = gloo_check.failures(cases, gloo_predictions(work, cases, alphas, bw, lat))
        print(f"links: bandwidth x{bw:g}, latency x{lat:g}: " + ("; ".join(found) or "passes"))
        assert any(f" {broken}" in line for line in found), (bw, lat, found, table)
