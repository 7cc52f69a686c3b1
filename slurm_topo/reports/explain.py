"""`slurm-topo explain JOBID`: what a job asked for, what the locality filter decided, and where Slurm put it.

* the request: the locality from the filter's record on the job (``AdminComment=... slurm-topo: <record>``),
  else from ``--comment=locality=...``; the job's constraint (``Features=``) and comment;
* the decision: the filter's record, as it wrote it;
* the outcome: for a job with nodes, the lowest level all of them share, read from the nodes' own features as
  Slurm reports them (``region_*``, ``zone_*``, ``ng_*`` in ``scontrol show node -o``), phrased like
  "same zone us-east-1a, 2 network groups" (nodes without a group of a level are counted apart); a placement
  that breaks a required locality (a zone job whose nodes span zones, e.g. with ``--nodelist``) is flagged;
  a segment job (the filter's record ``nvl:wait segment=N …``, or ``segment=N (yours)`` for the job's own
  ``--segment``) is judged by its segments, not by one domain: each NVLink domain's share of its nodes a
  multiple of N (every segment inside one domain), the domains and shares named either way;
  for a pending job, Slurm's ``Reason=`` (and for a held one the record, which says why);
* the cost (with ``-i FILE``: the fleet's inventory): for a placed job that carries a parallelism plan, the
  predicted communication seconds per step of its placement, of the best placement free right now (its
  own nodes counted as free) and of the best on an idle fleet, and how much slower the job's own
  placement is (:mod:`slurm_topo.cost`). The plan
  comes from ``--plan tp=8,pp=4,bytes=10G`` on the command line, else from the job's comment
  (``sbatch --comment=plan=tp=8,pp=4,bytes=10G``, a ``plan=`` token next to any ``locality=``), else from
  a site default (``policy: {plan: ...}``, once the inventory carries one). Without a plan it says so.

A heterogeneous job (``sbatch A : B``) named by its id is explained component by component (``JOBID+0``,
``JOBID+1`` …: each has its own request, decision and nodes, since Slurm places each on its own), followed by
where the whole job landed; ``JOBID+K`` or a component's own job id explains that component alone, as
``scontrol show job`` shows it.

The parsing functions are pure (text in, values out); ``explain_job``/``explain_full`` are the only ones that
call the runner.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..access import JobListing, SlurmAccess
from ..access import argv as slurm_argv
from ..access.text import parse_nodes
from ..core.errors import CommandError, InputError, ParseError
from ..core.model import Inventory, natural_key
from ..cost import DEFAULT_TABLE, LinkTable
from ..plumbing.runner import Runner
from ..plumbing.text import NULL
from ..policy.vocab import NVL, PLAN_PREFIX, RECORD_PREFIX, SEGMENT_KEY, parse_segment
from ..relaxer.relax_plan import auto_lines
from .capacity import NodeState

LEVEL_PREFIXES = (("network group", "ng_"), ("zone", "zone_"), ("region", "region_"))
# scontrol's keys start upper-case (JobId=, AdminComment=, AllocNode:Sid=, CPUs/Task=, ReqB:S:C:T=); a value
# may hold spaces (AdminComment, Comment), so a line is split only before " Key=".


def filter_record(admin_comment: str | None) -> str | None:
    """The filter's record (the text after the last ``slurm-topo: ``), or None."""
    if not admin_comment or admin_comment == NULL:
        return None
    i = admin_comment.rfind(RECORD_PREFIX)
    if i < 0:
        return None
    return admin_comment[i + len(RECORD_PREFIX) :].strip()


def locality_of_record(record: str) -> str | None:
    """``zone:wait [..]`` -> ``zone:wait``; ``prefer zone [..]`` / ``prefer: why`` -> ``prefer``;
    ``any`` -> ``any``."""
    head = record.split()[0] if record.split() else ""
    head = head.rstrip(":;")
    if head == "rejected":
        return None
    if head in ("prefer", "any"):
        return head
    return head if re.fullmatch(r"[a-z_]+:(wait|fail|auto)", head) else None


def _comment_value(comment: str | None, name: str) -> str | None:
    """The value of the first ``name=VALUE`` token of a job's comment, or None."""
    if not comment or comment == NULL:
        return None
    for token in comment.split():
        key, _, value = token.partition("=")
        if key == name and value:
            return value
    return None


def locality_of_comment(comment: str | None) -> str | None:
    """``--comment='locality=zone:fail ...'`` -> ``zone:fail`` (for clients without the plugin)."""
    return _comment_value(comment, "locality")


def plan_of_comment(comment: str | None) -> str | None:
    """``--comment='plan=tp=8,pp=4,bytes=10G locality=zone'`` -> ``tp=8,pp=4,bytes=10G``."""
    return _comment_value(comment, "plan")


def site_plan(inventory: Inventory | None) -> str | None:
    """The site's default plan (``policy: {plan: ...}`` of the inventory), where the inventory carries one."""
    policy = inventory.policy if inventory is not None else None
    plan = getattr(policy, "plan", None)
    return plan if isinstance(plan, str) and plan.strip() else None


