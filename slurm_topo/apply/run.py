"""``slurm-topo apply``'s entry points (:func:`run_apply`, :func:`recover`, :func:`rollback`): read the live
files, ask the controller what the pure plan needs, prove, commit (see the package's docstring). The package
loads this module on first use of these names, so that its pure parts (``plan``, ``parse``, ``topology_file``,
``base``) import without the prover, the runner or the access layer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from ..access.text import parse_scontrol_nodes
from ..core.errors import CommandError, ParseError
from ..plumbing.runner import Runner
from .base import (
    DATA,
    EXIT_APPLIED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_ROLLBACK_FAILED,
    MANAGED,
    TOPOLOGY,
    TOPOLOGY_YAML,
    ApplyOptions,
    ApplyResult,
    Journal,
    JournalUnreadable,
    Refusal,
    _Deferred,
    _line,
    _result,
)
from .commit import _commit, _prove, _recover_locked, _rename_order, owing_set
from .controller import _Slurm
from .plan import (
    _Plan,
    check_interval,
    check_node_set,
    check_pending,
    check_topology_switch,
    check_unplaced,
    draft,
    finish,
)
from .store import _locked, _meta, _read, _State

__all__ = ["recover", "rollback", "run_apply"]


def _plan(
    options: ApplyOptions,
    rendered: Mapping[str, bytes | None],
    slurm: _Slurm,
    state: Journal,
    *,
    checks: bool = True,
) -> _Plan | None:
    """Read the live files, ask the controller what the pure plan needs, plan (see ``plan``)."""
    sd = options.slurm_dir
    live = {name: _read(sd / name) for name in (*rendered, TOPOLOGY, TOPOLOGY_YAML)}
    d = draft(options, rendered, live, state, slurm_conf=_read(sd / "slurm.conf"), checks=checks)
    if d is None:
        return None
    if checks and d.reconfigure:
        if not slurm.primary_up():
            raise Refusal("slurmctld (primary) does not answer `scontrol ping` UP; nothing changed")
        try:
            known = {r["NodeName"] for r in parse_scontrol_nodes(slurm.nodes_text())}
        except (CommandError, ParseError) as exc:
            raise Refusal(f"cannot read the controller's nodes: {exc}") from None
        version = slurm.version()
        expected = check_node_set(d, known, version)
        check_unplaced(d.topology, expected)
        if d.kind_before != d.kind_after:
            d.details += check_topology_switch(d, slurm.topology_plugin(), version)
        if d.gone_feats and not options.force:
            try:
                pending = slurm.pending_features()
            except CommandError as exc:
                raise Refusal(f"cannot list pending jobs: {exc}") from None
            check_pending(d, pending)
        d.details += check_interval(options, d, state, options.clock())
    elif checks and d.kind_after == "yaml" and d.kind_before != "yaml" and options.slurm_version:
        check_topology_switch(d, None, options.slurm_version)
    return finish(options, d, {n: _meta(sd / n) for n in d.changed})


def _check_dirs(options: ApplyOptions) -> None:
    sd, st = options.slurm_dir.resolve(), options.state_dir.resolve()
    if st == sd or sd in st.parents:
        raise Refusal(f"--state-dir {options.state_dir} is inside --slurm-dir {options.slurm_dir}")
    if not options.slurm_dir.is_dir():
        raise Refusal(f"--slurm-dir {options.slurm_dir} is not a directory")


def _make_state_dir(options: ApplyOptions) -> None:
    try:
        options.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise Refusal(f"cannot create --state-dir {options.state_dir}: {exc.strerror or exc}") from None


def _guard(fn: Callable[[], ApplyResult]) -> ApplyResult:
    try:
        return fn()
    except Refusal as exc:
        said = exc.reason if exc.reason.endswith("nothing changed") else f"{exc.reason}; nothing changed"
        return _result("refused", EXIT_REFUSED, said, exc.details)
    except _Deferred as exc:
        return _result("deferred", EXIT_OK, str(exc))
    except JournalUnreadable as exc:
        return _result(
            "journal-unreadable",
            EXIT_ROLLBACK_FAILED,
            f"{exc}; nothing changed, the live files may be a half-done set",
        )
    except OSError as exc:
        return _result(
            "failed",
            EXIT_ROLLBACK_FAILED,
            f"{exc}; a journal, if one was written, stays for --recover",
        )


def _encode(rendered: Mapping[str, str | bytes | None]) -> dict[str, bytes | None]:
    return {k: (v.encode("utf-8") if isinstance(v, str) else v) for k, v in rendered.items()}


def run_apply(options: ApplyOptions, rendered: Mapping[str, str | bytes], runner: Runner) -> ApplyResult:
    """Apply ``rendered`` (``render.render_all``'s name → text) to ``options.slurm_dir``; see the module
    doc."""

    def go() -> ApplyResult:
        _check_dirs(options)
        if options.dry_run:
            return _dry_run(options, _encode(rendered), runner)
        _make_state_dir(options)
        st = _State(options.state_dir)
        slurm = _Slurm(runner, options)
        with _locked(options):
            what, details, ok = _recover_locked(options, st, slurm)
            if not ok:
                return _result(
                    "rollback-failed",
                    EXIT_ROLLBACK_FAILED,
                    f"could not recover the previous run: {details[-1] if details else what}",
                    details,
                )
            plan = _plan(options, _encode(rendered), slurm, st.state())
            if plan is None or _nothing_to_write(plan):
                text = (
                    f"{len(rendered)} files in {options.slurm_dir} already match; nothing touched"
                    if plan is None
                    else f"nothing to write in {options.slurm_dir} ({plan.details[-1]}); nothing touched"
                )
                return _result("unchanged", EXIT_OK, (f"{what}; " if what else "") + text, details)
            plan.completes = owing_set(st, plan)
            proven = _prove(options, plan)
            res = _commit(options, st, slurm, plan)
            res.details.append(proven)
            if what:
                res.summary = _line(res.summary + f" (first {what})")
                res.details = [*details, *res.details]
            return res

    return _guard(go)


def _nothing_to_write(plan: _Plan) -> bool:
    """Only the data file differs, and it is held back for the reconfigure an earlier --no-reconfigure
    run owes (this run does not reconfigure either): no file to write, no set to record."""
    return not plan.new and not plan.reconfigure


def _dry_run(options: ApplyOptions, rendered: dict[str, bytes | None], runner: Runner) -> ApplyResult:
    st = _State(options.state_dir)
    slurm = _Slurm(runner, options)
    pending = st.journal() if options.state_dir.exists() else None
    state = st.state() if options.state_dir.exists() else {}
    plan = _plan(replace(options, min_interval=0), rendered, slurm, state)
    pre = (
        [f"a half-done journal ({pending['id']}, phase {pending['phase']}) would be recovered first"]
        if pending
        else []
    )
    if plan is not None and _nothing_to_write(plan):
        return _result(
            "dry-run",
            EXIT_OK,
            f"unchanged: nothing to write in {options.slurm_dir} ({plan.details[-1]})",
            [*pre, *plan.details],
        )
    if plan is not None:
        pre.append(_prove(options, plan))
    if plan is None:
        return _result(
            "dry-run", EXIT_OK, f"unchanged: {len(rendered)} files in {options.slurm_dir} already match", pre
        )
    order = _rename_order(list(plan.new), plan.data_first) + (
        [DATA] if DATA in plan.new and not plan.data_first else []
    )
    details = [*pre, *plan.details]
    for name in order:
        old, new = plan.old[name], plan.new[name]
        what = "create" if old is None else "delete" if new is None else "replace"
        details.append(f"would {what} {options.slurm_dir / name}")
        if old is not None and new is not None:
            import difflib

            details += [
                ln.rstrip("\n")
                for ln in difflib.unified_diff(
                    old.decode("utf-8", "replace").splitlines(True),
                    new.decode("utf-8", "replace").splitlines(True),
                    f"live/{name}",
                    f"new/{name}",
                    n=0,
                )
            ]
    return _result(
        "dry-run",
        EXIT_APPLIED if options.detailed_exitcodes else EXIT_OK,
        f"would replace {', '.join(order)} then "
        + ("reconfigure" if plan.reconfigure else "not reconfigure"),
        details,
        order,
    )


def recover(options: ApplyOptions, runner: Runner) -> ApplyResult:
    """``apply --recover``: finish or revert a half-done journal, nothing else."""

    def go() -> ApplyResult:
        _check_dirs(options)
        _make_state_dir(options)
        st = _State(options.state_dir)
        with _locked(options):
            what, details, ok = _recover_locked(options, st, _Slurm(runner, options))
        if not ok:
            return _result(
                "rollback-failed",
                EXIT_ROLLBACK_FAILED,
                f"recovery failed: {details[-1] if details else what}",
                details,
            )
        return _result("recovered", EXIT_OK, what or "no half-done journal; nothing to do", details)

    return _guard(go)


def rollback(options: ApplyOptions, runner: Runner) -> ApplyResult:
    """``apply --rollback``: put back the files the last completed apply replaced (its ``old`` copies),
    through the same journaled path (refusals that protect slurmctld still apply; the header check and the
    removal threshold do not). Rolling back twice returns to where you were."""

    def go() -> ApplyResult:
        _check_dirs(options)
        st = _State(options.state_dir)
        if not options.state_dir.is_dir():
            raise Refusal(f"no {options.state_dir}: nothing to roll back")
        with _locked(options):
            slurm = _Slurm(runner, options)
            what, details, ok = _recover_locked(options, st, slurm)
            if not ok:
                return _result(
                    "rollback-failed", EXIT_ROLLBACK_FAILED, f"could not recover first: {what}", details
                )
            done = st.completed_sets()
            if not done:
                raise Refusal(f"no completed set in {st.sets}: nothing to roll back")
            last = done[-1]
            names = [p.name for p in (last / "new").iterdir()] + [p.name for p in (last / "old").iterdir()]
            target: dict[str, bytes | None] = {}
            for name in MANAGED:
                if name in names:
                    target[name] = _read(last / "old" / name)
            o = replace(options, adopt=True, force=True, min_interval=0)
            plan = _plan(o, target, slurm, st.state(), checks=False)
            if plan is None:
                return _result(
                    "unchanged", EXIT_OK, f"the live files already equal the set before {last.name}"
                )
            if plan.reconfigure:
                _plan(replace(o, adopt=True), target, slurm, {}, checks=True)  # ping, node set, unplaced
            # slurm.conf may have changed since (a partition's Topology=, the TopologyPlugin): the old set
            # must still load
            proven = _prove(o, plan)
            plan.data_first = False
            res = _commit(o, st, slurm, plan)
            res.details.append(proven)
            res.summary = _line(
                res.summary.replace(
                    "slurm-topo apply: applied:",
                    f"slurm-topo apply: rolled back to the set before {last.name}:",
                )
            )
            return res

    return _guard(go)
