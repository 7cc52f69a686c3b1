"""The shared vocabulary of the locality policy: levels, localities, Slurm's limits, the job_desc field names,
and how a user string may appear in a message. The Lua filter carries the same names (its "vocabulary"
section)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.errors import InputError
from ..core.model import LEVEL_FEATURE_PREFIXES

LEVELS = ("network_group", "zone", "region")  # finest first: the order prefer tries them
LOCALITIES = ("prefer", "nvl", "network_group", "zone", "region", "any")
NVL = "nvl"
"""One NVLink domain (``nvl_<domain>`` features, every release): required only (:wait or :fail), never a
level of the prefer cascade or of an auto budget — a domain need not lie inside one network group."""
MODES = ("wait", "fail", "auto")  # auto: decided as wait, plus the budget record (docs/relax.md)
SEGMENT_KEY = "segment="
"""``--locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]``: an ``nvl`` job larger than one NVLink
domain runs in segments of N nodes, each inside one domain (Slurm's ``segment_size``, set by the filter from
25.11.2, where job_submit/lua can write it)."""
SEGMENT_POLICIES = ("spread", "consolidate")
"""Where a segment job's segments go (Slurm 25.11's ``--spread-segments`` / ``--consolidate-segments``: the
job flags ``slurm.SPREAD_SEGMENTS`` / ``slurm.CONSOLIDATE_SEGMENTS``); none: Slurm's own choice."""
MAX_SEGMENT = 9999
"""Largest N of ``segment=N`` (1-4 digits, no leading zero): an NVLink domain is 72 GPUs or a few hundred."""
SEGMENT_RELEASE = "25.11.2"
"""The first release whose job_submit/lua can write ``segment_size`` (and has ``slurm.CONSOLIDATE_SEGMENTS``,
how the filter tells it)."""
MAX_ALTERNATIVES = 64  # a matching-OR bracket is a 64-bit bitmap in slurmctld; more corrupts memory
MAX_CONSTRAINT = 1024  # longest features / prefer string slurmctld accepts
MAX_RECORD = 200
LOOKS_LIST = 64
"""The work bound (policy/scan.py): groups one walk of a level's list looks at — a required level's, each list
of the prefer cascade."""
LOOKS_FINER = 32
"""Groups each finer list of a required zone's or region's --prefer looks at."""
LOOKS_LARGEST = 32
"""Groups the largest-group search of a refusal looks at (from the largest down)."""
UNION_ROWS = 32
"""Zones prefer's unions are made from: the largest, looked at from the largest down."""
UNION_TRIES = 96
"""Zone combinations prefer's unions try, in all."""
MAX_MERGED = 16
"""Most partitions a job's -p list may name for the filter to count them (each walk step compares one
group per partition); a longer list is decided as every node (prefer) or refused (a required level)."""
MAX_FIELD = 4096
"""Longest partition list, GPU request, regions list, SPANK entry or comment the filter reads: a longer one is
not scanned (hostile sizes cost what a normal request costs); Slurm has its own, larger limits for these."""
RECORD_PREFIX = "slurm-topo: "  # the job's AdminComment record starts with it
IMPLICIT_PARTITION = "*"
NO_VAL = 0xFFFFFFFE
NO_VAL16 = 0xFFFE
INFINITE = 0xFFFFFFFF
HOLD_NOTE = (
    "; the job is held (Slurm shows JobHeldUser, but a release by its owner is refused): resize it "
    "(scontrol update JobId=ID NumNodes=N) to re-plan it, or ask an administrator to release it"
)
INTERACTIVE_NOTE = "; an interactive allocation does not wait for it"
AUTO_NO_LIMIT = "; auto: no time limit, no budget (waits as :wait)"
AUTO_NO_PLAN = "; auto: no site plan, no budget (waits as :wait)"
AUTO_NO_FIT = "; auto: the site plan does not fit this job, no budget (waits as :wait)"
AUTO_WAITS = {  # what the submitter reads (stderr) when an auto job gets no budget: the record's reason
    AUTO_NO_LIMIT: "no time limit (give --time)",
    AUTO_NO_PLAN: "no site plan in the filter's data",
    AUTO_NO_FIT: "the site plan does not fit this job",
}
CONFLICT_NOTE = (
    "; a required locality cannot be enforced with it: drop the brackets or counts, or use --locality=prefer"
)
NVL_NONE = "no node of the partition is in an NVLink domain"
NVL_NONE_NOTE = "; no size can ever fit: use --locality=network_group or zone"
BUDGET_PREFIX = "slurm-topo-auto: "  # slurm_topo/relaxer/relax.py: the budget record an auto job carries
RELAX_PREFIX = "slurm-topo-relax: "  # slurm_topo/relaxer/relax.py: one per relaxation
AUTO_LEVELS = ("network_group", "zone", "region", "any")  # an auto job's budget levels, tightest first
SPANK_LOCALITY = "_SLURM_SPANK_OPTION_locality_locality"
SPANK_REGIONS = "_SLURM_SPANK_OPTION_locality_locality_regions"
SPANK_PLAN = "_SLURM_SPANK_OPTION_locality_plan"  # sbatch --plan (the filter copies it into AdminComment)
PLAN_PREFIX = "slurm-topo-plan: "  # the plan record, first in AdminComment: explain reads it
AUTO_INDEX = {level: i for i, level in enumerate(LEVELS, 1)}  # a level: its place in AUTO_LEVELS
LOCATION_PREFIXES = LEVEL_FEATURE_PREFIXES
"""The feature prefixes the generator owns (``region_``, ``zone_``, ``ng_``, ``leaf_``, ``nvl_``; family
buckets are ``zone_<z>.<value>`` and so on): ``model.LEVEL_FEATURE_PREFIXES``, the one list, which the data
file carries to the filter (``owned``). A constraint naming such a feature is combined with a required
level's bracket (its fit not counted: the features are the groups'), never called unknown."""
MAX_NAMED_DIGITS = 15
"""Longest digit run a --nodelist may hold (policy/nodes.py): Lua's numbers are exact to 2^53, so a longer
one is refused with a required level rather than read approximately."""
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:=,+-")


