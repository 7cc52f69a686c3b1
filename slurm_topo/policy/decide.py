"""Decide: one job's request against the compiled data -> ``Decision`` (the Lua filter's "decision"
section)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..core.errors import InputError
from .compile import Group, PolicyData
from .constraint import Constraint, compose, parse_constraint
from .nodes import MAX_NAMED, MAX_VISITS, PLACE_LEVELS, place_named
from .request import JobRequest, _blen
from .scan import NO_GROUPS, Scan, Source, level_source, named_source, needs, values_source
from .vocab import (
    AUTO_NO_FIT,
    AUTO_NO_LIMIT,
    AUTO_NO_PLAN,
    AUTO_WAITS,
    CONFLICT_NOTE,
    HOLD_NOTE,
    IMPLICIT_PARTITION,
    INTERACTIVE_NOTE,
    LEVELS,
    LOOKS_FINER,
    MAX_ALTERNATIVES,
    MAX_CONSTRAINT,
    MAX_MERGED,
    MAX_RECORD,
    NVL,
    NVL_NONE,
    NVL_NONE_NOTE,
    RECORD_PREFIX,
    SEGMENT_KEY,
    SEGMENT_RELEASE,
    UNION_ROWS,
    UNION_TRIES,
    budget_record,
    parse_segment,
    safe,
)


@dataclass(frozen=True, slots=True)
class Decision:
    """What the filter does: ``unchanged``, ``amend`` (features and/or prefer set), ``hold`` or ``reject``."""

    action: str
    locality: str = ""
    features: str | None = None
    prefer: str | None = None
    message: str | None = None
    """Sent to the user (slurm.log_user): a rejection's or a hold's reason, or a warning."""
    record: str = ""
    """Appended to the job's AdminComment ("slurm-topo: …", at most 200 characters)."""
    candidates: tuple[tuple[str, int, int], ...] = ()
    """(label, nodes, GPUs) of the groups put in the bracket, in order."""
    level: str | None = None
    """The level the bracket is at (for prefer: the finest that fits)."""
    segment: int | None = None
    """``segment_size`` the filter writes (``nvl:segment=N`` for a job larger than one NVLink domain, on a
    release that takes it); None: not written (none asked, or the job's own ``--segment``)."""
    segment_policy: str | None = None
    """``spread`` or ``consolidate``: the job flag the filter sets with the segment (never when the job set
    either itself)."""
    rejection: str = ""
    """For a rejection: ``size`` (no group can ever hold the job: Slurm's node-count / topology error code) or
    ``request`` (the request itself: an unknown locality or region, a conflict; Slurm's generic error, so
    that sbatch does not add "Node count specification invalid")."""

    def as_dict(self) -> dict[str, object]:
        return {
            "action": self.action,
            "locality": self.locality,
            "features": self.features,
            "prefer": self.prefer,
            "message": self.message,
            "record": self.record,
            "rejection": self.rejection,
            "segment": self.segment,
            "segment_policy": self.segment_policy,
        }


