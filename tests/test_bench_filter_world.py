"""benchmarks/bench_filter_world.py's generators and driver, at tiny sizes (issue 44, item 2).

The fleets it draws load through the real inventory loader and generator (every node, each partition's
members, every NVLink rack); the request shapes, read back by the filter's own reader (policy/request.py
``JobRequest``, not the generator's labels), cover every field and form the benchmark promises (``FIELDS``);
and benchmarks/world_bench.lua runs a family through the real filter in plain lua5.1, each decision without
an error. No timing is asserted: the benchmark measures, the tests check it measures the right thing.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from preconditions import unavailable

from slurm_topo import load_inventories
from slurm_topo.access.text import parse_scontrol_partitions
from slurm_topo.core import hostlist
from slurm_topo.policy.request import JobRequest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "bench_filter_world", REPO / "benchmarks" / "bench_filter_world.py"
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["bench_filter_world"] = bench
_spec.loader.exec_module(bench)

SEEDS = (3, 17, 2024)


def _lua_job(job: Mapping[str, Any]) -> dict[Any, Any]:
    """A shape's job as job_submit/lua hands it to the filter (spank_job_env 0-indexed)."""
    out = dict(job)
    if "spank_job_env" in out:
        out["spank_job_env"] = dict(enumerate(out["spank_job_env"]))
    return out


@dataclass(frozen=True)
class Seen:
    """What the reader of a shape knows of its fleet."""

    gpu_types: frozenset[str]
    own: frozenset[str]
    partitions: frozenset[str]
    names: frozenset[str]
    locations: frozenset[str]

    @classmethod
    def of(cls, fleet: Any) -> Seen:
        return cls(
            frozenset(r.kind.gpu_type for r in fleet.racks if r.kind.gpu_type),
            frozenset(f for r in fleet.racks for f in r.kind.features),
            frozenset(fleet.partitions),
            frozenset(n for r in fleet.racks for n in r.names),
            frozenset(fleet.location_features),
        )


def _read_locality(req: JobRequest, job: Mapping[str, Any]) -> set[str]:
    """Where the locality came from, its level and its mode (a value the filter refuses: level:bad and
    mode:bad)."""
    if req.locality is None:
        return {"locality:none", "mode:none"}
    spank = " ".join(job.get("spank_job_env", []))
    seen = {
        "locality:spank"
        if f"{bench.SPANK}locality=" in spank
        else "locality:environment"
        if "environment" in job
        else "locality:comment"
    }
    level, sep, mode = req.locality.partition(":")
    plain = level in ("prefer", "any")
    valid = level in bench.LEVELS and (not sep if plain else not sep or mode in ("wait", "fail", "auto"))
    if not valid or (level == "nvl" and mode == "auto"):
        return seen | {"level:bad", "mode:bad"}
    return seen | {f"level:{level}", "mode:none" if plain else f"mode:{mode or 'wait'}"}


def _read_back(job: Mapping[str, Any], fleet: Seen) -> set[str]:
    """The FIELDS a shape's job exercises, as the filter's own reader sees it (policy/request.py)."""
    req = JobRequest.from_job_desc(_lua_job(job))
    spank = " ".join(job.get("spank_job_env", []))
    seen = _read_locality(req, job)
    if req.min_nodes is not None:
        seen.add("min_nodes")
    if req.num_tasks is not None:
        seen.add("num_tasks")
    if req.gpu is not None:
        seen.add(f"tres_per_{req.gpu.scope}")
        gtype = req.gpu.gpu_type
        seen.add(
            "gpu:untyped"
            if gtype is None
            else "gpu:typed"
            if gtype in fleet.gpu_types
            else "gpu:unknown-type"
        )
    seen |= _read_constraint(req, fleet)
    if req.prefer is not None:
        seen.add("prefer")
    if req.partition is not None:
        names = req.partition.split(",")
        seen.add("partition:several" if len(names) > 1 else "partition:one")
        if any(n not in fleet.partitions for n in names):
            seen.add("partition:unknown")
    seen |= _read_nodes(req, fleet)
    if req.regions is not None:
        seen.add("regions:spank" if "locality_regions=" in spank else "regions:comment")
        if "atlantis" in req.regions.split(","):
            seen.add("regions:unknown")
    seen |= {key for key in ("exc_nodes", "reservation", "contiguous", "admin_comment") if key in job}
    for name, there in (
        ("het_job_offset", req.het_offset is not None),
        ("interactive", req.interactive),
        ("time_limit", req.time_limit is not None),
        ("plan", "_plan=" in spank),
    ):
        if there:
            seen.add(name)
    return seen


def _read_constraint(req: JobRequest, fleet: Seen) -> set[str]:
    text = req.features
    if text is None:
        return set()
    fam = set(bench.TORCH) | set(bench.CUDA)
    if any(c in text for c in "()*"):
        return {"features:complex"}
    if "[" in text:
        return {"features:bracket"}
    names = text.replace("|", "&").split("&")
    if any(n in fleet.locations for n in names):
        return {"features:location"}
    if not all(n in fleet.own | fam for n in names):
        return {"features:unknown"}
    if "|" in text:
        return {"features:or"}
    if "&" in text:
        return {"features:and"}
    return {"features:family" if text in fam else "features:own"}


