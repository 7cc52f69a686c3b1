"""The strict text reader (``scontrol show job -o``, slurm_topo.access.jobs) on real listings of every release
(tests/fixtures/real/job-listing/slurm-*/, captured by the capture.py beside them) in which the unprivileged
``nobody`` submitted jobs whose name, comment or ``--extra`` hold line breaks, carriage returns, whole
forged records and keys the reader did not know: every honest job is read as Slurm holds it (the victims
whose ids the forgers' lines claim included), each forger is refused with one line, the job ids only a
forged line names are never reported; relax and explain read the true state. Plus the same forgeries
injected into real captured lines: in each free-text field, before and after the victim, 200 at once."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedRunner

from slurm_topo.access import SlurmAccess, admin_comment_argv, argv
from slurm_topo.access.jobs import (
    SCONTROL_JOB_KEYS,
    SCONTROL_JOB_ORDER,
    job_from_text,
    jobs_from_text,
    load_text_jobs,
)
from slurm_topo.core.errors import CommandError, ParseError
from slurm_topo.relaxer.relax import Pass, run_pass
from slurm_topo.relaxer.relax_plan import parse_time
from slurm_topo.reports.explain import explain_record

REAL = Path(__file__).parent / "fixtures" / "real"
RELEASES = ("slurm-22.05", "slurm-24.11", "slurm-26.05")
IDS = tuple(argv.job_ids())
LISTING = tuple(argv.show_job())
INVALID = "slurm_load_jobs error: Invalid job id specified\n"


def as_slurm_topo_reads(text: str) -> str:
    """A command's output as slurm_topo.plumbing.runner.SubprocessRunner gives it: ``\\r\\n``, ``\\r`` as
    ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class Capture:
    """One release's real listing, and which of its jobs is which (capture.json)."""

    folder: Path

    @cached_property
    def facts(self) -> dict[str, Any]:
        return json.loads((self.folder / "capture.json").read_text())  # type: ignore[no-any-return]

    def raw(self, name: str) -> str:
        """A captured output as printed (carriage returns kept)."""
        return (self.folder / name).read_bytes().decode()

    @property
    def jobs(self) -> dict[str, str]:
        return self.facts["jobs"]  # type: ignore[no-any-return]

    @property
    def forgers(self) -> set[str]:
        return {self.jobs[tag] for tag in self.facts["texts"]}

    @property
    def ids(self) -> list[str]:
        return self.raw("squeue-ids.txt").split()

    @property
    def honest(self) -> set[str]:
        return set(self.ids) - self.forgers

    @property
    def victims(self) -> tuple[str, str]:
        return self.jobs["victim"], self.jobs["victim2"]

    def own(self, jid: str) -> dict[str, str]:
        """The job's own record: its ``scontrol show job -o ID`` answer (that job alone), line by line."""
        for line in self.raw(f"scontrol-show-job-o-{jid}.txt").split("\n"):
            if line.startswith(f"JobId={jid} "):
                return job_from_text(line)
        raise AssertionError(f"no line of job {jid}")

    def answers(self, normalize: bool = True) -> dict[str | tuple[str, ...], object]:
        """What the cluster answered: the listing, squeue's ids, each job alone (the forged ids: unknown),
        the nodes, the victims' AdminComment; ``normalize``: as slurm_topo's runner reads them."""
        read: Callable[[str], str] = as_slurm_topo_reads if normalize else (lambda text: text)
        out: dict[str | tuple[str, ...], object] = {
            IDS: read(self.raw("squeue-ids.txt")),
            LISTING: read(self.raw("scontrol-show-job-o.txt")),
            "scontrol show node -o": read(self.raw("scontrol-show-node-o.txt")),
            "scontrol update": "",
        }
        for path in self.folder.glob("scontrol-show-job-o-*.txt"):
            out[(*LISTING, path.stem.rsplit("-", 1)[1])] = read(self.raw(path.name))
        for jid, err in self.facts["errors"].items():
            out[(*LISTING, jid)] = CommandError([*LISTING, jid], 1, err)
        for jid in self.victims:
            out[tuple(admin_comment_argv(jid))] = self.facts["budget"] + "\n"
        return out


