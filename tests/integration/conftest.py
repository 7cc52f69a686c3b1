"""Fixtures for the integration tests against a real Slurm (docker-slurm/cluster).

* ``slurm_cluster`` (session): starts a cluster from docker-slurm/fleet.yaml through ``slurm-topo generate``
  in a fresh base directory on free loopback ports (``$SLURM_TOPO_CLUSTER_BASE`` if set, else
  ``/tmp/slurm-topo-it-<pid>``) and stops it at the end of the session. With ``SLURM_TOPO_CLUSTER=<base>``
  it uses that already running cluster instead and leaves it running.
* ``slurm`` (function): a :class:`slurmctl.Slurm` client on a quiet cluster (no jobs, all nodes idle).
* ``filtered_cluster`` (session): a second cluster with the locality filter installed as an admin would
  (``cluster up --with-filter``: job_submit.lua + slurm_topo_filter/ + the generated slurm_topo_data.lua
  beside slurm.conf, ``JobSubmitPlugins=lua``, the SPANK plugin built by job_submit/build-spank in
  plugstack.conf), on ``docker-slurm/fleet-filter.yaml``. Started only when a test asks for it (about 1 s);
  stopped at the end. ``$SLURM_TOPO_FILTERED_CLUSTER=<base>`` uses a running one instead.
* ``fslurm`` (function): a :class:`slurmctl.Slurm` client on the quiet filtered cluster.

Preconditions are declared, and skipped honestly: without root or the Slurm binaries the tests skip with
the reason, except when ``CI`` is set, where an unavailable cluster is a failure, never a skip.
On a failing test the report gets the tail of slurmctld.log and ``scontrol show job -d``.

**Slurm versions.** ``--slurm-versions native,24.11,26.05`` (or ``$SLURM_TOPO_SLURM_VERSIONS``; default
``native``, the host's Slurm) runs every integration test once per version: the session fixture
``slurm_release`` (autouse) is parametrized with them (test ids ``[slurm-24.11]``; none with ``native`` alone)
and exports ``SLURM_TOPO_SLURM=<release>`` for its duration, so every ``docker-slurm/cluster up`` a test makes
(fixtures, ``slurmctl.start_cluster``, ``scratch_cluster``) runs that Slurm; 24.11/26.05 run from a Debian
root the launcher builds once (``cluster root``). ``@pytest.mark.slurm_min("24.05", reason=...)`` marks a
test that only makes sense from a release on: on an older one it is skipped with the reason, and under ``CI``
it is deselected instead and listed by name in the summary (CI counts every skip as a failure: nothing is
silent).
The option is registered by tests/conftest.py (so ``pytest tests --slurm-versions ...`` knows it too); the
releases and their check are here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from preconditions import NOT_FOR_VERSION, SAID, in_ci, say, unavailable
from releases import selected_releases

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests import the helper module as `slurmctl`

import slurmctl  # noqa: E402

#: the roots that get pyslurm (docker-slurm/build-pyslurm): the releases PyPI's pyslurm builds for, patched
PYSLURM_RELEASES = ("26.05",)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slurm_min(version, reason): the test needs Slurm >= version (major.minor); on an older release "
        "it is skipped with the reason (deselected and listed under CI)",
    )
    config.addinivalue_line(
        "markers",
        "native_only(reason): the test runs on the host's Slurm only (a Debian root is not given its "
        "mode); on another release it is skipped with the reason (deselected and listed under CI)",
    )
    # (a bad --slurm-versions or $SLURM_TOPO_SLURM_VERSIONS is one usage error: tests/conftest.py's
    # pytest_configure, which runs first)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    releases = selected_releases(metafunc.config)
    if "slurm_release" in metafunc.fixturenames and releases != ["native"]:
        metafunc.parametrize(
            "slurm_release", releases, indirect=True, scope="session", ids=[f"slurm-{r}" for r in releases]
        )


_NATIVE_VERSION: list[tuple[int, int] | None] = []


def release_version(release: str) -> tuple[int, int] | None:
    """major.minor of a release: the host's ``slurmctld -V`` for native (None if not installed)."""
    if release != "native":
        major, minor = release.split(".")
        return int(major), int(minor)
    if not _NATIVE_VERSION:
        found = None
        for cand in ("/usr/sbin/slurmctld-wlm", shutil.which("slurmctld") or "", "/usr/sbin/slurmctld"):
            if cand and os.access(cand, os.X_OK):
                try:
                    out = subprocess.run([cand, "-V"], capture_output=True, text=True, timeout=10).stdout
                except (OSError, subprocess.TimeoutExpired):
                    continue
                m = re.search(r"(\d+)\.(\d+)", out)
                if m:
                    found = (int(m.group(1)), int(m.group(2)))
                    break
        _NATIVE_VERSION.append(found)
    return _NATIVE_VERSION[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    not_for_version = config.stash.setdefault(NOT_FOR_VERSION, [])  # printed by tests/conftest.py
    for item in items:
        native = item.get_closest_marker("native_only")
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("slurm_release", "native") if callspec else "native"
        if native is not None and release != "native":
            why = (
                f"the host's Slurm only, this is {release}: {native.kwargs.get('reason', 'no reason given')}"
            )
            if in_ci():
                dropped.append(item)
                not_for_version.append(f"{item.nodeid}: {why}")
            else:
                item.add_marker(pytest.mark.skip(reason=why))
                keep.append(item)
            continue
        marker = item.get_closest_marker("slurm_min")
        if marker is None:
            keep.append(item)
            continue
        if not marker.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.slurm_min needs a version, e.g. '24.05'")
        need = tuple(int(x) for x in str(marker.args[0]).split(".")[:2])
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("slurm_release", "native") if callspec else "native"
        have = release_version(release)
        if have is None or have >= need:
            keep.append(item)
            continue
        why = (
            f"needs Slurm >= {marker.args[0]}, this is {have[0]}.{have[1]:02d} ({release}): "
            f"{marker.kwargs.get('reason', 'no reason given')}"
        )
        if in_ci():
            dropped.append(item)
            not_for_version.append(f"{item.nodeid}: {why}")
        else:
            item.add_marker(pytest.mark.skip(reason=why))
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session) -> None:
    # a pytest-xdist worker hands the deselected list to the controller (tests/conftest.py prints it)
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["not_for_version"] = json.dumps(session.config.stash.get(NOT_FOR_VERSION, []))
        out["said"] = json.dumps(session.config.stash.get(SAID, []))