def _level_values(features: Iterable[str], prefix: str) -> set[str]:
    """The node's feature(s) of one level, without family-bucket variants (``zone_a.torch-2.4`` next to
    ``zone_a``)."""
    cands = {f for f in features if f.startswith(prefix)}
    return {f for f in cands if not any(f != g and f.startswith(g + ".") for g in cands)}


def _label(feature: str, prefix: str) -> str:
    return feature[len(prefix) :]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _spread(node_features: Mapping[str, Sequence[str]]) -> dict[str, tuple[set[str], int]]:
    """Per level: the values the nodes have, and how many nodes have none at that level."""
    per_level: dict[str, tuple[set[str], int]] = {}
    for level, prefix in LEVEL_PREFIXES:
        values: set[str] = set()
        missing = 0
        for feats in node_features.values():
            found = _level_values(feats, prefix)
            if not found:
                missing += 1
            values |= found
        per_level[level] = (values, missing)
    return per_level


def _count(values: set[str], missing: int, level: str) -> str:
    """A level's spread: "2 zones", "1 network group + 1 node without one", "3 nodes without a zone"."""
    if not values:
        return f"{_plural(missing, 'node')} without a{'n' if level[0] in 'aeiou' else ''} {level}"
    text = _plural(len(values), level)
    return text + (f" + {_plural(missing, 'node')} without one" if missing else "")


NVL_PREFIX = "nvl_"


def nvlink_domains(node_features: Mapping[str, Sequence[str]]) -> str | None:
    """The NVLink domain(s) of the nodes, where any node is in one: "NVLink domain rack-01", "2 NVLink domains
    (rack-01, rack-02)", "NVLink domain rack-01 + 1 node in none"; None when no node is in a domain."""
    values, missing = set(), 0
    for feats in node_features.values():
        found = _level_values(feats, NVL_PREFIX)
        values |= found
        missing += not found
    if not values:
        return None
    names = sorted(_label(v, NVL_PREFIX) for v in values)
    text = (
        f"NVLink domain {names[0]}"
        if len(names) == 1
        else f"{len(names)} NVLink domains ({', '.join(names)})"
    )
    return text + (f" + {_plural(missing, 'node')} in none" if missing else "")


def landed(node_features: Mapping[str, Sequence[str]]) -> str:
    """The lowest level all nodes share: "same network group us-east-1a.rack-a1", "same zone us-east-1a,
    2 network groups", "same region us-west, 3 zones", "3 regions"; nodes without a group of the finer level
    are counted apart ("same zone z, 1 network group + 1 node without one"); "no location features" when none
    are known. Where the nodes are in NVLink domains, those follow: "…; NVLink domain rack-01"."""
    text = _landed_tree(node_features)
    domains = nvlink_domains(node_features) if node_features else None
    return text if domains is None else f"{text}; {domains}"


def _landed_tree(node_features: Mapping[str, Sequence[str]]) -> str:
    if not node_features:
        return "no nodes"
    per_level = _spread(node_features)
    if not any(values for values, _ in per_level.values()):
        return "no location features on its nodes"
    finer = None
    for level, prefix in LEVEL_PREFIXES:
        values, missing = per_level[level]
        if len(values) == 1 and not missing:
            text = f"same {level} {_label(next(iter(values)), prefix)}"
            if finer is not None and per_level[finer][0]:
                text += ", " + _count(*per_level[finer], finer)
            return text
        finer = level
    values, missing = per_level["region"]
    return _count(values, missing, "region") if values else "nodes without a common region"


REQUIRED_LEVELS = ("network_group", "zone", "region")


@dataclass(frozen=True)
class Segment:
    """A segment job's segment, as the filter recorded it (or the job's ``--comment`` asked it)."""

    size: int
    yours: bool = False
    """The job's own ``--segment`` (the filter's ``segment=N (yours)``): Slurm's, the filter set nothing."""
    policy: str | None = None
    """``spread`` / ``consolidate`` (the filter set Slurm's flag), None: Slurm's own choice."""

    def words(self) -> str:
        text = f"{SEGMENT_KEY}{self.size}"
        if self.yours:
            return text + " (the job's own --segment)"
        return text + (f":{self.policy}" if self.policy else "")


SEGMENT_RECORD_RE = re.compile(
    r"nvl:(?:wait|fail) segment=([1-9][0-9]{0,3})(?P<own> \(yours\))?(?::(?P<policy>spread|consolidate))?"
    r"(?: \[bound: [0-9a-z ;]{1,60}\])? \[[1-9][0-9]{0,5} nodes in segments of \1, each in one NVLink domain"
)
"""The head of the filter's record of a segment job (``policy/decide.py`` ``_segments``), read from the
record's first character: the record is slurmctld's (AdminComment, written by the filter), and its head is
the filter's own words (the partition names a user gives come after it), so no job name or comment can make
a record say ``segment=``."""