def capture(release: str) -> Capture:
    return Capture(REAL / "job-listing" / release)


def places(release: str) -> dict[str, int]:
    return {k: i for i, p in enumerate(SCONTROL_JOB_KEYS[release[6:]]) for k in p.split("|")}


def keys_of(line: str) -> list[str]:
    return re.findall(r"(?:^| )([A-Z][A-Za-z0-9_:/]*)=", line)


def test_every_release_has_a_listing_with_forgers() -> None:
    for release in RELEASES:
        c = capture(release)
        assert c.facts["version"] == release[6:]
        assert c.forgers and set(c.victims) <= c.honest and c.forgers <= set(c.ids)
        assert set(c.facts["forged_ids"]) == set(c.facts["errors"])  # no such jobs: scontrol says so


def test_the_key_lists_keep_each_releases_order_in_one_order() -> None:
    """SCONTROL_JOB_ORDER (tests write job lines in it) holds every key of every release, in each release's
    order; no release lists a key twice."""
    for release, order in SCONTROL_JOB_KEYS.items():
        keys = [k for p in order for k in p.split("|")]
        assert len(keys) == len(set(keys)), release
        at = [SCONTROL_JOB_ORDER.index(k) for k in keys]
        assert at == sorted(at), release


@pytest.mark.parametrize("release", RELEASES)
def test_every_key_a_real_listing_printed_is_one_its_release_prints(release: str) -> None:
    """Every line an honest job printed (each job alone, and the three jobs of tests/fixtures/real/slurm-*),
    read against its own release's list: each key known, once, in Slurm's order. Among them the keys the old
    list lacked: Extra (24.11, 26.05: ``--extra``), CPU_min_freq/CPU_max_freq/Governor (``--cpu-freq``),
    MinMemoryCPU, KillOInInvalidDependent / KillOnInvalidDependent (26.05), ..."""
    c = capture(release)
    lines = [c.raw(f"scontrol-show-job-o-{jid}.txt") for jid in c.honest]
    lines += [
        (REAL / release / f"scontrol-show-job-o-{k}.txt").read_text() for k in ("running", "pending", "held")
    ]
    at = places(release)
    seen: set[str] = set()
    for text in lines:
        for line in text.split("\n"):
            if not line.startswith("JobId="):
                continue
            keys = keys_of(line)
            assert set(keys) <= set(at), (line[:60], set(keys) - set(at))
            assert [at[k] for k in keys] == sorted({at[k] for k in keys}), line[:60]
            seen.update(keys)
    want = {"CPU_min_freq", "Governor", "MinMemoryCPU", "MailUser", "HetJobIdSet", "ArrayTaskId", "Switches"}
    want |= {"Extra", "KillOInInvalidDependent"} if release == "slurm-24.11" else set()
    want |= {"Extra", "KillOnInvalidDependent", "SubmitLine"} if release == "slurm-26.05" else set()
    assert want <= seen, want - seen


@pytest.mark.parametrize("normalize", [True, False], ids=["as-read", "raw"])
@pytest.mark.parametrize("release", RELEASES)
def test_a_real_listing_with_forgers_reads_every_honest_job_and_refuses_each_forger(
    release: str, normalize: bool
) -> None:
    """The forgers' names, comments and extras start lines that claim job 999999 (a whole forged record
    before it), 999998 (a record that starts as Slurm's do), the victims' ids (whole records with a forged
    budget, a carriage return, the line right before the victim's own), and (24.11, 26.05) an AdminComment
    after Extra=. The listing gives every honest job exactly as its own answer does, each forger once in
    ``refused``, and none of the forged ids anywhere; ``as-read``: the carriage return made a line break, as
    slurm_topo's runner reads it; ``raw``: kept."""
    c = capture(release)
    runner = ScriptedRunner(c.answers(normalize))
    listing = SlurmAccess(runner, "text").jobs()
    assert listing.backend == "text" and listing.ids_checked
    got = {j["JobId"]: j for j in listing.jobs}
    assert set(got) == c.honest
    assert sorted(jid for jid, _ in listing.refused) == sorted(c.forgers)
    assert all(why.startswith("ambiguous scontrol line (") for _, why in listing.refused)
    words = " ".join(why for _, why in listing.refused)
    assert not any(f in words or f in got for f in c.facts["forged_ids"])
    fields = (
        "JobName",
        "UserId",
        "JobState",
        "Priority",
        "SubmitTime",
        "Features",
        "AdminComment",
        "Comment",
    )
    for jid in c.honest:
        assert {k: got[jid].get(k) for k in fields} == {k: c.own(jid).get(k) for k in fields}, jid
    for jid in c.victims:
        assert got[jid]["AdminComment"] == c.facts["budget"] and got[jid]["UserId"] == "root(0)"
    calls = {call[4] for call in runner.calls if call[:4] == LISTING and len(call) == 5}
    assert calls <= set(c.ids) and set(c.victims) <= calls  # the victims re-read alone; no forged id asked


