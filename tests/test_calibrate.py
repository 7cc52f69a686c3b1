"""slurm-topo calibrate: the TCP probe over real sockets (its arithmetic checked with an injected clock),
the pairs it picks per level, the table it writes (monotone, with its measured: record), and cost/explain
naming a measured table. The srun steps themselves run on real Slurm in
tests/integration/test_calibrate_on_real_slurm.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from slurm_topo.core.errors import CommandError, InputError, PlacementError
from slurm_topo.cost import DEFAULT_TABLE, parse_links
from slurm_topo.cost.calibrate import (
    Measurement,
    Pair,
    calibrated_table,
    choose_pairs,
    probe_argv,
    read_probe,
    render,
    run_calibration,
)
from slurm_topo.inventory import load_inventories, parse_inventory
from slurm_topo.probes import parse_addresses, tcp, tcp_task

FLEET = {
    "nodes": [
        {"name": "a[1-3]", "region": "eu", "zone": "eu-1", "network_group": "leaf-1"},
        {"name": "b[1-2]", "region": "eu", "zone": "eu-1", "network_group": "leaf-2"},
        {"name": "c1", "region": "eu", "zone": "eu-2", "network_group": "leaf-3"},
        {"name": "d1", "region": "us", "zone": "us-1", "network_group": "leaf-4"},
    ]
}


def _inventory(fleet: dict[str, object] = FLEET):  # type: ignore[no-untyped-def]
    from slurm_topo.inventory import merge

    return merge([parse_inventory(yaml.safe_dump(fleet), source="fleet.yaml")])


class Ticks:
    """A clock returning the given instants in order (the probe's only source of time)."""

    def __init__(self, instants: list[float]) -> None:
        self.instants = iter(instants)

    def __call__(self) -> float:
        return next(self.instants)


class Served(dict[str, int]):
    """What the serving thread received (``bytes``), once :meth:`done` has waited for it."""

    thread: threading.Thread

    def done(self) -> int:
        self.thread.join(20)
        return self["bytes"]


@pytest.fixture
def server() -> Iterator[tuple[int, Served]]:
    sock = tcp.listen(0, "127.0.0.1")
    got = Served()
    got.thread = threading.Thread(target=lambda: got.update(bytes=tcp.serve(sock, timeout=20)), daemon=True)
    got.thread.start()
    yield sock.getsockname()[1], got
    got.thread.join(20)
    sock.close()


def test_tcp_probe_arithmetic_over_a_real_connection(server: tuple[int, Served]) -> None:
    port, got = server
    pings, repeats, nbytes = 4, 3, 1 << 20
    # each ping: 2 ms round trip; each transfer: 10 ms (8 ms after the round trip is taken off), 12, 9
    t, instants = 0.0, []
    for _ in range(pings):
        instants += [t, t + 0.002]
        t += 0.01
    for took in (0.010, 0.012, 0.009):
        instants += [t, t + took]
        t += 1
    with tcp.connect("127.0.0.1", port, deadline_s=10) as sock:
        result = tcp.measure(sock, nbytes=nbytes, repeats=repeats, pings=pings, clock=Ticks(instants))
    assert result.latency_us == pytest.approx(1000.0)  # half the 2 ms round trip
    rates = [nbytes / s / 1e9 for s in (0.008, 0.010, 0.007)]
    assert result.bandwidths == pytest.approx(tuple(rates))
    assert result.bandwidth == pytest.approx(sorted(rates)[1])  # the median
    # the server really received every byte: the uncounted 1 MiB warm-up and the three transfers
    assert got.done() == nbytes * (repeats + 1)


def test_tcp_probe_measures_loopback_with_the_real_clock(server: tuple[int, Served]) -> None:
    port, _ = server
    with tcp.connect("127.0.0.1", port, deadline_s=10) as sock:
        result = tcp.measure(sock, nbytes=4 << 20, repeats=2, pings=10)
    assert result.bandwidth > 0 and result.latency_us > 0
    assert len(result.bandwidths) == 2


def test_connect_gives_up_with_a_clear_error() -> None:
    sock = tcp.listen(0, "127.0.0.1")
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    waits: list[float] = []
    with pytest.raises(CommandError, match="cannot connect"):
        tcp.connect("127.0.0.1", port, deadline_s=1.0, sleep=waits.append)
    assert len(waits) == 5  # 1 s of 0.2 s waits, taken from the injected sleep, not the clock


def test_probe_task_needs_a_slurm_step() -> None:
    with pytest.raises(InputError, match="two-task srun step"):
        tcp_task({}, port=1, addresses={})
    with pytest.raises(InputError, match="NODE=ADDRESS"):
        parse_addresses(["n1"])
    assert parse_addresses(["n1=10.0.0.1", "n2=fe80::1"]) == {"n1": "10.0.0.1", "n2": "fe80::1"}


def test_probe_tasks_talk_through_the_step_environment() -> None:
    """Task 0 serves on the step's first node, task 1 finds it through --address and reports."""
    sock = tcp.listen(0, "127.0.0.1")
    port = sock.getsockname()[1]
    sock.close()
    env = {"SLURM_STEP_NODELIST": "n[7-8]"}
    out: dict[str, str] = {}

    def serve() -> None:
        out["serve"] = tcp_task(
            {**env, "SLURM_PROCID": "0", "SLURMD_NODENAME": "n7"}, port=port, addresses={}
        )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    line = tcp_task(
        {**env, "SLURM_PROCID": "1", "SLURMD_NODENAME": "n8"},
        port=port,
        addresses={"n7": "127.0.0.1"},
        nbytes=1 << 20,
        repeats=1,
        pings=5,
        timeout=20,
    )
    thread.join(20)
    measure, serve_rec = json.loads(line), json.loads(out["serve"])
    assert measure["slurm_topo_probe"] == "measure" and measure["node"] == "n8" and measure["server"] == "n7"
    assert serve_rec == {"slurm_topo_probe": "serve", "node": "n7", "bytes_received": 2 << 20}
    pair = Pair("network_group", "n7", "n8")
    got = read_probe(pair, f"{out['serve']}\n{line}\n")
    assert got.bandwidth == measure["bandwidth"] and got.latency_us == measure["latency_us"]


def test_pairs_one_per_level_the_nodes_can_show() -> None:
    inv = _inventory()
    pairs, notes = choose_pairs(inv, ["d1", "c1", "b2", "b1", "a3", "a2", "a1"])
    assert [(p.level, p.a, p.b) for p in pairs] == [
        ("network_group", "a1", "a2"),
        ("zone", "a1", "b1"),
        ("region", "a1", "c1"),
        ("any", "a1", "d1"),
    ]
    assert notes == []
    pairs, notes = choose_pairs(inv, ["a1", "b1"])
    assert [p.level for p in pairs] == ["zone"]
    assert [n.split(":")[0] for n in notes] == ["network_group", "region", "any"]
    with pytest.raises(InputError, match="not in the inventory"):
        choose_pairs(inv, ["a1", "zz9"])


def test_probe_argv_is_one_task_per_node_with_addresses() -> None:
    argv = probe_argv(
        Pair("zone", "a1", "b1"), ["slurm-topo"], {"a1": "10.0.0.1"}, port=47123, nbytes=1000, repeats=2
    )
    assert argv[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=a1,b1"]
    i = argv.index("slurm-topo")
    assert argv[i : i + 3] == ["slurm-topo", "probe", "tcp"]
    assert argv[-4:] == ["--address", "a1=10.0.0.1", "--address", "b1=b1"]


def test_a_probe_that_ran_elsewhere_is_refused() -> None:
    line = json.dumps({"slurm_topo_probe": "measure", "node": "x9", "bandwidth": 1.0, "latency_us": 5.0})
    with pytest.raises(PlacementError, match="ran on"):
        read_probe(Pair("zone", "a1", "b1"), line)
    with pytest.raises(InputError, match="no measurement"):
        read_probe(Pair("zone", "a1", "b1"), "srun: error: something\n")
    bad = json.dumps({"slurm_topo_probe": "measure", "node": "a1", "bandwidth": -1, "latency_us": 5.0})
    with pytest.raises(InputError, match="not usable"):
        read_probe(Pair("network_group", "a1", "a1"), bad)


def _m(level: str, bandwidth: float, latency_us: float) -> Measurement:
    return Measurement(Pair(level, "a1", "b1"), "tcp", bandwidth, latency_us, {"bytes": 1})


def test_table_stays_monotone_and_says_what_it_held() -> None:
    table, notes = calibrated_table(DEFAULT_TABLE, [_m("network_group", 1.2, 40.0), _m("zone", 1.3, 30.0)])
    assert table["network_group"].bandwidth == 1.2
    # zone measured faster and nearer than the leaf: held at the leaf's figures
    assert (table["zone"].bandwidth, table["zone"].latency_us) == (1.2, 40.0)
    # region and any not measured: their defaults (12, 5 GB/s) are above the measured 1.2, held too
    assert table["region"].bandwidth == 1.2 and table["any"].bandwidth == 1.2
    assert table["region"].latency_us == DEFAULT_TABLE["region"].latency_us
    assert [n.split(":")[0] for n in notes] == ["zone", "region", "any"]
    assert "not measured" in notes[1]
    assert table["nvlink"] == DEFAULT_TABLE["nvlink"]  # the TCP probe never touches node levels
    assert table.given == {"network_group", "zone"}  # the measured levels are the site's; nvlink is not


def test_written_file_reads_back_as_links_and_as_an_inventory(tmp_path: Path) -> None:
    measured = [_m("network_group", 2.5, 30.0), _m("zone", 1.0, 120.0)]
    table, notes = calibrated_table(DEFAULT_TABLE, measured)
    text = render(table, measured, probe="tcp", notes=notes, now=datetime(2026, 12, 2, 17, 0, tzinfo=UTC))
    doc = yaml.safe_load(text)
    assert doc["links"]["measured"]["levels"]["zone"]["pair"] == ["a1", "b1"]
    back = parse_links(doc["links"], source="calibrated.yaml: links")
    assert back.links == table.links
    assert back.measured is not None and back.measured.levels == ("network_group", "zone")
    assert back.measured.text().startswith(
        "links measured by slurm-topo calibrate (tcp, 2026-12-02T17:00:00Z)"
    )
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(FLEET))
    (tmp_path / "links.yaml").write_text(text)
    inv = load_inventories([tmp_path / "fleet.yaml", tmp_path / "links.yaml"])
    assert len(inv.nodes) == 7 and inv.links.links == table.links


def test_bad_measured_record_is_one_clear_error() -> None:
    with pytest.raises(InputError, match=r"links\.measured\.levels: 'rack'"):
        parse_links({"measured": {"date": "2026-12-02", "probe": "tcp", "levels": {"rack": {}}}})
    with pytest.raises(InputError, match=r"links\.measured\.date"):
        parse_links({"measured": {"probe": "tcp"}})


class StepRunner:
    """Answers calibrate's srun steps as a pair of probe tasks would: fixed figures per level, each task's
    node as asked (or ``wrong`` for one level); records the argv."""

    def __init__(self, figures: dict[str, tuple[float, float]], fail: str = "") -> None:
        self.figures, self.fail, self.calls = figures, fail, []  # type: ignore[var-annotated]
        self.stderr = "srun: error: Unable to create step"

    def run(self, argv: list[str], timeout: float = 30.0) -> str:
        self.calls.append(argv)
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1].split(",")
        level = {("a1", "a2"): "network_group", ("a1", "b1"): "zone", ("a1", "c1"): "region"}[tuple(nodes)]
        if level == self.fail:
            raise CommandError(argv, 1, self.stderr)
        bandwidth, latency = self.figures[level]
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