def segment_of_record(record: str | None) -> Segment | None:
    """``nvl:wait segment=2 [4 nodes in segments of 2, …`` -> Segment(2); ``… segment=2 (yours) […`` ->
    Segment(2, yours=True); ``… segment=2:spread […`` -> Segment(2, policy="spread"); else None."""
    m = SEGMENT_RECORD_RE.match(record or "")
    if m is None or (m.group("own") and m.group("policy")):
        return None
    return Segment(int(m.group(1)), bool(m.group("own")), m.group("policy"))


def segment_of_comment(locality: str | None) -> Segment | None:
    """``--comment=locality=nvl:segment=2:spread`` (read only where the job has no record) -> its segment."""
    if not locality or not locality.startswith(f"{NVL}:{SEGMENT_KEY}"):
        return None
    try:
        _, _, size, policy = parse_segment(locality)
    except InputError:
        return None
    return Segment(size, policy=policy) if size is not None else None


def domain_shares(node_features: Mapping[str, Sequence[str]]) -> tuple[dict[str, int], int]:
    """How many of the nodes each NVLink domain holds (by label), and how many are in none (a node with two
    ``nvl_`` features is in no one domain: counted as in none)."""
    shares: dict[str, int] = {}
    none = 0
    for feats in node_features.values():
        found = _level_values(feats, NVL_PREFIX)
        if len(found) != 1:
            none += 1
            continue
        label = _label(next(iter(found)), NVL_PREFIX)
        shares[label] = shares.get(label, 0) + 1
    return shares, none


def judge_segments(
    locality: str | None, segment: Segment, node_features: Mapping[str, Sequence[str]]
) -> tuple[str | None, str | None]:
    """A segment job by Slurm's allocation: (the line saying the segments hold, None) when every NVLink
    domain's share of the nodes is a multiple of the segment size (the nodes then split into segments each
    inside one domain), else (None, what broke). Both name the domains and their shares."""
    shares, none = domain_shares(node_features)
    size = segment.size
    ordered = sorted(shares.items(), key=lambda x: natural_key(x[0]))
    named = ", ".join(f"{d} {_plural(n, 'node')}" for d, n in ordered)
    odd = [f"{d}'s {n}" for d, n in ordered if n % size]
    head = f"{_plural(len(node_features), 'node')} in segments of {size}"
    if not odd and not none:
        return f"hold: {head}, each inside one NVLink domain: {named} (each share a multiple of {size})", None
    asked = (
        f"locality {locality or NVL} {segment.words()} keeps each segment of {_plural(size, 'node')} in one"
    )
    if not shares:
        return (
            None,
            f"{asked} NVLink domain; the job's {_plural(none, 'node')} {_be(none)} in no NVLink domain",
        )
    why = [f"{' and '.join(odd)} not a multiple of {size}"] if odd else []
    why += [f"{_plural(none, 'node')} in no NVLink domain"] if none else []
    where = named + (f" + {_plural(none, 'node')} in none" if none else "")
    return None, f"{asked} NVLink domain; the job's nodes are in {where}: {'; '.join(why)}"


def _be(n: int) -> str:
    return "is" if n == 1 else "are"


def broken_locality(
    locality: str | None, node_features: Mapping[str, Sequence[str]], segment: Segment | None = None
) -> str | None:
    """Why a placement breaks a required locality (``zone:wait`` and the nodes span zones; a segment job
    whose segments cannot each be inside one NVLink domain), else None."""
    if not locality or not node_features:
        return None
    level = locality.split(":", 1)[0]
    if level == NVL and segment is not None:
        return judge_segments(locality, segment, node_features)[1]
    if level == "nvl":
        domains = nvlink_domains(node_features)
        if domains is not None and domains.startswith("NVLink domain ") and " + " not in domains:
            return None
        return f"locality {locality} asks for one NVLink domain; the job's nodes are in {domains or 'none'}"
    if level not in REQUIRED_LEVELS:
        return None
    word = level.replace("_", " ")
    values, missing = _spread(node_features)[word]
    if len(values) == 1 and not missing:
        return None
    return f"locality {locality} asks for one {word}; the job's nodes are in {_count(values, missing, word)}"