@pytest.fixture(scope="session", autouse=True)
def slurm_release(request: pytest.FixtureRequest) -> Iterator[str]:
    """The Slurm release the integration tests run on now (``native``, ``24.11``, ``26.05``).

    Exported as ``SLURM_TOPO_SLURM`` (the launcher's default for ``--slurm``) while it is active; for a
    Debian-root release the root is built first if the cache has none (minutes, once, reported)."""
    release: str = getattr(request, "param", "native")
    if release != "native":
        _ensure_root(request, release)
    old = os.environ.get("SLURM_TOPO_SLURM")
    os.environ["SLURM_TOPO_SLURM"] = release
    try:
        yield release
    finally:
        if old is None:
            os.environ.pop("SLURM_TOPO_SLURM", None)
        else:
            os.environ["SLURM_TOPO_SLURM"] = old


def _ensure_root(request: pytest.FixtureRequest, release: str) -> None:
    missing = _missing_root_preconditions()
    if missing:
        _unavailable("; ".join(missing))
    t0 = time.monotonic()
    p = slurmctl.launcher("root", "--slurm", release, timeout=3600)
    if p.returncode != 0:
        _unavailable(f"no Slurm {release} root: {p.stderr.strip().splitlines()[-1:]}")
    say(
        request.config, f"\nSlurm {release} root: {p.stdout.strip()} ({time.monotonic() - t0:.1f}s to get it)"
    )
    if release in PYSLURM_RELEASES:  # the pyslurm backend's tests need it in the root (idempotent, cached)
        t0 = time.monotonic()
        b = subprocess.run(
            [str(slurmctl.REPO / "docker-slurm" / "build-pyslurm"), p.stdout.strip().splitlines()[-1]],
            env={**os.environ, "PYTHON": sys.executable},
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if b.returncode != 0:
            _unavailable(f"no pyslurm in the Slurm {release} root: {b.stderr.strip().splitlines()[-3:]}")
        say(request.config, f"{b.stderr.strip().splitlines()[-1]} ({time.monotonic() - t0:.1f}s)")


def _missing_root_preconditions() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("not root (the launcher needs unshare --mount, chroot, mknod and a munge-user munged)")
    for tool in ("unshare", "chroot", "mount"):
        if not shutil.which(tool):
            missing.append(f"{tool} not on PATH")
    return missing


def _unavailable(reason: str) -> None:
    unavailable(f"Slurm test cluster ({reason})")


def slurm_preconditions() -> None:
    """Skip (outside CI) or fail (in CI) when this host cannot run a test cluster (of the current release)."""
    missing = _missing_preconditions()
    if missing:
        _unavailable("; ".join(missing))


@pytest.fixture(scope="session")
def scratch_cluster(slurm_release: str) -> object:
    """``slurmctl.scratch_cluster``, after the session cluster's preconditions (without starting it).

    Its clusters run ``slurm_release`` (``$SLURM_TOPO_SLURM``); depending on it keys the fixtures built on
    this one (module clusters) by release, so none is reused across releases."""
    slurm_preconditions()
    return slurmctl.scratch_cluster


def _missing_preconditions() -> list[str]:
    if os.environ.get("SLURM_TOPO_SLURM", "native") != "native":
        return _missing_root_preconditions()  # the root brings its own Slurm (checked when it was built)
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


def _base(release: str, suffix: str = "") -> Path:
    """The session cluster's base: ``$SLURM_TOPO_CLUSTER_BASE`` or /tmp/slurm-topo-it-<pid> (+ -<release>)."""
    base = os.environ.get("SLURM_TOPO_CLUSTER_BASE") or f"/tmp/slurm-topo-it-{os.getpid()}"
    return Path(base + ("" if release == "native" else f"-{release}") + suffix)


def _named(var: str, release: str) -> str | None:
    """``$SLURM_TOPO_CLUSTER`` / ``$SLURM_TOPO_FILTERED_CLUSTER`` if it names a cluster of ``release``."""
    named = os.environ.get(var)
    if not named:
        return None
    try:
        state = json.loads((Path(named) / "cluster.json").read_text())
    except (OSError, ValueError):
        return named  # reported below as "no cluster.json there"
    return named if state.get("slurm", "native") == release else None


def _attached(var: str, named: str, start: str) -> slurmctl.Cluster:
    """The running cluster ``$var`` names (not ours to stop); a failure, never a skip, when it has no
    cluster.json or its slurmctld does not answer."""
    base = Path(named)
    if not (base / "cluster.json").exists():
        pytest.fail(f"{var}={named}: no cluster.json there (start it with {start})", pytrace=False)
    cluster = slurmctl.load_cluster(base, owned=False)
    if "UP" not in cluster.slurm.run(["scontrol", "ping"], check=False).stdout:
        pytest.fail(f"{var}={named}: slurmctld does not answer", pytrace=False)
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest, slurm_release: str) -> Iterator[slurmctl.Cluster]:
    """The session's real Slurm cluster (see the module docstring)."""
    named = _named("SLURM_TOPO_CLUSTER", slurm_release)
    if named:
        yield _attached("SLURM_TOPO_CLUSTER", named, "docker-slurm/cluster up")
        return

    slurm_preconditions()
    base = _base(slurm_release)
    t0 = time.monotonic()
    with slurmctl.owned_cluster(base) as cluster:
        say(
            request.config,
            f"\nslurm test cluster: Slurm {cluster.version[0]}.{cluster.version[1]:02d} "
            f"({cluster.release}), {len(cluster.nodes)} nodes, "
            f"up (all idle) in {cluster.up_seconds:.2f}s by the launcher, "
            f"{time.monotonic() - t0:.2f}s with the call; base {base}",
        )
        yield cluster


FILTER_FLEET = slurmctl.REPO / "docker-slurm" / "fleet-filter.yaml"


@pytest.fixture(scope="session")
def filtered_cluster(request: pytest.FixtureRequest, slurm_release: str) -> Iterator[slurmctl.Cluster]:
    """The session's cluster with the locality filter and the SPANK plugin (see the module docstring)."""
    named = _named("SLURM_TOPO_FILTERED_CLUSTER", slurm_release)
    if named:
        yield _attached("SLURM_TOPO_FILTERED_CLUSTER", named, "docker-slurm/cluster up --with-filter")
        return
    missing = _missing_preconditions()
    if slurm_release == "native" and not (
        shutil.which("gcc") and os.path.exists("/usr/include/slurm/spank.h")
    ):
        missing.append(
            "gcc or /usr/include/slurm/spank.h (libslurm-dev) missing: cannot build the SPANK plugin"
        )
    if missing:
        _unavailable("; ".join(missing))
    base = _base(slurm_release, "-filter")
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
