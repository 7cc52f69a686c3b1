"""``slurm-topo metrics``: the exposition read back with prometheus_client's own parser, on what the real
daemons of every release printed (tests/fixtures/real/slurm-<X.Y>/), with the numbers computed again by the
project's own functions (capacity), never typed in; hostile job fields never reach a label."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from fakes import ScriptedRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from slurm_topo.access.jobs import jobs_from_json
from slurm_topo.access.text import parse_scontrol_nodes
from slurm_topo.inventory import load_inventories
from slurm_topo.reports import metrics as m
from slurm_topo.reports.capacity import capacity, node_states

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
RELEASES = ("slurm-22.05", "slurm-24.11", "slurm-26.05")
SHAPES = ((2, 2), (4, 2), (2, 8))


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by (name, sorted labels), through prometheus_client's parser."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, key
            out[key] = s.value
    return out


def snapshot(release: str, now: float = 2e9) -> m.Snapshot:
    folder = REAL / release
    inv = load_inventories([folder / "inventory.yaml"])
    nodes = parse_scontrol_nodes((folder / "scontrol-show-node-o.txt").read_text())
    listing = jobs_from_json((folder / "squeue-json.txt").read_text())
    states, extra = node_states(inv, nodes)
    cap = capacity(inv, states, SHAPES, extra_nodes=extra)
    data = m.data_file_state(folder / "slurm_topo_data.lua", now)
    return m.Snapshot(now, cap, listing.jobs, nodes, data, len(listing.refused), ("nodes", "jobs"))


@pytest.mark.parametrize("release", RELEASES)
def test_the_exposition_of_real_slurm_parses_and_says_what_the_project_computes(release: str) -> None:
    snap = snapshot(release)
    got = samples(m.exposition(snap).decode())
    assert snap.capacity is not None
    for shape in snap.capacity.shapes:
        assert got[("slurm_topo_capacity_naive_jobs", (("shape", shape.shape),))] == shape.naive_jobs
        for lv in shape.levels:
            key = (("level", lv.level), ("shape", shape.shape))
            assert got[("slurm_topo_capacity_jobs", key)] == lv.jobs
            assert got[("slurm_topo_capacity_stranded_gpus", key)] == lv.stranded_gpus
            assert got[("slurm_topo_capacity_groups", key)] == lv.groups
    assert got[("slurm_topo_gpus", (("state", "free"),))] == snap.capacity.free_gpus
    # every job of the capture carries a filter record; job 4's name forges Reason=Priority: Slurm's own
    # reason (the hold) is what counts
    loc = {k[1]: v for k, v in got.items() if k[0] == "slurm_topo_locality_jobs"}
    assert sum(loc.values()) == len(snap.jobs) == 4
    held = {k: v for k, v in loc.items() if dict(k)["reason"] == "JobHeldUser"}
    assert sum(held.values()) == 2
    assert not any(dict(k)["reason"] == "Priority" for k in loc)
    assert got[("slurm_topo_filter_not_applied_jobs", ())] == 0
    capture = json.loads((REAL / release / "capture.json").read_text())
    drained = [n for n in snap.nodes if (n.get("Reason") or "").startswith(m.HEALTH_PREFIX)]
    assert sum(v for k, v in got.items() if k[0] == "slurm_topo_health_drained_nodes") == len(drained)
    assert capture  # the capture's facts are there to read
    path = str(REAL / release / "slurm_topo_data.lua")
    assert got[("slurm_topo_data_file_present", (("path", path),))] == 1
    assert got[("slurm_topo_source_up", (("source", "jobs"),))] == 1


def test_every_documented_metric_is_in_docs_and_every_family_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "report.md").read_text()
    for name, (_, _, labels) in m.METRICS.items():
        assert f"`{m.PREFIX}{name}`" in doc, name
        for label in labels:
            assert f"`{label}`" in doc, (name, label)
    emitted = {f.name for f in text_string_to_metric_families(m.exposition(snapshot(RELEASES[1])).decode())}
    assert emitted <= {m.PREFIX + n for n in m.METRICS}


def test_fail_open_relax_and_health_records_are_counted() -> None:
    jobs = [
        {
            "JobState": "PENDING",
            "Reason": "Priority",
            "AdminComment": "slurm-topo: not applied: no data file",
        },
        {
            "JobState": "RUNNING",
            "Reason": "None",
            "AdminComment": "slurm-topo-auto: zone limit=60s region=0s any=0s; "
            "slurm-topo: zone:auto [a(2n)]; "
            "slurm-topo-relax: zone->region waited=61s budget=60s at=2026-01-01T00:00:00",
        },
    ]
    nodes = [
        {"NodeName": "a1", "Reason": "slurm-topo-health: mlx5_0/1 state DOWN"},
        {"NodeName": "a2", "Reason": "slurm-topo-health: gpu0/nvlink3 inactive"},
        {"NodeName": "a3", "Reason": "an admin's drain"},
    ]
    got = samples(m.exposition(m.Snapshot(1.0, jobs=jobs, nodes=nodes, sources=("nodes", "jobs"))).decode())
    assert got[("slurm_topo_filter_not_applied_jobs", ())] == 1
    assert got[("slurm_topo_relaxed_jobs", (("from_level", "zone"), ("to_level", "region")))] == 1
    assert got[("slurm_topo_health_drained_nodes", (("link", "mlx5_0/1"),))] == 1
    assert got[("slurm_topo_health_drained_nodes", (("link", "gpu0/nvlink3"),))] == 1
    assert got[
        ("slurm_topo_locality_jobs", (("locality", "zone:auto"), ("reason", "None"), ("state", "RUNNING")))
    ]


_TEXT = st.text(st.characters(codec="utf-8"), max_size=80)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(st.fixed_dictionaries({"JobState": _TEXT, "Reason": _TEXT, "AdminComment": _TEXT}), max_size=6),
    st.lists(st.fixed_dictionaries({"NodeName": _TEXT, "Reason": _TEXT}), max_size=4),
)
def test_any_field_text_gives_a_parsable_exposition_with_labels_from_fixed_vocabularies(
    jobs: list[dict[str, str]], nodes: list[dict[str, str]]
) -> None:
    """Whatever the fields hold (a job's AdminComment record may quote what a user gave), every label value
    fits its pattern or is ``other``, and the counts add up to the records counted."""
    for job in jobs:
        job["AdminComment"] = "slurm-topo: " + job["AdminComment"]
    text = m.exposition(m.Snapshot(1.0, jobs=jobs, nodes=nodes, sources=("nodes", "jobs"))).decode()
    got = samples(text)
    for (name, labels), _ in got.items():
        for key, value in labels:
            pattern = {
                "reason": m._REASON_RE,
                "state": m._STATE_RE,
                "locality": m._LOCALITY_RE,
                "link": m._LINK_RE,
                "from_level": None,
                "to_level": None,
                "source": None,
            }[key]
            assert value == m.OTHER or pattern is None or pattern.fullmatch(value), (name, key, value)
    drains = sum(v for (n, _), v in got.items() if n == "slurm_topo_health_drained_nodes")
    assert drains == sum(1 for n in nodes if n["Reason"].startswith(m.HEALTH_PREFIX))


def test_the_textfile_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "slurm_topo.prom"
    m.write_textfile(path, snapshot(RELEASES[0]))
    before = path.read_bytes()
    assert samples(before.decode())
    broken = m.Snapshot(1.0, capacity=object())  # type: ignore[arg-type]  # collect() fails half-way
    with pytest.raises(AttributeError):
        m.write_textfile(path, broken)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slurm_topo.prom"]


def test_read_snapshot_through_the_access_layer_and_a_failed_source(tmp_path: Path) -> None:
    folder = REAL / "slurm-24.11"
    runner = ScriptedRunner(
        {
            "scontrol -d show node -o": (folder / "scontrol-show-node-o.txt").read_text(),
            "squeue --json": (folder / "squeue-json.txt").read_text(),
        }
    )
    inv = load_inventories([folder / "inventory.yaml"])
    sources = m.Sources(inv, SHAPES, tmp_path / "missing.lua")
    snap = m.read_snapshot(sources, runner, now=5.0)
    assert snap.errors == {} and len(snap.jobs) == 4 and snap.capacity is not None
    got = samples(m.exposition(snap).decode())
    assert got[("slurm_topo_data_file_present", (("path", str(tmp_path / "missing.lua")),))] == 0
    failing = ScriptedRunner({"squeue --json": (folder / "squeue-json.txt").read_text()})
    snap = m.read_snapshot(sources, failing, now=5.0)
    assert set(snap.errors) == {"nodes"} and snap.capacity is None
    got = samples(m.exposition(snap).decode())
    assert got[("slurm_topo_source_up", (("source", "nodes"),))] == 0
    assert not any(k[0].startswith("slurm_topo_capacity") for k in got)


def test_listen_serves_one_read_per_interval() -> None:
    reads = []

    def produce() -> m.Snapshot:
        reads.append(1)
        return snapshot(RELEASES[2], now=float(len(reads)))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = m.serve(port, "127.0.0.1", produce, min_interval=3600)
    try:
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                got = samples(r.read().decode())
        assert got[("slurm_topo_snapshot_timestamp_seconds", ())] == 1.0
        assert len(reads) == 1
    finally:
        if isinstance(server, tuple):
            server[0].shutdown()
            server[0].server_close()


def test_the_systemd_unit_writes_the_textfile_on_a_timer() -> None:
    root = Path(__file__).resolve().parents[1] / "contrib" / "systemd"
    assert ' metrics --textfile "$TEXTFILE" ' in (root / "slurm-topo-metrics.service").read_text()
    assert "OnUnitInactiveSec=1min" in (root / "slurm-topo-metrics.timer").read_text()
