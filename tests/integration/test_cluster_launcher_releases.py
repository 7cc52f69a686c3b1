"""docker-slurm/cluster on each selected Slurm release (``--slurm-versions``): the daemons and the clients are
that release's, a reconfigure (a re-exec from 23.11) keeps the nodes' GPUs and the launcher's hold on every
process, and `down` leaves no process, no mount and no file of the cluster behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

FLEET = {
    "nodes": [
        {
            "name": "v[1-2]",
            "region": "r1",
            "zone": "r1-a",
            "network_group": "g1",
            "gpus": 2,
            "gpu_type": "t4",
            "slurm": {"CPUs": 4, "RealMemory": 8000},
        },
        {"name": "v3", "region": "r1", "zone": "r1-b", "network_group": "g2", "slurm": {"CPUs": 4}},
    ]
}


def mounts_naming(*paths: Path) -> list[str]:
    """Mount-table lines, of any process's mount namespace, whose mount point is under one of ``paths``."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/mountinfo") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            point = line.split()[4]
            if any(point == str(p) or point.startswith(f"{p}/") for p in paths):
                found.append(f"pid {d}: {line}")
    return found


def written_since_built(rootfs: Path) -> list[str]:
    """Paths of the cached root changed after its build (root.json is written last); /proc, /sys, /dev and
    /tmp are mount points while a cluster runs, never written."""
    built = (rootfs.parent / "root.json").stat().st_mtime
    changed = []
    for dirpath, dirnames, filenames in os.walk(rootfs):
        if Path(dirpath) == rootfs:
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "dev", "tmp")]
        for name in (*dirnames, *filenames):
            path = os.path.join(dirpath, name)
            if os.lstat(path).st_mtime > built:
                changed.append(path)
    return changed


def daemon_names(base: Path) -> list[str]:
    """basename(argv[0]) of the cluster's processes."""
    names = []
    for pid in slurmctl.cluster_pids(base):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                names.append(os.path.basename(f.read().split(b"\0")[0].decode()))
        except OSError:
            pass
    return names


