"""The fleet as a text tree: region → zone → network group, with node and GPU counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from ..core.model import Inventory, Node, Source, natural_key
from ..plumbing.text import counted


@dataclass
class _Count:
    nodes: int = 0
    gpus: int = 0
    self_only: int = 0
    children: dict[str, _Count] = field(default_factory=dict)

    def add(self, node: Node) -> None:
        self.nodes += 1
        self.gpus += node.gpus or 0
        self.self_only += node.located_by == Source.SELF

    def text(self) -> str:
        s = f"{counted(self.nodes, 'node')}, {counted(self.gpus, 'GPU')}"
        return s + (f", {self.self_only} self-reported*" if self.self_only else "")


def _tree(inventory: Inventory) -> _Count:
    root = _Count()
    for node in inventory.nodes:
        loc = node.location
        path = [loc.region or "(no location)"]
        if loc.region is not None:
            path.append(loc.zone or "(no zone)")
            if loc.network_group is not None or loc.zone is not None:
                path.append(loc.network_group or "(no network group)")
        root.add(node)
        cur = root
        for label in path:
            cur = cur.children.setdefault(label, _Count())
            cur.add(node)
    return root


def tree_dict(inventory: Inventory) -> dict[str, object]:
    """``show --json``: ``{"nodes", "gpus", "self_reported", "regions": [{"name", "nodes", "gpus",
    "self_reported", "zones": [{…, "network_groups": [{…}]}]}], "extra_nodes"}``; a missing level is named
    ``(no zone)``/``(no network group)``/``(no location)`` as in the text tree."""
    root = _tree(inventory)
    kinds = ("regions", "zones", "network_groups")

    def entry(name: str | None, c: _Count, depth: int) -> dict[str, object]:
        out: dict[str, object] = {} if name is None else {"name": name}
        out.update(nodes=c.nodes, gpus=c.gpus, self_reported=c.self_only)
        if depth < len(kinds):
            keys = sorted(c.children, key=lambda k: (k.startswith("("), natural_key(k)))
            out[kinds[depth]] = [entry(k, c.children[k], depth + 1) for k in keys]
        return out

    out = entry(None, root, 0)
    out["extra_nodes"] = list(inventory.extra_nodes)
    return out


def render_tree(inventory: Inventory) -> str:
    root = _tree(inventory)
    regions = [k for k in root.children if not k.startswith("(")]
    zones = sum(len([z for z in root.children[r].children if not z.startswith("(")]) for r in regions)
    lines = [f"fleet: {root.text()}; {counted(len(regions), 'region')}, {counted(zones, 'zone')}"]

    def walk(count: _Count, prefix: str) -> None:
        keys = sorted(count.children, key=lambda k: (k.startswith("("), natural_key(k)))
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            child = count.children[key]
            lines.append(f"{prefix}{'└─ ' if last else '├─ '}{key}  {child.text()}")
            walk(child, prefix + ("   " if last else "│  "))

    walk(root, "")
    if inventory.extra_nodes:
        lines.append(f"not in any inventory (root leaf): {counted(len(inventory.extra_nodes), 'node')}")
    if root.self_only:
        lines.append("* location known only from the node's own report")
    return "\n".join(lines) + "\n"


def write_svg(inventory: Inventory, records: Sequence[Mapping[str, str]] | None, path: str) -> str:
    """Draw the fleet (with node states when ``records`` are given) into ``path``; the line to print."""
    from ..plumbing.output import write_files
    from .capacity import node_states
    from .svg import render_svg

    states = node_states(inventory, records)[0] if records is not None else None
    target = Path(path)
    if not target.name or target.name in (".", ".."):
        raise InputError(f"--svg {path}: must name a file")
    write_files(target.parent, {target.name: render_svg(inventory, states, title=target.stem or "fleet")})
    return f"svg: {path} ({counted(len(inventory.nodes), 'node')}{', with node states' if states else ''})"