@dataclass(frozen=True)
class Explanation:
    job_id: str
    state: str
    reason: str | None
    nodes: str | None
    locality: str | None
    locality_source: str
    features: str | None
    comment: str | None
    record: str | None
    outcome: str
    broken: str | None = None
    """Set when the nodes break the job's required locality (they span the level it asked for)."""
    cost: tuple[str, ...] = ()
    """The cost lines (plan, prediction; or why there is none), empty for a job without nodes."""
    auto: tuple[str, ...] = ()
    """A ``LEVEL:auto`` job's budget, time waited and relaxations
    (:func:`slurm_topo.relaxer.relax.auto_lines`)."""
    components: tuple[Explanation, ...] = ()
    """A heterogeneous job: each component's explanation (``JOBID+0``, ``JOBID+1`` …); the fields above are
    then component 0's (Slurm's leader), ``job_id`` the job's and ``nodes`` every component's."""
    together: str | None = None
    """A heterogeneous job: where all its placed components' nodes landed together."""
    segment: Segment | None = None
    """A segment job's segment (the filter's record, else the job's ``--comment`` locality)."""
    segments: str | None = None
    """A placed segment job whose segments hold: the line that says so, naming the domains and shares."""

    def text(self) -> str:
        if self.components:
            return self._het_text()
        return self._text()

    def _het_text(self) -> str:
        names = ", ".join(c.job_id for c in self.components)
        lines = [
            f"job {self.job_id}: heterogeneous, {_plural(len(self.components), 'component')} ({names}), "
            "each placed on its own (Slurm matches a constraint per component)"
        ]
        if self.together:
            lines.append(f"  together: {self.together}")
        if self.broken:
            lines.append(f"  BROKEN:   {self.broken}")
        return "\n".join(lines) + "\n" + "".join(c._text() for c in self.components)

    def _text(self) -> str:
        lines = [f"job {self.job_id}: {self.state}" + (f" on {self.nodes}" if self.nodes else "")]
        req = (
            f"locality {self.locality} ({self.locality_source})"
            if self.locality
            else ("no locality recorded (the filter did not see this job, or its data was unusable)")
        )
        if self.locality and self.segment is not None:
            req = req.replace(
                f"locality {self.locality} ", f"locality {self.locality} {self.segment.words()} ", 1
            )
        if self.features:
            req += f"; constraint {self.features}"
        if self.comment:
            req += f"; comment {self.comment!r}"
        lines.append(f"  request:  {req}")
        lines.append(f"  decision: {self.record if self.record else '(none recorded)'}")
        lines.append(f"  {'landed:   ' if self.nodes else 'waiting:  '}{self.outcome}")
        if self.segments:
            lines.append(f"  segments: {self.segments}")
        if self.broken:
            lines.append(f"  BROKEN:   {self.broken}")
        for i, line in enumerate(self.auto):
            lines.append(("  auto:     " if i == 0 else "            ") + line)
        for i, line in enumerate(self.cost):
            lines.append(("  cost:     " if i == 0 else "            ") + line)
        return "\n".join(lines) + "\n"


TOPOLOGY_REASONS = {
    "Required nodes lack available resources": "the nodes the job names (-w) are busy or lack what it asks",
    "Required nodes do not fit topology": "the nodes the job names (-w) are not inside one topology unit",
    "No suitable topology unit found": "no block or switch can hold the whole job now",
    "No suitable topology unit found for segment": "no block can hold one of the job's --segment pieces",
    "Insufficient resources in topology unit": "the best topology unit lacks free resources for the job",
    "Weight-based selection could not satisfy request within topology unit": (
        "the weighted node choice found no fit inside one topology unit"
    ),
    "Exceeded maximum node limit during topology allocation": "the job's node limit stopped the topology fit",
    "No available nodes in topology": "no node of the partition's topology is available",
}
"""Slurm 26.05's topology pending reasons (``ESLURM_TOPO_*`` 7201-7208, their texts in
``src/common/slurm_errno.c``, SchedMD commit dbbc3cf4bf "Add error codes for topology eval_nodes
rejections"): ``node_scheduler.c`` sets ``state_reason=WAIT_RESOURCES`` and ``state_desc`` to the text, and
``scontrol show job`` prints ``state_desc`` as ``Reason=`` with every blank turned into ``_``
(``src/scontrol/info_job.c``). Earlier releases print ``Reason=Resources`` for all of them."""


def topology_reason(reason: str | None) -> str | None:
    """Slurm's own topology reason (26.05) in ``reason`` (``scontrol``'s ``_`` form or squeue's blanks) with
    what it means, else None."""
    text = reason.replace("_", " ") if reason else None
    if text not in TOPOLOGY_REASONS:
        return None
    return f"Slurm's topology reason: {text} ({TOPOLOGY_REASONS[text]})"


def _val(kv: Mapping[str, str], key: str) -> str | None:
    v = kv.get(key)
    return None if v in (None, "", NULL, "None") else v


def _requested(record: str | None, comment: str | None) -> tuple[str | None, str, Segment | None]:
    """The locality, where it was read and its segment: the filter's record, else the job's ``--comment``
    (the segment from the same place as the locality, never the comment beside a record)."""
    locality = locality_of_record(record) if record is not None else None
    if locality is not None:
        return locality, "as the filter read it", segment_of_record(record)
    asked = locality_of_comment(comment)
    if asked:
        return asked, "from --comment", segment_of_comment(asked)
    return None, "", None


