"""Fixtures for the integration tests against a real Slurm (docker-slurm/cluster).

* ``slurm_cluster`` (session): starts a cluster from docker-slurm/fleet.yaml through ``slurm-topo generate``
  in a fresh base directory on free loopback ports (``$SLURM_TOPO_CLUSTER_BASE`` if set, else
  ``/tmp/slurm-topo-it-<pid>``) and stops it at the end of the session. With ``SLURM_TOPO_CLUSTER=<base>``
  it uses that already running cluster instead and leaves it running.
* ``slurm`` (function): a :class:`slurmctl.Slurm` client on a quiet cluster (no jobs, all nodes idle).
* ``filtered_cluster`` (session): a second cluster with the locality filter installed as an admin would
  (``cluster up --with-filter``: job_submit.lua + slurm_topo_filter.lua + the generated slurm_topo_data.lua
  beside slurm.conf, ``JobSubmitPlugins=lua``, the SPANK plugin built by job_submit/build-spank in
  plugstack.conf), on ``docker-slurm/fleet-filter.yaml``. Started only when a test asks for it (about 1 s);
  stopped at the end. ``$SLURM_TOPO_FILTERED_CLUSTER=<base>`` uses a running one instead.
* ``fslurm`` (function): a :class:`slurmctl.Slurm` client on the quiet filtered cluster.

Preconditions are declared, and skipped honestly: without root or the Slurm binaries the tests skip with
the reason, except when ``CI`` is set, where an unavailable cluster is a failure, never a skip.
On a failing test the report gets the tail of slurmctld.log and ``scontrol show job -d``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests import the helper module as `slurmctl`

import slurmctl  # noqa: E402


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(
            f"Slurm test cluster unavailable in CI ({reason}); CI must run these tests", pytrace=False
        )
    pytest.skip(f"Slurm test cluster unavailable: {reason}")


def slurm_preconditions() -> None:
    """Skip (outside CI) or fail (in CI) when this host cannot run a test cluster."""
    missing = _missing_preconditions()
    if missing:
        _unavailable("; ".join(missing))


@pytest.fixture(scope="session")
def scratch_cluster() -> object:
    """``slurmctl.scratch_cluster``, after the session cluster's preconditions (without starting it)."""
    slurm_preconditions()
    return slurmctl.scratch_cluster


def _missing_preconditions() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("not root (the launcher needs mknod, unshare --uts and a munge-user munged)")
    for tool in ("sbatch", "scontrol", "sinfo", "squeue", "scancel", "unshare"):
        if not shutil.which(tool):
            missing.append(f"{tool} not on PATH")
    for daemon in ("slurmctld", "slurmd", "slurmstepd", "munged"):
        if not (
            os.access(f"/usr/sbin/{daemon}-wlm", os.X_OK)
            or shutil.which(daemon)
            or os.access(f"/usr/sbin/{daemon}", os.X_OK)
        ):
            missing.append(f"{daemon} not installed")
    return missing


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest) -> Iterator[slurmctl.Cluster]:
    """The session's real Slurm cluster (see the module docstring)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    named = os.environ.get("SLURM_TOPO_CLUSTER")
    if named:
        base = Path(named)
        if not (base / "cluster.json").exists():
            pytest.fail(
                f"SLURM_TOPO_CLUSTER={named}: no cluster.json there (start it with docker-slurm/cluster up)",
                pytrace=False,
            )
        cluster = slurmctl.load_cluster(base, owned=False)
        if "UP" not in cluster.slurm.run(["scontrol", "ping"], check=False).stdout:
            pytest.fail(f"SLURM_TOPO_CLUSTER={named}: slurmctld does not answer", pytrace=False)
        yield cluster
        return

    slurm_preconditions()
    base = Path(os.environ.get("SLURM_TOPO_CLUSTER_BASE") or f"/tmp/slurm-topo-it-{os.getpid()}")
    t0 = time.monotonic()
    with slurmctl.owned_cluster(base) as cluster:
        _report_start(request, reporter, cluster, base, t0)
        yield cluster


def _report_start(
    request: pytest.FixtureRequest, reporter: object, cluster: slurmctl.Cluster, base: Path, t0: float
) -> None:
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line(
                f"\nslurm test cluster: Slurm {cluster.version[0]}.{cluster.version[1]:02d}, "
                f"{len(cluster.nodes)} nodes, "
                f"up (all idle) in {cluster.up_seconds:.2f}s by the launcher, "
                f"{time.monotonic() - t0:.2f}s with the call; "
                f"base {base}"
            )


FILTER_FLEET = slurmctl.REPO / "docker-slurm" / "fleet-filter.yaml"


@pytest.fixture(scope="session")
def filtered_cluster(request: pytest.FixtureRequest) -> Iterator[slurmctl.Cluster]:
    """The session's cluster with the locality filter and the SPANK plugin (see the module docstring)."""
    named = os.environ.get("SLURM_TOPO_FILTERED_CLUSTER")
    if named:
        cluster = slurmctl.load_cluster(Path(named), owned=False)
        if "UP" not in cluster.slurm.run(["scontrol", "ping"], check=False).stdout:
            pytest.fail(f"SLURM_TOPO_FILTERED_CLUSTER={named}: slurmctld does not answer", pytrace=False)
        yield cluster
        return
    missing = _missing_preconditions()
    if not (shutil.which("gcc") and os.path.exists("/usr/include/slurm/spank.h")):
        missing.append(
            "gcc or /usr/include/slurm/spank.h (libslurm-dev) missing: cannot build the SPANK plugin"
        )
    if missing:
        _unavailable("; ".join(missing))
    base = Path(f"{os.environ.get('SLURM_TOPO_CLUSTER_BASE') or f'/tmp/slurm-topo-it-{os.getpid()}'}-filter")
    with slurmctl.owned_cluster(base, "--with-filter", "--inventory", str(FILTER_FLEET)) as cluster:
        yield cluster


@pytest.fixture
def fslurm(filtered_cluster: slurmctl.Cluster) -> slurmctl.Slurm:
    """A client for the filtered cluster, after cancelling every job and waiting for all nodes to be idle."""
    client = filtered_cluster.slurm
    client.quiesce()
    return client


@pytest.fixture
def slurm(slurm_cluster: slurmctl.Cluster) -> slurmctl.Slurm:
    """A client for the session cluster, after cancelling every job and waiting for all nodes to be idle."""
    client = slurm_cluster.slurm
    client.quiesce()
    return client


# --------------------------------------------------------------------------------------------------
# on failure: attach the daemons' view to the report


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"({path}: {e})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.when == "teardown":
        return
    funcargs = getattr(item, "funcargs", {})
    cluster = funcargs.get("filtered_cluster") or funcargs.get("slurm_cluster")
    if not isinstance(cluster, slurmctl.Cluster):
        return
    client = cluster.slurm
    try:
        jobs = client.run(["scontrol", "show", "job", "-d"], timeout=10, check=False)
        report.sections.append(("scontrol show job -d", (jobs.stdout + jobs.stderr)[-20000:]))
        nodes = client.run(["sinfo", "-N", "-o", "%N %T %E"], timeout=10, check=False)
        report.sections.append(("sinfo -N", nodes.stdout + nodes.stderr))
    except Exception as e:  # the report must not hide the original failure
        report.sections.append(("scontrol", f"could not query the cluster: {e!r}"))
    report.sections.append(
        ("slurmctld.log (last 60 lines)", _tail(cluster.base / "log" / "slurmctld.log", 60))
    )