def _record(text: str) -> str:
    text = RECORD_PREFIX + text  # ASCII only: user strings pass through safe()
    return text if len(text) <= MAX_RECORD else text[: MAX_RECORD - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_request(req: JobRequest) -> str:
    nodes, gpus, _, gtype = needs(req)
    text = _plural(nodes, "node")
    if gpus:
        text += f" with {gpus} {gtype + ' ' if gtype else ''}GPU{'' if gpus == 1 else 's'}"
    return text


def _all_groups(data: PolicyData, partitions: Sequence[str], level: str) -> tuple[Group, ...]:
    """Every group of a level for the job's partitions, in the filter's order (each feature once: its largest
    copy, ties to the first partition): what ``survey`` lists. A decision walks them instead (scan.py)."""
    merged: dict[str, Group] = {}
    for p in partitions:
        for g in data.partitions[p].get(level, ()):
            if g.feature not in merged or g.nodes > merged[g.feature].nodes:
                merged[g.feature] = g
    return tuple(sorted(merged.values(), key=lambda g: (g.nodes, g.rank)))


def _cascade(
    lists: Sequence[tuple[list[tuple[Group, int]], bool]],
    budget: int,
    extra: int = 0,
    emit: Sequence[int] | None = None,
) -> tuple[list[tuple[Group, int]], bool]:
    """One bracket from per-level lists given finest first: within Slurm's limits (64 alternatives,
    ``budget`` characters of bracket) the coarsest lists are kept whole first, and what does not fit is
    dropped from the tail of the finest ones (regions and family values keep the job off the plain tree).
    The first ``extra`` lists (zone unions) come last in that order: they take only the room the level
    lists leave. ``emit``: the lists' order in the bracket (indices), else as given."""
    alternatives, room = MAX_ALTERNATIVES, budget - 1  # each alternative costs its name and one separator
    counts = [0] * len(lists)
    cut = False
    order = [*reversed(range(extra, len(lists))), *range(extra)]
    for j in order:
        kept, was_cut = lists[j]
        n = 0
        for g, _ in kept:
            if n == alternatives or len(g.feature) + 1 > room:
                break
            room -= len(g.feature) + 1
            n += 1
        alternatives -= n
        cut = cut or was_cut or n < len(kept)
        counts[j] = n
    order_out = range(len(lists)) if emit is None else emit
    return [x for j in order_out for x in lists[j][0][: counts[j]]], cut


PREFER_LEVELS = (NVL, *LEVELS)
"""The levels prefer tries, finest first: an NVLink domain (where the fleet has them), then the tree's."""
UNION_EMIT = (2, 3, 4, 0, 5, 1)
"""The bracket's order of the prefer lists (unions inside, unions across, nvl, ng, zone, region): nvl, ng,
zone, the unions inside one region, region, the unions across regions."""
UNION_EMIT_FAMILIES = (*UNION_EMIT, 6)
"""With families: the same, then the bare family values (the coarsest alternatives), all from the first
union or region bucket on ordered by what each spans (:func:`_by_spread`)."""
UNION_ZONES = 8
"""Zones a union is made from, per region and across regions: the 8 rows with the most eligible nodes."""


Spans = dict[str, tuple[int, int]]
"""Per alternative after the zones (a union's feature, a region bucket, a bare family value): the (regions,
zones) it spans, its eligible zones' among the rows for a region bucket or a bare value."""
Row = tuple[Group, int, int, int]
"""A zone with eligible nodes: (zone, nodes, GPUs, most GPUs on a node)."""


def _zone_rows(scan: Scan, zones: Source) -> list[Row]:
    """The ``UNION_ROWS`` largest zones (from the largest down) with eligible nodes, by eligible nodes (most
    first), then size, then rank."""
    rows = []
    for g in scan.largest_first(zones, UNION_ROWS):
        n, gp, most = scan.eligible(g)
        if n > 0:
            rows.append((g, n, gp, most))
    rows.sort(key=lambda r: (-r[1], r[0].nodes, r[0].rank))
    return rows


def _zone_unions(
    scan: Scan, zones: Source, room: int = MAX_ALTERNATIVES
) -> tuple[list[tuple[Group, int]], list[tuple[Group, int]], tuple[Group, int] | None, Spans]:
    """Unions of 2-3 zones that can ever hold the job, as alternatives ``(zone_a|zone_b)`` (Slurm reads a
    parenthesised OR inside a matching-OR bracket as one alternative: all nodes in the union): (those inside
    one region, those across regions), each by (regions, zones, size, features). After every zone and
    before the regions, a union in one region lands a job no zone has room for on the fewest zones of one
    region; after the regions, a union across regions does the same when no region has room
    (benchmarks/results/placement.md, "Zone unions"). With families the zones are the family buckets and a
    union joins buckets of one value only (prefer never mixes versions). The third value is the zone with the
    most eligible nodes: what leads a bracket that would start with a union (see ``_lead``); the fourth, the
    :data:`Spans` of the unions, of the region buckets holding rows (one region, their rows) and of each
    family value (:func:`_by_spread`). ``room``: the
    alternatives the level lists leave; unions that could never be kept are not made (3-zone unions only
    while the 2-zone ones leave room, those across regions only while those inside leave room).

    Bounded: the rows are the largest zones (``UNION_ROWS`` looks), the regions taken in the order of their
    first row, and at most ``UNION_TRIES`` combinations are tried in all (inside regions first)."""
    if not scan.check or room <= 0 or _too_large_for_unions(scan, zones):
        return [], [], None, {}  # no union could be kept: no row is read (family values keep their order)
    rows = _zone_rows(scan, zones)
    by_region: dict[tuple[str | None, str | None], list[Row]] = {}
    by_family: dict[str | None, list[Row]] = {}
    for r in rows:
        by_region.setdefault((r[0].region, r[0].family), []).append(r)
        by_family.setdefault(r[0].family, []).append(r)
    tries = _Tries(scan)
    inside: list[tuple[tuple[int, int, int, str], tuple[Group, int]]] = []
    across: list[tuple[tuple[int, int, int, str], tuple[Group, int]]] = []
    for k in (2, 3):
        if len(inside) >= room:
            break
        for members in by_region.values():
            inside += _unions(scan, members[:UNION_ZONES], False, k, tries)
    # per family value (one, None, without families): its zones in two regions or more; a union of all of
    # them is the bare value's (the plain tree's) own alternative and is not made
    tops = [
        (top[:UNION_ZONES], len(top)) for top in by_family.values() if len({r[0].region for r in top}) >= 2
    ]
    for k in (2, 3):
        if not tops or len(inside) + len(across) >= room:
            break
        for top, count in tops:
            if k < count:
                across += _unions(scan, top, True, k, tries)
    order = _union_order(any(r[0].family for r in rows))
    inside.sort(key=order)
    across.sort(key=order)
    lead = (rows[0][0], rows[0][1]) if rows else None
    return (
        [x[1] for x in inside],
        [x[1] for x in across],
        lead,
        _spans(by_family, by_region, inside, across),
    )


def _spans(
    by_family: dict[str | None, list[Row]],
    by_region: dict[tuple[str | None, str | None], list[Row]],
    inside: list[UnionKey],
    across: list[UnionKey],
) -> Spans:
    """What each value, union across regions and (with families: the spans are read only then) union inside
    one region and region bucket (one region, its rows) spans: :data:`Spans`."""
    spans = {fv: (len({r[0].region for r in top}), len(top)) for fv, top in by_family.items() if fv}
    spans.update({u.feature: (key[0], key[1]) for key, (u, _) in across})
    if any(fv for fv in by_family):
        spans.update({u.feature: (key[0], key[1]) for key, (u, _) in inside})
        spans.update(
            {top[0][0].parents[1]: (1, len(top)) for top in by_region.values() if top[0][0].parents[1]}
        )
    return spans


UnionKey = tuple[tuple[int, int, int, str], tuple[Group, int]]


def _union_order(families: bool) -> Callable[[UnionKey], tuple[int, int, int, str]]:
    """The unions' order (and what the cut keeps: the tail goes): by (regions, zones), then size — smallest
    first without families (best fit); with families the largest first, so the unions a cut keeps of one
    span are those most likely to have room (Slurm takes the first alternative with room; family buckets'
    long names cut the bracket at 16-24 alternatives: benchmarks/results/family_target.md); what is kept is
    then listed smallest first again (:func:`_by_spread`)."""
    if families:
        return lambda x: (x[0][0], x[0][1], -x[0][2], x[0][3])
    return lambda x: x[0]


def _too_large_for_unions(scan: Scan, zones: Source) -> bool:
    """Whether the job has more nodes than any three zones together (the three largest of each partition's
    list bound every union's nodes): then no union is tried and no row read."""
    top = sorted(g.nodes for lst in zones.lists for g in lst[-3:])[-3:]
    return sum(top) < scan.nodes


class _Tries:
    """The combinations prefer's unions may still try (``UNION_TRIES``)."""

    def __init__(self, scan: Scan):
        self.left = UNION_TRIES
        self.scan = scan

    def take(self) -> bool:
        if self.left == 0:
            return False
        self.left -= 1
        return True


def _unknown_span(g: Group) -> tuple[int, int]:
    """The span of an alternative no row counted: a region bucket's is one region, its zones unknown (after
    the spans known inside one region); anything else goes last."""
    if g.region is not None and g.zone is None:
        return (1, MAX_ALTERNATIVES)
    return (MAX_ALTERNATIVES, MAX_ALTERNATIVES)


def _by_spread(kept: list[tuple[Group, int]], spans: Spans) -> list[tuple[Group, int]]:
    """With families the bracket ends with the unions inside one region, the region buckets, the unions
    across regions and the bare values: that tail is ordered by the (regions, zones) each spans (a region
    bucket's zones: its rows'), unions before a bucket or value of the same span, so a value that holds the
    job on two regions comes before another value's unions of three, and a region bucket of two zones before
    another region's unions of three (Slurm takes the first alternative with room;
    benchmarks/results/family_target.md). The unions of one span go smallest first (best fit): the cut
    kept the largest (:func:`_union_order`), the bracket lists them as the levels are listed."""
    start = next((i for i, (g, _) in enumerate(kept) if g.feature in spans), len(kept))
    tail = sorted(kept[start:], key=lambda x: _spread_key(x[0], spans))
    return [*kept[:start], *tail]


def _spread_key(g: Group, spans: Spans) -> tuple[int, int, int, int]:
    """(regions, zones, then unions before the rest, a union's size): :func:`_by_spread`'s order."""
    regions, zones = spans.get(g.feature, _unknown_span(g))
    if g.feature.startswith("("):
        return (regions, zones, 0, g.nodes)
    return (regions, zones, 1, 0)


def _lead(
    kept: list[tuple[Group, int]], lead: tuple[Group, int] | None, budget: int
) -> tuple[list[tuple[Group, int]], bool]:
    """A bracket must not start with a union: 22.05's submit check (``valid_feature_counts``) then narrows the
    usable nodes to the union's first zone and rejects a job that zone cannot hold ("Requested node
    configuration is not available"; a plain first alternative leaves the check alone). So such a bracket
    starts with the largest zone — too small for the job, Slurm passes over it at once — and loses its last
    unions (then its last alternatives) when that breaks the limits. (kept, cut)."""
    if not kept or not kept[0][0].feature.startswith("(") or lead is None:
        return kept, False
    out = [lead, *kept]
    cut = False
    while len(out) > MAX_ALTERNATIVES or sum(len(g.feature) + 1 for g, _ in out) + 1 > budget:
        # the last union goes first: a region bucket or a bare family value keeps the job off the plain tree
        last = next(
            (i for i in range(len(out) - 1, 0, -1) if out[i][0].feature.startswith("(")), len(out) - 1
        )
        out.pop(last)
        cut = True
    return out, cut


def _unions(
    scan: Scan, rows: Sequence[Row], cross: bool, k: int, tries: _Tries
) -> list[tuple[tuple[int, int, int, str], tuple[Group, int]]]:
    """Unions of ``k`` of ``rows`` that can hold the job; inside a region, not all of its zones (that is the
    region's own alternative); across regions, spanning two or more. Keyed by (regions, zones, size,
    features). Each combination looked at takes one of ``tries``."""
    out: list[tuple[tuple[int, int, int, str], tuple[Group, int]]] = []
    if not cross and k >= len(rows):
        return out
    for combo in itertools.combinations(rows, k):
        if not tries.take():
            break
        spread = len({r[0].region for r in combo})
        if cross and spread < 2:
            continue
        n = sum(r[1] for r in combo)
        if not scan.holds(n, sum(r[2] for r in combo), max(r[3] for r in combo)):
            continue
        feature = "(" + "|".join(r[0].feature for r in combo) + ")"
        label = "+".join(r[0].label for r in combo)
        union = Group(
            feature, label, None, None, frozenset(), (), n, sum(r[2] for r in combo), max(r[3] for r in combo)
        )
        out.append(((spread, k, n, feature), (union, n)))
    return out


def _bracket(kept: Sequence[tuple[Group, int]]) -> str:
    return "[" + "|".join(g.feature for g, _ in kept) + "]"


def _shown(kept: Sequence[tuple[Group, int]], cut: bool) -> str:
    text = ",".join(f"{g.label}({n}n)" for g, n in kept)
    return (f"first {len(kept)} kept (Slurm's limits) " if cut else "") + f"[{text}]"


def _conflict(loc: str, mode: str, what: str, msg: str) -> Decision:
    """The user's constraint and a required locality cannot be combined: refused at submit in every mode (a
    required level is a promise: never passed through unenforced); ``prefer`` never gets here."""
    return Decision(
        "reject",
        loc,
        message=msg + CONFLICT_NOTE,
        record=_record(f"{loc}: rejected, {what} conflict"),
        rejection="request",
    )


def decide(data: PolicyData, req: JobRequest) -> Decision:
    """The filter's decision for one job (see the module docstring)."""
    d = _decide(data, req)
    if req.het_offset is not None and d.action != "unchanged":
        note = f" [het+{req.het_offset}: components are placed separately]"
        rec = (
            d.record
            if len(d.record) + len(note) <= MAX_RECORD
            else d.record[: MAX_RECORD - len(note) - 3] + "..."
        )
        d = replace(d, record=rec + note)
    return _with_budget(data, req, d)


def _with_budget(data: PolicyData, req: JobRequest, d: Decision) -> Decision:
    """``LEVEL:auto`` decides as ``:wait``; a job given its level's bracket also gets the budget record
    (``; slurm-topo-auto: zone limit=7200s region=1908s any=7494s``, docs/relax.md) from the data's
    per-node-count factors and its time limit. Without a time limit, or without a site plan in the data,
    the record says so instead and the job waits as ``:wait`` (the relaxer never widens it)."""
    level, _, mode = d.locality.partition(":")
    if mode != "auto" or level not in LEVELS or d.action != "amend":
        return d
    if req.time_limit is None:
        return _no_budget(d, level, AUTO_NO_LIMIT)
    if not data.auto_units:
        return _no_budget(d, level, AUTO_NO_PLAN)
    units = data.auto_units[level][min(req.min_nodes or 1, data.auto_max) - 1]
    if units is None:
        return _no_budget(d, level, AUTO_NO_FIT)
    return replace(d, record=d.record + "; " + budget_record(level, req.time_limit * 60, units))


def _no_budget(d: Decision, level: str, why: str) -> Decision:
    """An auto job without a budget: the record says why, and so does the submitter's stderr."""
    note = (
        f"slurm-topo: --locality={level}:auto: {AUTO_WAITS[why]}, so no budget: the job waits as {level}:wait"
    )
    return replace(d, record=d.record + why, message=note if d.message is None else f"{d.message}; {note}")


def _partition_names(data: PolicyData, req: JobRequest) -> tuple[list[str], list[str], str | None]:
    """(the job's partitions as named, the data's partitions counted for them, the first name the data does
    not know — counted as every node)."""
    names = req.partition.split(",") if req.partition else [data.default_partition]
    unknown = next((p for p in names if p not in data.partitions), None)
    counted = list(dict.fromkeys(p if p in data.partitions else data.everywhere for p in names))
    return names, counted, unknown


@dataclass(frozen=True, slots=True)
class _Job:
    """One request on its way through the decision: what every step below reads."""

    data: PolicyData
    req: JobRequest
    c: Constraint
    loc: str
    level: str
    mode: str
    partitions: list[str]
    note: str
    restrict: str | None
    scan: Scan
    segment: tuple[int, str | None] | None = None
    """``nvl:segment=N[:policy]`` (or the site's default for nvl jobs): (N, policy); None: no segment."""


def _decide(data: PolicyData, req: JobRequest) -> Decision:
    """The steps in order: hostile sizes, the locality, the constraint, the regions, then prefer or a required
    level. Each step returns a Decision when it settles the job."""
    oversize = req.oversize
    if oversize is None and req.features is not None and _blen(req.features) > MAX_CONSTRAINT:
        oversize = "--constraint"  # a request not read from a job_desc (an update's merge, `check`)
    if oversize is not None:
        return Decision("unchanged", "", record=_record(f"request too large ({oversize}); unchanged"))
    names, partitions, unknown = _partition_names(data, req)
    parsed = _locality(data, req, names)
    if isinstance(parsed, Decision):
        return parsed
    level, mode, size, policy = parsed
    if level == NVL and size is None and data.config.nvl_segment:  # the site's segment for nvl jobs
        _, _, size, policy = parse_segment(f"nvl:{SEGMENT_KEY}{data.config.nvl_segment}")
    loc = f"{level}:{mode}"
    if level == "any" and req.regions is None:
        return Decision("unchanged", loc, record=_record("any"))
    if len(partitions) > MAX_MERGED and level != "any":
        return _many_partitions(loc, level, len(partitions))
    c = parse_constraint(req.features)
    if c.kind == "invalid":
        return Decision("unchanged", loc, record=_record(f"{loc}: constraint not understood; unchanged"))
    missing = _unknown_feature(data, c)
    if missing is not None:
        return Decision(
            "unchanged",
            loc,
            message=f"slurm-topo: --constraint: no node of this cluster has the feature '{missing}' (Slurm "
            f"rejects it); --locality={level} not applied",
            record=_record(f"{loc}: unknown feature '{missing}'; unchanged"),
        )
    area = _area(data, req, loc)
    if isinstance(area, Decision):
        return area
    restrict, area_features, wanted = area
    note = f"; fit not checked ({req.unchecked})" if req.unchecked else ""
    if not note and not c.counted:
        note = "; fit not checked (constraint)"
    if (
        unknown is not None
        and level not in ("prefer", "any")
        and data.default_partition != IMPLICIT_PARTITION
    ):
        # the data knows the partitions, not this one: a bracket from every node could name groups outside it
        # (Slurm's generic "Requested node configuration is not available"); say what is wrong instead
        return Decision(
            "reject",
            loc,
            message=f"slurm-topo: --locality={loc}: partition '{safe(unknown)}' is not in slurm-topo's data "
            f"(created after its last run?), so its {level}s cannot be checked; the next `slurm-topo apply` "
            "learns it (an administrator can run it now), or submit to another partition",
            record=_record(f"{loc}: rejected; partition '{safe(unknown)}' not in the data"),
            rejection="request",
        )
    if unknown is not None:
        note += f"; partition '{safe(unknown)}' not in the data: all nodes counted"
    job = _Job(
        data,
        req,
        c,
        loc,
        level,
        mode,
        partitions,
        note,
        restrict,
        Scan(data, req, c, area_features, wanted),
        None if size is None else (size, policy),
    )
    if level in ("prefer", "any"):
        return _decide_prefer(job)
    return _decide_required(job)


def _many_partitions(loc: str, level: str, count: int) -> Decision:
    """A -p list of more partitions than the filter merges (``MAX_MERGED``): prefer leaves the job alone, a
    required level is refused (never passed unchecked)."""
    if level == "prefer":
        return Decision(
            "unchanged", loc, record=_record(f"prefer: {count} partitions (over {MAX_MERGED}); unchanged")
        )
    return Decision(
        "reject",
        loc,
        message=f"slurm-topo: --locality={loc}: the job names {count} partitions; slurm-topo checks a "
        f"{level} over at most {MAX_MERGED}: name fewer partitions, or use --locality=prefer",
        record=_record(f"{loc}: rejected; {count} partitions (over {MAX_MERGED})"),
        rejection="request",
    )


def _locality(
    data: PolicyData, req: JobRequest, names: Sequence[str]
) -> tuple[str, str, int | None, str | None] | Decision:
    """(level, mode, segment size, segment policy): the job's own, else its partition's default, else the
    cluster's; a bad one is rejected."""
    locality = req.locality
    if locality is None:
        defaults = dict(data.config.partitions)
        locality = next((defaults[p] for p in names if p in defaults), data.config.default)
    try:
        return parse_segment(locality)
    except InputError as exc:
        return Decision(
            "reject",
            safe(locality),
            message=f"slurm-topo: {exc}",
            record=_record(f"rejected locality '{safe(locality)}'"),
            rejection="request",
        )


def _unknown_feature(data: PolicyData, c: Constraint) -> str | None:
    """The first feature of the user's constraint that no node has (Slurm rejects it: say so, do not count it
    as "no group can hold the job"); location features and constraints not counted are left to Slurm."""
    if not c.counted or c.kind not in ("and", "or", "bracket"):
        return None
    known = data.known_features
    return next((safe(n) for n in c.names if n not in known), None)


def _area(
    data: PolicyData, req: JobRequest, loc: str
) -> tuple[str | None, frozenset[str] | None, set[str] | None] | Decision:
    """--locality-regions: (the term ANDed in, the area's features, its regions); unknown names are
    rejected."""
    if req.regions is None:
        return None, None, None
    names = list(dict.fromkeys(r for r in req.regions.split(",") if r))
    bad = next((r for r in names if r not in data.areas), None)
    if bad is not None or not names:
        shown = safe(bad if bad is not None else req.regions)
        return Decision(
            "reject",
            loc,
            message=f"slurm-topo: --locality-regions: '{shown}' is not a region or zone of this cluster",
            record=_record(f"{loc}: unknown region '{shown}'"),
            rejection="request",
        )
    feats = list(dict.fromkeys(f for r in names for f in data.areas[r][0]))
    wanted = {region for r in names for region in data.areas[r][1]}
    restrict = feats[0] if len(feats) == 1 else "(" + "|".join(feats) + ")"
    return restrict, frozenset(feats), wanted


def _terms(job: _Job, bracket: str) -> str | None:
    return compose(job.c, *(t for t in (job.restrict, bracket) if t))


def _bound_tag(scan: Scan, unchecked: int = 0) -> str:
    """The record's word on the work bound, before its list (the record is cut at 200 characters): how
    many walks of this decision stopped at their looks, and whether a required level's bracket was taken
    unchecked."""
    if not scan.bounded:
        return ""
    walks = f"{scan.bounded} walk{'' if scan.bounded == 1 else 's'} cut"
    return f" [bound: {walks}{'; fit not checked' if unchecked else ''}]"


def _decide_prefer(job: _Job) -> Decision:
    """prefer (and any with regions): never delays the job; --prefer at the finest level some group fits."""
    c, loc, restrict = job.c, job.loc, job.restrict
    base = compose(c, restrict) if restrict else None
    if restrict and base is None:
        return Decision(
            "unchanged",
            loc,
            message="slurm-topo: --locality-regions cannot be combined with your constraint; "
            "job left unchanged",
            record=_record(f"{loc}: regions conflict; unchanged"),
        )
    if job.level == "any":
        return Decision("amend", loc, features=base, record=_record(f"any; regions {restrict}"))
    if job.req.prefer is not None:
        why = "your --prefer kept"
    elif c.kind in ("bracket", "complex"):
        why = "constraint has brackets or parentheses"
    else:
        probe = _terms(job, "[]")
        assert probe is not None
        d = _prefer_cascade(job, base, MAX_CONSTRAINT - len(probe) + 2)
        if d is not None:
            return d
        why = "no group fits; topology/tree packs"
    return Decision("amend" if base else "unchanged", loc, features=base, record=_record(f"prefer: {why}"))


def _prefer_cascade(job: _Job, base: str | None, budget: int) -> Decision | None:
    """The cascade: every level's groups that can ever hold the job, finest level first, smallest first
    within a level (with families: then the bare family values, largest first). 22.05 tries a matching OR
    alternative by alternative, so the job lands in the finest group with room now. NVLink domains first
    where the fleet has them (not with families: a domain is no family bucket, and prefer never mixes
    versions); zone unions (of one value's buckets with families) between the zones and the regions, and
    after the regions. None when no group fits."""
    scan = job.scan
    values = values_source(job.data, job.partitions)
    sources = [
        NO_GROUPS if lvl == NVL and values else level_source(job.data, job.partitions, lvl)
        for lvl in PREFER_LEVELS
    ]
    names = [*PREFER_LEVELS]
    if values is not None:
        sources.append(values)
        names.append("family")
    lists = _coarsest_first(scan, sources, budget)
    room = max(0, MAX_ALTERNATIVES - sum(len(k) for k, _ in lists))
    zones = level_source(job.data, job.partitions, "zone")
    inside, across, lead, spans = _zone_unions(scan, zones, room)
    parts = [(inside, False), (across, False), *lists]
    kept, cut = _cascade(parts, budget, extra=2, emit=UNION_EMIT_FAMILIES if values else UNION_EMIT)
    if values:
        kept = _by_spread(kept, spans)
    kept, led_cut = _lead(kept, lead, budget)
    cut = cut or led_cut
    lists += [(inside, False), (across, False)]
    names += ["unions", "unions"]
    if not kept:
        return None
    used = list(dict.fromkeys(lvl for lvl, (k, _) in zip(names, lists, strict=True) if k))
    return Decision(
        "amend",
        job.loc,
        features=base,
        prefer=_terms(job, _bracket(kept)),
        record=_record(f"prefer {'+'.join(used)}{_bound_tag(scan)} {_shown(kept, cut)}{job.note}"),
        candidates=tuple((g.label, n, g.gpus) for g, n in kept),
        level=used[0],
    )


def _coarsest_first(
    scan: Scan, sources: Sequence[Source], budget: int
) -> list[tuple[list[tuple[Group, int]], bool]]:
    """The cascade's walks, given finest first, walked coarsest first (the order the cascade keeps them
    in), each for at most what the cascade can still take and one more: the same bracket as from whole
    lists, without looking at what would be dropped."""
    out: list[tuple[list[tuple[Group, int]], bool]] = [([], False)] * len(sources)
    alternatives, room = MAX_ALTERNATIVES, budget - 1
    for j in reversed(range(len(sources))):
        w = scan.candidates(sources[j], budget, limit=alternatives + 1)
        n = 0
        for g, _ in w.kept:
            if n == alternatives or len(g.feature) + 1 > room:
                break
            room -= len(g.feature) + 1
            n += 1
        alternatives -= n
        out[j] = (w.kept, w.cut)
    return out


def _decide_required(job: _Job) -> Decision:
    """nvl / network_group / zone / region: the matching-OR bracket of the groups that can ever hold the
    job."""
    level, loc, mode, c = job.level, job.loc, job.mode, job.c
    src = level_source(job.data, job.partitions, level)
    only: list[str] | None = None
    if c.kind == "bracket":
        if not all(src.has(x) for x in c.inside):
            return _conflict(
                loc,
                mode,
                "bracket",
                f"slurm-topo: --locality={level}: the brackets in your "
                f"constraint are not all {level} groups (Slurm allows one bracket set)",
            )
        only = list(dict.fromkeys(c.inside))
    probe = _terms(job, "[]")
    if probe is None:
        return _conflict(
            loc,
            mode,
            "constraint",
            f"slurm-topo: --locality={level}: your constraint cannot be combined with a {level} bracket",
        )
    if len(probe) >= MAX_CONSTRAINT:
        return _conflict(
            loc,
            mode,
            "length",
            f"slurm-topo: --locality={level}: your constraint leaves no room for a {level} bracket "
            f"(Slurm's {MAX_CONSTRAINT}-character limit)",
        )
    rejected, named, within = _named_nodes(job)
    if rejected is not None:
        return rejected
    if within is not None and (only is None or within in only) and src.has(within):
        only = [within]  # the named nodes are in one group: the job's other nodes come from it too
    walked = src if only is None else named_source(src, only)
    budget = MAX_CONSTRAINT - len(probe) + 2
    w = job.scan.candidates(walked, budget, unchecked_after=True)
    if w.kept:
        return Decision(
            "amend",
            loc,
            features=_terms(job, _bracket(w.kept)),
            prefer=_required_prefer(job, w.kept, budget),
            message=named,
            record=_record(f"{loc}{_bound_tag(job.scan, w.unchecked)} {_shown(w.kept, w.cut)}{job.note}"),
            candidates=tuple((g.label, n, g.gpus) for g, n in w.kept),
            level=level,
        )
    if level == NVL and (job.segment is not None or job.req.user_segment is not None):
        return _segments(job, walked)
    return _nothing_holds(job, walked)


def _segments(job: _Job, src: Source) -> Decision:
    """An ``nvl`` job no NVLink domain can hold, with a segment (``nvl:segment=N``, or the job's own
    ``--segment``, which wins): on a release whose job_submit/lua writes ``segment_size`` (25.11.2+) the job
    runs in segments of N nodes, each inside one domain (Slurm's block topology places them), instead of
    being held or refused; N must divide the node count and fit the largest domain. Before that release
    the request is refused, saying which release is needed and what works without the filter."""
    loc, req = job.loc, job.req
    largest = job.scan.largest(src)
    if largest is None:
        return _nothing_holds(job, src)  # no domain at all: refused whatever the mode
    g, most, _ = largest
    nodes = req.min_nodes or needs(req)[0]
    size, policy = job.segment if job.segment is not None else (0, None)
    size = req.user_segment or size
    asked = f"--locality={loc.split(':')[0]}:segment={size}"
    if not req.segment_ok:
        return _segment_refused(
            job,
            f"{asked}: {_plural(nodes, 'node')} is larger than any NVLink domain (the largest is {g.label} "
            f"with {_plural(most, 'node')}); the filter sets the segment size from Slurm {SEGMENT_RELEASE} "
            f"(job_submit/lua cannot before); from Slurm 24.05 `sbatch --segment={size}` without "
            "--locality=nvl places each segment in one block itself",
            f"segment needs Slurm {SEGMENT_RELEASE}",
        )
    if nodes % size:
        return _segment_refused(
            job,
            f"{asked}: the node count {nodes} is not a multiple of the segment size {size}",
            f"{nodes} nodes not a multiple of segment {size}",
        )
    if size > most:
        return _segment_refused(
            job,
            f"{asked}: the segment size {size} is larger than the largest NVLink domain ({g.label}, "
            f"{_plural(most, 'node')})",
            f"segment {size} over the largest domain ({most})",
        )
    own = req.user_segment is not None
    shown = f"segment={size}" + (" (yours)" if own else "") + (f":{policy}" if policy and not own else "")
    return Decision(
        "amend",
        loc,
        features=_terms(job, "") if job.restrict else None,
        record=_record(
            f"{loc} {shown}{_bound_tag(job.scan)} [{nodes} nodes in segments of {size}, each in one NVLink "
            f"domain; largest {g.label}({most}n)]{job.note}"
        ),
        level=NVL,
        segment=None if own else size,
        segment_policy=None if own else policy,
    )


def _segment_refused(job: _Job, why: str, short: str) -> Decision:
    return Decision(
        "reject",
        job.loc,
        message=f"slurm-topo: {why}",
        record=_record(f"{job.loc}: rejected; {short}"),
        level=NVL,
        rejection="request",
    )


def _required_prefer(job: _Job, kept: Sequence[tuple[Group, int]], budget: int) -> str | None:
    """A required zone or region also gets ``--prefer=<hard>&[finer groups inside the kept ones…|the kept
    ones]``: every alternative lies inside one group of the level, so locality holds, and the job lands in
    the finest group with room now. None with the user's own --prefer, or when nothing finer can hold the
    job. Each finer list looks at ``LOOKS_FINER`` groups at most."""
    if job.req.prefer is not None or job.level not in LEVELS[1:]:
        return None  # network_group and nvl: nothing finer is known to lie inside
    at = LEVELS.index(job.level)
    inside = (at - 1, {g.feature for g, _ in kept})
    walks = [
        job.scan.candidates(level_source(job.data, job.partitions, lvl), budget, LOOKS_FINER, inside=inside)
        for lvl in LEVELS[:at]
    ]
    if not any(w.kept for w in walks):
        return None  # nothing finer can hold the job: the --prefer would repeat the constraint
    alternatives, _ = _cascade([*((w.kept, w.cut) for w in walks), (list(kept), False)], budget)
    return _terms(job, _bracket(alternatives))


_NAMED_PROBLEMS = {
    "long": ("is longer than {limit} bytes", "too long"),
    "unread": (
        "is not a node list slurm-topo reads (names and name[lo-hi,n] ranges, separated by commas or spaces)",
        "not read",
    ),
    "many": (
        "names more nodes than slurm-topo checks ({limit}: the cluster's nodes, at most "
        + str(MAX_VISITS)
        + ")",
        "too many",
    ),
    "unknown": ("names {name}, which is not in slurm-topo's data", "node not in the data"),
}
"""Why a --nodelist cannot be checked (nodes.Named.problem): the message's words and the record's."""


def _named_nodes(job: _Job) -> tuple[Decision | None, str | None, str | None]:
    """--nodelist / --exclude with a required level: (a refusal, a note for the user, the one group the named
    nodes are in). Refused when the named nodes are in two groups of the level, when one is in none, and when
    the list cannot be checked (read, counted or placed): a required level is never passed unchecked."""
    level, loc, req = job.level, job.loc, job.req
    if req.nodelist is None:
        if req.unchecked == "--exclude":
            return (
                None,
                f"slurm-topo: --locality={loc}: with --exclude, whether a {level} can still hold the job is "
                "not checked",
                None,
            )
        return None, None, None
    named = place_named(job.data.nodes, req.nodelist, PLACE_LEVELS.index(level))
    if len(named.groups) > 1:
        return (
            _refused(
                job,
                f"the nodes of --nodelist are in more than one {level} ({named.groups[0]}, "
                f"{named.groups[1]}); the job would run across them",
                f"--nodelist spans {level}s",
            ),
            None,
            None,
        )
    if named.homeless:
        return (
            _refused(job, f"--nodelist names a node that is in no {level}", f"--nodelist node in no {level}"),
            None,
            None,
        )
    if named.problem is not None:
        what, short = _NAMED_PROBLEMS[named.problem]
        limit = MAX_NAMED if named.problem == "long" else named.limit
        text = what.format(limit=limit, name=f"'{safe(named.name or '')}'")
        return (
            _refused(
                job,
                f"--nodelist {text}, so whether its nodes share one {level} cannot be checked; a required "
                f"{level} is never left unchecked",
                f"--nodelist not checked ({short})",
            ),
            None,
            None,
        )
    return None, None, named.groups[0] if named.groups else None


def _refused(job: _Job, why: str, short: str) -> Decision:
    """A --nodelist refused with a required level (every mode: the request itself)."""
    return Decision(
        "reject",
        job.loc,
        message=f"slurm-topo: --locality={job.loc}: {why}",
        record=_record(f"{job.loc}: rejected; {short}"),
        level=job.level,
        rejection="request",
    )


def _nothing_holds(job: _Job, src: Source) -> Decision:
    """No group of the level can ever hold the job: :fail and interactive allocations are rejected, :wait
    held."""
    level, loc = job.level, job.loc
    largest = job.scan.largest(src)
    if largest is None and level == NVL:  # no size can ever fit: refused at submit whatever the mode
        return Decision(
            "reject",
            loc,
            message=f"slurm-topo: --locality={loc}: {NVL_NONE}{NVL_NONE_NOTE}",
            record=_record(f"{loc}: rejected; {NVL_NONE}"),
            level=level,
            rejection="request",
        )
    if largest is None:
        why = f"no node of the partition has a {level}"
    else:
        g, n, gp = largest
        why = f"the largest is {g.label} with {_plural(n, 'node')} ({gp} GPUs)"
    msg = f"slurm-topo: --locality={loc}: no {level} can ever hold {describe_request(job.req)}; {why}"
    if job.mode == "fail":
        return Decision(
            "reject",
            loc,
            message=msg,
            record=_record(f"{loc}: rejected; {why}"),
            level=level,
            rejection="size",
        )
    if job.req.interactive:
        return Decision(
            "reject",
            loc,
            message=msg + INTERACTIVE_NOTE,
            record=_record(f"{loc}: rejected (interactive); {why}"),
            level=level,
            rejection="size",
        )
    return Decision("hold", loc, message=msg + HOLD_NOTE, record=_record(f"{loc}: held; {why}"), level=level)


@dataclass(frozen=True, slots=True)
class Survey:
    """Every group of one level for one request: those that can ever hold it, in the filter's order, and the
    rest."""

    fitting: tuple[tuple[str, int, int], ...]
    too_small: tuple[tuple[str, int, int], ...]


def survey(data: PolicyData, req: JobRequest, level: str) -> Survey:
    """All groups of ``level`` split by "can ever hold" (for `slurm-topo check`; the filter stops at 65)."""
    _, partitions, _ = _partition_names(data, req)
    area = wanted = None
    if req.regions:
        names = [r for r in req.regions.split(",") if r in data.areas]
        area = frozenset(f for r in names for f in data.areas[r][0])
        wanted = {region for r in names for region in data.areas[r][1]}
    scan = Scan(data, req, parse_constraint(req.features), area, wanted)
    fitting: list[tuple[str, int, int]] = []
    small: list[tuple[str, int, int]] = []
    for g in _all_groups(data, partitions, level):
        if not scan.allowed(g):
            continue
        ok, n = scan.fits(g)
        (fitting if ok else small).append((g.label, n, scan.eligible(g)[1]))
    return Survey(tuple(fitting), tuple(small))