def explain_record(job: Mapping[str, str], node_features: Mapping[str, Sequence[str]] | None) -> Explanation:
    """Pure: the parsed job line (and its nodes' features, when it has nodes) -> an Explanation."""
    record = filter_record(job.get("AdminComment"))
    comment = _val(job, "Comment")
    locality, source, segment = _requested(record, comment)
    state = job.get("JobState", "UNKNOWN")
    reason = _val(job, "Reason")
    nodes = _val(job, "NodeList")
    broken = segments = None
    if nodes and node_features:
        outcome = f"{landed(node_features)} ({_plural(len(node_features), 'node')})"
        broken = broken_locality(locality, node_features, segment)
        if segment is not None and broken is None and (locality or "").startswith(NVL + ":"):
            segments = judge_segments(locality, segment, node_features)[0]
    elif nodes:
        outcome = "nodes known, but their features could not be read"
    else:
        outcome = f"Reason={reason or 'None'}"
        if reason in ("JobHeldUser", "JobHeldAdmin") and record and ": held;" in record:
            outcome += f", held by the locality filter: {record.split(': held; ', 1)[1]}"
        elif reason in ("JobHeldUser", "JobHeldAdmin"):
            outcome += " (held)"
        elif (why := topology_reason(reason)) is not None:
            outcome += f"; {why}"
        elif (
            reason in ("Resources", "Priority", "None")
            and record
            and not record.startswith(("prefer", "any"))
        ):
            outcome += "; a required locality waits until one group has room"
    return Explanation(
        job.get("JobId", "?"),
        state,
        reason,
        nodes,
        locality,
        source,
        _val(job, "Features"),
        comment,
        record,
        outcome,
        broken,
        auto=tuple(auto_lines(job)),
        segment=segment,
        segments=segments,
    )


# ---- the cost of the placement (slurm_topo.cost)

NO_PLAN = "no plan: pass --plan or submit with --comment=plan=tp=…,pp=…,bytes=…"
NO_INVENTORY = "not predicted: give -i FILE (the fleet's inventory: where every node is)"
_TRES_PER_NODE_GPU_RE = re.compile(r"(?:^|,)gres[:/]gpu(?::[^:,=]+)?[:=](\d+)(?:,|$)")
_ALLOC_TRES_GPU_RE = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")


PLAN_RECORD_RE = re.compile(r"(?:^|; )" + re.escape(PLAN_PREFIX) + r"([A-Za-z0-9_.,=%-]{1,200})(?:;|$)")
"""The plan the submit filter copied from the job's ``sbatch --plan=…`` (the SPANK option) into its
AdminComment: written by slurmctld, first in the field, never by the job's owner."""


def plan_of_admin_comment(admin_comment: str | None) -> str | None:
    m = PLAN_RECORD_RE.search(admin_comment or "")
    return m.group(1) if m else None


def plan_words(sizes: Mapping[str, int]) -> str:
    """``tp 8 × pp 2 × dp 4``; ``tp 8 × cp 2 × pp 2 × dp 4, ep 8`` with context or expert parallelism (EP
    divides cp × dp: it is no factor of the rank count)."""
    words = f"tp {sizes['tp']}" + (f" × cp {sizes['cp']}" if sizes.get("cp", 1) > 1 else "")
    words += f" × pp {sizes['pp']} × dp {sizes['dp']}"
    return words + (f", ep {sizes['ep']}" if sizes.get("ep", 1) > 1 else "")


def job_plan(
    given: str | None, comment: str | None, inventory: Inventory | None, admin_comment: str | None = None
) -> tuple[str, str] | tuple[None, None]:
    """The plan text and where it came from: ``explain --plan``, else the job's ``sbatch --plan`` (its
    AdminComment record), else the job's ``plan=`` comment, else the site's."""
    if given:
        return given, "from --plan"
    recorded = plan_of_admin_comment(admin_comment)
    if recorded:
        return recorded, "from the job's sbatch --plan"
    found = plan_of_comment(comment)
    if found:
        return found, "from the job's comment"
    site = site_plan(inventory)
    if site:
        return site, "the site default (policy: plan)"
    return None, None


def job_gpus_per_node(job: Mapping[str, str], nodes: int) -> int | None:
    """GPUs per node the job holds: ``TresPerNode=gres:gpu:4``, else ``AllocTRES=…gres/gpu=8`` over its
    nodes (when it divides evenly); None when the job asked for no GPUs (then: the nodes' own count)."""
    per_node = _val(job, "TresPerNode")
    m = _TRES_PER_NODE_GPU_RE.search(per_node) if per_node else None
    if m and int(m.group(1)) > 0:
        return int(m.group(1))
    alloc = _val(job, "AllocTRES")
    m = _ALLOC_TRES_GPU_RE.search(alloc) if alloc else None
    if m and nodes and int(m.group(1)) % nodes == 0 and int(m.group(1)) > 0:
        return int(m.group(1)) // nodes
    return None


@dataclass(frozen=True)
class CostView:
    """The prediction for one placed job: the lines for the text, and what the picture marks."""

    lines: tuple[str, ...]
    nodes: tuple[str, ...] = ()
    best_idle: tuple[str, ...] | None = None
    best_now: tuple[str, ...] | None = None
    states: Mapping[str, NodeState] | None = None