def test_the_release_runs_survives_reconfigure_and_down_leaves_nothing(slurm_release: str) -> None:
    work = Path(f"/tmp/slurm-topo-it-rel-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    (work / "fleet.yaml").write_text(yaml.safe_dump(FLEET))
    base = work / "cluster"
    rootfs: Path | None = None
    try:
        cluster = slurmctl.start_cluster(base, "--inventory", str(work / "fleet.yaml"), nodes_max=4)
        slurm = cluster.slurm
        assert cluster.release == slurm_release
        # the clients are the release's own: their version is the daemons' (slurmctld -V, cluster.json)
        client = slurm.out("scontrol", "--version").split()[-1]
        assert tuple(int(x) for x in client.split(".")[:2]) == cluster.version
        if slurm_release != "native":
            assert client.startswith(slurm_release + "."), client
            assert cluster.client_prefix, "a root release records how to run its clients"
            rootfs = Path(yaml.safe_load((base / "cluster.json").read_text())["root"])
            # a cached root is reused, not rebuilt: its record (root.json, written last by a build) and the
            # tree are the same files afterwards (no wall-clock bound: the machine's speed is not the test)
            record = rootfs.parent / "root.json"
            before = (record.read_bytes(), record.stat().st_mtime_ns, rootfs.stat().st_ino)
            again = slurmctl.launcher("root", "--slurm", slurm_release, timeout=600)
            assert again.returncode == 0, again.stderr
            assert again.stdout.strip() == str(rootfs)
            assert (record.read_bytes(), record.stat().st_mtime_ns, rootfs.stat().st_ino) == before
            # jobs run inside the root, where the checkout's slurm-topo / gpulayer-srun are wrappers over it
            for cmd, said in (
                ("slurm-topo --version", "slurm-topo, version"),
                ("gpulayer-srun --help", "usage:"),
            ):
                step = slurm.run(["timeout", "30", "srun", "-w", "v3", *cmd.split()], timeout=35)
                assert said in step.stdout, step
            # the shared root is read-only for daemons and jobs; a working directory the root lacks is /tmp
            step = slurm.run(
                ["timeout", "30", "srun", "-w", "v3", "touch", "/written"], timeout=35, check=False
            )
            assert step.returncode != 0 and "Read-only file system" in step.stderr, step
            step = slurm.run(["timeout", "30", "srun", "-w", "v3", "pwd"], timeout=35)  # from this cwd
            inside = os.getcwd() if Path("/tmp") in Path(os.getcwd()).parents else "/tmp"
            assert step.stdout.strip() == inside, step
        assert slurm.node_states() == {"v1": "idle", "v2": "idle", "v3": "idle"}

        job = slurm.submit("-w", "v1", "--gres=gpu:t4:2", "--wrap", "sleep 300")
        slurm.wait_state(job, "RUNNING")
        assert slurm.allocation_of(job).gpus == {"v1": (0, 1)}
        slurm.cancel(job)
        slurm.quiesce()

        # a reconfigure re-executes the daemons from 23.11 on: they must come back under the same names
        # (basename(argv[0]) decides which daemon Slurm thinks it is: pitfall 2) and still carry the tag
        slurm.reconfigure(cluster.version, timeout=60)
        names = daemon_names(base)
        assert "slurmctld" in names and names.count("slurmd") == 3, names
        gres = slurm.out("sinfo", "-h", "-N", "-o", "%N %G")
        assert re.search(r"^v2 gpu:t4:2\b", gres, re.M), gres
        job = slurm.submit("-w", "v2", "--gres=gpu:t4:1", "--wrap", "sleep 300")
        slurm.wait_state(job, "RUNNING")
        assert slurmctl.cluster_pids(base)
    finally:
        slurmctl.stop_cluster(base)
        left_mounts = mounts_naming(*(p for p in (base, rootfs) if p is not None))
        os.remove(work / "fleet.yaml")
        work.rmdir()
    assert slurmctl.cluster_pids(base) == []
    assert not base.exists()
    assert left_mounts == []
    if rootfs is not None:
        assert written_since_built(rootfs) == [], "the cached root is only read"


def daemon_pids(base: Path) -> dict[int, str]:
    """pid -> basename(argv[0]) of the cluster's slurmctld and slurmd processes."""
    out = {}
    for pid in slurmctl.cluster_pids(base):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name = os.path.basename(f.read().split(b"\0")[0].decode())
        except OSError:
            continue
        if name in ("slurmctld", "slurmd"):
            out[pid] = name
    return out


@pytest.mark.slurm_min("23.11", reason="scontrol reconfigure re-executes the daemons from Slurm 23.11 on")
def test_reconfigure_re_executes_the_daemons_in_place(scratch_cluster) -> None:  # type: ignore[no-untyped-def]
    """Each daemon logs that it started once more, keeps its pid (exec in place: the launcher's tag and `down`
    still find it) and its name; the nodes come back with their GPUs."""
    with scratch_cluster("reexec", {"nodes": FLEET["nodes"][:1]}) as cluster:
        slurm, base = cluster.slurm, cluster.base
        logs = [base / "log" / "slurmctld.log", *(base / "log" / f"slurmd-{n}.log" for n in cluster.nodes)]
        started = {log: log.read_text().count(" started") for log in logs}
        before = daemon_pids(base)
        slurm.reconfigure(cluster.version, timeout=60)
        end = time.monotonic() + 30
        while time.monotonic() < end and any(
            log.read_text().count(" started") <= started[log] for log in logs
        ):
            time.sleep(0.2)
        assert all(log.read_text().count(" started") > started[log] for log in logs), "no re-exec logged"
        assert daemon_pids(base) == before
        slurm.quiesce()
        assert re.search(r"^v1 gpu:t4:2\b", slurm.out("sinfo", "-h", "-N", "-o", "%N %G"), re.M)


FAKE_DEBOOTSTRAP = r"""#!/bin/sh
# a stand-in for debootstrap: a root that only has /bin/sh (the host's dash and its libraries) and a
# slurmctld-wlm that prints a version; counts its calls, and takes a while, like the real one
set -e
echo "$*" >> "$FAKE_CALLS"
root=$4
mkdir -p "$root/bin" "$root/usr/sbin" "$root/usr/bin" "$root/etc/munge" "$root/lib/x86_64-linux-gnu" \
  "$root/lib64" "$root/usr/local/bin"
cp /bin/dash "$root/bin/sh"
cp /lib/x86_64-linux-gnu/libc.so.6 "$root/lib/x86_64-linux-gnu/"
cp /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
for d in slurmctld slurmd slurmstepd; do
  printf '#!/bin/sh\necho "slurm-wlm %s"\n' "$FAKE_VERSION" > "$root/usr/sbin/$d-wlm"
  chmod 755 "$root/usr/sbin/$d-wlm"
done
touch "$root/usr/bin/setpriv" "$root/usr/bin/gcc" "$root/usr/sbin/munged"
sleep 3
"""


def test_a_root_is_built_once_atomically_and_shared_by_concurrent_builders(tmp_path: Path) -> None:
    """Two `cluster root` at once on an empty cache: one build (the other waits on the lock and reuses it),
    renamed into place complete; a half-built directory without root.json is rebuilt; a suite that ships
    another release is refused in one line, leaving no root. (A stand-in debootstrap: no network needed.)"""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (fake / "debootstrap").chmod(0o755)
    cache = tmp_path / "cache"
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{fake}:{os.environ['PATH']}",
        "FAKE_CALLS": str(calls),
        "FAKE_VERSION": "24.11.5",
    }

    def root(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                str(slurmctl.LAUNCHER),
                "root",
                "--slurm",
                "24.11",
                "--cache",
                str(cache),
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first, second = root(), root()
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert outs[0][0] == outs[1][0] == f"{cache / 'slurm-24.11' / 'root'}\n"
    assert len(calls.read_text().splitlines()) == 1, "built once"
    assert sorted(p.name for p in cache.iterdir()) == [".slurm-24.11.lock", "slurm-24.11"]
    info = yaml.safe_load((cache / "slurm-24.11" / "root.json").read_text())
    assert info["version"] == "24.11.5"
    assert (cache / "slurm-24.11" / "root" / "opt" / "slurm-topo" / "sbin" / "slurmd").stat().st_nlink == 2

    (cache / "slurm-24.11" / "root.json").unlink()  # as if the build had died before its last step
    p = root()
    assert p.communicate(timeout=120)[0].strip() == str(cache / "slurm-24.11" / "root")
    assert len(calls.read_text().splitlines()) == 2 and (cache / "slurm-24.11" / "root.json").exists()

    shutil.rmtree(cache / "slurm-24.11")
    env["FAKE_VERSION"] = "25.05.1"  # the suite moved on
    p = root()
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("cluster: error: Debian trixie now ships Slurm 25.05.1, not 24.11")
    )
    assert sorted(x.name for x in cache.iterdir()) == [".slurm-24.11.lock"]


