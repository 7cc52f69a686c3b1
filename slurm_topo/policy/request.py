"""The request: what the filter reads from a job_desc as job_submit/lua hands it (SPANK option, environment,
comment, GPUs, size, partition), the same reading as the Lua filter's "request" section."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .vocab import MAX_CONSTRAINT, MAX_FIELD, NO_VAL, NO_VAL16, SPANK_LOCALITY, SPANK_REGIONS

_DIGITS = re.compile(r"^[0-9]{1,9}\Z")
_ASCII_SPACE = re.compile(r"[^ \t\n\v\f\r]+")
_LABEL_TOKEN = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")
_GPU_FIELDS = (("job", "tres_per_job"), ("node", "tres_per_node"), ("task", "tres_per_task"))
_UNCHECKED_FIELDS = (
    ("req_nodes", "--nodelist"),
    ("exc_nodes", "--exclude"),
    ("reservation", "--reservation"),
)
_CAPPED_FIELDS = (
    ("features", MAX_CONSTRAINT, "--constraint"),
    ("prefer", MAX_CONSTRAINT, "--prefer"),
    ("partition", MAX_FIELD, "--partition"),
    ("tres_per_job", MAX_FIELD, "--gpus"),
    ("tres_per_node", MAX_FIELD, "--gpus-per-node"),
    ("tres_per_task", MAX_FIELD, "--gpus-per-task"),
)


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
    """A heterogeneous job's component: each is constrained on its own, so they may land in different
    groups."""
    interactive: bool = False
    """An salloc/srun allocation (job_desc.script is nil): nobody waits at a terminal for a job no group can
    ever hold, so a ``:wait`` that would hold it rejects it at once with the reason."""

    oversize: str | None = None
    """A field longer than the filter reads (hostile sizes): the job passes unchanged without being
    scanned."""
    nodelist: str | None = None
    """--nodelist as Slurm hands it (a hostlist): a required level the named nodes already break is
    refused."""
    time_limit: int | None = None
    """--time in minutes (job_desc.time_limit); None when not given or unlimited: an ``auto`` job's budget
    is its time limit times the slowdown of each looser level."""
    segment_ok: bool = False
    """The release lets job_submit/lua write ``segment_size`` (25.11.2+: the Lua filter sees
    ``slurm.CONSOLIDATE_SEGMENTS``): ``nvl:segment=N`` can be set, not only refused."""
    user_segment: int | None = None
    """The job's own ``--segment`` (job_desc.segment_size, read only where ``segment_ok``; 0 and NO_VAL16:
    not given): it wins over a requested or default one, and the filter never writes it."""

    @classmethod
    def from_job_desc(cls, job: Mapping[str, Any], segments: bool = False) -> JobRequest:
        """The same reading as the Lua filter: SPANK env, then the job environment (batch jobs only), then
        ``--comment``. ``segments``: the release takes ``segment_size`` from job_submit/lua (the Lua filter
        asks ``slurm.CONSOLIDATE_SEGMENTS``)."""
        interactive = job.get("script") is None
        locality, regions = _spank_values(job.get("spank_job_env"))
        # The batch environment only when the SPANK entries say nothing (slurmctld logs a complaint for every
        # srun/salloc job whose environment is read).
        environment = job.get("environment") if locality is None and not interactive else None
        if isinstance(environment, Mapping):
            locality = _str(environment.get("SLURM_SPANK_" + SPANK_LOCALITY))
            if regions is None:
                regions = _str(environment.get("SLURM_SPANK_" + SPANK_REGIONS))
        comment = _str(job.get("comment"))
        if comment is not None and _blen(comment) <= MAX_FIELD:  # a longer comment is not read
            c_locality, c_regions = _comment_values(comment)
            locality = c_locality if locality is None else locality
            regions = c_regions if regions is None else regions
        het = job.get("het_job_offset")
        het_offset = _int(het)
        if het_offset is None and isinstance(het, (int, float)) and not isinstance(het, bool) and het == 0:
            het_offset = 0
        return cls(
            locality=_str(locality),
            regions=_str(regions),
            features=_str(job.get("features")),
            prefer=_str(job.get("prefer")),
            partition=_str(job.get("partition")),
            min_nodes=_int(job.get("min_nodes")),
            num_tasks=_int(job.get("num_tasks")),
            gpu=_gpu(job),
            unchecked=_unchecked(job),
            het_offset=het_offset,
            interactive=interactive,
            oversize=_oversize(job, regions),
            nodelist=_str(job.get("req_nodes")),
            time_limit=_int(job.get("time_limit")),
            segment_ok=segments,
            user_segment=_segment(job.get("segment_size")) if segments else None,
        )


def _segment(value: object) -> int | None:
    """job_desc.segment_size as the user set it: 1 .. NO_VAL16 - 1; 0 and NO_VAL16 (and anything else) are
    "not given"."""
    n = _int(value)
    return n if n is not None and n < NO_VAL16 else None


def _blen(text: str) -> int:
    """Length in bytes, as Lua's ``#``."""
    return len(text.encode("utf-8", "surrogatepass"))


def _spank_values(env: object) -> tuple[str | None, str | None]:
    """(locality, regions) from the SPANK entries (0-indexed, as slurmctld builds them; the first of each
    wins)."""
    locality = regions = None
    if not isinstance(env, Mapping):
        return None, None
    i = 0
    while i < 1000 and env.get(i) is not None:
        kv = env[i]
        i += 1
        if isinstance(kv, str) and "=" in kv and _blen(kv) <= MAX_FIELD:
            k, _, v = kv.partition("=")
            if k == SPANK_LOCALITY and locality is None:
                locality = v
            elif k == SPANK_REGIONS and regions is None:
                regions = v
    return locality, regions


def _comment_values(comment: str) -> tuple[str | None, str | None]:
    """(locality, regions) from ``locality=…`` / ``locality-regions=…`` words of the comment (the first
    wins)."""
    locality = regions = None
    for token in _ASCII_SPACE.findall(comment):
        if "=" not in token:
            continue
        k, _, v = token.partition("=")
        if k == "locality" and locality is None:
            locality = v
        elif k == "locality-regions" and regions is None:
            regions = v
    return locality, regions


def _gpu(job: Mapping[str, Any]) -> GpuAsk | None:
    for scope, key in _GPU_FIELDS:
        parsed = parse_gpu_tres(job.get(key))
        if parsed is not None:
            return GpuAsk(scope, parsed[0], parsed[1])
    return None


def _unchecked(job: Mapping[str, Any]) -> str | None:
    for key, what in _UNCHECKED_FIELDS:
        if _str(job.get(key)) is not None:
            return what
    contiguous = _int(job.get("contiguous"))
    if contiguous is not None and contiguous < NO_VAL16:  # NO_VAL16: not given
        return "--contiguous"
    return None


def _oversize(job: Mapping[str, Any], regions: str | None) -> str | None:
    """The first field longer than the filter reads, by its option name (see ``MAX_FIELD``)."""
    for key, limit, what in _CAPPED_FIELDS:
        value = job.get(key)
        if isinstance(value, str) and _blen(value) > limit:
            return what
    if regions is not None and _blen(regions) > MAX_FIELD:
        return "--locality-regions"
    return None
