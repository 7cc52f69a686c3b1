"""The access layer: how slurm-topo reads live Slurm's jobs, whatever the release.

Backends, chosen at run time (:attr:`SlurmAccess.backend`, printed by ``relax --verbose``):

- ``json``: ``squeue --json`` — structured on every release the project runs (22.05's openapi/v0.0.38,
  24.11's data_parser v0.0.42, 26.05's v0.0.45). A job's name, comment, paths and other users' text are
  JSON strings: they cannot become another field. The default.
- ``text``: ``scontrol show job -o`` read by a parser that refuses ambiguous lines
  (:func:`slurm_topo.access.jobs.job_from_text`), for a Slurm built without its JSON serializer (squeue
  answers ``unrecognized option '--json'``). Chosen automatically only then, or with
  ``SLURM_TOPO_SLURM_BACKEND=text``.

Records are dicts in scontrol's vocabulary (:data:`slurm_topo.access.jobs.JOB_KEYS`). A job that cannot be
read safely is in :attr:`JobListing.refused` (job id, why): callers log one line each and go on.
"""

from __future__ import annotations

import os

from ..errors import CommandError, ParseError
from ..runner import Runner
from . import argv
from .jobs import (
    JOB_KEYS,
    NULL,
    JobListing,
    allocation_from_json,
    job_from_text,
    jobs_from_json,
    jobs_from_text,
    pending_count,
)
from .text import Allocation, parse_job_detail

BACKENDS = ("json", "text")
BACKEND_ENV = "SLURM_TOPO_SLURM_BACKEND"


def json_jobs_argv(job: str | None = None) -> list[str]:
    return ["squeue", "--json", "--states=all", *([f"--jobs={job}"] if job else [])]


def text_jobs_argv(job: str | None = None) -> list[str]:
    return ["scontrol", "show", "job", "-o", *([job] if job else [])]


def _no_json(exc: CommandError) -> bool:
    """squeue of a build without the JSON serializer (or too old to know ``--json``)."""
    text = str(exc).lower()
    return "unrecognized option" in text or "serializer" in text or "data_parser" in text


def _unknown_job(exc: CommandError) -> bool:
    text = str(exc).lower()
    return "invalid job id" in text


class SlurmAccess:
    """Reads live Slurm through ``runner``. ``backend``: ``json``, ``text`` or None (``$SLURM_TOPO_SLURM_
    BACKEND``, else ``json`` until squeue shows it has no ``--json``)."""

    def __init__(self, runner: Runner, backend: str | None = None) -> None:
        self.runner = runner
        chosen = backend or os.environ.get(BACKEND_ENV) or None
        if chosen is not None and chosen not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV}={chosen[:20]!r}: one of {', '.join(BACKENDS)}")
        self._backend = chosen
        self.fixed = chosen is not None
        self.one_job_text = False
        """Set once ``squeue --json --jobs=J`` answered with every job (22.05 ignores squeue's filters with
        ``--json``): one job is then read with ``scontrol show job -o J`` and the strict text reader, which
        costs one job, not the whole queue (a line it cannot read safely is refused, never guessed)."""

    @property
    def backend(self) -> str:
        return self._backend or "json"

    def jobs(self, job: str | None = None, timeout: float = 60.0) -> JobListing:
        """Every job slurmctld holds (or only ``job``; an unknown id gives an empty listing)."""
        if self.backend == "json" and not (job is not None and self.one_job_text):
            try:
                text = self.runner.run(json_jobs_argv(job), timeout=timeout)
            except CommandError as exc:
                if job is not None and _unknown_job(exc):
                    return JobListing(backend="json")
                if self.fixed or not _no_json(exc):
                    raise
                self._backend = "text"
            else:
                try:
                    listing = jobs_from_json(text, job)
                except ParseError:
                    if self.fixed:
                        raise
                    self._backend = "text"
                else:
                    if job is not None and listing.listed > 1:
                        self.one_job_text = True
                    return listing
        try:
            text = self.runner.run(text_jobs_argv(job), timeout=timeout)
        except CommandError as exc:
            if job is not None and _unknown_job(exc):
                return JobListing(backend="text")
            raise
        return jobs_from_text(text)

    def allocation(self, job: str, timeout: float = 30.0) -> Allocation:
        """A running job's nodes and GPU indices per node (``squeue --json``'s ``nodes`` and
        ``gres_detail``; the text backend: ``scontrol show job -d``'s detail lines)."""
        if self.backend == "json":
            try:
                return allocation_from_json(self.runner.run(json_jobs_argv(job), timeout=timeout), job)
            except CommandError as exc:
                if self.fixed or not _no_json(exc):
                    raise
                self._backend = "text"
        return parse_job_detail(self.runner.run(argv.show_job_detail(job), timeout=timeout))

    def job(self, job: str, timeout: float = 30.0) -> dict[str, str] | None:
        """One job's record; None when slurmctld does not know it. Raises :class:`ParseError` when the job
        exists but cannot be read safely (an ambiguous text line)."""
        listing = self.jobs(job, timeout=timeout)
        if listing.jobs:
            return listing.jobs[0]
        for jid, why in listing.refused:
            if jid == job:
                raise ParseError(f"job {job}", None, why)
        return None


__all__ = [
    "Allocation",
    "BACKENDS",
    "BACKEND_ENV",
    "JOB_KEYS",
    "NULL",
    "JobListing",
    "SlurmAccess",
    "job_from_text",
    "jobs_from_json",
    "jobs_from_text",
    "json_jobs_argv",
    "pending_count",
    "text_jobs_argv",
]
