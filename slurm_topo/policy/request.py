"""The request: what the filter reads from a job_desc as job_submit/lua hands it (SPANK option, environment,
comment, GPUs, size, partition), the same reading as the Lua filter's "request" section."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .vocab import NO_VAL, NO_VAL16, SPANK_LOCALITY, SPANK_REGIONS

_DIGITS = re.compile(r"^[0-9]{1,9}\Z")
_ASCII_SPACE = re.compile(r"[^ \t\n\v\f\r]+")
_LABEL_TOKEN = re.compile(r"^[A-Za-z0-9._-]{1,63}\Z")


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

    @classmethod
    def from_job_desc(cls, job: Mapping[str, Any]) -> JobRequest:
        """The same reading as the Lua filter: SPANK env, then the job environment (batch jobs only), then
        ``--comment``."""
        locality = regions = None
        interactive = job.get("script") is None
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
        environment = job.get("environment") if locality is None and not interactive else None
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
        contiguous = _int(job.get("contiguous"))
        if unchecked is None and contiguous is not None and contiguous < NO_VAL16:  # NO_VAL16: not given
            unchecked = "--contiguous"
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
            gpu=gpu,
            unchecked=unchecked,
            het_offset=het_offset,
            interactive=interactive,
        )
