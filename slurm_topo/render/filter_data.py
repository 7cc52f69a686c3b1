"""slurm_topo_data.lua: what the submit filter decides from.

A Lua 5.1 chunk returning one table: the policy defaults, node classes and, per partition and level, the
groups in the filter's order (size, then label). Its first line is ``-- slurm-topo-data <fingerprint>``: the
filter reads only that line to notice a new file, and reloads the whole table only when it changed. Every
string written here has passed label validation ([A-Za-z0-9._-]) or is one of our own names, and is still
written through ``_q`` (the node index: each name through ``_q``, the whole through ``_INDEX``), except
Slurm's partition names, which may hold any character Slurm takes: each byte of those that ``_q`` would
refuse is written as a Lua decimal escape (``_slurm_name``).

Format 9 (format 8 with every integer column written as one string of base-64 digits, decoded once per
load by ``data.lua`` ``ints``; the locations as numbers into the one string list, ``features``; family
buckets' labels derived; format 8: the node index's ranges and bare names as Lua tables, built at load so that
no decision parses them; format 7: the generator's feature prefixes, ``owned``, and each node's NVLink domain
and the node count in the node index; format 6: a family bucket's values, ``fv``) is sized for the load inside
slurmctld (read, Adler-32 in Lua, Lua's parser, ``prepare``): the checksum costs about 120 machine
instructions a byte, Lua's parser about 1 300 a number literal and 50 a byte of a string literal, decoding a
digit string about 200 a number (``benchmarks/results/filter_world.md``, "data load"). So the group lists are
written by column, what repeats (strings, locations, node counts) written once and referred to by number, the
numbers as digit strings, and what is derivable (labels) left to the filter.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from ..policy import LEVELS, Group, PolicyData
from ..policy.nodes import NodeIndex
from ..policy.vocab import HOLD_NOTE, INTERACTIVE_NOTE, LOCATION_PREFIXES, NVL
from . import RenderContext, header

FORMAT = 9
"""The data file's layout version; job_submit/slurm_topo_filter/data.lua refuses (fails open on) any other."""
_PLAIN = re.compile(r"^[A-Za-z0-9._:*?=+/ ()-]*\Z")
_INDEX = re.compile(r"^[A-Za-z0-9._:*?=+/ ()#|;,-]*\Z")
"""The node index string: _PLAIN's characters and its separators."""


DIGIT_ZERO = 63
"""Digit strings (:func:`_ints`): base 64, the digits the characters ``?`` (63) to ``~`` (126), none of them
``=``, so ``]=]`` never occurs inside and each is written as a level-1 long string (no escapes)."""
DIGIT_WIDTH = 5
"""The most digits a value of a digit string has (64**5 > 10**9: node numbers of 9 decimal digits)."""


def _ints(values: Sequence[int]) -> str:
    """Non-negative integers as one Lua long string: its first character the width w (1-5 digits each, the
    largest value's), then each value in w base-64 digits, most significant first (``data.lua`` ``ints``)."""
    top = max(values, default=0)
    if min(values, default=0) < 0:
        raise ValueError("refusing to write a negative number as digits")  # indices and counts; never reached
    width = 1
    while top >= 64**width:
        width += 1
    if width > DIGIT_WIDTH:
        raise ValueError(f"refusing to write {top} as digits")  # node numbers have at most 9 decimal digits
    shifts = range(6 * (width - 1), -1, -6)
    digits = "".join(chr(DIGIT_ZERO + ((v >> k) & 63)) for v in values for k in shifts)
    return f"[=[{chr(DIGIT_ZERO + width)}{digits}]=]"


def _q(text: str) -> str:
    if not _PLAIN.match(text):
        raise ValueError(f"refusing to write {text!r} into Lua")  # validated upstream; never reached
    return f'"{text}"'


def _slurm_name(text: str) -> str:
    """A name Slurm gave (a partition's: any characters it takes, ``"``, ``\\``, ``;``, non-ASCII) as a Lua
    string literal that holds exactly its bytes: ASCII only, every byte outside ``_PLAIN`` as a three-digit
    decimal escape (Lua 5.1 ``\\ddd``), so nothing in it can end the string or start a line."""
    raw = text.encode("utf-8", "surrogateescape")
    return '"' + "".join(chr(b) if _PLAIN.match(chr(b)) else f"\\{b:03d}" for b in raw) + '"'


def _msg(text: str) -> str:
    """A message template of our own (policy/vocab.py) as a Lua string."""
    if not re.fullmatch(r"[A-Za-z0-9 ._:;,=()'/-]*", text):
        raise ValueError(f"refusing to write {text!r} into Lua")
    return f'"{text}"'


