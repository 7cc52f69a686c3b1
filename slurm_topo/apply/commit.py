"""Commit and recover: prove, stage, journal, rename, reconfigure, verify, finish — or roll back; and
finish or revert a half-done journal."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard

from ..core.errors import CommandError, SlurmTopoError
from ..plumbing.output import fsync_dir as _fsync_dir
from .base import (
    CONFIG_ORDER,
    DATA,
    EXIT_APPLIED,
    EXIT_OK,
    EXIT_ROLLBACK_FAILED,
    EXIT_ROLLED_BACK,
    MANAGED,
    NODES,
    TOPOLOGY,
    TOPOLOGY_YAML,
    ApplyOptions,
    ApplyResult,
    Journal,
    Refusal,
    _Failure,
    _result,
    _sha,
)
from .controller import _Slurm
from .plan import _Plan
from .prove import ThrowawayController, prover_for
from .store import _clean_stage, _put, _read, _stage_path, _State, _write_synced


def _prove(options: ApplyOptions, plan: _Plan) -> str:
    """Load the set as it would be live with Slurm's own parser (a throwaway slurmctld, see ``prove``)
    when a config file changes; raise Refusal when Slurm would not load it. The detail line to report."""
    if not any(n in CONFIG_ORDER for n in plan.new):
        return "Slurm's parser not asked: no config file changes"
    if not options.slurm_check:
        return "not proven by Slurm (--no-slurm-check)"
    prover = options.prover or prover_for(options.slurm_version)
    if options.progress is not None and isinstance(prover, ThrowawayController):
        prover.progress = lambda elapsed, limit: options.progress(  # type: ignore[misc]
            f"slurm-topo apply: Slurm's parser is still loading the new set ({elapsed:.0f} s of at most "
            f"{limit:.0f} s)"
        )
    proof = prover.prove(options.slurm_dir, dict(plan.new), options.slurm_check_timeout)
    if proof.verdict == "timeout":
        raise Refusal(
            f"Slurm's own parser did not answer in time ({proof.error}; raise --slurm-check-timeout)",
            [f"proof: {proof.how}", *proof.log[-8:]],
        )
    if proof.verdict == "rejected":
        raise Refusal(
            f"Slurm's own parser rejects the new set ({proof.error or 'no reason given'})",
            [f"proof: {proof.how}", *proof.log[-8:]],
        )
    return f"proof: {proof.how}"


def _step(options: ApplyOptions, name: str) -> None:
    if options.step_hook is not None:
        options.step_hook(name)


def _rename_order(plan_names: Sequence[str], data_first: bool) -> list[str]:
    order = [n for n in CONFIG_ORDER if n in plan_names]
    if DATA in plan_names:
        order = [DATA, *order] if data_first else order
    return order


def _prepare(options: ApplyOptions, st: _State, plan: _Plan) -> Journal:
    sd = options.slurm_dir
    set_id = st.new_set_id()
    set_dir = st.sets / set_id
    (set_dir / "old").mkdir(parents=True)
    (set_dir / "new").mkdir()
    files: list[Journal] = []
    for name in MANAGED:
        if name not in plan.new:
            continue
        old, new = plan.old[name], plan.new[name]
        if old is not None:
            _write_synced(set_dir / "old" / name, old, 0o600)
        if new is not None:
            _write_synced(set_dir / "new" / name, new, 0o600)
            meta = plan.meta[name]
            _write_synced(
                _stage_path(sd, name),
                new,
                meta["mode"] if meta else 0o644,
                (meta["uid"], meta["gid"]) if meta else None,
            )
        files.append({"name": name, "old_sha": _sha(old), "new_sha": _sha(new), "meta": plan.meta[name]})
    for d in (set_dir / "old", set_dir / "new", set_dir, st.sets):
        _fsync_dir(d)
    _fsync_dir(sd)
    first = _rename_order([f["name"] for f in files], plan.data_first)
    journal = {
        "id": set_id,
        "slurm_dir": os.path.realpath(sd),  # resolved: recovery may spell the directory another way
        "phase": "prepared",
        "files": files,
        "order": first,
        "data_last": DATA in plan.new and not plan.data_first,
        "reconfigure": plan.reconfigure,
        "created": options.clock(),
    }
    if plan.completes is not None:
        journal["completes"] = plan.completes
    _step(options, "staged")
    st.write_journal(journal)
    _step(options, "journal")
    return journal


def _set_bytes(st: _State, journal: Journal, which: str, name: str) -> bytes | None:
    f = next(f for f in journal["files"] if f["name"] == name)
    if f[f"{which}_sha"] is None:
        return None
    data = _read(st.sets / journal["id"] / which / name)
    if data is None or _sha(data) != f[f"{which}_sha"]:
        raise _Failure(f"set copy {st.sets / journal['id'] / which / name} is missing or damaged")
    return data


def _rename_staged(options: ApplyOptions, st: _State, journal: Journal, name: str) -> None:
    sd = options.slurm_dir
    f = next(f for f in journal["files"] if f["name"] == name)
    if f["new_sha"] is None:
        (sd / name).unlink(missing_ok=True)
    else:
        tmp = _stage_path(sd, name)
        if tmp.exists():
            os.replace(tmp, sd / name)
        elif _sha(_read(sd / name)) != f["new_sha"]:
            _put(sd, name, _set_bytes(st, journal, "new", name), f["meta"])
    _fsync_dir(sd)
    _step(options, f"rename:{name}")


def _restore_old(options: ApplyOptions, st: _State, journal: Journal) -> list[str]:
    """Every file of the journal back to its old bytes (idempotent); the names restored."""
    sd = options.slurm_dir
    _clean_stage(sd)
    restored = []
    # reverse of the rename order: the data file last when it went first, first when it went last
    names = [f["name"] for f in journal["files"]]
    config = [n for n in reversed(CONFIG_ORDER) if n in names]
    data = [DATA] if DATA in names else []
    for name in data + config if journal.get("data_last") else config + data:
        f = next(f for f in journal["files"] if f["name"] == name)
        if _sha(_read(sd / name)) != f["old_sha"]:
            _put(sd, name, _set_bytes(st, journal, "old", name), f["meta"])
            restored.append(name)
            _fsync_dir(sd)
            _step(options, f"restore:{name}")
    return restored


def owing_set(st: _State, plan: _Plan) -> str | None:
    """The completed set whose ``--no-reconfigure`` run owes the reconfigure ``plan`` pays, when ``plan``
    writes no config file (only the data file held back for that reconfigure, or nothing): its files
    belong to that set. None: the plan is a change of its own."""
    state = st.state()
    last = state.get("last_applied")
    if not (plan.reconfigure and state.get("reconfigure_owed")) or any(n != DATA for n in plan.new):
        return None
    return last if _set_name_ok(last) and (st.sets / last / "complete").exists() else None


def _set_name_ok(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and "/" not in name and name not in ("", ".", "..")


def _replace_synced(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.fold.tmp")
    _write_synced(tmp, data, 0o600)
    os.replace(tmp, path)


def _fold(options: ApplyOptions, st: _State, journal: Journal, into: str) -> bool:
    """Add this journal's files to the completed set ``into`` (a file it already holds keeps its ``old``
    copy and takes the new one; another gets both) and drop this set's own directory. Idempotent at every
    point: a copy ``into`` already holds is not read again (an earlier release stopped inside its
    ``rmtree`` left this set's directory half deleted), and the directory is renamed to a tombstone
    before it is deleted, so it is either whole or gone. False when ``into`` is gone (then the set is
    recorded on its own)."""
    own, dest = st.sets / journal["id"], st.sets / into
    if not own.is_dir():
        return True  # folded before an interruption
    if not (dest / "complete").exists():
        return False
    for f in journal["files"]:
        name = f["name"]
        held = (dest / "old" / name).exists() or (dest / "new" / name).exists()
        old = None if held else _set_bytes(st, journal, "old", name)
        if old is not None:
            _replace_synced(dest / "old" / name, old)
        if _sha(_read(dest / "new" / name)) != f["new_sha"]:
            new = _set_bytes(st, journal, "new", name)
            if new is None:
                (dest / "new" / name).unlink()
            else:
                _replace_synced(dest / "new" / name, new)
        _step(options, f"fold:{name}")
    for d in (dest / "old", dest / "new"):
        _fsync_dir(d)
    tomb = st.sets / f".{own.name}.folded"  # no "complete": prune removes what an interruption leaves
    shutil.rmtree(tomb, ignore_errors=True)
    os.rename(own, tomb)
    _fsync_dir(st.sets)
    shutil.rmtree(tomb)
    return True


def _finish(options: ApplyOptions, st: _State, journal: Journal, reconfigured: bool) -> None:
    if journal.get("data_last"):
        _rename_staged(options, st, journal, DATA)
    into = journal.get("completes")
    if _set_name_ok(into) and _fold(options, st, journal, into):
        values: Journal = {"last_applied": into}
        _step(options, "folded")
    else:
        set_dir = st.sets / journal["id"]
        _write_synced(set_dir / "complete", b"", 0o600)
        _fsync_dir(set_dir)
        values = {"last_applied": journal["id"]}
    if reconfigured:
        values.update(last_reconfigure=options.clock(), reconfigure_owed=False)
    elif any(f["name"] in CONFIG_ORDER for f in journal["files"]) and options.no_reconfigure:
        values["reconfigure_owed"] = True
    st.update_state(**values)
    st.drop_journal()
    _step(options, "done")
    st.prune(options.keep)


def _rollback_live(
    options: ApplyOptions, st: _State, slurm: _Slurm, journal: Journal, reconfigure: bool
) -> tuple[bool, list[str]]:
    """Restore the old files; sync and reconfigure on them when ``reconfigure``. (ok, details)."""
    details: list[str] = []
    try:
        restored = _restore_old(options, st, journal)
        details.append(f"restored: {', '.join(restored) or 'nothing to restore'}")
        if reconfigure:
            slurm.sync()
            if not slurm.primary_up():
                return False, [
                    *details,
                    "slurmctld does not answer: cannot reconfigure on the restored files",
                ]
            slurm.reconfigure()
            st.update_state(last_reconfigure=options.clock())
            old = {f["name"]: _set_bytes(st, journal, "old", f["name"]) for f in journal["files"]}
            for name in (TOPOLOGY_YAML, TOPOLOGY, NODES):
                old.setdefault(name, _read(options.slurm_dir / name))
            diff = slurm.verify(old)
            if diff:
                return False, [*details, "after the rollback slurmctld still differs:", *diff]
        elif options.sync_cmd and any(f["name"] in CONFIG_ORDER for f in journal["files"]):
            slurm.sync()
    except (SlurmTopoError, OSError) as exc:
        return False, [*details, f"rollback failed: {exc}"]
    shutil.rmtree(st.sets / journal["id"], ignore_errors=True)
    st.drop_journal()
    return True, details


def _how(options: ApplyOptions, plan: _Plan, names: Sequence[str], reconfigured: bool) -> str:
    """What an applied run did after the renames, for its summary line."""
    how = (
        "reconfigured, verified"
        if reconfigured
        else "not reconfigured (--no-reconfigure): reconfigure or restart slurmctld"
        if options.no_reconfigure and any(n in CONFIG_ORDER for n in names)
        else "no reconfigure needed"
    )
    if DATA in names and plan.data_first:
        how += "; data file published first (groups only removed)"
    if plan.completes is not None:
        how += f" (the reconfigure owed since --no-reconfigure; recorded with its set {plan.completes})"
    return how


def _commit(options: ApplyOptions, st: _State, slurm: _Slurm, plan: _Plan) -> ApplyResult:
    try:
        journal = _prepare(options, st, plan)
    except OSError as exc:
        if st.journal() is None:  # nothing live was touched: drop the staging files and the set copy
            _clean_stage(options.slurm_dir)
            st.prune(options.keep)
        return _result(
            "failed",
            EXIT_ROLLED_BACK,
            f"could not stage the new files ({exc}); live files unchanged",
            plan.details,
            list(plan.new),
        )
    names = list(plan.new)
    reconfigured = False
    try:
        for name in journal["order"]:
            _rename_staged(options, st, journal, name)
        if plan.reconfigure:
            journal["phase"] = "reconfiguring"
            st.write_journal(journal)
            _step(options, "reconfiguring")
            try:
                slurm.sync()
            except CommandError as exc:
                raise _Failure(f"--sync-cmd failed: {exc}") from None
            reconfigured = True  # from here on slurmctld may have read the new set, even if the call fails
            try:
                slurm.reconfigure()
            except CommandError as exc:
                raise _Failure(f"scontrol reconfigure failed: {exc}") from None
            st.update_state(last_reconfigure=options.clock())
            _step(options, "reconfigured")
            written = {n: _read(options.slurm_dir / n) for n in (TOPOLOGY_YAML, TOPOLOGY, NODES)}
            diff = slurm.verify(written)
            if diff:
                raise _Failure(f"slurmctld does not show what was written ({diff[0]})", diff)
        journal["phase"] = "verified"
        st.write_journal(journal)
        _step(options, "verified")
        _finish(options, st, journal, reconfigured)
    except (_Failure, OSError) as exc:
        reason = exc.reason if isinstance(exc, _Failure) else f"{exc}"
        details = exc.details if isinstance(exc, _Failure) else []
        ok, rb = _rollback_live(options, st, slurm, journal, reconfigure=reconfigured)
        if ok:
            return _result(
                "rolled-back",
                EXIT_ROLLED_BACK,
                f"{reason}; the old files are back"
                + ("; slurmctld reconfigured on them" if plan.reconfigure else ""),
                [*plan.details, *details, *rb],
                names,
                reconfigured,
            )
        return _result(
            "rollback-failed",
            EXIT_ROLLBACK_FAILED,
            f"{reason}; ROLLBACK FAILED ({rb[-1]}); journal kept in {st.journal_path}",
            [*plan.details, *details, *rb],
            names,
            reconfigured,
        )
    how = _how(options, plan, names, reconfigured)
    return _result(
        "applied",
        EXIT_APPLIED if options.detailed_exitcodes else EXIT_OK,
        f"{', '.join(names) or 'nothing'} replaced in {options.slurm_dir}; {how}"
        + (f"; {'; '.join(plan.details)}" if plan.details else ""),
        plan.details,
        names,
        reconfigured,
    )


def _same_dir(journaled: str, slurm_dir: Path) -> bool:
    """Does the journal's ``slurm_dir`` name ``slurm_dir``? Compared resolved (``os.path.realpath``): a
    symlink (/etc/slurm-llnl -> /etc/slurm) or a relative spelling is the same directory. Journals written
    before the path was stored resolved hold it as typed; it resolves the same way (a relative one against
    the current directory)."""
    return journaled != "" and os.path.realpath(journaled) == os.path.realpath(slurm_dir)


def _recover_locked(options: ApplyOptions, st: _State, slurm: _Slurm) -> tuple[str | None, list[str], bool]:
    """Finish or revert a half-done journal. (what was done or None, details, ok)."""
    journal = st.journal()
    if journal is None:
        _clean_stage(options.slurm_dir)
        return None, [], True
    if not _same_dir(journal["slurm_dir"], options.slurm_dir):
        return (
            "journal-elsewhere",
            [f"the journal in {st.journal_path} is for {journal.get('slurm_dir')}, not {options.slurm_dir}"],
            False,
        )
    if journal["phase"] == "verified":
        try:
            _finish(options, st, journal, reconfigured=journal.get("reconfigure", False))
        except (SlurmTopoError, OSError) as exc:
            return "finish-failed", [f"finishing journal {journal['id']}: {exc}"], False
        _clean_stage(options.slurm_dir)
        return f"finished journal {journal['id']} (verified before the interruption)", [], True
    may_have_reconfigured = journal["phase"] == "reconfiguring" and not options.no_reconfigure
    ok, details = _rollback_live(options, st, slurm, journal, reconfigure=may_have_reconfigured)
    what = f"reverted journal {journal['id']} (phase {journal['phase']})" + (
        "; reconfigured on the old files" if may_have_reconfigured and ok else ""
    )
    return what, details, ok
