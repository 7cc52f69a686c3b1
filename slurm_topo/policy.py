"""The locality policy: the executable specification of what the submit filter does.

``compile_policy`` turns the merged inventory (plus Slurm's partitions) into ``PolicyData``: node classes (own
features, GPUs, GPU type) and, per partition and level, the groups with their node count per class, ordered by
size (nodes in the partition) then label — Slurm takes the first alternative of a matching OR that fits now, so the
smallest group that can hold a job comes first. ``render/filter_data.py`` writes the same data as
``slurm_topo_data.lua``; ``job_submit/slurm_topo_filter.lua`` implements ``decide`` over it in Lua 5.1, and the
parity tests run one table of cases through both. ``decide`` is pure.

Semantics (ADR-0021 §2, DESIGN D4):

* ``prefer`` (default) never delays a job. topology/tree already packs to the lowest common switch; in addition
  ``prefer = <user constraint>&[g1|…]`` at the finest level where some group can ever hold the job. Untouched when
  the user gave ``--prefer``, when the constraint has brackets, parentheses or counts, or when no level fits (Slurm
  rejects at submit a ``--prefer`` that no node set can meet).
* ``network_group`` / ``zone`` / ``region``: ``features = <user constraint>&[g1|…]`` over the groups of that level
  that can ever hold the job. None can → ``fail`` rejects at submit, ``wait`` holds (priority 0); both say why.
* ``any``: the job is left alone.
* ``--locality-regions=A,B`` restricts every node to the named regions or zones: a plain OR of their features is
  ANDed in, and only groups overlapping them are candidates.

"Can ever hold", per group: the nodes of the job's partition whose own features satisfy the user's ``&``/``|``
list and that have at least the GPUs per node asked (of the type asked); the job needs
``max(min_nodes or 1, ⌈total GPUs ÷ largest GPUs per node⌉)`` of them and the group needs the GPUs in total.
It is not checked — and the decision says so — with ``--nodelist``, ``--exclude``, ``--reservation`` or
``--contiguous``, or when the constraint has parentheses or counts or names location features.

Algorithm: groups are pre-sorted by size, so a request for N nodes starts at the first group with ≥ N nodes
(binary search) and scans forward until 65 groups fit (64 are kept, the 65th tells that the list was cut).
The full scan happens only when nothing fits, to name the largest group. O(log G + scan) per level.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InputError
from .inventory import natural_key
from .model import Inventory, Location, PolicyConfig
from .topology import Topology

LEVELS = ("network_group", "zone", "region")  # finest first: the order prefer tries them
LOCALITIES = ("prefer", "network_group", "zone", "region", "any")
MODES = ("wait", "fail")
MAX_ALTERNATIVES = 64  # a matching-OR bracket is a 64-bit bitmap in slurmctld; more corrupts memory
MAX_CONSTRAINT = 1024  # longest features / prefer string slurmctld accepts
MAX_RECORD = 200
IMPLICIT_PARTITION = "*"
NO_VAL = 0xFFFFFFFE
SPANK_LOCALITY = "_SLURM_SPANK_OPTION_locality_locality"
SPANK_REGIONS = "_SLURM_SPANK_OPTION_locality_locality_regions"
LOCATION_PREFIXES = ("region_", "zone_", "ng_", "leaf_")
_DIGITS = re.compile(r"^[0-9]{1,9}\Z")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:=,+-")
_ASCII_SPACE = re.compile(r"[^ \t\n\v\f\r]+")
_FEATURE_TOKEN = re.compile(r"^[A-Za-z0-9._=+-]+\Z")
_LABEL_TOKEN = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")


def parse_locality(text: str) -> tuple[str, str]:
    """``zone:fail`` -> ("zone", "fail"); the mode defaults to wait."""
    level, _, mode = text.partition(":")
    mode = mode or "wait"
    if level not in LOCALITIES or mode not in MODES:
        raise InputError(
            f"unknown locality '{safe(text)}' (use prefer|network_group|zone|region|any, "
            "optionally :wait or :fail)"
        )
    return level, mode


# ----------------------------------------------------------------------------------------------------------------
# Compiled data


@dataclass(frozen=True, slots=True)
class NodeClass:
    features: frozenset[str]
    """The node's own features only; location (and family-bucket) features belong to the groups."""
    gpus: int
    gpu_type: str | None