def predict_cost(
    job: Mapping[str, str],
    inventory: Inventory | None,
    node_records: Sequence[Mapping[str, str]] | None,
    *,
    plan: str | None = None,
    table: LinkTable = DEFAULT_TABLE,
) -> CostView:
    """Pure: a placed job (its parsed line), the fleet, the node states (``scontrol -d show node -o``
    records; None: unknown, no "free right now") -> the cost lines. A plan or a placement the model cannot
    use (a bad ``plan=`` comment, a node the inventory lacks) is one line, never an error."""
    from ..plumbing.collector import collector_paused

    with collector_paused():  # node states and placements over the whole fleet: no collector passes
        return _predict_cost(job, inventory, node_records, plan, table)


def _predict_cost(
    job: Mapping[str, str],
    inventory: Inventory | None,
    node_records: Sequence[Mapping[str, str]] | None,
    plan: str | None,
    table: LinkTable,
) -> CostView:
    from ..core.hostlist import expand
    from ..cost import Fabric, describe, gpus_per_node, parse_plan, predict_job
    from .capacity import node_states

    text, source = job_plan(plan, _val(job, "Comment"), inventory, _val(job, "AdminComment"))
    if text is None:  # no prediction; the picture still shows what is free (node states when read)
        known = node_states(inventory, node_records)[0] if inventory and node_records is not None else None
        return CostView((NO_PLAN,), states=known)
    if inventory is None:
        return CostView((f"plan {text} ({source}); {NO_INVENTORY}",))
    try:
        nodes = tuple(expand(_val(job, "NodeList") or ""))
        spec = parse_plan(text)
        fabric = Fabric.of(inventory)
        g = spec.gpus_per_node or job_gpus_per_node(job, len(nodes))
        g = gpus_per_node(fabric, nodes, g)
        spec = dataclasses.replace(spec, gpus_per_node=g)
        states = node_states(inventory, node_records)[0] if node_records is not None else None
        free = {n for n, st in states.items() if st.free_gpus >= g} if states is not None else None
        idle, now = predict_job(fabric, nodes, spec, table, free_now=free)
    except InputError as exc:
        return CostView((f"plan {text} ({source}); not predicted: {exc}",))
    head = (
        f"plan {plan_words(idle.current.sizes)} on {_plural(len(nodes), 'node')} × "
        f"{_plural(g, 'GPU')} ({source}: {text})"
    )
    lines = [head, *describe(idle, now)]
    if table.measured is not None:
        lines.append(table.measured.text())
    if now is None:
        lines.append("free right now (with its own nodes): unknown (node states could not be read)")
    return CostView(
        tuple(lines),
        nodes,
        idle.best.nodes if idle.best is not None else None,
        now.best.nodes if now is not None and now.best is not None else None,
        states,
    )


def explain_full(
    job_id: str,
    runner: Runner,
    *,
    inventory: Inventory | None = None,
    plan: str | None = None,
    table: LinkTable = DEFAULT_TABLE,
    access: SlurmAccess | None = None,
    want_states: bool = False,
) -> tuple[Explanation, CostView | None]:
    """Ask slurmctld (``scontrol show job -o``, ``scontrol show node -o`` for the job's nodes, and with an
    inventory and a plan ``scontrol -d show node -o`` for what is free now) -> the explanation and, for a
    placed job, its cost view. A failing job/node query raises the runner's CommandError; a failing state
    query only leaves "free right now" out. None for a job slurmctld does not know.

    A heterogeneous job's id gives every component's explanation (:attr:`Explanation.components`) and where
    they landed together; its view marks all their nodes (the cost lines are per component)."""
    access = access or SlurmAccess(runner)
    found, components = _read_job(access, job_id)
    if found is None:
        return Explanation(job_id, "", None, None, None, "", None, None, None, ""), None
    if components:
        return _explain_het(job_id, components, runner, inventory, plan, table, want_states)
    return _explain_one(found, runner, inventory, plan, table, want_states, {}, {})


MAX_COMPONENTS = 128
"""The most components of one heterogeneous job that explain reads."""


def _component_name(rec: Mapping[str, str]) -> str | None:
    """``17+1`` for a record scontrol's text marks as a component (``HetJobId=17 HetJobOffset=1``)."""
    het, offset = rec.get("HetJobId"), rec.get("HetJobOffset")
    return f"{het}+{offset}" if het and offset and het.isdigit() and offset.isdigit() else None


