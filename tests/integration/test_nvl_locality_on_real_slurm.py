"""`--locality=nvl` through the submit filter and the SPANK plugin on a real Slurm: the job is kept in one
NVLink domain by the domains' `nvl_<domain>` features (Slurm's matching OR: every release, the only tool
before topology/block), where the network tree alone would split it; a job no domain can hold is refused at
submit with the reason; `nvl:auto` is refused (a domain has no looser level to relax to).

Scaled-down NVL shape: three domains of 3 nodes (an NVL72 rack has 18 trays); the InfiniBand leaves cut across
them (ib-1 = n[1-4], ib-2 = n[5-9]), so the tree and the domains disagree. Assertions read
`scontrol show job -d`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import slurmctl
from slurmctl import EnvRunner

from slurm_topo.reports.explain import explain_job

pytestmark = pytest.mark.slurm

HW = {"CPUs": 2, "RealMemory": 1000}
DOMAINS = {"rack-01": ("n1", "n2", "n3"), "rack-02": ("n4", "n5", "n6"), "rack-03": ("n7", "n8", "n9")}
FLEET = {
    "nvlink": {"topology": "tree"},  # the tree on every release: the features alone keep the domain
    "nodes": [
        {"name": "n[1-3]", "region": "r1", "zone": "z1", "network_group": "ib-1", "nvlink_domain": "rack-01"},
        {"name": "n4", "region": "r1", "zone": "z1", "network_group": "ib-1", "nvlink_domain": "rack-02"},
        {"name": "n[5-6]", "region": "r1", "zone": "z1", "network_group": "ib-2", "nvlink_domain": "rack-02"},
        {"name": "n[7-9]", "region": "r1", "zone": "z1", "network_group": "ib-2", "nvlink_domain": "rack-03"},
    ],
}
for entry in FLEET["nodes"]:  # type: ignore[attr-defined]
    entry["slurm"] = HW


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    with scratch_cluster("nvlloc", FLEET, "--with-filter", nodes_max=9) as c:
        yield c


@pytest.fixture
def slurm(cluster: slurmctl.Cluster) -> Iterator[slurmctl.Slurm]:
    s = cluster.slurm
    s.quiesce()
    yield s
    s.quiesce()


def domains_of(nodes: tuple[str, ...]) -> set[str]:
    return {d for d, members in DOMAINS.items() for n in nodes if n in members}


def test_nvl_keeps_the_job_in_one_domain_where_the_tree_would_split_it(slurm: slurmctl.Slurm) -> None:
    filler = slurm.submit("--locality=any", "--exclusive", "-w", "n1", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    # the tree alone: ib-1 still has n2-n4 free, and it takes them (two domains)
    tree = slurm.submit("--locality=any", "--exclusive", "-N3", "--wrap", "sleep 300")
    slurm.wait_state(tree, "RUNNING")
    assert len(domains_of(slurm.allocation_of(tree).nodes)) == 2, slurm.allocation_of(tree).nodes
    slurm.cancel(tree)
    slurm.wait_state(tree, "CANCELLED")
    # --locality=nvl: the domains that can ever hold 3 nodes, smallest first; Slurm takes the first
    # alternative with room now (rack-01 has only two free nodes)
    job = slurm.submit("--locality=nvl", "--exclusive", "-N3", "--wrap", "sleep 300")
    info = slurm.wait_state(job, "RUNNING")
    assert info["Features"] == "[nvl_rack-01|nvl_rack-02|nvl_rack-03]", info
    nodes = slurm.allocation_of(job).nodes
    assert len(domains_of(nodes)) == 1 and "n1" not in nodes, nodes
    (domain,) = domains_of(nodes)
    shown = explain_job(job, EnvRunner(dict(slurm.env)))
    assert "landed:   same zone z1, " in shown and f"; NVLink domain {domain} (3 nodes)" in shown, shown
    assert "BROKEN" not in shown, shown


def test_a_job_no_domain_can_hold_is_refused_with_the_reason(slurm: slurmctl.Slurm) -> None:
    err = slurm.submit_error("--locality=nvl:fail", "-N4", "--wrap", "true")
    assert "no nvl can ever hold 4 nodes; the largest is rack-01 with 3 nodes" in err, err


def test_nvl_auto_is_refused_at_the_client(slurm: slurmctl.Slurm) -> None:
    err = slurm.submit_error("--locality=nvl:auto", "-N2", "--wrap", "true")
    assert "nvl" in err and "locality" in err, err


def test_default_prefer_tries_one_domain_first(slurm: slurmctl.Slurm) -> None:
    """The default (prefer) on a fleet with NVLink domains: its --prefer (the record: ``prefer nvl+…``)
    starts with the domains that can hold the job, so with n1 busy a 3-node job lands in one domain (rack-02
    or rack-03) where the tree alone takes n2-n4 across two domains (the test above). Slurm's own allocation
    is asserted."""
    filler = slurm.submit("--locality=any", "--exclusive", "-w", "n1", "--wrap", "sleep 300")
    slurm.wait_state(filler, "RUNNING")
    job = slurm.submit("--exclusive", "-N3", "--wrap", "sleep 300")  # no --locality: the cluster's prefer
    info = slurm.wait_state(job, "RUNNING")
    assert "prefer nvl+" in info["AdminComment"], info
    nodes = slurm.allocation_of(job).nodes
    assert len(domains_of(nodes)) == 1 and "n1" not in nodes, nodes