def test_run_calibration_goes_on_past_a_failed_pair() -> None:
    runner = StepRunner(
        {"network_group": (3.0, 20.0), "zone": (1.5, 50.0), "region": (0.2, 900.0)}, fail="zone"
    )
    done = run_calibration(
        _inventory(),
        ["a1", "a2", "b1", "c1"],
        runner,
        base=DEFAULT_TABLE,
        probe_command=["slurm-topo"],
        addresses={},
        port=47123,
        nbytes=1 << 20,
        repeats=1,
    )
    assert [m.pair.level for m in done.measured] == ["network_group", "region"]
    assert done.table["region"].bandwidth == 0.2
    assert done.table["zone"].bandwidth == 3.0  # not measured; its default 25 held at the leaf's 3.0
    assert any(n.startswith("zone (a1 <-> b1): ") and "Unable to create step" in n for n in done.notes)
    assert len(runner.calls) == 3
    with pytest.raises(CommandError, match="no level could be measured"):
        run_calibration(
            _inventory(),
            ["a1", "b1"],
            StepRunner({}, fail="zone"),
            base=DEFAULT_TABLE,
            probe_command=["slurm-topo"],
            addresses={},
            port=47123,
            nbytes=1,
            repeats=1,
        )


class FailingSteps:
    """Every probe step fails as srun does when the probe task cannot connect: the task's own error line,
    then srun's lines after it (the last one says nothing of why)."""

    STDERR = (
        "slurm-topo: error: probe tcp: cannot connect to a1 at 10.0.0.1:47123 within 120 s: "
        "[Errno 113] No route to host (a firewall between the leaves?)\n"
        "srun: error: b1: task 1: Exited with exit code 3\n"
        "srun: Terminating StepId=77.3\n"
    )

    def run(self, argv: list[str], timeout: float = 30.0) -> str:
        raise CommandError(argv, 1, self.STDERR)