def locality_advice(text: str) -> str:
    """The refusal of a locality that does not parse (the Lua filter's ``bad_locality``: the same text)."""
    if text == "nvl:auto":
        return (
            "--locality=nvl:auto: an NVLink domain has no looser level to relax to; use nvl "
            "(waits) or nvl:fail, or LEVEL:auto with LEVEL network_group, zone or region"
        )
    return (
        f"unknown locality '{safe(text)}' (use prefer|nvl|network_group|zone|region|any, "
        "optionally :wait, :fail or :auto; nvl takes :wait or :fail)"
    )


SEGMENT_ADVICE = (
    "--locality=nvl:segment=N[:spread|:consolidate][:wait|:fail]: N a whole number from 1 to "
    f"{MAX_SEGMENT} (the nodes of one segment, kept in one NVLink domain)"
)


def parse_segment(text: str) -> tuple[str, str, int | None, str | None]:
    """(level, mode, segment size, segment policy): ``nvl:segment=2:spread:fail`` -> ("nvl", "fail", 2,
    "spread"); any other locality as ``parse_locality`` reads it, with no segment. The one grammar of the
    segment form (the Lua filter's ``parse_segment``, locality.c's ``_valid_segment``)."""
    if not text.startswith(NVL + ":" + SEGMENT_KEY):
        level, mode = _parse_plain(text)
        return level, mode, None, None
    parts = text.split(":")
    digits = parts[1][len(SEGMENT_KEY) :]
    rest = parts[2:]
    policy = None
    if rest and rest[0] in SEGMENT_POLICIES:
        policy = rest.pop(0)
    mode = rest.pop(0) if rest else "wait"
    if not _is_segment_size(digits) or rest or mode not in ("wait", "fail"):
        raise InputError(SEGMENT_ADVICE)
    return NVL, mode, int(digits), policy


def _is_segment_size(digits: str) -> bool:
    return (
        1 <= len(digits) <= len(str(MAX_SEGMENT))
        and digits.isascii()
        and digits.isdigit()
        and digits[0] != "0"
    )


def parse_locality(text: str) -> tuple[str, str]:
    """``zone:fail`` -> ("zone", "fail"); the mode defaults to wait (``zone:``, with nothing after the colon,
    is refused); ``nvl:segment=N…`` (``parse_segment``) -> ("nvl", its mode)."""
    level, mode, _, _ = parse_segment(text)
    return level, mode


def _parse_plain(text: str) -> tuple[str, str]:
    level, colon, mode = text.partition(":")
    mode = mode or ("" if colon else "wait")  # "zone:" is refused, as the SPANK plugin refuses it
    if level not in LOCALITIES or mode not in MODES or (level == NVL and mode == "auto"):
        raise InputError(locality_advice(text))
    return level, mode


def budget_record(level: str, limit_s: int, units: Sequence[float]) -> str:
    """An ``auto`` job's budget record from its time limit (seconds) and its data row ``units`` (s_L -
    s_tight for each level looser than ``level``, in order): what ``slurm_topo.relaxer.relax.budget_record``
    writes, rounded half up as the Lua twin rounds (``math.floor(x + 0.5)``)."""
    looser = AUTO_LEVELS[AUTO_LEVELS.index(level) + 1 :]
    parts = [f"{BUDGET_PREFIX}{level}", f"limit={limit_s}s"]
    parts += [f"{k}={math.floor(limit_s * u + 0.5)}s" for k, u in zip(looser, units, strict=True)]
    return " ".join(parts)


def safe(text: str, limit: int = 40) -> str:
    """A user-supplied string as it may appear in a message: ASCII word characters only, cut (bytewise, as
    Lua)."""
    raw = text.encode("utf-8", "surrogatepass")[:limit]
    return "".join(chr(b) if chr(b) in _SAFE else "?" for b in raw)
