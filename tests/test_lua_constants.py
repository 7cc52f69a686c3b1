"""The constants the Lua filter keeps beside the Python policy (limits, prefixes, levels, messages) are the
same values: every top-level ``local NAME = …`` of job_submit/slurm_topo_filter.lua whose NAME the Python
vocabulary (slurm_topo/policy/vocab.py) also defines is evaluated in the real Lua 5.1 and compared."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lupa import lua51

from slurm_topo.policy import vocab

FILTER = Path(__file__).resolve().parents[1] / "job_submit" / "slurm_topo_filter.lua"
_TOP = re.compile(r"^local ([A-Z][A-Z0-9_]*) = ", re.M)


def _statements(text: str) -> dict[str, str]:
    """Each top-level constant's whole statement, up to the next top-level line (continuations included)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _TOP.match(line)
        if not m:
            continue
        body = [line]
        for nxt in lines[i + 1 :]:
            if not nxt.startswith((" ", "\t", "}")):
                break
            body.append(nxt)
        out[m[1]] = "\n".join(body)
    return out


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


def test_every_shared_constant_has_the_same_value_in_lua_and_python() -> None:
    statements = _statements(FILTER.read_text())
    shared = [n for n in statements if hasattr(vocab, n)]
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    # the statements in file order, each constant exported by name (later ones may use earlier ones)
    chunk = (
        "\n".join(statements[n] for n in statements)
        + "\nreturn {"
        + ", ".join(f"{n} = {n}" for n in shared)
        + "}"
    )
    env = lua.execute(chunk.replace("local M = {}", "").replace("record(", "tostring("))
    compared = 0
    for name in shared:
        want = getattr(vocab, name)
        got = _python(env[name])
        if isinstance(want, (tuple, list)) and isinstance(got, frozenset):
            want = frozenset(want)  # a Python tuple kept as a Lua set (LOCALITIES, MODES)
        elif isinstance(want, (tuple, list)):
            want = tuple(want)
        assert got == want, (name, got, want)
        compared += 1
    assert compared >= 20, shared  # the limits, prefixes, levels and messages named in the vocabulary