def _set(items: object) -> str:
    return "{" + ",".join(f"[{_q(x)}]=true" for x in sorted(items)) + "}"  # type: ignore[call-overload]


def _ancestors(feature: str, location_features: frozenset[str]) -> tuple[str | None, str | None]:
    """The group's region and zone features other than its own: two fields instead of a set table per group
    keeps the resident data small (slurmctld's Lua collector walks it)."""
    rest = sorted(location_features - {feature})
    rf = next((x for x in rest if x.startswith("region_")), None)
    zf = next((x for x in rest if x.startswith("zone_")), None)
    return rf, zf


def _derived_label(feature: str, family: str | None = None) -> str | None:
    """The label a group feature spells (``ng_a.r1`` -> ``a/r1``: after the first ``_``, dots as slashes; a
    family bucket's ``ng_a.r1.torch-2.4`` of value ``torch-2.4`` -> ``a/r1/torch-2.4``): written only where a
    group's label differs (the Lua twin is ``scan.lua`` ``label_of``)."""
    if family:  # a bucket whose feature does not end with its values (hashed) gets its label written
        base = _derived_label(feature[: -len(family) - 1]) if feature.endswith("." + family) else None
        return None if base is None else f"{base}/{family}"
    _, sep, rest = feature.partition("_")
    return rest.replace(".", "/") if sep else None


def _runs(values: Sequence[int], step: int) -> list[int]:
    """``[first, count, ...]``: runs of values rising by ``step`` (0: repeated) as (first value, length)."""
    out: list[int] = []
    for v in values:
        if out and v == out[-2] + step * out[-1]:
            out[-1] += 1
        else:
            out += [v, 1]
    return out


def _column(key: str, values: Sequence[int], step: int) -> str:
    """One group column as digits: its runs (``key``) or, where shorter, its values (``key`` + ``v``)."""
    runs = _runs(values, step)
    return f"{key}={_ints(runs)}" if len(runs) <= len(values) else f"{key}v={_ints(values)}"


class _Shared:
    """What the group lists and the node index refer to by number: the strings (group features, region and
    zone names, family values: each written once), the distinct locations (r, z, rf, zf, pz, pr, fv: string
    numbers) and shapes (n, g, m, then the class counts)."""

    def __init__(self) -> None:
        self.features: dict[str, int] = {}
        self.locations: dict[tuple[int, ...], int] = {}
        self.shapes: dict[tuple[int, ...], int] = {}
        # what lists repeat, computed once: a group's fields -> its location; its class counts -> its shape
        self._location_of: dict[tuple[object, ...], int] = {}
        self._shape_of: dict[tuple[tuple[int, int], ...], int] = {}

    def feature(self, feature: str | None) -> int:
        """1-based index in the string list; 0 for none."""
        return self.features.setdefault(feature, len(self.features) + 1) if feature else 0

    def shape(self, g: Group) -> int:
        """1-based index of the group's shape: nodes, GPUs, most GPUs on a node, its class counts."""
        known = self._shape_of.get(g.counts)  # the rest of a shape follows from its counts
        if known is None:
            counts = [x for c, n in g.counts for x in (c + 1, n)]  # 1-based class index in Lua
            shape = (g.nodes, g.gpus, g.max_gpus, len(g.counts), *counts)
            known = self._shape_of[g.counts] = self.shapes.setdefault(shape, len(self.shapes) + 1)
        return known

    def location(self, g: Group) -> int:
        """1-based index of the group's location: region, zone, their features, parents, family values."""
        key = (g.feature, g.region, g.zone, g.location_features, g.parents, g.family)
        known = self._location_of.get(key)
        if known is None:
            known = self._location_of[key] = self._location(g)
        return known

    def _location(self, g: Group) -> int:
        rf, zf = _ancestors(g.feature, g.location_features)
        pz, pr = g.parents
        loc = (
            g.region,
            g.zone,
            rf,
            zf,
            pz if pz != zf else None,  # only where they differ (family buckets)
            pr if pr != rf else None,
            g.family,  # family buckets: zone unions join one value's buckets only
        )
        return self.locations.setdefault(tuple(self.feature(_plain(x)) for x in loc), len(self.locations) + 1)


def _plain(text: str | None) -> str | None:
    """A string the data refers to by number: what ``_q`` writes (checked here, written once later)."""
    if text:
        _q(text)
    return text