@dataclass(frozen=True, slots=True)
class Group:
    feature: str
    label: str
    region: str | None
    zone: str | None
    location_features: frozenset[str]
    """This group's feature and its ancestors' (region_…, zone_…)."""
    counts: tuple[tuple[int, int], ...]
    """(class index, nodes) for the partition's nodes in this group."""
    nodes: int
    gpus: int
    max_gpus: int
    rank: int = 0
    """Position of (label, feature) in natural order among the level's groups: the tie-break after size."""


@dataclass(frozen=True, slots=True)
class PolicyData:
    fingerprint: str
    config: PolicyConfig
    default_partition: str
    classes: tuple[NodeClass, ...]
    partitions: Mapping[str, Mapping[str, tuple[Group, ...]]]
    areas: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]
    """--locality-regions names: region or zone label -> (its features, the regions it lies in)."""
    bucket_features: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per node, the family-bucket features the node definitions carry (empty without families)."""
    everywhere: str = IMPLICIT_PARTITION
    """A partition holding every node: what a partition the data does not know is counted as."""


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool = False


def _family_values(features: Sequence[str], families: Sequence[tuple[str, str]]) -> str:
    values = []
    for _, pattern in families:
        values.append(next((f for f in features if fnmatch.fnmatchcase(f, pattern)), "none"))
    return ".".join(values)


def _bucket_name(feature: str, suffix: str) -> str:
    name = f"{feature}.{suffix}"
    return name if len(name) <= 64 else f"{name[:55]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def _level_key(level: str, loc: Location) -> Location | None:
    if loc.value(level) is None:
        return None
    return {"region": Location(loc.region), "zone": Location(loc.region, loc.zone)}.get(level, loc)


def compile_policy(
    inventory: Inventory, topology: Topology, partitions: Sequence[Partition] | None, fingerprint: str
) -> PolicyData:
    """Groups per partition and level, with node classes; family buckets when the policy declares families."""
    config = inventory.policy or PolicyConfig()
    families = config.families
    names = topology.group_names
    bucket_features: dict[str, tuple[str, ...]] = {}
    per_node: dict[str, list[tuple[str, str, str, Location, frozenset[str]]]] = {}
    areas: dict[str, tuple[set[str], set[str]]] = {}
    for node in inventory.nodes:
        loc = node.location
        suffix = _family_values(node.features, families) if families else ""
        rows, ancestors = [], []
        for level in ("region", "zone", "network_group"):
            key = _level_key(level, loc)
            if key is None:
                continue
            feature = names[level][key]
            ancestors.append(feature)
            if level in ("region", "zone"):
                feats, regions = areas.setdefault(loc.value(level) or "", (set(), set()))
                feats.add(feature)
                regions.add(loc.region or "")
            label = loc.value(level) or ""
            if level == "network_group":
                label = f"{loc.zone or loc.region}/{label}"  # a group is scoped to its zone
            if families:
                feature, label = _bucket_name(feature, suffix), f"{label}/{suffix}"
            rows.append((level, feature, label, key, frozenset(ancestors) | {feature}))
        per_node[node.name] = rows
        if families:
            bucket_features[node.name] = tuple(r[1] for r in rows)

    classes: dict[NodeClass, int] = {}
    class_of: dict[str, int] = {}
    for node in inventory.nodes:
        cls = NodeClass(frozenset(node.features), node.gpus or 0, node.gpu_type)
        class_of[node.name] = classes.setdefault(cls, len(classes))
    class_list = tuple(classes)

    all_names = [n.name for n in inventory.nodes]
    if partitions:
        known = set(all_names)
        parts = [(p.name, [n for n in p.nodes if n in known]) for p in partitions]
        default = next((p.name for p in partitions if p.default), partitions[0].name)
        # A partition the data does not know (created after the generator ran, or partitions never given) is
        # counted as holding every node: an unknown name never switches the locality off.
        everywhere = next((name for name, members in parts if len(set(members)) == len(known)), None)
        if everywhere is None:
            parts.append((IMPLICIT_PARTITION, all_names))
            everywhere = IMPLICIT_PARTITION
    else:
        parts, default = [(IMPLICIT_PARTITION, all_names)], IMPLICIT_PARTITION
        everywhere = IMPLICIT_PARTITION
    ranks: dict[str, dict[str, int]] = {}
    for level in LEVELS:
        labels = {(row[2], row[1]) for rows in per_node.values() for row in rows if row[0] == level}
        ranks[level] = {
            f: i for i, (_, f) in enumerate(sorted(labels, key=lambda x: (natural_key(x[0]), x[1])))
        }
    compiled: dict[str, dict[str, tuple[Group, ...]]] = {}
    for pname, members in parts:
        acc: dict[str, dict[str, Any]] = {lvl: {} for lvl in LEVELS}
        for name in members:
            for level, feature, label, key, locs in per_node[name]:
                e = acc[level].setdefault(feature, {"label": label, "key": key, "locs": locs, "counts": {}})
                e["counts"][class_of[name]] = e["counts"].get(class_of[name], 0) + 1
        compiled[pname] = {}
        for level in LEVELS:
            groups = []
            for feature, e in acc[level].items():
                counts = tuple(sorted(e["counts"].items()))
                nodes = sum(n for _, n in counts)
                gpus = sum(n * class_list[c].gpus for c, n in counts)
                most = max(class_list[c].gpus for c, _ in counts)
                key = e["key"]
                groups.append(
                    Group(
                        feature,
                        e["label"],
                        key.region,
                        key.zone,
                        e["locs"],
                        counts,
                        nodes,
                        gpus,
                        most,
                        ranks[level][feature],
                    )
                )
            groups.sort(key=lambda g: (g.nodes, g.rank))
            compiled[pname][level] = tuple(groups)
    return PolicyData(
        fingerprint,
        config,
        default,
        class_list,
        compiled,
        {k: (tuple(sorted(f)), tuple(sorted(r))) for k, (f, r) in sorted(areas.items())},
        bucket_features,
        everywhere,
    )


# ----------------------------------------------------------------------------------------------------------------
# The request, read from a job_desc as job_submit/lua sees it


@dataclass(frozen=True, slots=True)
class GpuAsk:
    scope: str  # "job" | "node" | "task"
    gpu_type: str | None
    count: int


def parse_gpu_tres(text: object) -> tuple[str | None, int] | None:
    """``gres:gpu:h100:2`` (to 23.02) / ``gres/gpu:2`` (from 23.11), in comma lists -> (type, count)."""
    if not isinstance(text, str) or not text:
        return None
    for item in text.split(","):
        if not (item.startswith("gres:gpu") or item.startswith("gres/gpu")):
            continue
        rest = item[8:]
        if rest == "":
            return None, 1
        parts = rest[1:].split(":") if rest.startswith(":") else None
        if parts is None or len(parts) > 2:
            continue
        if len(parts) == 1:
            if _DIGITS.match(parts[0]):
                return None, int(parts[0])
            if _LABEL_TOKEN.match(parts[0]):
                return parts[0], 1
        elif _LABEL_TOKEN.match(parts[0]) and _DIGITS.match(parts[1]):
            return parts[0], int(parts[1])
    return None


def safe(text: str, limit: int = 40) -> str:
    """A user-supplied string as it may appear in a message: ASCII word characters only, cut (bytewise, as Lua)."""
    raw = text.encode("utf-8", "surrogatepass")[:limit]
    return "".join(chr(b) if chr(b) in _SAFE else "?" for b in raw)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value) if 0 < value < NO_VAL else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value != "" else None


@dataclass(frozen=True, slots=True)
class JobRequest:
    locality: str | None = None
    regions: str | None = None
    features: str | None = None
    prefer: str | None = None
    partition: str | None = None
    min_nodes: int | None = None
    num_tasks: int | None = None
    gpu: GpuAsk | None = None
    unchecked: str | None = None
    """Why "can ever fit" is not checked (--nodelist, --exclude, --reservation, --contiguous), or None."""
    het_offset: int | None = None
    """A heterogeneous job's component: each is constrained on its own, so they may land in different groups."""

    @classmethod
    def from_job_desc(cls, job: Mapping[str, Any]) -> JobRequest:
        """The same reading as the Lua filter: SPANK env, then the job environment, then ``--comment``."""
        locality = regions = None
        env = job.get("spank_job_env")
        if isinstance(env, Mapping):
            i = 0
            while i < 1000 and env.get(i) is not None:  # 0-indexed, as slurmctld builds it
                kv = env[i]
                i += 1
                if isinstance(kv, str) and "=" in kv:
                    k, _, v = kv.partition("=")
                    if k == SPANK_LOCALITY and locality is None:
                        locality = v
                    elif k == SPANK_REGIONS and regions is None:
                        regions = v
        # The batch environment only when the SPANK entries say nothing (slurmctld logs a complaint for every
        # srun/salloc job whose environment is read).
        environment = job.get("environment") if locality is None else None
        if isinstance(environment, Mapping):
            locality = _str(environment.get("SLURM_SPANK_" + SPANK_LOCALITY))
            if regions is None:
                regions = _str(environment.get("SLURM_SPANK_" + SPANK_REGIONS))
        comment = _str(job.get("comment"))
        if comment is not None:
            for token in _ASCII_SPACE.findall(comment):
                if "=" not in token:
                    continue
                k, _, v = token.partition("=")
                if k == "locality" and locality is None:
                    locality = v
                elif k == "locality-regions" and regions is None:
                    regions = v
        gpu = None
        for scope, key in (("job", "tres_per_job"), ("node", "tres_per_node"), ("task", "tres_per_task")):
            parsed = parse_gpu_tres(job.get(key))
            if parsed is not None:
                gpu = GpuAsk(scope, parsed[0], parsed[1])
                break
        unchecked = None
        for key, what in (
            ("req_nodes", "--nodelist"),
            ("exc_nodes", "--exclude"),
            ("reservation", "--reservation"),
        ):
            if _str(job.get(key)) is not None:
                unchecked = what
                break
        if unchecked is None and _int(job.get("contiguous")) is not None:
            unchecked = "--contiguous"
        het = job.get("het_job_offset")
        het_offset = int(het) if _int(het) is not None or het == 0 else None
        return cls(
            locality=_str(locality),
            regions=_str(regions),
            features=_str(job.get("features")),
            prefer=_str(job.get("prefer")),
            partition=_str(job.get("partition")),
            min_nodes=_int(job.get("min_nodes")),
            num_tasks=_int(job.get("num_tasks")),
            gpu=gpu,
            unchecked=unchecked,
            het_offset=het_offset,
        )