def test_a_failed_step_keeps_its_whole_reason_on_one_line() -> None:
    """The reason is whole however long the step's srun line is (it was cut at 300 characters, which a long
    --probe-command and the addresses use up before the reason starts), its lines joined into one, and the
    pairs that failed alike are named once with it."""
    probe_command = ["/opt/site/venvs/slurm-topo-" + "x" * 200 + "/bin/python", "-m", "slurm_topo"]
    addresses = {n: f"{n}.compute.cluster.example.org" for n in ("a1", "a2", "b1", "c1")}
    args = dict(base=DEFAULT_TABLE, probe_command=probe_command, addresses=addresses, port=47123, nbytes=1)
    with pytest.raises(CommandError) as caught:
        run_calibration(_inventory(), ["a1", "a2", "b1", "c1"], FailingSteps(), repeats=1, **args)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == 3
    assert message == (
        "calibrate: no level could be measured: network_group (a1 <-> a2), zone (a1 <-> b1), region "
        "(a1 <-> c1): srun exited 1: " + " / ".join(FailingSteps.STDERR.strip().splitlines())
    )
    assert "could not be started" not in message


def test_a_failed_pair_beside_measured_ones_is_a_whole_note() -> None:
    runner = StepRunner({"network_group": (3.0, 20.0), "region": (0.2, 900.0)}, fail="zone")
    runner.stderr = "srun: error: Unable to create step for job 77: " + ", ".join(["not available"] * 40)
    runner.stderr += "\nsrun: error: second line"
    done = run_calibration(
        _inventory(),
        ["a1", "a2", "b1", "c1"],
        runner,
        base=DEFAULT_TABLE,
        probe_command=["slurm-topo"] * 40,
        addresses={},
        port=47123,
        nbytes=1,
        repeats=1,
    )
    (note,) = [n for n in done.notes if n.startswith("zone ")]
    assert note == (
        f"zone (a1 <-> b1): srun exited 1: {runner.stderr.splitlines()[0]} / srun: error: second line "
        "(not measured)"
    )


