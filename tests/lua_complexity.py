"""A Lua-aware cyclomatic complexity counter for the filter's modules (tests/test_lua_complexity.py).

Every function counts, named or anonymous, local or a table field, nested or not: 1 plus its own
``if``, ``elseif``, ``for``, ``while``, ``repeat``, ``and`` and ``or`` (a nested function's are its own, as
radon counts Python's). Comments and strings are removed first (long brackets of any level included), so a
keyword inside text never counts."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LONG = re.compile(r"\[(=*)\[.*?\]\1\]", re.S)
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\.\.\.|\.\.|[^\sA-Za-z_]")
_BRANCHES = {"if", "elseif", "for", "while", "repeat", "and", "or"}


@dataclass
class LuaFunction:
    name: str
    line: int
    complexity: int = 1


def _strip(source: str) -> str:
    """The source with comments and strings blanked (line breaks kept, so lines still count)."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("--", i):
            m = _LONG.match(source, i + 2)
            end = m.end() if m else source.find("\n", i)
            end = n if end < 0 else end
            out.append(re.sub(r"[^\n]", " ", source[i:end]))
            i = end
        elif c == "[" and _LONG.match(source, i):
            m = _LONG.match(source, i)
            assert m is not None
            out.append('""' + re.sub(r"[^\n]", " ", m.group(0))[2:])
            i = m.end()
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append('""' + " " * (j - i - 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(source: str) -> list[LuaFunction]:
    """Every function of a Lua chunk with its complexity, in order of appearance."""
    text = _strip(source)
    found: list[LuaFunction] = []
    stack: list[LuaFunction | None] = []  # one entry per open block: the function it opens, or None
    pending_do = 0  # `for`/`while` headers whose `do` opens their block
    elseif_then = False  # an `elseif … then` continues its `if`'s block
    line = 1
    last_pos = 0
    prev = before = ""
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        line += text.count("\n", last_pos, m.start())
        last_pos = m.start()
        current = next((f for f in reversed(stack) if f is not None), None)
        if tok in _BRANCHES and current is not None:
            current.complexity += 1
        if tok == "function":
            name = (
                text[m.end() : text.find("(", m.end())].strip()
                or (before if prev == "=" else "")
                or "anonymous"
            )
            f = LuaFunction(name, line)
            found.append(f)
            stack.append(f)
        elif tok in ("for", "while"):
            pending_do += 1
        elif tok == "do":
            if pending_do:
                pending_do -= 1
            stack.append(None)
        elif tok == "elseif":
            elseif_then = True
        elif tok == "then" and elseif_then:
            elseif_then = False
        elif tok in ("then", "repeat"):
            stack.append(None)
        elif tok in ("end", "until"):
            stack.pop()
        before, prev = prev, tok
    return found