# ----------------------------------------------------------------------------------------------------------------
# The user's constraint


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


# ----------------------------------------------------------------------------------------------------------------
# The decision


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

    def as_dict(self) -> dict[str, object]:
        return {
            "action": self.action,
            "locality": self.locality,
            "features": self.features,
            "prefer": self.prefer,
            "message": self.message,
            "record": self.record,
        }


def _record(text: str) -> str:
    text = "slurm-topo: " + text  # ASCII only: user strings pass through safe()
    return text if len(text) <= MAX_RECORD else text[: MAX_RECORD - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _needs(req: JobRequest) -> tuple[int, int, int, str | None]:
    """(nodes at least, total GPUs, GPUs per node at least, GPU type)."""
    nodes = req.min_nodes or 1
    gpu = req.gpu
    if gpu is None:
        return nodes, 0, 0, None
    if gpu.scope == "node":
        return nodes, gpu.count * nodes, gpu.count, gpu.gpu_type
    if gpu.scope == "task":
        return nodes, gpu.count * (req.num_tasks or nodes), 1, gpu.gpu_type
    return nodes, gpu.count, 1, gpu.gpu_type


def describe_request(req: JobRequest) -> str:
    nodes, gpus, _, gtype = _needs(req)
    text = _plural(nodes, "node")
    if gpus:
        text += f" with {gpus} {gtype + ' ' if gtype else ''}GPU{'' if gpus == 1 else 's'}"
    return text


class _Scan:
    """Per-request evaluation of groups (see the module docstring for the algorithm)."""

    def __init__(
        self,
        data: PolicyData,
        req: JobRequest,
        c: Constraint,
        area_features: frozenset[str] | None,
        wanted: set[str] | None,
    ):
        self.data = data
        self.nodes, self.total_gpus, self.per_node, self.gpu_type = _needs(req)
        self.check = req.unchecked is None and c.counted
        self.area_features = area_features
        self.ok = [
            _class_ok(cls, c)
            and (
                not self.per_node
                or (cls.gpus >= self.per_node and (self.gpu_type is None or cls.gpu_type == self.gpu_type))
            )
            for cls in data.classes
        ]
        self.wanted = wanted

    def allowed(self, g: Group) -> bool:
        """Inside a --locality-regions area, or a region group holding one."""
        if self.area_features is None:
            return True
        return bool(g.location_features & self.area_features) or (
            g.zone is None and self.wanted is not None and g.region in self.wanted
        )

    def eligible(self, g: Group) -> tuple[int, int, int]:
        n = gp = most = 0
        for idx, count in g.counts:
            if self.ok[idx]:
                cls = self.data.classes[idx]
                n += count
                gp += count * cls.gpus
                most = max(most, cls.gpus)
        return n, gp, most

    def fits(self, g: Group) -> tuple[bool, int]:
        n, gp, most = self.eligible(g)
        if not self.check:
            return True, n
        need = self.nodes
        if self.total_gpus:
            if most == 0:
                return False, n
            need = max(need, math.ceil(self.total_gpus / most))
        return n >= need and gp >= self.total_gpus, n

    def candidates(
        self, groups: Sequence[Group], budget: int, only: set[str] | None = None
    ) -> tuple[list[tuple[Group, int]], bool]:
        """Up to 64 fitting groups within ``budget`` characters of bracket; (kept, cut short)."""
        start = bisect.bisect_left([g.nodes for g in groups], self.nodes) if self.check else 0
        kept: list[tuple[Group, int]] = []
        length = 2
        for g in groups[start:]:
            if (only is not None and g.feature not in only) or not self.allowed(g):
                continue
            ok, n = self.fits(g)
            if not ok:
                continue
            extra = len(g.feature) + (1 if kept else 0)
            if len(kept) == MAX_ALTERNATIVES or length + extra > budget:
                return kept, True
            kept.append((g, n))
            length += extra
        return kept, False

    def largest(self, groups: Sequence[Group]) -> tuple[Group, int, int] | None:
        best: tuple[Group, int, int] | None = None
        for g in groups:
            if not self.allowed(g):
                continue
            n, gp, _ = self.eligible(g)
            if best is None or (n, gp) > (best[1], best[2]):
                best = (g, n, gp)
        return best


def _groups(data: PolicyData, partitions: Sequence[str], level: str) -> tuple[Group, ...]:
    if len(partitions) == 1:
        return data.partitions[partitions[0]][level]
    merged: dict[str, Group] = {}
    for p in partitions:
        for g in data.partitions[p][level]:
            if g.feature not in merged or g.nodes > merged[g.feature].nodes:
                merged[g.feature] = g
    return tuple(sorted(merged.values(), key=lambda g: (g.nodes, g.rank)))


def _bracket(kept: Sequence[tuple[Group, int]]) -> str:
    return "[" + "|".join(g.feature for g, _ in kept) + "]"


def _shown(kept: Sequence[tuple[Group, int]], cut: bool) -> str:
    text = ",".join(f"{g.label}({n}n)" for g, n in kept)
    return (f"first {len(kept)} kept (Slurm's limits) " if cut else "") + f"[{text}]"


def _conflict(loc: str, mode: str, what: str, msg: str) -> Decision:
    """The user's constraint and the locality cannot be combined: :fail rejects, :wait leaves the job alone."""
    if mode == "fail":
        return Decision("reject", loc, message=msg, record=_record(f"{loc}: rejected, {what} conflict"))
    return Decision(
        "unchanged",
        loc,
        message=msg + "; job left unchanged",
        record=_record(f"{loc}: {what} conflict; unchanged"),
    )


def decide(data: PolicyData, req: JobRequest) -> Decision:
    """The filter's decision for one job (see the module docstring)."""
    d = _decide(data, req)
    if req.het_offset is None or d.action == "unchanged":
        return d
    note = f" [het+{req.het_offset}: components are placed separately]"
    rec = (
        d.record
        if len(d.record) + len(note) <= MAX_RECORD
        else d.record[: MAX_RECORD - len(note) - 3] + "..."
    )
    return replace(d, record=rec + note)


def _partition_names(data: PolicyData, req: JobRequest) -> tuple[list[str], list[str], str | None]:
    """(the job's partitions as named, the data's partitions counted for them, the first name the data does not
    know — counted as every node)."""
    names = req.partition.split(",") if req.partition else [data.default_partition]
    unknown = next((p for p in names if p not in data.partitions), None)
    return names, [p if p in data.partitions else data.everywhere for p in names], unknown


def _decide(data: PolicyData, req: JobRequest) -> Decision:
    names, partitions, unknown = _partition_names(data, req)
    locality = req.locality
    if locality is None:
        defaults = dict(data.config.partitions)
        locality = next((defaults[p] for p in names if p in defaults), data.config.default)
    try:
        level, mode = parse_locality(locality)
    except InputError as exc:
        return Decision(
            "reject",
            safe(locality),
            message=f"slurm-topo: {exc}",
            record=_record(f"rejected locality '{safe(locality)}'"),
        )
    loc = f"{level}:{mode}"
    if level == "any" and req.regions is None:
        return Decision("unchanged", loc, record=_record("any"))
    c = parse_constraint(req.features)
    if c.kind == "invalid":
        return Decision("unchanged", loc, record=_record(f"{loc}: constraint not understood; unchanged"))
    note = ""
    if req.unchecked:
        note = f"; fit not checked ({req.unchecked})"
    elif not c.counted:
        note = "; fit not checked (constraint)"
    if unknown is not None:
        note += f"; partition '{safe(unknown)}' not in the data: all nodes counted"

    restrict = None
    area_features: frozenset[str] | None = None
    wanted: set[str] | None = None
    if req.regions is not None:
        names = list(dict.fromkeys(r for r in req.regions.split(",") if r))
        bad = next((r for r in names if r not in data.areas), None)
        if bad is not None or not names:
            shown = safe(bad if bad is not None else req.regions)
            return Decision(
                "reject",
                loc,
                message=f"slurm-topo: --locality-regions: '{shown}' is not a region or zone of this cluster",
                record=_record(f"{loc}: unknown region '{shown}'"),
            )
        feats = list(dict.fromkeys(f for r in names for f in data.areas[r][0]))
        area_features = frozenset(feats)
        wanted = {region for r in names for region in data.areas[r][1]}
        restrict = feats[0] if len(feats) == 1 else "(" + "|".join(feats) + ")"
    scan = _Scan(data, req, c, area_features, wanted)

    if level in ("prefer", "any"):
        base = compose(c, restrict) if restrict else None
        if restrict and base is None:
            return Decision(
                "unchanged",
                loc,
                message="slurm-topo: --locality-regions cannot be combined with your "
                "constraint; job left unchanged",
                record=_record(f"{loc}: regions conflict; unchanged"),
            )
        if level == "any":
            return Decision("amend", loc, features=base, record=_record(f"any; regions {restrict}"))
        why = None
        if req.prefer is not None:
            why = "your --prefer kept"
        elif c.kind in ("bracket", "complex"):
            why = "constraint has brackets or parentheses"
        else:
            for lvl in LEVELS:
                probe = compose(c, *(t for t in (restrict, "[]") if t))
                assert probe is not None
                kept, cut = scan.candidates(_groups(data, partitions, lvl), MAX_CONSTRAINT - len(probe) + 2)
                if kept:
                    prefer = compose(c, *(t for t in (restrict, _bracket(kept)) if t))
                    return Decision(
                        "amend",
                        loc,
                        features=base,
                        prefer=prefer,
                        record=_record(f"prefer {lvl} {_shown(kept, cut)}{note}"),
                        candidates=tuple((g.label, n, g.gpus) for g, n in kept),
                        level=lvl,
                    )
            why = "no group fits; topology/tree packs"
        return Decision(
            "amend" if base else "unchanged", loc, features=base, record=_record(f"prefer: {why}")
        )

    groups = _groups(data, partitions, level)
    only: set[str] | None = None
    if c.kind == "bracket":
        level_features = {g.feature for g in groups}
        if not all(x in level_features for x in c.inside):
            return _conflict(
                loc,
                mode,
                "bracket",
                f"slurm-topo: --locality={level}: the brackets in your "
                f"constraint are not all {level} groups (Slurm allows one bracket set)",
            )
        only = set(c.inside)
    probe = compose(c, *(t for t in (restrict, "[]") if t))
    if probe is None:
        return _conflict(
            loc,
            mode,
            "constraint",
            f"slurm-topo: --locality={level}: your constraint cannot be combined with a {level} bracket",
        )
    kept, cut = scan.candidates(groups, MAX_CONSTRAINT - len(probe) + 2, only)
    if kept:
        features = compose(c, *(t for t in (restrict, _bracket(kept)) if t))
        return Decision(
            "amend",
            loc,
            features=features,
            record=_record(f"{loc} {_shown(kept, cut)}{note}"),
            candidates=tuple((g.label, n, g.gpus) for g, n in kept),
            level=level,
        )
    largest = scan.largest([g for g in groups if only is None or g.feature in only])
    if largest is None:
        why = f"no node of the partition has a {level}"
    else:
        g, n, gp = largest
        why = f"the largest is {g.label} with {_plural(n, 'node')} ({gp} GPUs)"
    msg = f"slurm-topo: --locality={loc}: no {level} can ever hold {describe_request(req)}; {why}"
    if mode == "fail":
        return Decision("reject", loc, message=msg, record=_record(f"{loc}: rejected; {why}"), level=level)
    return Decision(
        "hold", loc, message=msg + "; the job is held", record=_record(f"{loc}: held; {why}"), level=level
    )


@dataclass(frozen=True, slots=True)
class Survey:
    """Every group of one level for one request: those that can ever hold it, in the filter's order, and the rest."""

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
    scan = _Scan(data, req, parse_constraint(req.features), area, wanted)
    fitting, small = [], []
    for g in _groups(data, partitions, level):
        if not scan.allowed(g):
            continue
        ok, n = scan.fits(g)
        (fitting if ok else small).append((g.label, n, scan.eligible(g)[1]))
    return Survey(tuple(fitting), tuple(small))
