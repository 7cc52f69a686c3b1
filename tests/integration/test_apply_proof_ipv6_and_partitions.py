"""apply's proof (a throwaway slurmctld, slurm_topo/apply/prove.py) on IPv6 node addresses and on every
``error:`` line, and partition names Slurm takes but slurm-topo's labels do not — on a real Slurm of each
release (``--slurm-versions native,24.11,26.05``), each proof by the release's own slurmctld.

* 40 nodes with ``NodeAddr=fd00::N`` under ``CommunicationParameters=EnableIPv6``: proven in well under a
  second (the proof's namespace has an IPv6 address, so getaddrinfo(AI_ADDRCONFIG) resolves them; without
  one Slurm retried each for about 10 s and the proof timed out);
* the same addresses without ``EnableIPv6`` — the running controller cannot resolve them either — refused,
  naming getaddrinfo's ``error:`` line (it used to load after the retries, and pass);
* host names that resolve only over IPv6 (``DisableIPv4``): the private /etc/hosts names every node on both
  families (native only: a release root's chroot keeps its own /etc/hosts);
* partitions ``gpu+big``, ``a"b``, ``débug`` (in slurm.conf): ``generate --scontrol`` and
  ``apply --scontrol`` keep working, and the submit filter gives a ``--locality=zone`` job in ``a"b`` the
  zones of that partition's nodes; ``*`` is left out with one warning line.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml
from slurmctl import EnvRunner

from slurm_topo.apply import ApplyOptions, run_apply
from slurm_topo.apply.prove import Proof, ThrowawayController
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import RenderOptions, render_all

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE
RECHECK = 10  # job_submit/slurm_topo_filter/vocab.lua RECHECK_SECONDS: the filter rereads its data file
PARTITIONS = {"gpu+big": "q[1-2]", 'a"b': "q[3-4]", "débug": "q[1-4]"}
"""Partition names Slurm takes (22.05, 24.11, 26.05: ``scontrol create``) and slurm-topo's labels do not."""


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Four nodes in two zones with the submit filter: q[1-2] in z1, q[3-4] in z2."""
    with scratch_cluster(
        "proof6",
        {
            "nodes": [
                {"name": "q[1-2]", "region": "r1", "zone": "z1", "network_group": "g1", "slurm": HW},
                {"name": "q[3-4]", "region": "r1", "zone": "z2", "network_group": "g2", "slurm": HW},
            ]
        },
        "--with-filter",
    ) as c:
        yield c


def prover(c: slurmctl.Cluster) -> ThrowawayController:
    """The cluster's own slurmctld (inside the release's root for 24.11/26.05) as the throwaway."""
    wrapper = c.base / "clients" / "slurmctld"
    return ThrowawayController(slurmctld=str(wrapper) if wrapper.exists() else None, expect=c.version)


def conf_dir(c: slurmctl.Cluster, work: Path, extra: str = "") -> Path:
    """A copy of the cluster's configuration directory with ``extra`` lines in slurm.conf (the live one is
    never touched: the proof reads only its own copy of what it is given)."""
    etc = work / "etc"
    shutil.copytree(c.etc, etc)
    if extra:
        with (etc / "slurm.conf").open("a") as f:
            f.write(extra + "\n")
    return etc


def with_nodes(c: slurmctl.Cluster, lines: list[str], switch: str) -> dict[str, bytes | None]:
    """The cluster's node lines and topology.conf plus ``lines`` on a leaf of their own."""
    nodes = (c.etc / "slurm-topo-nodes.conf").read_text() + "".join(f"{ln}\n" for ln in lines)
    topo = (c.etc / "topology.conf").read_text() + f"SwitchName=extra Nodes={switch}\n"
    return {"slurm-topo-nodes.conf": nodes.encode(), "topology.conf": topo.encode()}


def prove(c: slurmctl.Cluster, etc: Path, staged: dict[str, bytes | None], limit: float) -> Proof:
    """The proof of ``staged``. An accepted verdict also says no address was retried: a getaddrinfo retry
    line refuses the set unless Slurm's own line concludes it (no wall clock is asserted)."""
    return prover(c).prove(etc, staged, limit)


V6 = [f"NodeName=v{i} NodeAddr=fd00::{i} CPUs=1" for i in range(1, 41)]


