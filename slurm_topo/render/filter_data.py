"""slurm_topo_data.lua: what the submit filter decides from.

A Lua 5.1 chunk returning one table: the policy defaults, node classes and, per partition and level, the
groups in the filter's order (size, then label). Its first line is ``-- slurm-topo-data <fingerprint>``: the
filter reads only that line to notice a new file, and reloads the whole table only when it changed. Every
string written here has passed label validation ([A-Za-z0-9._-]) or is one of our own names, and is still
written through ``_q`` (the node index: each name through ``_q``, the whole through ``_INDEX``), except
Slurm's partition names, which may hold any character Slurm takes: each byte of those that ``_q`` would
refuse is written as a Lua decimal escape (``_slurm_name``).

Format 8 (format 7 with the node index's ranges and bare names as Lua tables, built by the parser at load
so that no decision parses them; format 7: the generator's feature prefixes, ``owned``, and each node's
NVLink domain and the node count in the node index; format 6: a family bucket's values, ``fv``) is sized
for the load inside slurmctld (read, Adler-32 in Lua, Lua's parser: each costs about its bytes, the parser
more per table field and string): the group lists are written by column, with what repeats (features,
locations, node counts) written once and referred to by number, and what is derivable (labels) left to
the filter (M.prepare, once per load).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from ..policy import LEVELS, Group, PolicyData
from ..policy.nodes import NodeIndex
from ..policy.vocab import HOLD_NOTE, INTERACTIVE_NOTE, LOCATION_PREFIXES, NVL
from . import RenderContext, header

FORMAT = 8
"""The data file's layout version; job_submit/slurm_topo_filter/data.lua refuses (fails open on) any other."""
_PLAIN = re.compile(r"^[A-Za-z0-9._:*?=+/ ()-]*\Z")
_INDEX = re.compile(r"^[A-Za-z0-9._:*?=+/ ()#|;,-]*\Z")
"""The node index string: _PLAIN's characters and its separators."""


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


def _derived_label(feature: str) -> str | None:
    """The label a group feature spells (``ng_a.r1`` -> ``a/r1``: after the first ``_``, dots as slashes):
    written only where a group's label differs (the Lua twin is ``label_of``)."""
    _, sep, rest = feature.partition("_")
    return rest.replace(".", "/") if sep else None


def _runs(values: Sequence[int], step: int) -> str:
    """``{first,count,...}``: runs of values rising by ``step`` (0: repeated) as (first value, length)."""
    out: list[int] = []
    for v in values:
        if out and v == out[-2] + step * out[-1]:
            out[-1] += 1
        else:
            out += [v, 1]
    return "{" + ",".join(map(str, out)) + "}"


class _Shared:
    """What the group lists and the node index refer to by number: the location features (each written once),
    the distinct locations ({r, z, rf, zf, pz, pr, fv}) and shapes ({n, g, m, c, u})."""

    def __init__(self) -> None:
        self.features: dict[str, int] = {}
        self.locations: dict[str, int] = {}
        self.shapes: dict[str, int] = {}

    def feature(self, feature: str | None) -> int:
        """1-based index in the features list; 0 for none."""
        return self.features.setdefault(feature, len(self.features) + 1) if feature else 0

    def shape(self, g: Group) -> int:
        rf, zf = _ancestors(g.feature, g.location_features)
        pz, pr = g.parents
        fields = (
            ("r", g.region),
            ("z", g.zone),
            ("rf", rf),
            ("zf", zf),
            ("pz", pz if pz != zf else None),  # only where they differ (family buckets)
            ("pr", pr if pr != rf else None),
            ("fv", g.family),  # family buckets: zone unions join one value's buckets only
        )
        loc = "{" + ",".join(f"{k}={_q(v)}" for k, v in fields if v) + "}"
        u = self.locations.setdefault(loc, len(self.locations) + 1)
        counts = ",".join(f"{c + 1},{n}" for c, n in g.counts)  # 1-based class index in Lua
        shape = f"{{n={g.nodes},g={g.gpus},m={g.max_gpus},c={{{counts}}},u={u}}}"
        return self.shapes.setdefault(shape, len(self.shapes) + 1)


