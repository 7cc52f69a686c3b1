"""What a run would change and why it would refuse — pure: no file, no command, no clock.

The caller (``apply._plan``) reads the live files and asks the controller; these functions decide:

1. :func:`draft` — the files that change (a set writing topology.yaml retires topology.conf and the
   reverse), the new set's own checks (lint of the tree, block or yaml file, node lines), the live-file
   refusals (foreign files), the ``TopologyPlugin`` slurm.conf names for a topology.conf, the node and
   feature changes, the removal threshold, NVLink blocks that would move and the gres ``Cores=`` rule;
2. the ``check_*`` functions — when a reconfigure is due: the node set against the running controller's
   (restart required before 23.11), nodes on no switch or in no block, a change of topology file
   (topology.yaml needs 25.05, a plugin change a restart before 24.11), pending jobs naming a group about
   to disappear, and the ``--min-interval`` debounce;
3. :func:`finish` — when the data file goes live (first, last, or held back for an owed reconfigure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.errors import ParseError
from ..plumbing.version import format_slurm_version
from . import topology_file as topo
from .base import (
    _FEATURE_TOKEN_RE,
    CONFIG_ORDER,
    DATA,
    GRES,
    MANAGED,
    NODES,
    TOPOLOGY,
    TOPOLOGY_YAML,
    ApplyOptions,
    Journal,
    Refusal,
    _Deferred,
)
from .parse import _nodes_hl, has_header, parse_gres_cores, parse_node_lines


@dataclass
class _Plan:
    new: dict[str, bytes | None]
    """name → new bytes (None: delete) for every file that changes."""
    old: dict[str, bytes | None]
    meta: dict[str, dict[str, int] | None]
    reconfigure: bool
    data_first: bool
    details: list[str]
    completes: str | None = None
    """The set this run completes (``run_apply`` sets it): a run that writes no config file and only pays
    the reconfigure an earlier ``--no-reconfigure`` run owes (with the data file it held back) records no
    set of its own — its files join that set, so ``--rollback`` puts back the files from before it."""


def _check_new_set(
    new: Mapping[str, bytes | None], version: tuple[int, int] | None
) -> tuple[dict[str, frozenset[str]] | None, list[str]]:
    """Lint the new topology file (tree, block or yaml) and sanity-check the node lines; raise Refusal on
    any problem."""
    problems: list[str] = []
    nodes = None
    node_lines = new.get(NODES)
    found = topo.active(new)
    if found is not None:
        problems += topo.lint_problems(*found, version)
    if node_lines is not None:
        try:
            nodes = parse_node_lines(node_lines.decode(), source=f"new {NODES}")
            if not nodes:
                problems.append(f"{NODES}: no NodeName= lines")
        except ParseError as exc:
            problems.append(str(exc))
    if problems:
        raise Refusal(f"the new files do not pass lint ({problems[0]})", problems)
    return nodes, []


def _changes(
    rendered: Mapping[str, bytes | None], live: Mapping[str, bytes | None]
) -> dict[str, bytes | None]:
    """name → new bytes (None: remove) of every managed file that differs. A rendered set holds one of
    topology.conf / topology.yaml: the other one, when live, is retired in the same set (Slurm 25.05+ reads
    only the yaml once it exists; a stale one would come back to life the day the other goes)."""
    changed = {n: rendered[n] for n in MANAGED if n in rendered and rendered[n] != live.get(n)}
    for name, other in ((TOPOLOGY, TOPOLOGY_YAML), (TOPOLOGY_YAML, TOPOLOGY)):
        if rendered.get(name) is not None and other not in rendered and live.get(other) is not None:
            changed[other] = None
    return {n: changed[n] for n in MANAGED if n in changed}


def draft(
    options: ApplyOptions,
    rendered: Mapping[str, bytes | None],
    live: Mapping[str, bytes | None],
    state: Journal,
    *,
    slurm_conf: bytes | None = None,
    checks: bool = True,
) -> _Draft | None:
    """What changes, and every refusal that needs no controller. None: nothing to do. ``slurm_conf``: the
    live slurm.conf (its ``TopologyPlugin``), None when there is none in the directory."""
    unknown = set(rendered) - set(MANAGED)
    if unknown:
        raise Refusal(f"unknown output {sorted(unknown)[0]!r}: apply manages only {', '.join(MANAGED)}")
    changed = _changes(rendered, live)
    owed_before = bool(state.get("reconfigure_owed"))
    """A previous --no-reconfigure run wrote config files slurmctld has not read yet."""
    owed = owed_before and not options.no_reconfigure
    if not changed and not owed:
        return None
    after = {**live, **changed}
    new_nodes, _ = _check_new_set({**rendered, **changed}, options.slurm_version)
    if checks:
        _check_live_files(options, changed, live)
        _check_plugin(options, after, slurm_conf)
    d = _Draft(changed=changed, live=dict(live), owed_before=owed_before)
    d.kind_before, d.kind_after = topo.active_kind(live), topo.active_kind(after)
    d.topology = topo.active(after)
    d.old_nodes = _live_nodes(live.get(NODES))
    d.new_nodes = new_nodes if new_nodes is not None else d.old_nodes
    d.details = _node_details(d)
    if d.kind_before != d.kind_after and d.kind_before is not None:
        d.details.append(_switch_detail(d, changed))
    if checks and not options.force:
        _check_removal(options, d)
        _check_block_order(live, after)
    if checks:
        _check_gres_cores(changed, live)
    d.config_changed = any(n in changed for n in CONFIG_ORDER)
    d.reconfigure = (d.config_changed or owed) and not options.no_reconfigure
    return d


def _switch_detail(d: _Draft, changed: Mapping[str, bytes | None]) -> str:
    retired = [n for n in (TOPOLOGY, TOPOLOGY_YAML) if n in changed and changed[n] is None]
    return f"topology: {d.kind_before} -> {d.kind_after}" + (
        f"; {', '.join(retired)} retired (its copy stays in the set's old/)" if retired else ""
    )


@dataclass
class _Draft:
    changed: dict[str, bytes | None]
    live: dict[str, bytes | None]
    owed_before: bool
    old_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    new_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    config_changed: bool = False
    reconfigure: bool = False
    kind_before: str | None = None
    """``tree``/``block``/``yaml``: the live topology file's kind (``topo.kind``), None without one."""
    kind_after: str | None = None
    topology: tuple[str, bytes] | None = None
    """The topology file slurmctld reads after the change (name, bytes)."""

    @property
    def removed(self) -> set[str]:
        return set(self.old_nodes) - set(self.new_nodes)

    @property
    def added(self) -> set[str]:
        return set(self.new_nodes) - set(self.old_nodes)

    @property
    def old_feats(self) -> frozenset[str]:
        return frozenset().union(*self.old_nodes.values()) if self.old_nodes else frozenset()

    @property
    def new_feats(self) -> frozenset[str]:
        return frozenset().union(*self.new_nodes.values()) if self.new_nodes else frozenset()

    @property
    def gone_feats(self) -> frozenset[str]:
        return self.old_feats - self.new_feats