def _groups(groups: Sequence[Group], shared: _Shared, big: int | None) -> str:
    """One group list by column: feature indices, ranks, shapes and locations as digits (runs where
    shorter), labels only where not derived."""
    labels = ",".join(
        f"[{i}]={_q(g.label)}"
        for i, g in enumerate(groups, 1)
        if _derived_label(g.feature, g.family) != g.label
    )
    return (
        f"{{{_column('f', [shared.feature(g.feature) for g in groups], 1)},"
        f"{_column('k', [g.rank for g in groups], 1)},"
        f"{_column('s', [shared.shape(g) for g in groups], 0)},"
        f"{_column('u', [shared.location(g) for g in groups], 0)},l={{{labels}}}"
        + (f",big={big}" if big is not None else "")
        + "}"
    )


def _name(text: str) -> str:
    """A node name or range key inside the node index string: what ``_q`` accepts (so never ``#|;,``)."""
    _q(text)
    return text


def _key_runs(runs: Sequence[tuple[int, int, int]]) -> list[int]:
    """A key's runs as the node index writes them: their count, then first, last and place (1-based) each."""
    return [len(runs), *(x for a, b, c in runs for x in (a, b, c + 1))]


def _node_index(nodes: NodeIndex, shared: _Shared) -> str:
    """The node index (read only for a --nodelist), built by Lua's own parser when the file loads, so that
    no decision parses it: ``{head="w1,w2,N#places", areas=DIGITS, keys={"prefix/width",...},
    runs=DIGITS, bare={[name]=place}}``: ``runs`` holds each key's runs in the order of ``keys``, their count
    then (first,last,place) each (:func:`_key_runs`), as one digit string (:func:`_ints`); ``data.lua`` makes
    it one array and ``ranges={["prefix/width"]=where its count is}`` at load. ``head``: widths ``w1,w2,N``
    (N: the nodes indexed),
    places fixed-width (place i at (i-1)*(w1+w2)+1: its network-group feature index in w1 digits, its area
    in w2); areas are (zone, region, nvl) feature indices, 3 a row; a key's runs are sorted, searched by
    halving.
    Numbers are 1-based, 0: none."""
    areas: dict[tuple[int, int, int], int] = {}
    rows = [
        (
            shared.feature(ng),
            areas.setdefault((shared.feature(z), shared.feature(r), shared.feature(v)), len(areas) + 1),
        )
        for ng, z, r, v in nodes.places
    ]
    w1, w2 = (len(str(max((row[i] for row in rows), default=0))) for i in (0, 1))
    places = "".join(f"{ng:0{w1}d}{area:0{w2}d}" for ng, area in rows)
    head = "#".join((f"{w1},{w2},{nodes.nodes}", places))
    if not _INDEX.match(head):
        raise ValueError("refusing to write the node index into Lua")  # digits and separators; never reached
    ranges = (nodes.ranges or {}).items()
    keys = ",".join(_q(_name(key)) for key, _ in ranges)
    runs = _ints([x for _, key_runs in ranges for x in _key_runs(key_runs)])
    bare = ",".join(f"[{_q(_name(k))}]={v + 1}" for k, v in (nodes.bare or {}).items())
    area_rows = _ints([x for row in areas for x in row])
    return f'{{head="{head}",\nareas={area_rows},\nkeys={{{keys}}},\nruns={runs},\nbare={{{bare}}}}}'


def render_lua_table(data: PolicyData) -> str:
    shared = _Shared()
    out = [
        "return {\n",
        f"format={FORMAT},\n",
        f"fingerprint={_q(data.fingerprint)},\n",
        f"default={_q(data.config.default)},\n",
        f"default_partition={_slurm_name(data.default_partition)},\n",
        f"everywhere={_slurm_name(data.everywhere)},\n",
        "partition_defaults={" + ",".join(f"[{_q(p)}]={_q(v)}" for p, v in data.config.partitions) + "},\n",
        "families={" + ",".join(f"{{{_q(n)},{_q(p)}}}" for n, p in data.config.families) + "},\n",
        *([f"nvl_segment={_q(data.config.nvl_segment)},\n"] if data.config.nvl_segment else []),
        "known=" + _set({f for cls in data.classes for f in cls.features}) + ",\n",
        "owned={" + ",".join(_q(p) for p in LOCATION_PREFIXES) + "},\n",
        f"messages={{hold={_msg(HOLD_NOTE)},interactive={_msg(INTERACTIVE_NOTE)}}},\n",
        "classes={\n",
    ]
    for cls in data.classes:
        gtype = _q(cls.gpu_type) if cls.gpu_type else "nil"
        out.append(f"{{f={_set(cls.features)},g={cls.gpus},t={gtype}}},\n")
    out.append("},\nauto_max=" + str(data.auto_max) + ",\nauto_units={\n")
    for level, rows in data.auto_units.items():
        cells = ("false" if row is None else "{" + ",".join(repr(u) for u in row) + "}" for row in rows)
        out.append(f"{level}={{" + ",".join(cells) + "},\n")
    out.append("},\nareas={\n")
    for label, (features, regions) in data.areas.items():
        out.append(f"[{_q(label)}]={{f={{{','.join(_q(f) for f in features)}}},r={_set(regions)}}},\n")
    out.append("},\npartitions={\n")
    for pname, levels in data.partitions.items():
        out.append(f"[{_slurm_name(pname)}]={{\n")
        for level in (lvl for lvl in (*LEVELS, NVL) if lvl in levels):  # nvl: fleets with NVLink domains
            out.append(f"{level}=" + _groups(levels[level], shared, _largest(levels[level])) + ",\n")
        if data.family_values:
            out.append("values=" + _groups(data.family_values[pname], shared, None) + ",\n")
        out.append("},\n")
    out.append("},\nnodes=" + _node_index(data.nodes, shared) + ",\n")
    out.append("locations=" + _ints([x for loc in shared.locations for x in loc]) + ",\n")
    out.append("shapes=" + _ints([x for shape in shared.shapes for x in shape]) + ",\n")
    out.append("features={\n" + "".join(f"{_q(f)},\n" for f in shared.features) + "},\n}\n")
    return "".join(out)