@pytest.mark.netns  # the proof's namespace must get its addresses (CAP_NET_ADMIN): not in the CI image
def test_forty_ipv6_addressed_nodes_are_proven_in_well_under_a_second_each(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    etc = conf_dir(cluster, tmp_path, "CommunicationParameters=EnableIPv6")
    proof = prove(cluster, etc, with_nodes(cluster, V6, "v[1-40]"), 20)
    assert proof.verdict == "accepted", (proof.error, proof.log)
    assert not any("attempt number" in line for line in proof.log), proof.log


@pytest.mark.netns  # the proof's namespace must get its addresses (CAP_NET_ADMIN): not in the CI image
def test_addresses_the_controller_cannot_resolve_are_refused_on_slurms_error_line(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    """Without ``EnableIPv6`` Slurm resolves IPv4 only: slurmctld logs getaddrinfo's ``error:`` lines and
    loads the set without the nodes' addresses. That is a refusal, named by Slurm's line, after one retry
    cycle (about 10 s) — not a pass, not a timeout."""
    etc = conf_dir(cluster, tmp_path)
    proof = prove(cluster, etc, with_nodes(cluster, V6[:2], "v[1-2]"), 40)
    assert proof.verdict == "rejected", proof
    assert proof.error.startswith("error: ") and "getaddrinfo" in proof.error, proof.error
    assert "Address family for hostname not supported" in proof.error, proof.error


@pytest.mark.netns  # the proof's namespace must get its addresses (CAP_NET_ADMIN): not in the CI image
def test_apply_refuses_an_address_slurm_cannot_resolve_and_changes_nothing(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    """Through ``run_apply``: a node moved to ``NodeAddr=fd00::9`` without ``EnableIPv6`` is refused (exit
    11) on the getaddrinfo line; the live files are byte-identical and slurmctld answers."""
    inv = yaml.safe_load((cluster.etc / "inventory.yaml").read_text())
    for node in inv["nodes"]:
        if node["name"] == "q[1-2]":
            node["network_group"] = "g9"  # a real change besides, so that apply means to reconfigure
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    new = render_all(
        merge([load_inventory_file(path)]),
        cluster.version,
        None,
        RenderOptions(True, str(cluster.base / "dev" / "nvidia")),
    )
    new["slurm-topo-nodes.conf"] = new["slurm-topo-nodes.conf"].replace(
        "NodeName=q1 NodeHostname=localhost NodeAddr=127.0.0.1",
        "NodeName=q1 NodeHostname=localhost NodeAddr=fd00::9",
    )
    assert "NodeAddr=fd00::9" in new["slurm-topo-nodes.conf"]
    live = {p.name: p.read_bytes() for p in cluster.etc.iterdir() if p.is_file()}
    options = ApplyOptions(
        slurm_dir=cluster.etc,
        state_dir=tmp_path / "state",
        slurm_version=cluster.version,
        min_interval=0,
        detailed_exitcodes=True,
        prover=prover(cluster),
    )
    res = run_apply(options, new, EnvRunner(dict(cluster.env)))
    assert (res.exit_code, res.status) == (11, "refused"), res
    assert "Slurm's own parser rejects the new set" in res.summary and "getaddrinfo" in res.summary, (
        res.summary
    )
    assert {p.name: p.read_bytes() for p in cluster.etc.iterdir() if p.is_file()} == live
    assert "is UP" in cluster.slurm.out("scontrol", "ping")


@pytest.mark.netns  # the proof's namespace must get its addresses (CAP_NET_ADMIN): not in the CI image
@pytest.mark.native_only(
    reason="a release root's chroot reads its own /etc/hosts, not the proof's private one"
)
def test_host_names_that_resolve_only_over_ipv6_are_proven(cluster: slurmctl.Cluster, tmp_path: Path) -> None:
    """``DisableIPv4``: every name must resolve to IPv6. The private /etc/hosts names each node on the
    namespace's IPv4 and IPv6 address, so it does; the nodes' own lines use names only."""
    etc = conf_dir(cluster, tmp_path, "CommunicationParameters=EnableIPv6,DisableIPv4")
    lines = [f"NodeName=h{i} NodeAddr=host-{i}.example CPUs=1" for i in range(1, 21)]
    staged = {
        "slurm-topo-nodes.conf": "".join(f"{ln}\n" for ln in lines).encode(),
        "topology.conf": b"SwitchName=s Nodes=h[1-20]\n",
        "gres.conf": None,
    }
    proof = prove(cluster, etc, staged, 20)
    assert proof.verdict == "accepted", (proof.error, proof.log)
    assert not any("attempt number" in line for line in proof.log), proof.log


# --------------------------------------------------------------------------------------------------
# partition names


def cli(c: slurmctl.Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*slurmctl.slurm_topo_cli(), *args], env=dict(c.env), capture_output=True, text=True, timeout=180
    )


@pytest.fixture
def odd_partitions(cluster: slurmctl.Cluster) -> Iterator[dict[str, str]]:
    """The partitions in the cluster's slurm.conf (``scontrol create`` takes the same names, but a
    reconfigure — apply's — drops partitions made that way), then a reconfigure; put back afterwards."""
    conf = cluster.etc / "slurm.conf"
    before = conf.read_bytes()
    made = {**PARTITIONS, "*": "q1"}
    lines = "".join(f"PartitionName={name} Nodes={nodes} State=UP\n" for name, nodes in made.items())
    conf.write_bytes(before + lines.encode())
    cluster.slurm.reconfigure(cluster.version)
    try:
        yield made
    finally:
        cluster.slurm.quiesce()
        conf.write_bytes(before)
        cluster.slurm.reconfigure(cluster.version)


def decided_on_the_new_data(slurm: slurmctl.Slurm, partition: str) -> str:
    """A held --locality=zone job in ``partition``, once the filter decides it on the data file apply wrote:
    the filter rereads a changed file within RECHECK seconds, and until then the old data does not know the
    partition (it rejects the job, or counts all nodes with a note in the record). Each try that meets the
    old data is cancelled; the job the new data decided is returned."""
    deadline = time.monotonic() + 4 * RECHECK
    argv = ["timeout", "20", "sbatch", "--parsable", "-o", "/dev/null", "-p", partition, "-N2", "-H"]
    while True:
        p = slurm.run([*argv, "--locality=zone", "--wrap", "true"], timeout=25, check=False)
        if p.returncode == 0:
            job = p.stdout.strip().split(";")[0]
            if "not in the data" not in slurm.out("scontrol", "show", "job", "-o", job):
                return job
            slurm.cancel(job)
        else:
            assert "not in slurm-topo's data" in p.stderr, p.stderr
        assert time.monotonic() < deadline, f"the filter never decided on the new data: {p.stderr}"
        time.sleep(0.5)


def test_odd_partition_names_keep_generate_and_apply_working_and_the_filter_finds_them(
    cluster: slurmctl.Cluster, odd_partitions: dict[str, str], tmp_path: Path
) -> None:
    listed = cluster.slurm.out("scontrol", "show", "partition", "-o")
    assert all(f"PartitionName={name} " in listed for name in odd_partitions), listed
    inventory = str(cluster.etc / "inventory.yaml")
    version = f"{cluster.version[0]}.{cluster.version[1]:02d}"

    out = tmp_path / "out"
    p = cli(cluster, "generate", "-i", inventory, "-o", str(out), "--scontrol", "--slurm-version", version)
    assert p.returncode == 0, p.stderr
    warnings = [ln for ln in p.stderr.splitlines() if ln.startswith("warning: partition ")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: partition '*' left out"), p.stderr
    data = (out / "slurm_topo_data.lua").read_bytes()
    assert data.isascii() and b'["gpu+big"]={' in data and b'["a\\034b"]={' in data, data[:400]
    assert b'["d\\195\\169bug"]={' in data

    args = ["apply", "-i", inventory, "--slurm-dir", str(cluster.etc), "--state-dir", str(tmp_path / "state")]
    args += ["--scontrol", "--min-interval", "0", "--assume-minor-equals-index"]
    args += ["--gpu-device-prefix", str(cluster.base / "dev" / "nvidia")]
    p = cli(cluster, *args)
    assert p.returncode == 0, p.stderr + p.stdout
    assert "slurm-topo apply: applied" in p.stderr + p.stdout, p.stderr + p.stdout
    assert b'["a\\034b"]={' in (cluster.etc / "slurm_topo_data.lua").read_bytes()
    again = cli(cluster, *args)  # the next cron run: nothing to do, still no error
    assert again.returncode == 0 and "unchanged" in again.stderr + again.stdout, again.stderr

    slurm = cluster.slurm
    job = decided_on_the_new_data(slurm, 'a"b')
    info = slurm.job(job)
    assert info["Partition"] == 'a"b', info
    assert info["Features"] == "[zone_z2]", info  # the zones of a"b's nodes (q[3-4]) only
    record = slurm.out("scontrol", "show", "job", "-o", job)
    assert "not in the data" not in record, record
    job = slurm.submit("-p", "débug", "-N2", "-H", "--locality=zone", "--wrap", "true")
    assert slurm.job(job)["Features"] in ("[zone_z1|zone_z2]", "[zone_z2|zone_z1]"), slurm.job(job)