def _read_nodes(req: JobRequest, fleet: Seen) -> set[str]:
    if req.nodelist is None:
        return set()
    names = hostlist.expand(req.nodelist)
    if not all(n in fleet.names for n in names):
        return {"req_nodes", "nodelist:unknown"}
    return {"req_nodes", "nodelist:range" if "[" in req.nodelist else "nodelist:fleet"}


def _fleet(seed: int, nodes: int, tmp: Path, **fixed: Any) -> Any:
    fleet = bench.make_fleet(bench.draw_spec(seed, nodes, **fixed))
    inv = tmp / f"fleet-{seed}.yaml"
    inv.write_text(bench.inventory_yaml(fleet))
    fleet.location_features = bench.location_features(inv)
    return fleet


@pytest.mark.parametrize("seed", SEEDS)
def test_the_shapes_cover_every_field_the_filter_reads(seed: int, tmp_path: Path) -> None:
    """Read back by policy/request.py, the shapes of one seed's tiny fleet exercise every field and form in
    FIELDS; the generator's own labels say the same as the reader."""
    fleet = _fleet(seed, 60, tmp_path, partitions=3, nvl=1.0, families=2)
    shapes = bench.make_shapes(fleet, 900, seed)
    known = Seen.of(fleet)
    seen: set[str] = set()
    for s in shapes:
        read = _read_back(s.job, known)
        assert read == s.covers, (s.text, sorted(read ^ s.covers))
        seen |= read
    assert seen == set(bench.FIELDS), sorted(set(bench.FIELDS) - seen)
    assert {s.family for s in shapes} == set(bench.FAMILIES)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), nodes=st.integers(1, 400))
@example(seed=1454, nodes=10)  # one rack, drawn region-only: the fleet had no zone
def test_a_drawn_fleet_loads_as_drawn(seed: int, nodes: int, tmp_path: Path) -> None:
    """Any seed's fleet, any size: the real loader reads its inventory with every node at its place and kind,
    and its partitions text back to the members drawn."""
    fleet = bench.make_fleet(bench.draw_spec(seed, nodes))
    inv = tmp_path / f"fleet-{seed}.yaml"
    inv.write_text(bench.inventory_yaml(fleet))
    loaded = {n.name: n for n in load_inventories([inv]).nodes}
    drawn = {n: r for r in fleet.racks for n in r.names}
    assert len(drawn) == fleet.nodes == nodes == len(loaded)
    assert 1 <= len(fleet.zones) <= 200 and len(fleet.regions) >= 1
    for name, rack in drawn.items():
        node = loaded[name]
        assert (node.location.region, node.location.zone) == (rack.region, rack.zone)
        assert (node.gpus or 0, node.gpu_type, node.nvlink_domain) == (
            rack.kind.gpus,
            rack.kind.gpu_type,
            rack.domain,
        )
        assert set(node.features) == set(rack.kind.features) | set(rack.family)
    text = bench.partitions_text(fleet)
    if fleet.partitions:
        assert text is not None
        parsed = {name: set(members) for name, members, _ in parse_scontrol_partitions(text)}
        assert parsed == {p: set(m) for p, m in fleet.partitions.items()}
    else:
        assert text is None


def test_the_driver_runs_a_family_in_plain_lua(tmp_path: Path) -> None:
    """world_bench.lua on a data file the installed generator wrote: one family, every decision made by the
    real filter without raising, a load measured, and the decisions' outcomes not all alike."""
    lua = shutil.which("lua5.1")
    if lua is None:
        unavailable("lua5.1 (the benchmark's interpreter) is not installed")
        return
    fleet = bench.make_fleet(bench.draw_spec(5, 300, partitions=4, nvl=1.0, families=1, rack=10))
    data, _ = bench.generate(fleet, tmp_path, [sys.executable, "-m", "slurm_topo"])
    shapes = [s for s in bench.make_shapes(fleet, 400, 5) if s.family == "zone"]
    assert len(shapes) > 30
    shapes_file = tmp_path / "shapes.lua"
    shapes_file.write_text(bench.shapes_lua(shapes))
    out = bench.run_plain(lua, data, shapes_file, bench.lua_env(None))
    assert len(out["loads"]) == 1 and out["loads"][0] > 0
    assert len(out["decisions"]) == len(shapes)
    assert not any(raised for _, _, raised in out["decisions"]), out["stderr"]
    outcomes = {outcome for outcome, _, _ in out["decisions"]}
    assert "required" in outcomes and len(outcomes) >= 3, outcomes
    assert out["stderr"] == ""


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32), nodes=st.integers(1, 2000))
def test_a_seed_draws_the_same_fleet_and_shapes_again(seed: int, nodes: int) -> None:
    """A table's seeds rerun it: the same seed draws the same inventory, partitions and shapes, byte for
    byte; another seed draws another fleet."""

    def drawn(s: int) -> tuple[str, str | None, str]:
        fleet = bench.make_fleet(bench.draw_spec(s, nodes))
        return (
            bench.inventory_yaml(fleet),
            bench.partitions_text(fleet),
            bench.shapes_lua(bench.make_shapes(fleet, 50, s)),
        )

    first = drawn(seed)
    assert drawn(seed) == first
    assert drawn(seed + 1) != first
