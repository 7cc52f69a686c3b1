"""The access layer: how slurm-topo reads live Slurm's jobs, whatever the release.

Backends, chosen at run time (:attr:`SlurmAccess.backend`, printed by ``relax --verbose``):

- ``pyslurm``: Slurm's C API in this process (:mod:`slurm_topo.access.native`), where pyslurm is installed,
  imports (probed in a child process first) and was built for the running release (its library's
  ``slurm_api_version`` names the ``major.minor`` of ``scontrol --version``). Jobs, nodes, and the writes
  slurm-topo makes (a job's Features/AdminComment, a node's State/Reason; other keys, and a running job's
  GPU indices, go through scontrol / squeue --json). Preferred when usable.
- ``json``: ``squeue --json`` — structured on every release the project runs (22.05's openapi/v0.0.38,
  24.11's data_parser v0.0.42, 26.05's v0.0.45). A job's name, comment, paths and other users' text are
  JSON strings: they cannot become another field. The default where pyslurm is not usable.
- ``text``: ``scontrol show job -o`` read by a parser that refuses ambiguous lines
  (:func:`slurm_topo.access.jobs.job_from_text`), for a Slurm built without its JSON serializer (squeue
  answers ``unrecognized option '--json'``). Chosen automatically only then, or with
  ``SLURM_TOPO_SLURM_BACKEND=text``.

``SLURM_TOPO_SLURM_BACKEND`` (or ``backend=``) fixes the backend: ``pyslurm``, ``json`` or ``text``; a fixed
``pyslurm`` that cannot be used is an error that says why.

Records are dicts in scontrol's vocabulary (:data:`slurm_topo.access.jobs.JOB_KEYS`). A job that cannot be
read safely is in :attr:`JobListing.refused` (job id, why): callers log one line each and go on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..core.allocation import Allocation
from ..core.errors import CommandError, InputError, ParseError
from ..plumbing.runner import Runner
from ..plumbing.text import NULL
from ..plumbing.version import parse_slurm_version
from . import argv, native
from .jobs import (
    JOB_KEYS,
    JobListing,
    allocation_from_json,
    job_from_text,
    jobs_from_json,
    jobs_from_text,
    load_text_jobs,
    pending_count,
)
from .text import node_records, parse_job_detail

BACKENDS = ("pyslurm", "json", "text")
BACKEND_ENV = "SLURM_TOPO_SLURM_BACKEND"


def json_jobs_argv(job: str | None = None) -> list[str]:
    return ["squeue", "--json", "--states=all", *([f"--jobs={job}"] if job else [])]


def text_jobs_argv(job: str | None = None) -> list[str]:
    return argv.show_job(job)


ADMIN_COMMENT_WIDTH = 16384
"""squeue's field width for one job's AdminComment: a longer one is cut, reads as another and is refused."""


def admin_comment_argv(job: str) -> list[str]:
    """One job's AdminComment and nothing else (``squeue --Format=admin_comment``: 22.05 to 26.05): no other
    field, so no free-text value, shares its line."""
    return [
        "squeue",
        "--noheader",
        f"--jobs={job}",
        "--states=all",
        f"--Format=admin_comment:{ADMIN_COMMENT_WIDTH}",
    ]


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

        self._pyslurm: Any = None
        self.why_not_pyslurm = ""
        """Why the pyslurm backend is not used (empty when it is, or was never considered)."""
        self._chosen = False

    def _choose(self) -> None:
        """Decide once whether pyslurm serves this process (only where it is installed: a probe and
        ``scontrol --version``, once)."""
        if self._chosen:
            return
        self._chosen = True
        if self._backend not in (None, "pyslurm") or not (native.installed() or self._backend == "pyslurm"):
            return
        p = native.probe()
        why = p.why
        if p.ok:
            try:
                major, minor = parse_slurm_version(self.runner.run(argv.version_argvs()[0], timeout=30))
                running = f"{major}.{minor}"
            except (CommandError, InputError) as exc:
                running, why = "", f"cannot tell the running Slurm's version: {str(exc)[:100]}"
            if running and native.same_release(p.version, running):
                self._pyslurm = native.module()
                self._backend = "pyslurm"
                return
            if running:
                why = f"pyslurm's library is Slurm {p.version}, the running Slurm {running}"
        self.why_not_pyslurm = why
        if self._backend == "pyslurm":
            raise CommandError([f"{BACKEND_ENV}=pyslurm"], None, why)

    @property
    def backend(self) -> str:
        self._choose()
        return self._backend or "json"

    def nodes(self, timeout: float = 60.0) -> dict[str, dict[str, str]]:
        """Every node's record in scontrol's words (``NodeName``, ``State``, ``ActiveFeatures``,
        ``AvailableFeatures``, ``Reason``; the text form: all of its line's fields)."""
        if self.backend == "pyslurm":
            return native.node_lines(self._pyslurm)
        return node_records(self.runner.run(argv.show_nodes(), timeout=timeout))

    def update_job(self, job: str, *fields: tuple[str, str], timeout: float = 30.0) -> None:
        """Change a job's fields (Features, AdminComment, …): pyslurm's ``Job.modify`` where it serves and
        knows every key, else ``scontrol update``. A refusal raises :class:`CommandError` (Slurm's words)."""
        if self.backend == "pyslurm" and all(k in native.JOB_WRITE_KEYS for k, _ in fields) and job.isdigit():
            native.update_job(self._pyslurm, job, fields)
            return
        self.runner.run(argv.update_job(job, *fields), timeout=timeout)

    def update_node(self, node: str, *fields: tuple[str, str], timeout: float = 30.0) -> None:
        """Change a node's fields (State, Reason; Topology and others through ``scontrol update``)."""
        if self.backend == "pyslurm" and all(k in native.NODE_WRITE_KEYS for k, _ in fields):
            native.update_node(self._pyslurm, node, fields)
            return
        self.runner.run(argv.update_node(node, *fields), timeout=timeout)

    def jobs(
        self, job: str | None = None, timeout: float = 60.0, detail: Callable[[str], bool] | None = None
    ) -> JobListing:
        """Every job slurmctld holds (or only ``job``; an unknown id gives an empty listing). ``detail``: a
        hint, given a job's AdminComment, whether the caller needs the whole record; the pyslurm backend then
        reads only ``JobId``, ``JobState`` and ``AdminComment`` of the others (the others read everything)."""
        if self.backend == "pyslurm":
            return native.load_jobs(self._pyslurm, job, detail)
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
        try:  # the listing between squeue's job ids, ambiguous jobs re-read by id (load_text_jobs)
            return load_text_jobs(lambda a: self.runner.run(a, timeout=timeout), job)
        except CommandError as exc:
            if job is not None and _unknown_job(exc):
                return JobListing(backend="text")
            raise

    def allocation(self, job: str, timeout: float = 30.0) -> Allocation:
        """A running job's nodes and GPU indices per node (``squeue --json``'s ``nodes`` and
        ``gres_detail``; the text backend: ``scontrol show job -d``'s detail lines)."""
        if self.backend in ("pyslurm", "json"):  # pyslurm's resource layout crashes on 26.05 (native.py)
            try:
                return allocation_from_json(self.runner.run(json_jobs_argv(job), timeout=timeout), job)
            except CommandError as exc:
                if self.fixed or not _no_json(exc):
                    raise
                self._backend = "text"
        return parse_job_detail(self.runner.run(argv.show_job_detail(job), timeout=timeout))

    @staticmethod
    def _one_record(job: str, listing: JobListing) -> None:
        """What a writer reads from text: exactly one record, of the job asked, none refused (a line break in
        a value can start what looks like a record of its own: :func:`jobs_from_text`)."""
        if listing.refused or len(listing.jobs) != 1:
            why = "; ".join(w for _, w in listing.refused) or f"{len(listing.jobs)} records"
            raise ParseError(f"job {job}", None, why)
        if listing.jobs[0].get("JobId") != job:
            raise ParseError(
                f"job {job}", None, f"answered with job {listing.jobs[0].get('JobId', '?')[:20]}"
            )

    def _confirm_admin_comment(self, job: str, record: Mapping[str, str], timeout: float) -> None:
        """A text line's ``AdminComment=`` may be a user's: scontrol prints it only when set, right after the
        always-printed WorkDir, so a job without one whose working directory is ``/w AdminComment=…`` reads
        as having one. squeue's own field for it says which; ParseError when they differ."""
        have = record.get("AdminComment", "").strip()
        said = self.runner.run(admin_comment_argv(job), timeout=timeout).strip()
        if ("" if said == NULL else said) != ("" if have == NULL else have):  # never set: squeue says (null)
            raise ParseError(
                f"job {job}",
                None,
                "the AdminComment= in scontrol's line is not the job's own (squeue's admin_comment field "
                "differs): a free-text field carried it; not read",
            )

    def job(
        self, job: str, timeout: float = 30.0, *, own_admin_comment: bool = False
    ) -> dict[str, str] | None:
        """One job's record; None when slurmctld does not know it. Raises :class:`ParseError` when the job
        exists but cannot be read safely (an ambiguous text line). ``own_admin_comment`` (what a caller that
        writes the job from the record needs): a record read from text must be the one record of that job
        (:meth:`_one_record`) and its AdminComment is confirmed by squeue (:meth:`_confirm_admin_comment`);
        ParseError otherwise."""
        listing = self.jobs(job, timeout=timeout)
        if own_admin_comment and listing.backend == "text" and (listing.jobs or listing.refused):
            self._one_record(job, listing)
            self._confirm_admin_comment(job, listing.jobs[0], timeout)
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
    "ADMIN_COMMENT_WIDTH",
    "admin_comment_argv",
    "json_jobs_argv",
    "pending_count",
    "text_jobs_argv",
]