def _groups(groups: Sequence[Group], shared: _Shared, big: int | None) -> str:
    """One group list by column: feature indices, ranks and shapes as runs, labels only where not derived."""
    labels = ",".join(
        f"[{i}]={_q(g.label)}" for i, g in enumerate(groups, 1) if _derived_label(g.feature) != g.label
    )
    return (
        f"{{f={_runs([shared.feature(g.feature) for g in groups], 1)},k={_runs([g.rank for g in groups], 1)},"
        f"s={_runs([shared.shape(g) for g in groups], 0)},l={{{labels}}}"
        + (f",big={big}" if big is not None else "")
        + "}"
    )


def _name(text: str) -> str:
    """A node name or range key inside the node index string: what ``_q`` accepts (so never ``#|;,``)."""
    _q(text)
    return text


def _node_index(nodes: NodeIndex, shared: _Shared) -> str:
    """The node index (read only for a --nodelist), built by Lua's own parser when the file loads, so that
    no decision parses it: ``{head="w1,w2,N#places", areas={{zone,region,nvl},...}, ranges={["prefix/width"]=
    {first,last,place,...}}, bare={[name]=place}}``. ``head``: widths ``w1,w2,N`` (N: the nodes indexed),
    places fixed-width (place i at (i-1)*(w1+w2)+1: its network-group feature index in w1 digits, its area
    in w2); areas are feature indices; a key's runs are sorted, searched by halving.
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
    ranges = ",".join(
        f"[{_q(_name(key))}]={{" + ",".join(f"{a},{b},{c + 1}" for a, b, c in runs) + "}"
        for key, runs in (nodes.ranges or {}).items()
    )
    bare = ",".join(f"[{_q(_name(k))}]={v + 1}" for k, v in (nodes.bare or {}).items())
    area_rows = ",".join(f"{{{z},{r},{v}}}" for z, r, v in areas)
    return f'{{head="{head}",\nareas={{{area_rows}}},\nranges={{{ranges}}},\nbare={{{bare}}}}}'


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
    out.append("locations={\n" + "".join(f"{loc},\n" for loc in shared.locations))
    out.append("},\nshapes={\n" + "".join(f"{shape},\n" for shape in shared.shapes))
    out.append("},\nfeatures={\n" + "".join(f"{_q(f)},\n" for f in shared.features) + "},\n}\n")
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
-- Format 8. Keys: default, partition_defaults, families: the policy. everywhere: the partition a name the
-- data does not know counts as. known: every node feature. owned: the prefixes of the features slurm-topo
-- makes (model.LEVEL_FEATURE_PREFIXES). messages: text templates (policy/vocab.py).
-- classes: node classes {f=features, g=GPUs, t=GPU type}. areas: --locality-regions names {f=features,
-- r=regions}. partitions[p][level]: groups in the filter's order, by column: f=feature indices, k=ranks,
-- s=shape indices (runs {first,count,...} of values rising by 1, shapes: repeated), l={[i]=label} where
-- not the feature's own (ng_a.r1: a/r1), big=index of the largest group; values (with families): the bare
-- family values as groups, largest first. shapes: {n=nodes, g=GPUs, m=most GPUs on a node, c={class,
-- nodes,...}, u=location index}; locations: {r/z=region/zone, rf/zf=ancestor features, pz/pr=the
-- zone/region groups holding it where not zf/rf, fv=the family values (family buckets)}; features: every
-- group feature, once.
-- nodes: where each node is (read only for a --nodelist): {head="w1,w2,N#places", areas={{z,r,nvl}},
-- ranges={["prefix/width"]={first,last,place,...}}, bare={[name]=place}}, see filter_data.py _node_index.
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
