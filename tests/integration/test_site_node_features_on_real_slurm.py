"""Issue 42 on a real Slurm: a site's own node definition survives ``generate --scontrol`` and the README's
wiring (its ``NodeName=`` lines removed, ``Include slurm-topo-nodes.conf``): ``sbatch -C ib`` is accepted and
runs on the ``ib`` node before and after, and Slurm's view of every node's configuration is the same."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml

pytestmark = pytest.mark.slurm

HARDWARE = (
    "NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=4 Boards=1 SocketsPerBoard=1 "
    "CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000"
)
SITE = {  # the site's own lines, before slurm-topo
    "s1": "Features=ib Weight=7 TmpDisk=100 CoreSpecCount=1 MemSpecLimit=500",
    "s2": "Features=fast CpuSpecList=0,1",
    "s3": "",
    "s4": "State=CLOUD",
}
PLACES = {"nodes": [{"name": "s[1-4]", "region": "r1", "zone": "r1-a", "network_group": "rack-1"}]}
"""What the admin's inventory says of them: where they are, nothing else (the rest comes from Slurm)."""
LOCATION = ("region_r1", "zone_r1-a", "ng_r1-a.rack-1")
CONFIG_KEYS = (
    "NodeAddr", "Port", "CPUTot", "Boards", "Sockets", "CoresPerSocket", "ThreadsPerCore", "RealMemory",
    "TmpDisk", "Weight", "CoreSpecCount", "CPUSpecList", "MemSpecLimit", "CPUEfctv", "CfgTRES",
)  # fmt: skip
"""``scontrol show node`` fields that follow from a node's configuration."""


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster(
        "sitenodes",
        {"nodes": [{"name": "s[1-4]", **PLACES["nodes"][0], "slurm": dict(slurmctl.SMALL_NODE)}]},
    ) as c:
        yield c


def nodes(slurm: slurmctl.Slurm) -> dict[str, dict[str, str]]:
    """Slurm's own view of every node (``scontrol show node -o``, read by the project's reader)."""
    from slurm_topo.access.text import parse_scontrol_nodes

    return {r["NodeName"]: r for r in parse_scontrol_nodes(slurm.out("scontrol", "show", "node", "-o"))}


def features(record: dict[str, str]) -> list[str]:
    text = record.get("AvailableFeatures", "(null)")
    return [] if text == "(null)" else text.split(",")


def generate(c: slurmctl.Cluster, inventory: Path, out: Path) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [
            *slurmctl.slurm_topo_cli(), "generate", "--inventory", str(inventory), "--scontrol",
            "--out", str(out), "--slurm-version", "{}.{:02d}".format(*c.version),
        ],
        env=dict(c.env), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p


def run_ib_job(slurm: slurmctl.Slurm) -> None:
    """``sbatch -C ib`` is accepted and runs on s1, the one ib node (Slurm's own record of the job)."""
    job = slurm.submit("-N1", "-C", "ib", "--time=5", "--wrap", "sleep 60")
    slurm.wait_state(job, "RUNNING", timeout=30)
    detail = slurm.out("scontrol", "show", "job", "-d", job)
    assert re.search(r"(?m)^\s*Features=ib\s", detail), detail
    assert slurm.allocation_of(job).nodes == ("s1",)
    slurm.cancel(job)
    slurm.quiesce()


def test_a_sites_node_features_and_attributes_survive_generate_scontrol(cluster: slurmctl.Cluster) -> None:
    slurm = cluster.slurm
    generated = (cluster.etc / "slurm-topo-nodes.conf").read_text()
    ports = dict(re.findall(r"(?m)^NodeName=(\S+) .*?Port=(\d+)", generated))
    site = "".join(
        f"NodeName={n} {HARDWARE.format(port=ports[n])} {x}".rstrip() + "\n" for n, x in SITE.items()
    )
    slurmctl.define_nodes(cluster, site, restart=True)  # the site's Slurm, as it ran before slurm-topo
    slurm.quiesce()
    before = nodes(slurm)
    assert features(before["s1"]) == ["ib"] and "CLOUD" in before["s4"]["State"]
    assert "Invalid feature specification" in slurm.submit_error("-N1", "-C", "nosuch", "--wrap", "true")
    run_ib_job(slurm)

    work = cluster.base.parent
    inventory = work / "places.yaml"
    inventory.write_text(yaml.safe_dump(PLACES, sort_keys=False))
    out = work / "generated"
    generate(cluster, inventory, out)
    for name in ("topology.conf", "slurm-topo-nodes.conf"):  # README: beside slurm.conf
        shutil.copyfile(out / name, cluster.etc / name)
    slurmctl.define_nodes(cluster, slurmctl.NODES_INCLUDE)  # the site's lines out, the include in
    slurm.quiesce()

    for step in ("reconfigured", "restarted"):
        after = nodes(slurm)
        for name, was in before.items():
            now = after[name]
            assert features(now) == [*features(was), *LOCATION], (step, name)
            assert {k: now.get(k) for k in CONFIG_KEYS} == {k: was.get(k) for k in CONFIG_KEYS}, (step, name)
        assert "CLOUD" in after["s4"]["State"], step
        run_ib_job(slurm)
        if (
            step == "reconfigured"
        ):  # the generated file alone, read afresh (22.05 keeps MemSpecLimit over one)
            slurmctl.restart_ctld(cluster.base)
            slurm.reconfigure(cluster.version)
            slurm.quiesce()

    again = work / "again"
    generate(cluster, inventory, again)  # what `apply --scontrol` does every run: nothing changes
    assert (again / "slurm-topo-nodes.conf").read_bytes() == (out / "slurm-topo-nodes.conf").read_bytes()