def test_down_stops_a_cluster_even_when_the_checkout_does_not_import(tmp_path: Path) -> None:
    """A half-edited checkout whose slurm_topo raises on import (first on the launcher's sys.path, as an
    editable install of it would be): `up` refuses in one line, `pids` and `down` still find and stop a
    running cluster (they need nothing of the package)."""
    broken = tmp_path / "repo"
    (broken / "docker-slurm").mkdir(parents=True)
    (broken / "slurm_topo").mkdir()
    shutil.copy(slurmctl.LAUNCHER, broken / "docker-slurm" / "cluster")
    (broken / "slurm_topo" / "__init__.py").write_text("raise ValueError('a field has a mutable default')\n")
    (broken / ".venv").symlink_to(slurmctl.REPO / ".venv")
    launcher = [sys.executable, str(broken / "docker-slurm" / "cluster")]
    # the launcher imports the slurm_topo its Python finds (an installed one before the checkout's)
    env = {**os.environ, "PYTHONPATH": str(broken)}
    work = Path(f"/tmp/slurm-topo-it-broken-{os.getpid()}")
    work.mkdir(mode=0o755, exist_ok=True)
    (work / "fleet.yaml").write_text(yaml.safe_dump({"nodes": FLEET["nodes"][1:]}))
    base = work / "cluster"
    try:
        refused = subprocess.run(
            [*launcher, "up", "--base", str(work / "other")],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert refused.returncode == 1
        assert refused.stderr.strip().splitlines() == [
            "cluster: error: this checkout's slurm_topo does not import: "
            "ValueError: a field has a mutable default"
        ]
        assert not (work / "other").exists()
        cluster = slurmctl.start_cluster(base, "--inventory", str(work / "fleet.yaml"), nodes_max=2)
        assert cluster.slurm.node_states() == {"v3": "idle"}
        pids = subprocess.run(
            [*launcher, "pids", "--base", str(base)], capture_output=True, text=True, timeout=30, env=env
        )
        assert sorted(int(x) for x in pids.stdout.split()) == slurmctl.cluster_pids(base) != []
        down = subprocess.run(
            [*launcher, "down", "--base", str(base)], capture_output=True, text=True, timeout=60, env=env
        )
        assert down.returncode == 0, down.stderr
        assert slurmctl.cluster_pids(base) == [] and not base.exists()
    finally:
        slurmctl.stop_cluster(base)
        shutil.rmtree(work, ignore_errors=True)
