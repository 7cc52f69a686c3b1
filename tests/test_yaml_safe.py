"""The inventory's YAML reader: a document without anchors is built by ``construct_plain`` (strings, lists
and string-keyed mappings by hand, the rest by the constructor); it must give what the safe loader gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurm_topo.inventory.yaml_safe import _Loader, load_yaml

_scalars = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["on", "off", "yes", "~", "0x1f", "1_000", "2024-01-02", "1e3", "<<", "=", ".inf", "07"]),
)
_keys = st.one_of(
    st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.sampled_from(["on", "1", "null", "<<", "y"])
)
_docs = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=25,
)


def _slow(text: str) -> object:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - the safe loader, its own constructor throughout


@settings(max_examples=400, deadline=None)
@given(doc=_docs, flow=st.sampled_from([None, True, False]))
@example(doc={"nodes": [{"name": "n[1-4]", "gpus": 8, "on": True, "features": ["a", "b"]}]}, flow=True)
def test_a_document_without_anchors_reads_as_the_safe_loader_reads_it(doc: object, flow: bool | None) -> None:
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    assert load_yaml(text) == _slow(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [x, 2, null, on, '3']\n",
        "{'k': v, \"q\": 'w', 3: x, on: y}\n",
        "base: {a: 1}\nmore: {<<: {a: 1, b: 2}, c: 3}\n",  # a merge key: the constructor's own way
        "s: !!str 12\nb: !!binary aGk=\nset: !!set {a, b}\n",
        "- [a, [b, [c, {d: [e]}]]]\n",
        "",
        "plain\n",
    ],
)
def test_typed_and_merged_nodes_read_as_the_safe_loader_reads_them(text: str) -> None:
    assert load_yaml(text) == _slow(text)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("nodes:\n  - {name: n1, name: n2}\n", "duplicate key 'name' at line 2 (first at line 2)"),
        ("a: 1\nb: {x: 1}\na: 2\n", "duplicate key 'a' at line 3 (first at line 1)"),
    ],
)
def test_a_key_given_twice_is_refused_with_both_lines(text: str, line: str) -> None:
    with pytest.raises(yaml.YAMLError, match=line.replace("(", r"\(").replace(")", r"\)")):
        load_yaml(text)


_REPO = Path(__file__).resolve().parent.parent
_SHIPPED = sorted(
    p.relative_to(_REPO) for d in ("examples", "tests/fixtures") for p in (_REPO / d).rglob("*.y*ml")
)


@pytest.mark.parametrize("path", _SHIPPED, ids=str)
def test_every_shipped_yaml_file_reads_as_the_safe_loader_reads_it(path: Path) -> None:
    text = (_REPO / path).read_text()
    assert load_yaml(text) == _slow(text)
