"""What a job was given, as plain values: its nodes with their GPU indices (:class:`Allocation`) and the
switch tree Slurm places by (:class:`SwitchTree`). Pure data, shared by the readers that fill them
(:mod:`slurm_topo.access`) and the planners that read them (:mod:`slurm_topo.srun.plan`,
:mod:`slurm_topo.cost.comm`), so neither side imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SwitchTree:
    """The switch tree Slurm uses: per node its leaf switch; per switch its parent and level (leaf = 0)."""

    leaf: Mapping[str, str] = field(default_factory=dict)
    parent: Mapping[str, str] = field(default_factory=dict)
    level: Mapping[str, int] = field(default_factory=dict)

    def path(self, node: str) -> tuple[str, ...]:
        """Switches above ``node``, lowest first (empty when the node is on no switch)."""
        out: list[str] = []
        sw = self.leaf.get(node)
        while sw is not None and sw not in out:
            out.append(sw)
            sw = self.parent.get(sw)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Allocation:
    """A job's nodes (in Slurm's order) and each node's allocated GPU indices (sorted)."""

    job_id: str
    nodes: tuple[str, ...]
    gpus: Mapping[str, tuple[int, ...]]