def _read_job(access: SlurmAccess, job_id: str) -> tuple[dict[str, str] | None, list[dict[str, str]]]:
    """The job's record (as :meth:`SlurmAccess.job` reads it), and when ``job_id`` is a heterogeneous job's
    id its components' records in offset order (else []).

    scontrol's text names the components (``HetJobId=``, ``HetJobOffset=``) and answers a het job's id with
    all of them; the structured backends (squeue --json, pyslurm) give a record without them, so there a
    component is asked for by its name, ``JOBID+K`` (only a component answers to one), from K=1 until none
    answers. Where the access layer has turned to text for one job (22.05's squeue --json lists every job,
    24.11's every component), the job is read again so. No command is run that fails for a job that has no
    components."""
    listing = access.jobs(job_id, timeout=30)
    first = _own_record(listing, job_id)
    if first is None:
        return None, []
    if not job_id.isdigit():  # JOBID+K (shown by that name), an array task: that one job
        return ({**first, "JobId": job_id} if re.fullmatch(r"\d+\+\d+", job_id) else first), []
    if listing.backend != "text" and _reads_text(access):
        try:
            again = access.jobs(job_id, timeout=30)
            if _own_record(again, job_id) is None:
                return first, []  # gone meanwhile
        except ParseError:
            # the text refuses a record a user's field could have shaped: the structured record stands, and
            # its components are asked for by name
            return first, _asked_components(access, job_id, first)
        listing = again
    if listing.backend == "text":
        return listing.jobs[0], _text_components(listing, job_id)
    return first, _asked_components(access, job_id, first)


def _own_record(listing: JobListing, job_id: str) -> dict[str, str] | None:
    """The listing's first record; None when it has none (ParseError when the job's own was refused)."""
    if listing.jobs:
        return listing.jobs[0]
    for jid, why in listing.refused:
        if jid == job_id:
            raise ParseError(f"job {job_id}", None, why)
    return None


def _reads_text(access: SlurmAccess) -> bool:
    """Whether the access layer's next read of one job is scontrol's text."""
    return access.backend == "text" or access.one_job_text


def _text_components(listing: JobListing, job_id: str) -> list[dict[str, str]]:
    """A heterogeneous job's components in scontrol's answer for its id, by offset, each named ``JOBID+K``;
    [] for a job that is none (or a component named by its own job id: that one alone)."""
    named = sorted(
        (r for r in listing.jobs if r.get("HetJobId") == job_id and _component_name(r)),
        key=lambda r: int(r["HetJobOffset"]),
    )
    if len(named) < 2:
        return []
    return [{**r, "JobId": _component_name(r) or r["JobId"]} for r in named]


def _asked_components(access: SlurmAccess, job_id: str, first: dict[str, str]) -> list[dict[str, str]]:
    """The components by name from a structured backend: a heterogeneous job has two components or more,
    and its id is its component 0's (pyslurm gives component 0 no offset, so ``JOBID+0`` is never asked):
    ``JOBID+1`` tells whether the job is one."""
    parts: list[dict[str, str]] = [{**first, "JobId": f"{job_id}+0"}]
    for k in range(1, MAX_COMPONENTS):
        if _reads_text(access):  # 24.11's squeue listed every component for JOBID+1: scontrol names them
            again = access.jobs(job_id, timeout=30)
            if again.backend == "text":
                return _text_components(again, job_id)
        rec = _component(access, job_id, k)
        if rec is None:
            break
        parts.append({**rec, "JobId": f"{job_id}+{k}"})
    return parts if len(parts) > 1 else []


def _component(access: SlurmAccess, job_id: str, k: int) -> dict[str, str] | None:
    """Component K of the heterogeneous job ``job_id``, or None when it has none (or is no such job)."""
    name = f"{job_id}+{k}"
    try:
        listing = access.jobs(name, timeout=30)
    except CommandError as exc:
        # scontrol show job -o JOBID+K of a job with no such component: exit 1, "Job 18+1 not found" (on
        # stdout in 22.05, on stderr later)
        if exc.returncode == 1 and ("not found" in exc.stderr.lower() or not exc.stderr.strip()):
            return None
        raise
    for rec in listing.jobs:
        # squeue --json and pyslurm match JOBID+K only to a component; scontrol answers JOBID+0 of a job
        # that has none with that job: its record must name the het job
        if listing.backend != "text" or rec.get("HetJobId") == job_id:
            return rec
    for jid, why in listing.refused:
        if jid == name:
            raise ParseError(f"job {name}", None, why)
    return None


def _node_states(runner: Runner, inventory: Inventory | None, want: bool) -> list[dict[str, str]] | None:
    """``scontrol -d show node -o`` records (what is free now), or None when not wanted or unreadable."""
    if inventory is None or not want:
        return None
    from ..access.text import parse_scontrol_nodes
    from .capacity import STATE_KEYS

    try:  # -d: GresUsed=gpu:…(IDX:…), the GPUs a MIXED node has in use
        out = runner.run(slurm_argv.show_nodes(detail=True), timeout=30)
        return parse_scontrol_nodes(out, source="scontrol -d show node -o", keys=STATE_KEYS)
    except (CommandError, InputError):
        return None


