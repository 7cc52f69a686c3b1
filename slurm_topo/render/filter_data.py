"""slurm_topo_data.lua: what the submit filter decides from.

A Lua 5.1 chunk returning one table: the policy defaults, node classes and, per partition and level, the
groups in the filter's order (size, then label). Its first line is ``-- slurm-topo-data <fingerprint>``: the
filter reads only that line to notice a new file, and reloads the whole table only when it changed. Every
string written here has passed label validation ([A-Za-z0-9._-]) or is one of our own names, and is still
written through ``_q``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from ..policy import LEVELS, Group, PolicyData
from ..policy.vocab import HOLD_NOTE, INTERACTIVE_NOTE, NVL
from . import RenderContext, header

FORMAT = 4
"""The data file's layout version; job_submit/slurm_topo_filter.lua refuses (fails open on) any other."""
_PLAIN = re.compile(r"^[A-Za-z0-9._:*?=+/ ()-]*\Z")


def _q(text: str) -> str:
    if not _PLAIN.match(text):
        raise ValueError(f"refusing to write {text!r} into Lua")  # validated upstream; never reached
    return f'"{text}"'


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


def _lua(value: str | None) -> str:
    return _q(value) if value else "nil"


def _group(g: Group, length: int) -> str:
    """One group as a Lua table; pz/pr (the zone and region groups holding it) only where they differ from
    zf/rf (with family buckets), to keep the data small."""
    counts = ",".join(f"{c + 1},{n}" for c, n in g.counts)  # 1-based class index in Lua
    rf, zf = _ancestors(g.feature, g.location_features)
    pz, pr = g.parents
    up = (f",pz={_q(pz)}" if pz and pz != zf else "") + (f",pr={_q(pr)}" if pr and pr != rf else "")
    return (
        f"{{f={_q(g.feature)},l={_q(g.label)},r={_lua(g.region)},z={_lua(g.zone)},n={g.nodes},g={g.gpus},"
        f"m={g.max_gpus},k={g.rank},rf={_lua(rf)},zf={_lua(zf)}{up},c={{{counts}}},"
        f"s={_q(f'{g.label}({g.nodes}n)')},L={length}}},\n"
    )


def render_lua_table(data: PolicyData) -> str:
    out = [
        "return {\n",
        f"format={FORMAT},\n",
        f"fingerprint={_q(data.fingerprint)},\n",
        f"default={_q(data.config.default)},\n",
        f"default_partition={_q(data.default_partition)},\n",
        f"everywhere={_q(data.everywhere)},\n",
        "partition_defaults={" + ",".join(f"[{_q(p)}]={_q(v)}" for p, v in data.config.partitions) + "},\n",
        "families={" + ",".join(f"{{{_q(n)},{_q(p)}}}" for n, p in data.config.families) + "},\n",
        "known=" + _set({f for cls in data.classes for f in cls.features}) + ",\n",
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
    out.append("},\nplaces={\n")
    for place in data.nodes.places:
        out.append("{" + ",".join(_q(f) if f else "false" for f in place) + "},\n")
    out.append("},\nranges={\n")
    for key, runs in (data.nodes.ranges or {}).items():
        out.append(f"[{_q(key)}]={{" + ",".join(f"{a},{b},{c + 1}" for a, b, c in runs) + "},\n")
    out.append(
        "},\nbare={" + ",".join(f"[{_q(k)}]={v + 1}" for k, v in (data.nodes.bare or {}).items()) + "},\n"
    )
    out.append("partitions={\n")
    for pname, levels in data.partitions.items():
        out.append(f"[{_q(pname)}]={{\n")
        for level in (lvl for lvl in (*LEVELS, NVL) if lvl in levels):  # nvl: fleets with NVLink domains
            out.append(f"{level}={{\n")
            length = 0
            for g in levels[level]:
                length += len(g.feature) + 1
                out.append(_group(g, length))
            out.append(f"big={_largest(levels[level])},\n}},\n")
        if data.family_values:
            out.append("values={\n")
            length = 0
            for g in data.family_values[pname]:
                length += len(g.feature) + 1
                out.append(_group(g, length))
            out.append("},\n")
        out.append("},\n")
    out.append("},\n}\n")
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
-- Keys: default, partition_defaults, families: the policy. everywhere: the partition a name the data
-- does not know counts as. known: every node feature. messages: text templates (policy/vocab.py).
-- classes: node classes {f=features, g=GPUs, t=GPU type}. areas: --locality-regions names {f=features,
-- r=regions}. places, ranges, bare: where each node is ({ng, zone, region} group features;
-- "prefix/width"={first,last,place,...}; names without a number). partitions[p][level]: groups in the
-- filter's order {f=feature, l=label, r/z=region/zone, n=nodes, g=GPUs, m=most GPUs on a node, k=rank,
-- rf/zf=ancestor features, pz/pr=the zone/region groups holding it where not zf/rf (family buckets),
-- c={class,nodes,...}, s=display, L=bracket length through this group}; big: index of the largest group;
-- values (with families): the bare family values as groups, largest first. auto_units[level][n] (n up to
-- auto_max): an auto job's budget per second of time limit for each looser level in order (empty: no plan;
-- false: the plan does not fit n nodes).
"""


def render_filter_data(ctx: RenderContext) -> str:
    data = ctx.policy
    groups = sum(len(v) for levels in data.partitions.values() for v in levels.values())
    summary = (
        f"submit-filter data: {len(data.partitions)} partitions, {groups} groups, {len(data.classes)} node "
        f"classes; read by job_submit/slurm_topo_filter.lua"
    )
    body = header("slurm_topo_data.lua", ctx, summary, comment="--") + LEGEND + render_lua_table(data)
    return f"-- slurm-topo-data {ctx.fingerprint}\n-- slurm-topo-checksum {checksum(body)}\n{body}"