def _check_live_files(
    options: ApplyOptions,
    changed: Mapping[str, bytes | None],
    live: Mapping[str, bytes | None],
) -> None:
    sd = options.slurm_dir
    foreign = [n for n in changed if (old := live.get(n)) is not None and not has_header(old)]
    if not foreign or options.adopt:
        return
    if all(changed[n] is None for n in foreign):  # the other topology file, retired by this set
        why = (
            f"Slurm 25.05+ ignores {TOPOLOGY} while it exists"
            if foreign == [TOPOLOGY_YAML]
            else f"{TOPOLOGY_YAML} replaces it"
        )
        raise Refusal(
            f"{', '.join(str(sd / n) for n in foreign)} was not written by slurm-topo ({why}); "
            "--adopt retires it (its copy stays in the set's old/)"
        )
    raise Refusal(
        f"{', '.join(foreign)} in {sd} not written by slurm-topo (no header); --adopt takes it over once"
    )


def _check_plugin(options: ApplyOptions, after: Mapping[str, bytes | None], slurm_conf: bytes | None) -> None:
    """A topology.conf in block syntax needs ``TopologyPlugin=topology/block`` in slurm.conf, one in tree
    syntax must not meet topology/block (slurmctld stops on the other syntax). apply never edits
    slurm.conf: the admin sets the plugin, apply then writes the matching file (docs/nvlink-domains.md)."""
    found = topo.active(after)
    if slurm_conf is None or found is None or found[0] != TOPOLOGY:
        return
    k = topo.kind(*found)
    have = topo.slurm_conf_plugin(slurm_conf.decode("utf-8", "replace"))
    want = topo.PLUGIN[k or topo.TREE]
    if have == want or (k == topo.TREE and have != topo.PLUGIN[topo.BLOCK]):
        return
    raise Refusal(
        f"the new {TOPOLOGY} is in {k} syntax but {options.slurm_dir / 'slurm.conf'} has "
        f"TopologyPlugin={have or '(unset)'}: set TopologyPlugin={want} there first (apply never edits "
        "slurm.conf), then run apply again; the reconfigure switches the plugin on Slurm 24.11+, older "
        "releases need --no-reconfigure and a slurmctld restart"
    )