@pytest.mark.parametrize("release", RELEASES)
def test_relax_and_explain_read_the_true_state_of_a_real_listing_with_forgers(release: str) -> None:
    """A relax pass (text backend, ``--dry-run``, 60 s after the first victim was submitted) decides the two
    victims only, from their own budget (zone limit 600 s, region after 5 s: to region, waited 60 s), counts
    the honest pending jobs only, and skips each forger with one line; explain shows the victim's own budget,
    refuses a forger, and does not know the forged ids."""
    c = capture(release)
    runner = ScriptedRunner(c.answers())
    victim = c.own(c.jobs["victim"])
    now = (parse_time(victim["SubmitTime"]) or 0) + 60
    p: Pass = run_pass(runner, access=SlurmAccess(runner, "text"), now=now, load_aware=False, dry_run=True)
    by = {d.job: d for d in p.decisions}
    assert set(by) == set(c.victims), p.decisions
    d = by[c.jobs["victim"]]
    assert (d.action, d.level, d.target, d.waited_s, d.budget_s) == ("relax", "zone", "region", 60, 5)
    assert by[c.jobs["victim2"]].target == "region"
    pending = set(c.raw("squeue-pending-ids.txt").split())
    assert p.pending == len(pending - c.forgers)
    assert sorted(e.split(":")[0][4:] for e in p.errors) == sorted(c.forgers), p.errors
    assert all(e.split(": ", 1)[1].startswith("skipped, ambiguous scontrol line (") for e in p.errors)
    assert not any(f in " ".join(p.errors) for f in c.facts["forged_ids"])
    access = SlurmAccess(runner, "text")
    e = explain_record(access.job(c.jobs["victim"]) or {}, None)
    assert (e.state, e.reason) == ("PENDING", "BeginTime")
    assert e.auto and "(limit 600 s)" in e.auto[0] and "limit 1 s" not in " ".join(e.auto)
    for tag in c.facts["texts"]:
        with pytest.raises(ParseError, match="ambiguous scontrol line"):
            access.job(c.jobs[tag])
    for forged in c.facts["forged_ids"]:
        assert access.job(forged) is None


def _with(line: str, release: str, key: str, value: str) -> str:
    """``line`` (one real record) with ``key``'s value set to ``value``, the key put in its place."""
    at = places(release)
    pairs: list[tuple[str, str]] = []
    ms = list(re.finditer(r"(?:^| )([A-Z][A-Za-z0-9_:/]*)=", line))
    for i, m in enumerate(ms):
        pairs.append((m[1], line[m.end() : ms[i + 1].start() if i + 1 < len(ms) else len(line)].strip()))
    pairs = [(k, v) for k, v in pairs if k != key] + [(key, value)]
    pairs.sort(key=lambda kv: at[kv[0]])
    return " ".join(f"{k}={v}" for k, v in pairs)


def _forged_rest(c: Capture) -> str:
    """The whole forged record the capture's forgers wrote after ``JobName=v`` (their own words)."""
    text = c.facts["texts"]["victim_record"]
    return text.split("JobName=v ", 1)[1].split("\n", 1)[0]