def test_cost_names_a_measured_table(tmp_path: Path) -> None:
    measured = [_m("network_group", 2.5, 30.0), _m("zone", 1.0, 120.0)]
    table, notes = calibrated_table(DEFAULT_TABLE, measured)
    (tmp_path / "links.yaml").write_text(render(table, measured, probe="tcp", notes=notes))
    fleet = {"nodes": [{**e, "gpus": 8} for e in FLEET["nodes"]]}  # type: ignore[dict-item]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    argv = [
        sys.executable,
        "-m",
        "slurm_topo",
        "cost",
        "-i",
        str(tmp_path / "fleet.yaml"),
        "--nodes",
        "a1,b1",
    ]
    argv += ["--allreduce-bytes", "10G", "--comm-only"]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    calibrated = subprocess.run(
        [*argv, "--links", str(tmp_path / "links.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "links measured" not in plain
    assert "links measured by slurm-topo calibrate (tcp, " in calibrated
    assert "zone (1 GB/s, 120 µs/hop)" in calibrated and "zone (25 GB/s" in plain


def test_a_name_that_does_not_resolve_fails_fast() -> None:
    waits: list[float] = []
    with pytest.raises(CommandError, match="cannot connect"):
        tcp.connect("no-such-node.invalid", 1, deadline_s=600, sleep=waits.append)
    assert len(waits) == 9  # ten tries, not 3 000


@pytest.mark.parametrize(
    "date", ["2026-12-02\n-- slurm = nil", "yesterday", "2026-12-02T17:00:00Z; rm", "x" * 41, 20261202]
)
def test_a_measured_date_is_one_token(date: object) -> None:
    """The record reaches the submit-filter data's header: a value that could start a new line of Lua there
    (or is no date at all) is refused."""
    with pytest.raises(InputError, match=r"links\.measured\.date"):
        parse_links({"measured": {"date": date, "probe": "tcp", "levels": {}}})
    with pytest.raises(InputError, match=r"links\.measured\.probe"):
        parse_links({"measured": {"date": "2026-12-02", "probe": "tcp\nx", "levels": {}}})
    unquoted = yaml.safe_load("measured: {date: 2026-12-02T17:00:00Z, probe: tcp, levels: {}}")
    assert parse_links(unquoted).measured.date.startswith("2026-12-02T17:00:00")  # type: ignore[union-attr]


def test_generate_says_the_auto_budgets_come_from_the_measured_table(tmp_path: Path) -> None:
    measured = [_m("network_group", 2.5, 30.0), _m("zone", 1.0, 120.0)]
    table, notes = calibrated_table(DEFAULT_TABLE, measured)
    (tmp_path / "links.yaml").write_text(
        render(table, measured, probe="tcp", notes=notes, now=datetime(2026, 12, 2, tzinfo=UTC))
    )
    fleet = {"policy": {"plan": "dp=16,bytes=10G"}, "nodes": [{**e, "gpus": 8} for e in FLEET["nodes"]]}
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    outputs = {}
    for name, files in (("plain", ["fleet.yaml"]), ("measured", ["fleet.yaml", "links.yaml"])):
        argv = [
            sys.executable,
            "-m",
            "slurm_topo",
            "generate",
            "--slurm-version",
            "22.05",
            "-o",
            str(tmp_path / name),
        ]
        for f in files:
            argv += ["-i", str(tmp_path / f)]
        subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        outputs[name] = (tmp_path / name / "slurm_topo_data.lua").read_text()
    said = "auto budgets from the links measured by slurm-topo calibrate (tcp, 2026-12-02T00:00:00Z)"
    assert said in outputs["measured"].splitlines()[4] and said not in outputs["plain"]
    # the budgets themselves changed: the measured zone is 25× slower than the default one
    assert outputs["measured"].split("auto_units=")[1] != outputs["plain"].split("auto_units=")[1]


def test_ring_allreduce_moves_two_p_minus_one_chunks_on_every_rank() -> None:
    """Three ranks on 127.0.0.1-3 (one port, as on three hosts): every rank finishes, rank 0 reports."""
    from slurm_topo.probes.ring import ring_task

    port = tcp.listen(0, "127.0.0.1")
    number = port.getsockname()[1]
    port.close()
    nodes = {f"r{i}": f"127.0.0.{i}" for i in (1, 2, 3)}
    env = {"SLURM_STEP_NODELIST": "r[1-3]", "SLURM_NTASKS": "3"}
    out: dict[int, str] = {}

    def rank(r: int) -> None:
        out[r] = ring_task(
            {**env, "SLURM_PROCID": str(r), "SLURMD_NODENAME": f"r{r + 1}"},
            port=number,
            addresses=nodes,
            nbytes=3 << 20,
            repeats=2,
            bind=f"127.0.0.{r + 1}",
            timeout=30,
        )

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in (1, 2, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    recs = {r: json.loads(line) for r, line in out.items()}
    assert sorted(recs) == [0, 1, 2]
    assert recs[0]["ranks"] == 3 and recs[0]["bytes"] == 3 << 20 and len(recs[0]["runs"]) == 2
    assert recs[0]["seconds"] > 0 and "seconds" not in recs[1]
    with pytest.raises(InputError, match="one task per node"):
        ring_task({**env, "SLURM_PROCID": "0", "SLURM_NTASKS": "6"}, port=1, addresses={}, nbytes=1)