def _check_block_order(live: Mapping[str, bytes | None], after: Mapping[str, bytes | None]) -> None:
    moved = topo.moved_blocks(topo.active(live), topo.active(after))
    if moved:
        raise Refusal(
            f"{len(moved)} NVLink block(s) would move ({moved[0]}); keep the order with nvlink.domains "
            "(placeholders keep a free slot), or --force applies anyway",
            moved,
        )


def check_topology_switch(
    d: _Draft, running_plugin: str | None, version: tuple[int, int] | None
) -> list[str]:
    """The running controller and a change of topology file: topology.yaml needs 25.05; a topology.conf
    of another plugin than slurmctld runs needs a restart before 24.11 (a 24.11+ reconfigure re-executes
    slurmctld, which loads slurm.conf's plugin). Detail lines; raises Refusal."""
    shown = "?" if version is None else format_slurm_version(version)
    conf_after = {**d.live, **d.changed}.get(TOPOLOGY)
    if d.kind_after == topo.YAML and conf_after is None and (version or (0, 0)) < topo.YAML_SINCE:
        raise Refusal(
            f"Slurm {shown} does not read {TOPOLOGY_YAML} (25.05+): writing it would retire "
            f"{TOPOLOGY}; render for the running release (--slurm-version)"
        )
    if d.kind_after not in (topo.TREE, topo.BLOCK) or running_plugin is None:
        return []
    want = topo.PLUGIN[d.kind_after]
    if running_plugin == want or (d.kind_after == topo.TREE and running_plugin != topo.PLUGIN[topo.BLOCK]):
        return []
    if (version or (0, 0)) < topo.PLUGIN_SWITCH_AT_RECONFIGURE_SINCE:
        raise Refusal(
            f"restart required: slurmctld runs TopologyPlugin={running_plugin}, the new {TOPOLOGY} needs "
            f"{want} and Slurm {shown} < 24.11 does not switch plugins at a reconfigure; run apply "
            "--no-reconfigure, then restart slurmctld"
        )
    return [f"TopologyPlugin {running_plugin} -> {want}: switched by the reconfigure (24.11+ re-executes)"]


def _live_nodes(data: bytes | None) -> dict[str, frozenset[str]]:
    """The live node lines (only ours: a foreign file says nothing we can compare with)."""
    if data is None or not has_header(data):
        return {}
    try:
        return parse_node_lines(data.decode())
    except ParseError:
        return {}


def _node_details(d: _Draft) -> list[str]:
    details = []
    if d.added:
        details.append(f"nodes added: {_nodes_hl(d.added)}")
    if d.removed:
        details.append(f"nodes removed: {_nodes_hl(d.removed)}")
    if d.gone_feats:
        details.append(f"features removed: {','.join(sorted(d.gone_feats))}")
    return details


def _check_removal(options: ApplyOptions, d: _Draft) -> None:
    removed = d.removed
    if not d.old_nodes or not removed:
        return
    share = len(removed) / len(d.old_nodes)
    if share > options.max_removal:
        raise Refusal(
            f"{len(removed)} of {len(d.old_nodes)} nodes would disappear ({share:.0%} > "
            f"--max-removal {options.max_removal:.0%}); --force applies anyway",
            [f"removed: {_nodes_hl(removed)}"],
        )


def _check_gres_cores(changed: Mapping[str, bytes | None], live: Mapping[str, bytes | None]) -> None:
    old, new = live.get(GRES), changed.get(GRES)
    if GRES not in changed or old is None or new is None:
        return
    try:
        before = parse_gres_cores(old.decode())
        after = parse_gres_cores(new.decode())
    except ParseError as exc:
        raise Refusal(f"gres.conf: {exc}") from None
    moved = {n for n in set(before) & set(after) if before[n] != after[n]}
    if moved:
        raise Refusal(
            f"restart required: gres.conf Cores= changes on {_nodes_hl(moved)} (slurmctld reads "
            "Cores= only at start); apply refuses"
        )


