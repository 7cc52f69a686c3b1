"""Node records collected in a directory (``generate --records DIR``) -> ``Loaded`` inventories for ``merge``.

Each node runs ``slurm-topo discover`` and ships its record into DIR (``docs/discovery.md``). Here every
``*.yaml``, ``*.yml`` and ``*.json`` file directly in DIR is read, in name order; hidden files
(``.n1.yaml.tmp``, the usual temporary name of an atomic write) and anything that is not a regular file are
ignored.

A record is *untrusted*: whatever it says, it is read as ``source: self`` (a node cannot promote itself; a
file that claims ``provider`` or ``operator`` is demoted with a warning), and ``merge`` then lets it fill gaps
in a trusted record but never override one (ARCHITECTURE.md, "Trust"); each disagreement becomes a
``Conflict``.

**A bad record is skipped, never fatal** (production admins want the fleet's other records, and a node that
writes junk must not stop ``generate``): the record is left out and one warning line names the file and the
reason (``DIR/n1.yaml: nodes[0].zone: must be 1-63 characters ... ('…'); record skipped``). Bad means: not
readable, larger than 64 KiB, not valid YAML/JSON (a duplicate key, a tag such as ``!!int x``, aliases that
expand past the loader's bound, nesting too deep all count), not exactly one node, any key other than the ones
``discover`` writes (``name region zone network_group source found_by notes`` — so a record cannot carry
``slurm:`` attributes, features, GPU counts, a ``gpu_topology`` path or a policy), or any value the inventory
loader refuses. A JSON record is the object ``discover --json`` prints; YAML is the one-entry inventory
``discover`` prints (a bare entry mapping is accepted too).

Two records for the same node that disagree on the location would be a same-trust error in ``merge`` and stop
``generate``; instead every record of that node is skipped with one warning (an old record left behind after a
move must not win by file name). Records that agree are all kept (``merge`` folds them). Only a missing or
unreadable DIR raises (``InputError``): that is a wrong flag, not a bad node.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import InputError, InventoryError, show_value
from ..core.model import LABEL_RE, LEVELS, NODE_NAME_RE, Source
from ..inventory import Loaded, load_yaml, parse_inventory

RECORD_SUFFIXES = (".yaml", ".yml", ".json")
RECORD_KEYS = frozenset(
    {"name", "region", "zone", "network_group", "nvlink_domain", "source", "found_by", "notes"}
)
MAX_RECORD_BYTES = 64 * 1024
MAX_RECORD_YAML_NODES = 10_000
"""A record is a handful of values: aliases may expand it to at most this many YAML nodes."""


class _Skip(Exception):
    """This record is left out; the message is the reason."""


def _entry(path: Path, text: str) -> Mapping[str, Any]:
    """The record's one entry, as a mapping, from either form."""
    try:
        if path.suffix == ".json":
            doc = json.loads(text)
        else:
            doc = load_yaml(text, max_nodes=MAX_RECORD_YAML_NODES)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        lines = str(exc).splitlines()
        first = lines[0][:200] if lines else type(exc).__name__
        raise _Skip(f"not valid {kind}: {first}") from None
    if isinstance(doc, Mapping) and "nodes" in doc:
        extra = sorted(str(k) for k in doc if k != "nodes")
        if extra:
            raise _Skip(f"a node record may only hold 'nodes', not {', '.join(extra)}")
        entries = doc["nodes"]
        if not isinstance(entries, list) or len(entries) != 1:
            raise _Skip("a node record must hold exactly one entry under 'nodes'")
        doc = entries[0]
    if not isinstance(doc, Mapping):
        raise _Skip(f"must be a node record (a mapping), not {type(doc).__name__}")
    unknown = sorted(str(k) for k in doc if k not in RECORD_KEYS)
    if unknown:
        raise _Skip(f"key(s) not allowed in a node record: {', '.join(unknown)[:80]}")
    # Whole strings only (fullmatch), as the loader's `\Z`-anchored patterns: a trailing newline never passes.
    name = doc.get("name")
    if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name):
        raise _Skip(f"name: must be one node name, 1-64 characters from [A-Za-z0-9._-] ({show_value(name)})")
    for lvl in (*LEVELS, "nvlink_domain"):
        value = doc.get(lvl)
        if value is not None and (not isinstance(value, str) or not LABEL_RE.fullmatch(value)):
            raise _Skip(f"{lvl}: must be 1-63 characters from [A-Za-z0-9._-] ({show_value(value)})")
    return doc


def load_record_file(path: Path) -> tuple[Loaded, tuple[str, ...]]:
    """One record file -> ``Loaded`` (one node, source self) and its warnings; a bad file raises
    ``InputError`` with one line naming the file (``load_records`` turns that into a skip)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise _Skip("not a regular file")
        if st.st_size > MAX_RECORD_BYTES:
            raise _Skip(f"larger than {MAX_RECORD_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
        entry = dict(_entry(path, text))
        claimed = entry.get("source", "self")
        warnings: list[str] = []
        if isinstance(claimed, str) and claimed.lower() in ("provider", "operator"):
            warnings.append(f"{path}: says source: {claimed.lower()}; a node record is always read as self")
            entry["source"] = "self"
        body = yaml.safe_dump({"nodes": [entry]}, sort_keys=False)
        loaded = parse_inventory(body, source=str(path), base=None)
    except _Skip as exc:
        raise InputError(f"{path}: {exc}") from None
    except InventoryError as exc:
        raise InputError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(loaded.nodes) != 1:
        raise InputError(f"{path}: a node record must name exactly one node, not {len(loaded.nodes)}")
    nodes = tuple(replace(n, source=Source.SELF) for n in loaded.nodes)  # belt and braces: never above self
    return replace(loaded, nodes=nodes), (*warnings, *loaded.warnings)


def load_records(directory: Path) -> tuple[list[Loaded], list[str]]:
    """Every good record in ``directory`` as ``Loaded`` (source self, one node each) and the warning lines
    (without a ``warning:`` prefix), for ``merge(inventories + loaded)``. Bad records are skipped with a
    warning; a missing or unreadable directory raises ``InputError``. Loader warnings (a zone-shaped region
    read as a zone) are returned in the warning list, not in ``Loaded.warnings``, so they are printed once."""
    directory = Path(directory)
    try:
        paths = sorted(
            p for p in directory.iterdir() if p.suffix in RECORD_SUFFIXES and not p.name.startswith(".")
        )
    except OSError as exc:
        raise InputError(f"records directory {directory}: cannot read: {exc.strerror or exc}") from None
    warnings: list[str] = []
    good: list[Loaded] = []
    for path in paths:
        try:
            loaded, notes = load_record_file(path)
        except InputError as exc:
            warnings.append(f"{exc}; record skipped")
            continue
        warnings.extend(notes)
        good.append(replace(loaded, warnings=()))
    # Same-trust disagreements would abort merge(): drop every record of such a node, with one warning.
    by_node: dict[str, list[Loaded]] = {}
    for item in good:
        by_node.setdefault(item.nodes[0].name, []).append(item)
    kept: list[Loaded] = []
    for name, items in by_node.items():
        places = {item.nodes[0].location for item in items}
        if len(places) > 1:
            where = "; ".join(f"{item.source}: {item.nodes[0].location.describe()}" for item in items)
            warnings.append(f"node {name}: its records disagree ({where}); all {len(items)} skipped")
            continue
        kept.extend(items)
    if not paths:
        warnings.append(f"records directory {directory}: no *.yaml, *.yml or *.json records")
    return kept, warnings
