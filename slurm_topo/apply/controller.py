"""The controller client: every ``scontrol``/``squeue`` call apply makes (through a Runner), and the
verification of what slurmctld shows after a reconfigure."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from ..access import argv as slurm_argv
from ..access.text import parse_show_config
from ..core.errors import CommandError, HostlistError, InputError, ParseError
from ..plumbing.runner import Runner
from ..plumbing.version import parse_slurm_version
from . import topology_file as topo
from .base import NODES, ApplyOptions
from .parse import features_difference, future_nodes, parse_node_lines


class _Slurm:
    def __init__(self, runner: Runner, options: ApplyOptions):
        self.runner = runner
        self.o = options
        self._version: tuple[tuple[int, int] | None] | None = None

    def run(self, *argv: str, timeout: float | None = None) -> str:
        return self.runner.run(list(argv), timeout=timeout or self.o.command_timeout)

    def primary_up(self) -> bool:
        try:
            out = self.run(*slurm_argv.ping())
        except CommandError:
            return False
        for line in out.splitlines():
            if "primary" in line.lower() or line.lower().startswith("slurmctld"):
                return line.rstrip().endswith("UP")
        return False

    def version(self) -> tuple[int, int] | None:
        if self.o.slurm_version:
            return self.o.slurm_version
        if self._version is None:
            try:
                self._version = (parse_slurm_version(self.run(*slurm_argv.version_argvs()[0])),)
            except (CommandError, InputError):
                return None
        return self._version[0]

    def nodes_text(self) -> str:
        return self.run(*slurm_argv.show_nodes())

    def pending_features(self) -> list[tuple[str, str]]:
        out = self.run(*slurm_argv.pending_features())
        rows = []
        for line in out.splitlines():
            job, _, feats = line.strip().partition(" ")
            if job:
                rows.append((job, feats.strip()))
        return rows

    def reconfigure(self) -> None:
        self.run(*slurm_argv.reconfigure(), timeout=max(self.o.command_timeout, 60.0))

    def sync(self) -> None:
        if self.o.sync_cmd:
            argv = shlex.split(self.o.sync_cmd)
            if argv:
                self.runner.run(argv, timeout=self.o.sync_timeout)

    def topology_plugin(self) -> str | None:
        """The running slurmctld's ``TopologyPlugin`` (``scontrol show config``); None when unknown."""
        try:
            return parse_show_config(self.run(*slurm_argv.show_config())).get("TopologyPlugin")
        except (CommandError, ParseError):
            return None

    def show_topology(self, name: str | None = None) -> str:
        return self.run(*slurm_argv.show_topology(name))

    def verify(self, files: Mapping[str, bytes | None]) -> list[str]:
        """Wait (up to verify_timeout) until slurmctld answers and shows what ``files`` say (the topology
        file that is live: topology.yaml, else topology.conf; the node lines' features); the last difference
        otherwise."""
        found = topo.active(files, self.version())
        nodes = files.get(NODES)
        try:
            want_nodes = parse_node_lines(nodes.decode()) if nodes is not None else None
            if nodes is not None and want_nodes is not None:  # scontrol show node lists no FUTURE node
                future = future_nodes(nodes.decode())
                want_nodes = {n: f for n, f in want_nodes.items() if n not in future}
            if found is not None:
                topo.difference(dict([found]), lambda name: "")  # it reads (a foreign file may not)
        except (ParseError, HostlistError):
            return []  # a foreign file being restored: nothing we can compare with
        deadline = self.o.clock() + self.o.verify_timeout
        diff = ["slurmctld does not answer after the reconfigure"]
        while True:
            try:
                if self.primary_up():
                    diff = []
                    if found is not None:
                        diff += topo.difference(dict([found]), self.show_topology)
                    if want_nodes is not None:
                        diff += features_difference(want_nodes, self.nodes_text())
                    if not diff:
                        return []
            except (CommandError, ParseError, HostlistError) as exc:
                diff = [f"verify: {exc}"]
            if self.o.clock() >= deadline:
                return diff
            self.o.sleep(0.25)