def check_node_set(d: _Draft, known: set[str], version: tuple[int, int] | None) -> set[str]:
    """The nodes slurmctld will know after the change; refuse a changed node set before 23.11."""
    expected = (known - set(d.old_nodes)) | set(d.new_nodes)
    more, less = expected - known, known - expected
    if (more or less) and (version is None or version < (23, 11)):
        lines = ([f"nodes to add: {_nodes_hl(more)}"] if more else []) + (
            [f"nodes to remove: {_nodes_hl(less)}"] if less else []
        )
        raise Refusal(
            "restart required: the node set differs from the running slurmctld's and Slurm "
            f"{'?' if version is None else f'{version[0]}.{version[1]:02d}'} < 23.11 would die on "
            f"a reconfigure; {'; '.join(lines)}",
            lines,
        )
    return expected


def check_unplaced(topology: tuple[str, bytes] | None, expected: set[str]) -> None:
    """Every node slurmctld will know must be placed by the default topology (on some switch of a tree,
    in some block of topology/block): topology/tree never allocates it otherwise, topology/block only to a
    job that names it by constraint or partition (with no block placement)."""
    if topology is None:
        return
    placed = topo.placed_nodes(*topology)
    if placed is None:
        return
    unplaced = sorted(expected - placed)
    if unplaced:
        where = "on no switch" if topo.kind(*topology) != topo.BLOCK else "in no block"
        raise Refusal(
            f"{len(unplaced)} nodes Slurm knows would be {where} (node {unplaced[0]} is {where} of "
            f"{topology[0]})",
            [f"node {n} is {where}" for n in unplaced],
        )


def check_pending(d: _Draft, pending: Sequence[tuple[str, str]]) -> None:
    """Pending jobs whose features name a group about to disappear would wait forever."""
    gone = d.gone_feats
    stuck = [f"job {job}: {feats}" for job, feats in pending if gone & set(_FEATURE_TOKEN_RE.findall(feats))]
    if stuck:
        raise Refusal(
            f"{len(stuck)} pending jobs name a group about to disappear (they would be held "
            f"forever); --force applies anyway",
            stuck,
        )


def check_interval(options: ApplyOptions, d: _Draft, state: Journal, now: float) -> list[str]:
    """Defer (nothing touched) a reconfigure inside ``--min-interval`` of the last one. A last reconfigure
    recorded in the future means the clock was set back since (a wrong RTC stepped by NTP): how long ago it
    was is unknown, so it counts as long ago — the change is not deferred, and the detail line returned
    says so. The reconfigure it makes records the new clock's time, and the interval holds again from
    there."""
    last = float(state.get("last_reconfigure", 0) or 0)
    if last > now:
        return (
            [
                f"last reconfigure recorded {last - now:.0f}s in the future (the clock was set back?): "
                "not deferred by --min-interval"
            ]
            if options.min_interval > 0
            else []
        )
    if options.min_interval - (now - last) > 0:
        raise _Deferred(
            f"last reconfigure {now - last:.0f}s ago (--min-interval "
            f"{options.min_interval:.0f}s); {len(d.changed)} files left as they are"
        )
    return []


def finish(options: ApplyOptions, d: _Draft, meta: Mapping[str, dict[str, int] | None]) -> _Plan:
    """The plan: when the data file goes live (see docs/apply.md "Why the data file moves when it does")."""
    changed, details = dict(d.changed), list(d.details)
    # The live files tell what slurmctld knows only when no reconfigure is owed from an earlier run.
    data_first = (
        DATA in changed
        and d.config_changed
        and not d.owed_before
        and d.new_feats <= d.old_feats
        and bool(d.old_nodes)
    )
    if DATA in changed and options.no_reconfigure and (d.config_changed or d.owed_before) and not data_first:
        # new groups: slurmctld learns them only at the reconfigure the admin owes; publish the data then
        del changed[DATA]
        details.append(
            f"{DATA} held back until slurmctld is reconfigured (it names new groups): the next "
            "apply without --no-reconfigure reconfigures and publishes it"
        )
    return _Plan(
        changed,
        {n: d.live.get(n) for n in changed},
        {n: meta.get(n) for n in changed},
        d.reconfigure,
        data_first,
        details,
    )
