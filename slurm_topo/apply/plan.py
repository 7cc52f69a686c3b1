"""What a run would change and why it would refuse (no writes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import CommandError, ParseError
from ..lint import lint_topology
from ..slurmconf import parse_scontrol_nodes, parse_topology_conf
from .base import (
    _FEATURE_TOKEN_RE,
    CONFIG_ORDER,
    DATA,
    GRES,
    MANAGED,
    NODES,
    TOPOLOGY,
    ApplyOptions,
    Refusal,
    _Deferred,
)
from .controller import _Slurm
from .parse import _nodes_hl, has_header, parse_gres_cores, parse_node_lines
from .store import _meta, _read


@dataclass
class _Plan:
    new: dict[str, bytes | None]
    """name → new bytes (None: delete) for every file that changes."""
    old: dict[str, bytes | None]
    meta: dict[str, dict[str, int] | None]
    reconfigure: bool
    data_first: bool
    details: list[str]


def _check_new_set(new: Mapping[str, bytes | None]) -> tuple[dict[str, frozenset[str]] | None, list[str]]:
    """Lint the new topology.conf and sanity-check the node lines; raise Refusal on any problem."""
    problems: list[str] = []
    nodes = None
    if new.get(TOPOLOGY) is not None:
        try:
            switches = parse_topology_conf(new[TOPOLOGY].decode(), source=f"new {TOPOLOGY}")
            problems += [f"{TOPOLOGY}: {p.code}: {p.message}" for p in lint_topology(switches)]
        except ParseError as exc:
            problems.append(str(exc))
    if new.get(NODES) is not None:
        try:
            nodes = parse_node_lines(new[NODES].decode(), source=f"new {NODES}")
            if not nodes:
                problems.append(f"{NODES}: no NodeName= lines")
        except ParseError as exc:
            problems.append(str(exc))
    if problems:
        raise Refusal(f"the new files do not pass lint ({problems[0]})", problems)
    return nodes, []


def _plan(
    options: ApplyOptions,
    rendered: Mapping[str, bytes | None],
    slurm: _Slurm,
    state: dict,
    *,
    checks: bool = True,
) -> _Plan | None:
    sd = options.slurm_dir
    unknown = set(rendered) - set(MANAGED)
    if unknown:
        raise Refusal(f"unknown output {sorted(unknown)[0]!r}: apply manages only {', '.join(MANAGED)}")
    live = {name: _read(sd / name) for name in rendered}
    changed = {n: rendered[n] for n in MANAGED if n in rendered and rendered[n] != live[n]}
    owed_before = bool(state.get("reconfigure_owed"))
    """A previous --no-reconfigure run wrote config files slurmctld has not read yet."""
    owed = owed_before and not options.no_reconfigure
    if not changed and not owed:
        return None
    new_nodes, _ = _check_new_set(rendered)
    details: list[str] = []

    if checks:
        if (sd / "topology.yaml").exists():
            raise Refusal(
                f"{sd / 'topology.yaml'} exists: Slurm 25.05+ then ignores topology.conf; remove it or "
                "stop using apply"
            )
        foreign = [n for n, data in changed.items() if live[n] is not None and not has_header(live[n])]
        if foreign and not options.adopt:
            raise Refusal(
                f"{', '.join(foreign)} in {sd} not written by slurm-topo (no header); --adopt takes "
                "it over once"
            )

    old_nodes: dict[str, frozenset[str]] = {}
    if live.get(NODES) is not None and has_header(live[NODES]):
        try:
            old_nodes = parse_node_lines(live[NODES].decode())
        except ParseError:
            old_nodes = {}
    new_nodes = new_nodes if new_nodes is not None else old_nodes
    removed = set(old_nodes) - set(new_nodes)
    added = set(new_nodes) - set(old_nodes)
    old_feats = frozenset().union(*old_nodes.values()) if old_nodes else frozenset()
    new_feats = frozenset().union(*new_nodes.values()) if new_nodes else frozenset()
    gone_feats = old_feats - new_feats
    if added:
        details.append(f"nodes added: {_nodes_hl(added)}")
    if removed:
        details.append(f"nodes removed: {_nodes_hl(removed)}")
    if gone_feats:
        details.append(f"features removed: {','.join(sorted(gone_feats))}")

    if checks and old_nodes and removed and not options.force:
        share = len(removed) / len(old_nodes)
        if share > options.max_removal:
            raise Refusal(
                f"{len(removed)} of {len(old_nodes)} nodes would disappear ({share:.0%} > "
                f"--max-removal {options.max_removal:.0%}); --force applies anyway",
                [f"removed: {_nodes_hl(removed)}"],
            )

    if checks and GRES in changed and live.get(GRES) is not None and changed[GRES] is not None:
        try:
            before = parse_gres_cores(live[GRES].decode())
            after = parse_gres_cores(changed[GRES].decode())
        except ParseError as exc:
            raise Refusal(f"gres.conf: {exc}") from None
        moved = {n for n in set(before) & set(after) if before[n] != after[n]}
        if moved:
            raise Refusal(
                f"restart required: gres.conf Cores= changes on {_nodes_hl(moved)} (slurmctld reads "
                "Cores= only at start); apply refuses"
            )

    config_changed = any(n in changed for n in CONFIG_ORDER)
    reconfigure = (config_changed or owed) and not options.no_reconfigure
    if checks and reconfigure:
        if not slurm.primary_up():
            raise Refusal("slurmctld (primary) does not answer `scontrol ping` UP; nothing changed")
        try:
            known_text = slurm.nodes_text()
            known = {r["NodeName"] for r in parse_scontrol_nodes(known_text)}
        except (CommandError, ParseError) as exc:
            raise Refusal(f"cannot read the controller's nodes: {exc}") from None
        expected = (known - set(old_nodes)) | set(new_nodes)
        more, less = expected - known, known - expected
        version = slurm.version()
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
        if rendered.get(TOPOLOGY) is not None:
            switches = parse_topology_conf(rendered[TOPOLOGY].decode())
            unplaced = [
                p.message for p in lint_topology(switches, known_nodes=expected) if p.code == "unplaced-node"
            ]
            if unplaced:
                raise Refusal(
                    f"{len(unplaced)} nodes Slurm knows would be on no switch ({unplaced[0]})", unplaced
                )
        if gone_feats and not options.force:
            try:
                pending = slurm.pending_features()
            except CommandError as exc:
                raise Refusal(f"cannot list pending jobs: {exc}") from None
            stuck = [
                f"job {job}: {feats}"
                for job, feats in pending
                if gone_feats & set(_FEATURE_TOKEN_RE.findall(feats))
            ]
            if stuck:
                raise Refusal(
                    f"{len(stuck)} pending jobs name a group about to disappear (they would be held "
                    f"forever); --force applies anyway",
                    stuck,
                )
        last = float(state.get("last_reconfigure", 0))
        wait = options.min_interval - (options.clock() - last)
        if wait > 0:
            raise _Deferred(
                f"last reconfigure {options.clock() - last:.0f}s ago (--min-interval "
                f"{options.min_interval:.0f}s); {len(changed)} files left as they are"
            )

    # The live files tell what slurmctld knows only when no reconfigure is owed from an earlier run.
    data_first = (
        DATA in changed and config_changed and not owed_before and new_feats <= old_feats and bool(old_nodes)
    )
    if DATA in changed and options.no_reconfigure and (config_changed or owed_before) and not data_first:
        # new groups: slurmctld learns them only at the reconfigure the admin owes; publish the data then
        del changed[DATA]
        details.append(
            f"{DATA} held back until slurmctld is reconfigured (it names new groups): the next "
            "apply without --no-reconfigure reconfigures and publishes it"
        )
    meta = {n: _meta(sd / n) for n in changed}
    return _Plan(dict(changed), {n: live[n] for n in changed}, meta, reconfigure, data_first, details)
