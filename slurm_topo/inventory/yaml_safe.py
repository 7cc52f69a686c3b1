"""Reading an inventory's YAML safely: aliases bounded (``MAX_YAML_NODES``), duplicate keys an error naming
both lines, tags that do not construct refused, values quoted short in messages.
"""

from __future__ import annotations

import reprlib
from typing import Any

import yaml

MAX_YAML_NODES = 1_000_000

"""At most this many YAML nodes after alias expansion (a "billion laughs" document is refused unexpanded)."""

_SHORT = reprlib.Repr()

_SHORT.maxstring = _SHORT.maxother = 60

_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = _SHORT.maxset = 4

_SHORT.maxlevel = 2


class Shown:
    """A value whose repr is bounded (depth, items, characters) whatever the value is: messages never walk a
    huge or self-referencing structure."""

    __slots__ = ("text",)

    def __init__(self, value: object):
        self.text = _SHORT.repr(value)

    def __repr__(self) -> str:
        return self.text


def key_text(key: object) -> str:
    """A mapping key as it may appear in ``nodes[3].<key>``: a short string as is, anything else bounded."""
    return key if isinstance(key, str) and len(key) <= 60 and key.isprintable() else _SHORT.repr(key)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


def _base_loader() -> Any:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_base_loader()):  # type: ignore[misc]
    """The safe loader (libyaml's when present) that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            tag = key_node.tag
            if tag == "tag:yaml.org,2002:merge":
                continue
            if tag == "tag:yaml.org,2002:str" and isinstance(key_node, yaml.ScalarNode):
                key = key_node.value  # what the constructor makes of a plain string key
            else:
                key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: the constructor reports it
            if first is not key_node:
                raise _duplicate(key, key_node, first)
        return super().construct_mapping(node, deep=deep)

    def construct_plain(self, node: Any) -> Any:
        """What the constructor makes of a node of a document without anchors, faster for the shapes an
        inventory has: string scalars, lists, and mappings of string keys (duplicates refused as above) are
        built here; any other node (a typed scalar, a merge key, a key that is not a string, another tag)
        goes the constructor's own way. Without anchors no node is shared, so nothing is built twice."""
        if isinstance(node, yaml.ScalarNode):
            return node.value if node.tag == _STR else self.construct_object(node, deep=True)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            return [self.construct_plain(item) for item in node.value]
        if (
            isinstance(node, yaml.MappingNode)
            and node.tag == _MAP
            and all(k.tag == _STR and isinstance(k, yaml.ScalarNode) for k, _ in node.value)
        ):
            out: dict[str, Any] = {}
            seen: dict[str, Any] = {}
            for key_node, value_node in node.value:
                first = seen.setdefault(key_node.value, key_node)
                if first is not key_node:
                    raise _duplicate(key_node.value, key_node, first)
                out[key_node.value] = self.construct_plain(value_node)
            return out
        return self.construct_object(node, deep=True)


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


def _duplicate(key: object, key_node: Any, first: Any) -> _DuplicateKeyError:
    """A key given twice in one mapping, both lines named."""
    return _DuplicateKeyError(
        None,
        None,
        f"duplicate key {_SHORT.repr(key)} at line {key_node.start_mark.line + 1} "
        f"(first at line {first.start_mark.line + 1})",
        key_node.start_mark,
    )


def _expanded_size(text: str, limit: int) -> None:
    """Raise ``yaml.YAMLError`` when aliases would expand the document past ``limit`` nodes (events only;
    nothing is constructed; constant work per event, whatever the nesting)."""
    anchors: dict[str, int] = {}
    starts: list[tuple[str | None, int]] = []  # open collections: (anchor, expanded count at their start)
    expanded = 0
    for event in yaml.parse(text, Loader=_base_loader()):
        if isinstance(event, yaml.AliasEvent):
            expanded += anchors.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                anchors[event.anchor] = 1
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            starts.append((event.anchor, expanded))
            expanded += 1
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, start = starts.pop()
            if anchor:
                anchors[anchor] = expanded - start
        if expanded > limit:
            raise yaml.YAMLError(f"aliases expand to more than {limit} YAML nodes")


def load_yaml(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse one YAML document safely and boundedly. Raises ``yaml.YAMLError`` for anything that is not a
    plain document: bad syntax, a duplicate key, aliases that expand past ``max_nodes``, a tag that does not
    construct (``!!int x``, ``!!timestamp x``, ``!!python/...``), nesting too deep to build."""
    try:
        # an alias names an anchor (&name) made before it: without an '&' there is none to expand
        if "&" in text:
            _expanded_size(text, max_nodes)
            return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            return None if node is None else loader.construct_plain(node)
        finally:
            loader.dispose()
    except yaml.YAMLError:
        raise
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
    except (ValueError, TypeError, AttributeError, OverflowError, KeyError, IndexError):
        # SafeConstructor's own failures on a tagged scalar it cannot build (int('x'), a timestamp regex miss)
        raise yaml.YAMLError("a tagged value cannot be read (such as !!int x or !!timestamp x)") from None
