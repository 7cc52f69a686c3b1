"""Every command line slurm-topo runs against live Slurm, in one place (``scontrol``, ``squeue``): the
commands read and write through :class:`slurm_topo.plumbing.runner.Runner` with these argv, and
:mod:`slurm_topo.access.text` / :mod:`slurm_topo.access.jobs` parse what they print. No module outside
``slurm_topo.access`` names these programs (``tests/test_layout.py``).

Accounting: finished jobs from ``sacct`` (``--json``; a text form of fixed-grammar fields, with each job's
free-text fields asked one field of one job a call).

Reads: nodes (``-o``: one line a node; without: the multi-line form whose ``Reason=`` has a line of its
own), partitions, topology, config, the jobs as text and their ids, a job's detail, the version, the pending
jobs' constraints, ping. Writes: a job's fields, a node's fields, a reconfigure."""

from __future__ import annotations

from collections.abc import Sequence

SCONTROL = "scontrol"
SQUEUE = "squeue"
SACCT = "sacct"


def show_nodes(names: str | None = None, *, one_line: bool = True, detail: bool = False) -> list[str]:
    """``scontrol [-d] show node [-o] [NAMES]``: ``detail`` adds ``GresUsed=…(IDX:…)``."""
    return [
        SCONTROL,
        *(["-d"] if detail else []),
        "show",
        "node",
        *(["-o"] if one_line else []),
        *([names] if names else []),
    ]


def show_partitions() -> list[str]:
    return [SCONTROL, "show", "partition", "-o"]


def show_topology(name: str | None = None) -> list[str]:
    return [SCONTROL, "show", "topology", *([name] if name else [])]


def show_config() -> list[str]:
    return [SCONTROL, "show", "config"]


def show_job(job: str | None = None) -> list[str]:
    """``scontrol show job -o [JOB]``: one line a job (a value's own line breaks start more lines)."""
    return [SCONTROL, "show", "job", "-o", *([job] if job else [])]


def job_ids() -> list[str]:
    """``squeue --noheader --states=all --format=%A``: every job's id (scontrol's ``JobId``), one a line,
    and nothing a user writes."""
    return [SQUEUE, "--noheader", "--states=all", "--format=%A"]


def show_job_detail(job: str) -> list[str]:
    """``scontrol show job -d JOB``: the per-node ``Nodes=… GRES=gpu:…(IDX:…)`` lines."""
    return [SCONTROL, "show", "job", "-d", job]


def ping() -> list[str]:
    return [SCONTROL, "ping"]


def reconfigure() -> list[str]:
    return [SCONTROL, "reconfigure"]


def version_argvs() -> list[list[str]]:
    """Ways to ask the installed Slurm its version, without contacting slurmctld, in order of preference."""
    return [[SCONTROL, "--version"], ["/usr/sbin/slurmctld", "-V"], ["/usr/sbin/slurmd", "-V"]]


def pending_features() -> list[str]:
    """``squeue -h -t PD -o '%i %f'``: every pending job's id and constraint (fixed-grammar fields only)."""
    return [SQUEUE, "-h", "-t", "PD", "-o", "%i %f"]


def _pairs(fields: Sequence[tuple[str, str]]) -> list[str]:
    return [f"{k}={v}" for k, v in fields]


def update_job(job: str, *fields: tuple[str, str]) -> list[str]:
    """``scontrol update JobId=JOB Key=value …`` (each value one argument: no shell, no splitting)."""
    return [SCONTROL, "update", f"JobId={job}", *_pairs(fields)]


def update_node(node: str, *fields: tuple[str, str]) -> list[str]:
    """``scontrol update NodeName=NODE Key=value …``."""
    return [SCONTROL, "update", f"NodeName={node}", *_pairs(fields)]


SBATCH = "sbatch"


def sbatch_help() -> list[str]:
    """``sbatch --help``: the options a SPANK plugin adds are listed under "Options provided by plugins"."""
    return [SBATCH, "--help"]


def sbatch_test_only(*options: str) -> list[str]:
    """``sbatch --test-only OPTIONS --wrap true``: the submit filter decides, nothing is queued."""
    return [SBATCH, "--test-only", *options, "--wrap", "true"]


# ---- accounting (sacct): finished jobs for `slurm-topo report`

SACCT_TEXT_FIELDS = (
    "JobIDRaw",
    "User",
    "Partition",
    "State",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
)
"""The fields :func:`sacct_text` asks for: none a job's owner writes (names, comments, paths are left out),
so ``-P``'s ``|`` can only come from Slurm."""
SACCT_FREE_TEXT = ("AdminComment", "Comment")
"""The fields a job's owner (Comment) or its record (AdminComment) may fill with any text: asked one field of
one job a call (:func:`sacct_field`), never beside another field."""
SACCT_FIELD_WIDTH = 16384


def _window(since: str, until: str) -> list[str]:
    return ["--allusers", "--allocations", f"--starttime={since}", f"--endtime={until}"]


def sacct_json(since: str, until: str) -> list[str]:
    """``sacct --json`` of every user's jobs in the window (the release's data_parser: 22.05's
    dbv0.0.38, 24.11's v0.0.42, 26.05's v0.0.45)."""
    return [SACCT, "--json", *_window(since, until)]


def sacct_text(since: str, until: str) -> list[str]:
    """``sacct -n -P`` of :data:`SACCT_TEXT_FIELDS` (one line a job allocation), for a sacct without JSON."""
    return [
        SACCT,
        "--noheader",
        "--parsable2",
        *_window(since, until),
        f"--format={','.join(SACCT_TEXT_FIELDS)}",
    ]


def sacct_field(job: str, field: str) -> list[str]:
    """One free-text field (:data:`SACCT_FREE_TEXT`) of one job's allocation, alone on its line(s)."""
    if field not in SACCT_FREE_TEXT:
        raise ValueError(f"sacct field {field!r}: one of {', '.join(SACCT_FREE_TEXT)}")
    return [
        SACCT,
        "--noheader",
        "--parsable2",
        "--allusers",
        "--allocations",
        f"--jobs={job}",
        f"--format={field}%{SACCT_FIELD_WIDTH}",
    ]