def _explain_one(
    job: Mapping[str, str],
    runner: Runner,
    inventory: Inventory | None,
    plan: str | None,
    table: LinkTable,
    want_states: bool,
    states: dict[str, list[dict[str, str]] | None],
    placed: dict[str, Sequence[str]],
) -> tuple[Explanation, CostView | None]:
    """One job (or component): its explanation and, when placed, its cost view. ``states``: the node
    states, read once for all components (key ``"nodes"``); ``placed`` gets its nodes' features."""
    features = None
    nodes = _val(job, "NodeList")
    if nodes:
        features = parse_nodes(runner.run(slurm_argv.show_nodes(nodes), timeout=30))
        placed.update(features)
    explanation = explain_record(job, features)
    if not nodes:
        return explanation, None
    planned = job_plan(plan, _val(job, "Comment"), inventory, _val(job, "AdminComment"))[0] is not None
    if (want_states or planned) and "nodes" not in states:
        states["nodes"] = _node_states(runner, inventory, True)
    view = predict_cost(job, inventory, states.get("nodes"), plan=plan, table=table)
    return dataclasses.replace(explanation, cost=view.lines), view


def _explain_het(
    job_id: str,
    components: Sequence[Mapping[str, str]],
    runner: Runner,
    inventory: Inventory | None,
    plan: str | None,
    table: LinkTable,
    want_states: bool,
) -> tuple[Explanation, CostView | None]:
    """Every component, then where they landed together (a required locality broken across them is
    flagged); the view marks all their nodes."""
    states: dict[str, list[dict[str, str]] | None] = {}
    parts: list[Explanation] = []
    placed: dict[str, Sequence[str]] = {}
    view_states = None
    for rec in components:
        part, view = _explain_one(rec, runner, inventory, plan, table, want_states, states, placed)
        parts.append(part)
        if view is not None and view.states is not None:
            view_states = view.states
    together = None
    broken = None
    if placed:
        together = f"{landed(placed)} ({_plural(len(placed), 'node')}"
        waiting = sum(1 for c in parts if not c.nodes)
        together += f"; {_plural(waiting, 'component')} not placed)" if waiting else ")"
        for part in parts:
            if part.segment is not None:  # judged on its own nodes: segments are a component's own
                continue
            why = broken_locality(part.locality, placed)
            if why is not None and part.broken is None:
                broken = f"component {part.job_id}: " + why.replace(
                    "the job's nodes", "the components' nodes"
                )
                break
    nodes = ",".join(c.nodes for c in parts if c.nodes) or None
    head = dataclasses.replace(parts[0], job_id=job_id, nodes=nodes, components=tuple(parts))
    head = dataclasses.replace(head, together=together, broken=broken, cost=(), auto=())
    return head, (CostView((), states=view_states) if nodes else None)


def explain_job(
    job_id: str,
    runner: Runner,
    *,
    inventory: Inventory | None = None,
    plan: str | None = None,
    table: LinkTable = DEFAULT_TABLE,
    access: SlurmAccess | None = None,
) -> str:
    """`slurm-topo explain JOBID`: the explanation as text, ending with a newline (:func:`explain_full`)."""
    explanation, _ = explain_full(job_id, runner, inventory=inventory, plan=plan, table=table, access=access)
    if not explanation.state:
        return f"job {job_id}: not known to slurmctld\n"
    return explanation.text()


def write_overlay(inventory: Inventory, explanation: Explanation, view: CostView | None, path: str) -> str:
    """``explain --svg FILE``: the fleet with the job's nodes and the best placement marked
    (:mod:`slurm_topo.reports.svg_overlay`); the line to print. The best placement is the best free right now
    when node states were read, else the best on an idle fleet; for a job without a plan, the tightest nodes
    of the same shape (the model's search, no cost)."""
    from pathlib import Path

    from ..core.hostlist import expand
    from ..cost import Fabric, best_nodes
    from ..plumbing.output import write_files
    from .svg_overlay import render_overlay

    target = Path(path)
    if not target.name or target.name in (".", ".."):
        raise InputError(f"--svg {path}: must name a file")
    nodes = tuple(expand(explanation.nodes)) if explanation.nodes else ()
    states = view.states if view is not None else None
    best: tuple[str, ...] | None = None
    label = "best placement"
    if view is not None and view.best_now is not None:
        best, label = view.best_now, "best placement free right now (with its own nodes)"
    elif view is not None and view.best_idle is not None:
        best, label = view.best_idle, "best placement on an idle fleet"
    elif nodes:
        fabric = Fabric.of(inventory)
        known = [n for n in nodes if n in fabric.nodes]
        if len(known) == len(nodes):
            g = min(fabric.node(n).gpus or 0 for n in nodes)
            found = best_nodes(fabric, len(nodes), g)
            best = found.nodes if found is not None else None
            label = "tightest placement of this shape on an idle fleet"
    svg_text = render_overlay(
        inventory,
        states,
        nodes,
        best,
        job_label=f"job {explanation.job_id}",
        best_label=label,
    )
    write_files(target.parent, {target.name: svg_text})
    if not nodes:
        return f"svg: {path} (job {explanation.job_id} has no nodes yet: nothing marked)"
    marked = f"job {explanation.job_id} on {_plural(len(nodes), 'node')}"
    if best is not None:
        marked += f", {label} on {_plural(len(best), 'node')}"
    return f"svg: {path} ({marked})"
