"""The user's constraint: Slurm's feature grammar as far as the filter composes with it (the Lua filter's
"constraint" section)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .compile import NodeClass
from .vocab import LOCATION_PREFIXES

_FEATURE_TOKEN = re.compile(r"^[A-Za-z0-9._=+-]+\Z")


@dataclass(frozen=True, slots=True)
class Constraint:
    kind: str
    """none | and | or | bracket (``a&[x|y]``: names outside, alternatives inside) | complex | invalid."""
    names: tuple[str, ...] = ()
    inside: tuple[str, ...] = ()
    text: str = ""

    @property
    def counted(self) -> bool:
        """Whether node classes can be matched against it (own features only)."""
        if self.kind in ("complex", "invalid"):
            return False
        return not any(n.startswith(LOCATION_PREFIXES) for n in self.names)


def parse_constraint(text: str | None) -> Constraint:
    if text is None:
        return Constraint("none")
    t = text.replace(",", "&")
    if any(ch in t for ch in " \t\n"):
        return Constraint("invalid", text=text)
    if "[" in t or "]" in t:
        m = re.fullmatch(r"(?:([^\[\]]*)&)?\[([^\[\]]*)\](?:&([^\[\]]*))?", t)
        if m is None or "(" in t or "*" in t:
            return Constraint("complex", text=text)
        outside = [p for part in (m[1], m[3]) if part is not None for p in part.split("&")]
        inside = m[2].split("|")
        if not all(_FEATURE_TOKEN.match(x) for x in outside + inside):
            return Constraint("complex", text=text)
        return Constraint("bracket", tuple(outside), tuple(inside), text)
    if "(" in t or ")" in t or "*" in t or ("|" in t and "&" in t):
        return Constraint("complex", text=text)
    sep = "|" if "|" in t else "&"
    names = tuple(t.split(sep))
    if not all(_FEATURE_TOKEN.match(n) for n in names):
        return Constraint("invalid", text=text)
    return Constraint("or" if sep == "|" else "and", names, text=text)


def _class_ok(cls: NodeClass, c: Constraint) -> bool:
    if not c.counted or c.kind == "none":
        return True
    if c.kind == "or":
        return any(n in cls.features for n in c.names)
    return all(n in cls.features for n in c.names)


def _has_top_level_or(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            return True
    return False


def compose(c: Constraint, *terms: str) -> str | None:
    """The user's constraint ANDed with ``terms``; None when Slurm's grammar cannot express it."""
    if c.kind == "none":
        return "&".join(terms)
    if c.kind == "and":
        return "&".join((c.text, *terms))
    if c.kind == "or":
        return "&".join((f"({c.text})", *terms))
    if c.kind == "bracket":
        return "&".join((*c.names, *terms))
    if c.kind == "complex" and "[" not in c.text and not _has_top_level_or(c.text):
        return "&".join((c.text, *terms))
    return None
