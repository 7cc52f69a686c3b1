"""One source for the constants the Lua filter shares with the Python policy (limits, prefixes, levels,
messages): they live in job_submit/slurm_topo_filter/vocab.lua only, every one of them equals its Python twin
(evaluated in the real Lua 5.1, through the module the filter itself loads), and no other module of the filter
defines a constant of its own with a literal value."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from luafilter import LuaFilter

from slurm_topo.core import model as core_model
from slurm_topo.cost import comm as cost_model
from slurm_topo.policy import vocab
from slurm_topo.render import filter_data

# policy/__init__ exports functions named like its modules (decide, ...): the modules themselves
decide = importlib.import_module("slurm_topo.policy.decide")
modify = importlib.import_module("slurm_topo.policy.modify")
nodes = importlib.import_module("slurm_topo.policy.nodes")

FILTER = Path(__file__).resolve().parents[1] / "job_submit" / "slurm_topo_filter"

# The vocab.lua names whose Python twin is not the same name in policy/vocab.py.
ELSEWHERE: dict[str, Any] = {
    "DATA_FORMAT": filter_data.FORMAT,
    "DATA_DIGIT_ZERO": filter_data.DIGIT_ZERO,
    "DATA_DIGIT_WIDTH": filter_data.DIGIT_WIDTH,
    "PREFER_LEVELS": decide.PREFER_LEVELS,
    "UNION_ZONES": decide.UNION_ZONES,
    "UNION_EMIT": tuple(i + 1 for i in decide.UNION_EMIT),  # 1-based list indices in Lua
    "UNION_EMIT_FAMILIES": tuple(i + 1 for i in decide.UNION_EMIT_FAMILIES),
    "SIZE_FIELDS": modify._SIZE_FIELDS,
    "PLAN_KEYS": cost_model.PLAN_KEYS,
    "MAX_NAMED": nodes.MAX_NAMED,
    "MAX_VISITS": nodes.MAX_VISITS,
    "MAX_NODES": core_model.MAX_NODES,
}
# Lua-only: how often the filter looks at the data file's first line (nothing in Python reads it), how
# many values one call returns while the data loads (Lua's C stack), and how many class pairs the load sums
# ahead for GPU requests (scan.lua gpu_sets: the same numbers a walk would sum).
LUA_ONLY = {"RECHECK_SECONDS", "DATA_PRESIZE", "SUMS_PAIRS"}


def _python(value: Any) -> Any:
    """A Lua value as Python: an array table -> tuple, a set {k = true} -> frozenset, a map -> dict."""
    if not hasattr(value, "items"):
        return value
    items = dict(value.items())
    if list(items) == list(range(1, len(items) + 1)):
        return tuple(_python(items[k]) for k in range(1, len(items) + 1))
    if all(v is True for v in items.values()):
        return frozenset(items)
    return {k: _python(v) for k, v in items.items()}


def _want(name: str, got: Any) -> Any:
    want = ELSEWHERE[name] if name in ELSEWHERE else getattr(vocab, name)
    if isinstance(want, (tuple, list, frozenset, set)) and isinstance(got, frozenset):
        return frozenset(want)  # a Python tuple kept as a Lua set (LOCALITIES, MODES, PLAN_KEYS)
    if isinstance(want, (tuple, list)):
        return tuple(want)
    return want


def test_every_constant_of_the_lua_vocabulary_equals_its_python_twin() -> None:
    lua_vocab = LuaFilter().lua.eval('require("slurm_topo_filter.vocab")')
    names = sorted(k for k in lua_vocab.keys() if re.fullmatch(r"[A-Z][A-Z0-9_]*", k))
    compared = 0
    for name in names:
        if name in LUA_ONLY:
            continue
        assert name in ELSEWHERE or hasattr(vocab, name), f"vocab.lua {name} has no Python twin named here"
        got = _python(lua_vocab[name])
        assert got == _want(name, got), name
        compared += 1
    assert compared >= 30, names  # the limits, prefixes, levels and messages


def test_a_changed_python_value_fails_the_comparison() -> None:
    """The comparison reads the values themselves: a Lua table that differs by one entry is told apart."""
    lua = LuaFilter().lua
    changed = _python(lua.eval('{ "network_group", "zone", "regions" }'))
    assert changed != _want("LEVELS", changed)
    assert _python(lua.eval("{ prefer = true }")) != _want("LOCALITIES", frozenset())


def test_no_other_module_defines_a_constant_of_its_own() -> None:
    """Outside vocab.lua a top-level UPPER_CASE local is taken from the vocabulary (``= V.NAME``) or built
    from it, never a literal string or number that could drift from Python."""
    literal = re.compile(r"^local ([A-Z][A-Z0-9_, ]*) = (?:\"|'|-?\d)", re.M)
    found = {
        path.name: literal.findall(path.read_text())
        for path in sorted(FILTER.glob("*.lua"))
        if path.name != "vocab.lua"
    }
    allowed = {
        "memo.lua": ["DECISION_ENTRIES, DECISION_KEY"],  # the memo's own bounds
        "util.lua": ["NUMBER_TEXTS"],  # the bound of the remembered number texts
        # the bound of the class sets a constraint makes
        "scan.lua": ["KEPT_SETS"],
        "decide.lua": ["KEPT_ROWS"],  # the bound of the zone rows a kept source keeps (rows_of)
    }
    for name, constants in found.items():
        assert constants == allowed.get(name, []), (name, constants)


def test_a_union_list_fits_the_index_digit_of_its_sort_keys() -> None:
    """decide.lua sort_unions makes one number a union whose last digit (base 2 x MAX_ALTERNATIVES, its
    INDEX_UNIT) is the union's place in its list: a list, at most UNION_TRIES long, must stay under it."""
    lua_vocab = LuaFilter().lua.eval('require("slurm_topo_filter.vocab")')
    assert lua_vocab["UNION_TRIES"] < 2 * lua_vocab["MAX_ALTERNATIVES"]
