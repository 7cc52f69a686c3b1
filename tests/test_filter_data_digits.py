"""Format 9's number columns: the generator's digit strings (``filter_data._ints``) read back by the
filter's own decoder (``data.lua`` ``ints``, real Lua 5.1) on seeded lists of every width and of lengths
around each batch and presize boundary; the groups, labels and node index a load makes equal to the Python
model's."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from luafilter import LuaFilter

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.policy import LEVELS
from slurm_topo.policy.nodes import _NAME, place_of, split_name
from slurm_topo.policy.vocab import NVL
from slurm_topo.render import make_context
from slurm_topo.render.filter_data import DIGIT_WIDTH, DIGIT_ZERO, _ints

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_family_target as bench  # noqa: E402

LUA = LuaFilter()
DATA = LUA.lua.eval('require("slurm_topo_filter.data")')
PRESIZE = LUA.lua.eval('require("slurm_topo_filter.vocab")').DATA_PRESIZE


def _decoded(values: list[int]) -> list[int]:
    text = _ints(values)
    assert text.startswith("[=[") and text.endswith("]=]") and "]=]" not in text[3:-3]
    t = DATA.ints(text[3:-3])
    return [int(t[i]) for i in range(1, len(t) + 1)]


@pytest.mark.parametrize("width", range(1, DIGIT_WIDTH + 1))
def test_every_width_and_length_round_trips(width: int) -> None:
    """Lengths about each batch (32, 16, 16, 12 values a call), the presize limit, and beyond it; values
    drawn over the whole range of the width (its largest included)."""
    rng = random.Random(width)
    top = 64**width - 1
    for n in (
        0,
        1,
        2,
        11,
        12,
        13,
        15,
        16,
        17,
        31,
        32,
        33,
        47,
        48,
        49,
        95,
        96,
        97,
        PRESIZE,
        PRESIZE + 1,
        3 * PRESIZE,
    ):
        values = [rng.randint(0, top) for _ in range(n)]
        if values:
            values[rng.randrange(n)] = top  # the width is the largest value's
        assert _decoded(values) == values, (width, n)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=64**DIGIT_WIDTH - 1), max_size=300))
def test_any_list_round_trips(values: list[int]) -> None:
    assert _decoded(values) == values


def test_digits_are_printable_and_never_close_the_string() -> None:
    text = _ints(list(range(0, 64**3, 97)))[3:-3]
    assert all(DIGIT_ZERO <= ord(c) < DIGIT_ZERO + 64 for c in text) and "=" not in text


def test_refused_numbers_and_bad_columns() -> None:
    with pytest.raises(ValueError):
        _ints([-1])
    with pytest.raises(ValueError):
        _ints([64**DIGIT_WIDTH])
    for bad in ("", chr(DIGIT_ZERO + 2) + "???", chr(DIGIT_ZERO + DIGIT_WIDTH + 1) + "?" * 6, "?"):
        ok, _ = LUA.lua.eval("function(f, s) return pcall(f, s) end")(DATA.ints, bad)
        assert not ok, bad


@settings(max_examples=500, derandomize=True)
@given(st.text(alphabet="ab.-_0123456789\n\u0663", max_size=16))
def test_split_name_reads_a_name_as_its_pattern_does(name: str) -> None:
    # the node index's key of a name (build_index, place_of) is _NAME's reading: the prefix before every
    # trailing ASCII digit (never across a line break), at most 9 of them
    m = _NAME.match(name)
    want = (m[1], int(m[2]), len(m[2])) if m and len(m[2]) <= 9 else None
    assert split_name(name) == want


@pytest.mark.parametrize("seed", [3, 11, 17, 29])
def test_a_load_makes_the_model_groups_labels_and_node_places(seed: int, tmp_path: Path) -> None:
    """Seeded fleets with families (bucket labels derived by the filter, long names hashed and written):
    every group of every partition and level loads with the model's feature, rank, size, label and location,
    and every node's place read through the loaded node index is the model's."""
    fleet = bench.make_fleet(random.Random(seed))
    inv = merge([parse_inventory(fleet.doc)])
    data = make_context(inv, (22, 5), fleet.partitions).policy
    path = tmp_path / "data.lua"
    path.write_text(render_all(inv, (22, 5), fleet.partitions)["slurm_topo_data.lua"])
    loaded = LUA.load_data(path)
    label_of = LUA.lua.eval('require("slurm_topo_filter.scan")').label_of
    for pname, levels in data.partitions.items():
        for level in (*LEVELS, NVL):
            if level not in levels:
                continue
            got = loaded.partitions[pname][level]
            assert len(got) == len(levels[level]), (pname, level)
            for i, g in enumerate(levels[level], 1):
                lg = got[i]
                assert (lg.feature, lg.rank, lg.nodes, lg.gpus, lg.most) == (
                    g.feature,
                    g.rank,
                    g.nodes,
                    g.gpus,
                    g.max_gpus,
                ), (pname, level, i)
                assert label_of(lg) == g.label, (pname, level, g.feature)
                assert (lg.loc.region, lg.loc.zone, lg.loc.family) == (g.region, g.zone, g.family)
                counts = [int(lg.counts[j]) for j in range(1, len(lg.counts) + 1)]
                assert counts == [x for c, n in g.counts for x in (c + 1, n)]
    nodes = LUA.lua.eval('require("slurm_topo_filter.nodes")')
    index = nodes.node_index(loaded)
    place = LUA.lua.eval(
        """function(nodes, data, name, li)
             local seen = nodes.place_named(data, name, li)
             return seen[1]
           end"""
    )
    names = [n.name for n in inv.nodes]
    for name in random.Random(seed).sample(names, min(200, len(names))):
        where = place_of(data.nodes, name)
        assert where is not None, name
        for li in range(1, 5):  # network group, zone, region, NVLink domain
            assert place(nodes, loaded, name, li) == data.nodes.places[where][li - 1], (name, li)
    assert place(nodes, loaded, "no-such-node-1", 1) is None
    assert index.nodes == data.nodes.nodes
