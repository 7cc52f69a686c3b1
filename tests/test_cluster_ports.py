"""The test cluster launcher (docker-slurm/cluster) keeps the ports it picks by itself inside
``$SLURM_TOPO_PORT_RANGE``, as the tests' and benchmarks' clusters do (tests/integration/slurmctl.py), so a
machine can confine every cluster slurm-topo starts to ports it allows."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

LAUNCHER = Path(__file__).resolve().parents[1] / "docker-slurm" / "cluster"


def _launcher() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("slurm_topo_cluster_launcher", str(LAUNCHER))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up while the class is made
    loader.exec_module(module)
    return module


def test_the_default_port_stays_inside_the_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cluster = _launcher()
    monkeypatch.setenv(cluster.PORT_RANGE_VAR, "40000-40999")
    ports = {cluster.default_ctld_port(tmp_path / f"base{i}") for i in range(200)}
    assert all(40000 <= p and p + 99 <= 40999 for p in ports)
    assert len(ports) == 10  # every block of 100 in the range is used
    monkeypatch.delenv(cluster.PORT_RANGE_VAR)
    assert all(10000 <= cluster.default_ctld_port(tmp_path / f"b{i}") <= 31900 for i in range(50))


@pytest.mark.parametrize("bad", ["40000", "40000-40050", "80-2000", "40000-70000", "a-b"])
def test_a_bad_range_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    cluster = _launcher()
    monkeypatch.setenv(cluster.PORT_RANGE_VAR, bad)
    with pytest.raises(cluster.ClusterError, match="SLURM_TOPO_PORT_RANGE"):
        cluster.port_range()
