"""`slurm-topo explain JOBID`: what a job asked for, what the locality filter decided, and where Slurm put it.

* the request: the locality from the filter's record on the job (``AdminComment=... slurm-topo: <record>``),
  else from ``--comment=locality=...``; the job's constraint (``Features=``) and comment;
* the decision: the filter's record, as it wrote it;
* the outcome: for a job with nodes, the lowest level all of them share, read from the nodes' own features as
  Slurm reports them (``region_*``, ``zone_*``, ``ng_*`` in ``scontrol show node -o``), phrased like
  "same zone us-east-1a, 2 network groups" (nodes without a group of a level are counted apart); a placement
  that breaks a required locality (a zone job whose nodes span zones, e.g. with ``--nodelist``) is flagged;
  for a pending job, Slurm's ``Reason=`` (and for a held one the record, which says why).

The parsing functions are pure (text in, values out); ``explain_job`` is the only one that calls the runner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .runner import Runner
from .slurmconf import split_pairs

RECORD_PREFIX = "slurm-topo: "
LEVEL_PREFIXES = (("network group", "ng_"), ("zone", "zone_"), ("region", "region_"))
# scontrol's keys start upper-case (JobId=, AdminComment=, AllocNode:Sid=, CPUs/Task=, ReqB:S:C:T=); a value
# may hold spaces (AdminComment, Comment), so a line is split only before " Key=".
NULL = "(null)"


def parse_record_line(line: str) -> dict[str, str]:
    """One ``scontrol show job -o`` / ``show node -o`` line -> {key: value}; values keep inner spaces."""
    try:
        return split_pairs(line.strip(), output=True)
    except ValueError:
        return {}


def parse_nodes(text: str) -> dict[str, tuple[str, ...]]:
    """``scontrol show node -o`` -> {node: its features} (ActiveFeatures, else AvailableFeatures)."""
    nodes: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        if not line.strip().startswith("NodeName="):
            continue
        kv = parse_record_line(line)
        feats = kv.get("ActiveFeatures") or kv.get("AvailableFeatures") or NULL
        nodes[kv["NodeName"]] = () if feats in ("", NULL) else tuple(f for f in feats.split(",") if f)
    return nodes


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
    return head if re.fullmatch(r"[a-z_]+:(wait|fail)", head) else None


def locality_of_comment(comment: str | None) -> str | None:
    """``--comment='locality=zone:fail ...'`` -> ``zone:fail`` (for clients without the plugin)."""
    if not comment or comment == NULL:
        return None
    for token in comment.split():
        key, _, value = token.partition("=")
        if key == "locality" and value:
            return value
    return None


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


def landed(node_features: Mapping[str, Sequence[str]]) -> str:
    """The lowest level all nodes share: "same network group us-east-1a.rack-a1", "same zone us-east-1a,
    2 network groups", "same region us-west, 3 zones", "3 regions"; nodes without a group of the finer level
    are counted apart ("same zone z, 1 network group + 1 node without one"); "no location features" when none
    are known."""
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


def broken_locality(locality: str | None, node_features: Mapping[str, Sequence[str]]) -> str | None:
    """Why a placement breaks a required locality (``zone:wait`` and the nodes span zones), else None."""
    if not locality or not node_features:
        return None
    level = locality.split(":", 1)[0]
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

    def text(self) -> str:
        lines = [f"job {self.job_id}: {self.state}" + (f" on {self.nodes}" if self.nodes else "")]
        req = (
            f"locality {self.locality} ({self.locality_source})"
            if self.locality
            else ("no locality recorded (the filter did not see this job, or its data was unusable)")
        )
        if self.features:
            req += f"; constraint {self.features}"
        if self.comment:
            req += f"; comment {self.comment!r}"
        lines.append(f"  request:  {req}")
        lines.append(f"  decision: {self.record if self.record else '(none recorded)'}")
        lines.append(f"  {'landed:   ' if self.nodes else 'waiting:  '}{self.outcome}")
        if self.broken:
            lines.append(f"  BROKEN:   {self.broken}")
        return "\n".join(lines) + "\n"


def _val(kv: Mapping[str, str], key: str) -> str | None:
    v = kv.get(key)
    return None if v in (None, "", NULL, "None") else v


def explain_record(job: Mapping[str, str], node_features: Mapping[str, Sequence[str]] | None) -> Explanation:
    """Pure: the parsed job line (and its nodes' features, when it has nodes) -> an Explanation."""
    record = filter_record(job.get("AdminComment"))
    comment = _val(job, "Comment")
    locality, source = None, ""
    if record is not None:
        locality = locality_of_record(record)
        source = "as the filter read it"
    if locality is None and locality_of_comment(comment):
        locality, source = locality_of_comment(comment), "from --comment"
    state = job.get("JobState", "UNKNOWN")
    reason = _val(job, "Reason")
    nodes = _val(job, "NodeList")
    broken = None
    if nodes and node_features:
        outcome = f"{landed(node_features)} ({_plural(len(node_features), 'node')})"
        broken = broken_locality(locality, node_features)
    elif nodes:
        outcome = "nodes known, but their features could not be read"
    else:
        outcome = f"Reason={reason or 'None'}"
        if reason in ("JobHeldUser", "JobHeldAdmin") and record and ": held;" in record:
            outcome += f", held by the locality filter: {record.split(': held; ', 1)[1]}"
        elif reason in ("JobHeldUser", "JobHeldAdmin"):
            outcome += " (held)"
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
    )


def explain_job(job_id: str, runner: Runner) -> str:
    """`slurm-topo explain JOBID`: asks slurmctld (``scontrol show job -o``, and ``scontrol show node -o`` for
    the job's nodes) and returns the explanation as text, ending with a newline. A failing command raises the
    runner's CommandError."""
    text = runner.run(["scontrol", "show", "job", "-o", job_id], timeout=30)
    line = next((ln for ln in text.splitlines() if ln.strip().startswith("JobId=")), "")
    if not line:
        return f"job {job_id}: not known to slurmctld\n"
    job = parse_record_line(line)
    features = None
    nodes = _val(job, "NodeList")
    if nodes:
        features = parse_nodes(runner.run(["scontrol", "show", "node", "-o", nodes], timeout=30))
    return explain_record(job, features).text()