def _largest(groups: Sequence[Group]) -> int:
    """1-based index of the level's largest group (nodes, then GPUs; the first of equals), 0 when none."""
    best = 0
    for i, g in enumerate(groups, 1):
        if best == 0 or (g.nodes, g.gpus) > (groups[best - 1].nodes, groups[best - 1].gpus):
            best = i
    return best


def checksum(body: str) -> str:
    """The data file's content checksum: Adler-32 of the bytes after its second line, and their length. The
    filter computes the same in Lua 5.1 (no bit operations: sums only) before it loads the table, and fails
    open on a mismatch (a corrupted or hand-edited file is never used)."""
    raw = body.encode("utf-8")
    return f"adler32:{zlib.adler32(raw):08x}:{len(raw)}"


LEGEND = """\
-- Format 9. Keys: default, partition_defaults, families: the policy. everywhere: the partition a name the
-- data does not know counts as. known: every node feature. owned: the prefixes of the features slurm-topo
-- makes (model.LEVEL_FEATURE_PREFIXES). messages: text templates (policy/vocab.py).
-- classes: node classes {f=features, g=GPUs, t=GPU type}. areas: --locality-regions names {f=features,
-- r=regions}. DIGITS: [=[WD...]=], non-negative integers in base 64 (digits '?'..'~', 0..63), W the width
-- of each (1-5 digits, written as a digit). partitions[p][level]: groups in the filter's order, by column,
-- each DIGITS: f=feature numbers and k=ranks as runs {first,count,...} of values rising by 1, s=shape and
-- u=location numbers as runs of one value, or fv/kv/sv/uv the values themselves where shorter; l={[i]=label}
-- where not the one the feature spells (ng_a.r1: a/r1; a family bucket's ng_a.r1.V of value V: a/r1/V),
-- big=number of the largest group; values (with families): the bare family values as groups, largest first.
-- shapes: DIGITS, each n=nodes, g=GPUs, m=most GPUs on a node, then its class count c and c pairs (class,
-- nodes). locations:
-- DIGITS, 7 string numbers each (0: none): region, zone, their features, the zone and region groups holding
-- it where not those (family buckets), the family values. features: every string the numbers refer to, once.
-- nodes: where each node is (read only for a --nodelist): {head="w1,w2,N#places", areas=DIGITS (z,r,nvl),
-- keys={"prefix/width",...}, runs=DIGITS: per key its run count, then (first,last,place) runs,
-- bare={[name]=place}}, see filter_data.py _node_index.
-- auto_units[level][n] (n up to auto_max): an auto job's budget per second of time limit for each looser
-- level in order (empty: no plan; false: the plan does not fit n nodes).
"""


def render_filter_data(ctx: RenderContext) -> str:
    data = ctx.policy
    groups = sum(len(v) for levels in data.partitions.values() for v in levels.values())
    summary = (
        f"submit-filter data: {len(data.partitions)} partitions, {groups} groups, {len(data.classes)} node "
        f"classes; read by job_submit/slurm_topo_filter/"
    )
    measured = getattr(ctx.inventory.links, "measured", None)
    if data.auto_units and measured is not None:  # the budgets' constants came from `slurm-topo calibrate`
        summary += f"; auto budgets from the {measured.text()}"
    body = header("slurm_topo_data.lua", ctx, summary, comment="--") + LEGEND + render_lua_table(data)
    return f"-- slurm-topo-data {ctx.fingerprint}\n-- slurm-topo-checksum {checksum(body)}\n{body}"
