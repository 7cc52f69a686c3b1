"""``slurm-topo apply``: put a rendered file set live in a Slurm config directory, safely, from cron/systemd.

One run = one call of :func:`run_apply` (or :func:`recover` / :func:`rollback`), under an exclusive ``flock``
on ``<state-dir>/lock`` and one on the ``--slurm-dir`` directory itself (so two runs with different state
directories never interleave their writes). It never prints and never exits: it returns an
:class:`ApplyResult` with one summary line (fit for syslog), detail lines and the exit code:

====  ======================================================================================================
0     applied, unchanged, deferred (debounce) or a dry run (the summary says which)
10    applied, with ``detailed_exitcodes`` (a dry run that would apply also gives 10 then)
11    refused: nothing was changed (restart required, foreign file, too many removals, pending jobs, lint,
      lock held, Slurm's own parser rejects the set, …)
12    failed and rolled back: the live files are the old ones again (and slurmctld was reconfigured on
      them); also a staging failure before anything went live
13    the rollback or recovery itself failed, or the journal cannot be read: look at the details; the
      journal stays for ``--recover``
====  ======================================================================================================

The codes are :class:`~slurm_topo.core.errors.ExitCode`'s (``OK``, ``APPLIED``, ``REFUSED``, ``ROLLED_BACK``,
``ROLLBACK_FAILED``): disjoint from the input (2) and command (3) errors of every other command.

Order of a change (each step is journaled; see docs/apply.md):

1. every file of the new set is checked (lint of its topology.conf or topology.yaml, node lines sanity)
   and compared with the live one; nothing differs → nothing is touched. A set holds one topology file:
   writing topology.yaml (25.05+) retires a live topology.conf in the same set, and the reverse.
2. refusals are checked against the live files and the running controller (``scontrol ping``, ``show
   node``, ``squeue``) — before anything is written.
   When a config file changes, Slurm's own parser loads the set as it would be live (a throwaway
   slurmctld, :mod:`slurm_topo.apply.prove`); a set it rejects is refused.
3. a set directory ``<state-dir>/sets/<id>/{old,new}`` gets copies of the old and new files; each new file
   is staged beside its target as ``.<name>.slurm-topo.tmp`` with the target's mode and owner; files and
   directories are fsynced; then ``<state-dir>/journal.json`` is written (atomically).
4. if the new filter data only *removes* groups (its node features are a subset of the live ones),
   ``slurm_topo_data.lua`` is renamed first: it names nothing slurmctld lacks, before or after the
   reconfigure.
5. rename (or remove) topology.yaml, topology.conf, slurm-topo-nodes.conf, gres.conf; journal phase
   ``reconfiguring``; ``--sync-cmd``; ``scontrol reconfigure``; verify ``scontrol show topology [NAME]``
   (switches, or blocks in their order) and each node's AvailableFeatures.
6. journal phase ``verified``; rename ``slurm_topo_data.lua`` (when it adds groups it must follow the
   reconfigure: naming features slurmctld does not have yet would fail every locality job); remove the
   journal.

A crash anywhere leaves a journal. The next run (or :func:`recover`) first cleans stale staging files,
then: phase ``verified`` → finish (publish the remaining files); any earlier phase → restore every file
from the set's ``old`` copies and, when a reconfigure may already have run on the new set, reconfigure
once more on the old one. ``scontrol reconfigure`` is only ever called when every config file of one set
is in place, so slurmctld never reads a mixed set.

Parts (``slurm_topo.apply.*``): ``base`` options, results, codes, errors · ``parse`` what we write and what
slurmctld shows (pure) · ``topo`` the topology file: kind, lint, block order, plugin, verification (pure) ·
``store`` the state store (file primitives, locks, journal, sets) · ``controller`` every scontrol/squeue call
and the verification · ``plan`` what changes and the refusals · ``prove`` Slurm's own parser on the staged
set · ``commit`` stage, rename, reconfigure, verify, roll back, recover · ``run`` the entry points. This
module names them all; it loads ``run`` and ``prove`` on first use, so the pure parts (``base``, ``parse``,
``topology_file``, ``plan``) import without the prover, the runner or the access layer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import (
    CONFIG_ORDER,
    DATA,
    EXIT_APPLIED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_ROLLBACK_FAILED,
    EXIT_ROLLED_BACK,
    GRES,
    MANAGED,
    NODES,
    STAGE_SUFFIX,
    TOPOLOGY,
    TOPOLOGY_YAML,
    ApplyOptions,
    ApplyResult,
    JournalUnreadable,
    Refusal,
)
from .parse import features_difference, has_header, parse_gres_cores, parse_node_lines, topology_difference

if TYPE_CHECKING:
    from ..access.text import parse_show_topology
    from .prove import Proof, Prover, ThrowawayController, prover_for
    from .run import recover, rollback, run_apply

_LATER = {
    "recover": ".run",
    "rollback": ".run",
    "run_apply": ".run",
    "Proof": ".prove",
    "Prover": ".prove",
    "ThrowawayController": ".prove",
    "prover_for": ".prove",
    "parse_show_topology": "..access.text",
}
"""Names loaded on first use: the entry points, the prover and the access layer's reader (each runs or
reads Slurm), so that ``import slurm_topo.apply.plan`` loads none of them (tests/test_layout.py)."""


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LATER[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "CONFIG_ORDER",
    "DATA",
    "EXIT_APPLIED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_ROLLBACK_FAILED",
    "EXIT_ROLLED_BACK",
    "GRES",
    "MANAGED",
    "NODES",
    "STAGE_SUFFIX",
    "TOPOLOGY",
    "TOPOLOGY_YAML",
    "ApplyOptions",
    "ApplyResult",
    "JournalUnreadable",
    "Proof",
    "Prover",
    "Refusal",
    "ThrowawayController",
    "features_difference",
    "has_header",
    "parse_gres_cores",
    "parse_node_lines",
    "parse_show_topology",
    "prover_for",
    "recover",
    "rollback",
    "run_apply",
    "topology_difference",
]