INJECTIONS = {
    "line break": "x\nJobId={victim}",
    "carriage return": "x\rJobId={victim}",
    "whole record": "x\nJobId={victim} JobName=v {rest}",
    "record, then a new id": "x {rest}\nJobId=999999 JobName=y",
    "cut record": "x {rest}\nJobId=999999 x",
}
FIELDS = ("JobName", "Comment", "WorkDir", "StdOut", "Extra")
CASES = [(r, f) for r in RELEASES for f in FIELDS if (r, f) != ("slurm-22.05", "Extra")]  # 22.05: no --extra


@pytest.mark.parametrize("before", [True, False], ids=["forger-first", "victim-first"])
@pytest.mark.parametrize("injection", list(INJECTIONS))
@pytest.mark.parametrize(("release", "field"), CASES)
def test_a_value_cannot_forge_a_job_or_hide_the_victims_record(
    release: str, field: str, injection: str, before: bool
) -> None:
    """A real captured honest line (the victim's: a pending auto job), and a forger (a copy of it of another
    user) whose ``field`` holds the injection: a line break or a carriage return and the victim's id, a whole
    forged record with the victim's id, a whole forged record then a new job id. Whichever line comes first,
    the victim is read as its own line says, the forger is refused, job 999999 is never reported."""
    c = capture(release)
    v, forger = c.jobs["victim"], "77"
    own = c.raw(f"scontrol-show-job-o-{v}.txt").split("\n")[0]
    value = INJECTIONS[injection].format(victim=v, rest=_forged_rest(c))
    bad = _with(own.replace(f"JobId={v} ", f"JobId={forger} ", 1), release, field, value)
    bad = bad.replace("UserId=root(0) GroupId=root(0)", "UserId=nobody(65534) GroupId=nogroup(65534)")
    lines = [bad, own] if before else [own, bad]
    runner = ScriptedRunner(
        {
            IDS: f"{v}\n{forger}\n",
            LISTING: as_slurm_topo_reads("\n".join(lines) + "\n"),
            (*LISTING, v): own + "\n",
            (*LISTING, forger): as_slurm_topo_reads(bad + "\n"),
            (*LISTING, "999999"): CommandError([*LISTING, "999999"], 1, INVALID),
        }
    )
    listing = SlurmAccess(runner, "text").jobs()
    assert [j["JobId"] for j in listing.jobs] == [v]
    assert listing.jobs[0] == job_from_text(own)
    assert [jid for jid, _ in listing.refused] == [forger]
    assert (*LISTING, "999999") not in runner.calls


@pytest.mark.parametrize("release", RELEASES)
def test_two_hundred_forgers_are_neither_ranked_nor_counted(release: str) -> None:
    """200 jobs like the capture's, each with a whole forged record (an auto job far past its budget) in its
    name and a job id of its own after it (``…\\nJobId=9000NN JobName=y``): one relax pass decides the
    victims only, counts the honest pending jobs only, skips the 200 with one line each (the limit of
    re-reads a listing, 256, holds them), and no ``9000NN`` appears anywhere."""
    c = capture(release)
    answers = c.answers()
    template = str(answers[(*LISTING, c.jobs["whole_record_named"])])
    listing, ids = str(answers[LISTING]), str(answers[IDS])
    forgers = [str(5000 + n) for n in range(200)]
    for n, jid in enumerate(forgers):
        text = template.replace(f"JobId={c.jobs['whole_record_named']} ", f"JobId={jid} ", 1)
        text = text.replace("\nJobId=999998 ", f"\nJobId={900000 + n} ")
        listing += text
        ids += jid + "\n"
        answers[(*LISTING, jid)] = text
        answers[(*LISTING, str(900000 + n))] = CommandError([*LISTING], 1, INVALID)
    answers[LISTING], answers[IDS] = listing, ids
    runner = ScriptedRunner(answers)
    now = (parse_time(c.own(c.jobs["victim"])["SubmitTime"]) or 0) + 60
    p = run_pass(runner, access=SlurmAccess(runner, "text"), now=now, load_aware=False, dry_run=True)
    assert {d.job for d in p.decisions} == set(c.victims)
    assert p.pending == len(set(c.raw("squeue-pending-ids.txt").split()) - c.forgers)
    skipped = {e.split(":")[0][4:] for e in p.errors}
    assert skipped == c.forgers | set(forgers)
    assert "9000" not in json.dumps(p.as_dict())


@pytest.mark.parametrize("release", RELEASES)
def test_without_squeues_ids_the_victims_are_still_read_and_the_cut_record_refused(release: str) -> None:
    """Where squeue cannot list the job ids (it fails), the listing is read with the checks that need no
    second source: the victims (their ids claimed twice) are read from their own re-read, every forger whose
    lines show is refused, no line of a job scontrol does not know (999999, 999997, 999996: re-read) is read.
    The one forgery only squeue's list catches: a name holding a whole record that starts and ends as Slurm's
    do, then a line that does too, with an id no job has (999998): both lines read, because nothing in the
    text tells them from two jobs' (on 26.05 the SubmitLine= that repeats the name gives it away)."""
    c = capture(release)
    answers = c.answers()
    answers[IDS] = CommandError(list(IDS), 1, "squeue: error: ...")
    listing = SlurmAccess(ScriptedRunner(answers), "text").jobs()
    assert not listing.ids_checked
    got = {j["JobId"]: j for j in listing.jobs}
    assert c.honest <= set(got)
    for jid in c.victims:
        assert got[jid]["AdminComment"] == c.facts["budget"]
    assert set(got) - c.honest <= {"999998", c.jobs["whole_record_named"]}
    assert c.forgers - {c.jobs["whole_record_named"]} <= {jid for jid, _ in listing.refused} <= c.forgers


@pytest.mark.parametrize("release", RELEASES)
def test_the_pure_reader_refuses_what_it_cannot_tell_apart(release: str) -> None:
    """jobs_from_text alone (no squeue list, no re-read): a job whose id two lines claim is refused, never
    read from either line, and so is the job whose line comes before a line that may be forged (it may hold
    it). (What only a second source tells, a job id nobody has, it cannot: :func:`load_text_jobs` asks.)"""
    c = capture(release)
    listing = jobs_from_text(as_slurm_topo_reads(c.raw("scontrol-show-job-o.txt")))
    refused = {jid for jid, _ in listing.refused}
    assert set(c.victims) <= refused
    assert {c.jobs[t] for t in ("whole_record", "victim_record", "before_victim", "comment")} <= refused
    assert not refused & {j["JobId"] for j in listing.jobs}


def test_at_most_the_limit_of_rereads_then_the_rest_is_refused() -> None:
    c = capture("slurm-24.11")
    runner = ScriptedRunner(c.answers())
    listing = load_text_jobs(runner.run, limit=2)
    assert len([x for x in runner.calls if x[:4] == LISTING and len(x) == 5]) == 2
    over = [why for _, why in listing.refused if why.endswith("not re-read: over 2 re-reads this listing")]
    assert over and all(jid not in {j["JobId"] for j in listing.jobs} for jid, _ in listing.refused)


@pytest.mark.parametrize("release", RELEASES)
def test_an_unknown_key_or_a_known_key_out_of_place_makes_the_record_untrusted(release: str) -> None:
    """In a real line: a name with a key no release prints, a carriage return, a line break; 24.11's and
    26.05's ``--extra`` carrying an AdminComment (after Extra=: out of order), 22.05 knowing no Extra=."""
    own = capture(release).raw("scontrol-show-job-o-1.txt").split("\n")[0]
    assert job_from_text(own)["JobId"] == "1"
    for name in ("a b Foo=1", "x\rJobId=2", "x\nJobId=2", "x NCCL_ALGO=Ring"):
        with pytest.raises(ValueError):
            job_from_text(own.replace("JobName=wrap", f"JobName={name}"))
    extra = own.replace(" StdErr=", " Extra=x AdminComment=slurm-topo-auto: zone limit=1s region=0s StdErr=")
    with pytest.raises(ValueError, match="AdminComment= out of scontrol's order|Extra= is no key"):
        job_from_text(extra)
