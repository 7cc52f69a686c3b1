"""`slurm-topo apply` (slurm_topo/apply/) on a real Slurm: a moved node reaches slurmctld and the next job;
a second run reconfigures nothing; refusals leave the live files byte-identical."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurmctl
import yaml
from slurmctl import EnvRunner

from slurm_topo.apply import ApplyOptions, run_apply
from slurm_topo.apply.prove import ThrowawayController
from slurm_topo.core.errors import InputError
from slurm_topo.inventory import load_inventory_file, merge
from slurm_topo.render import RenderOptions, render_all

pytestmark = pytest.mark.slurm

HW = slurmctl.SMALL_NODE
LIVE = ("topology.conf", "slurm-topo-nodes.conf", "gres.conf", "slurm_topo_data.lua")


@pytest.fixture(scope="module")
def cluster(scratch_cluster) -> Iterator[slurmctl.Cluster]:  # type: ignore[no-untyped-def]
    """Four nodes, zone z1: a[1-2] on rack-1, a[3-4] on rack-2."""
    with scratch_cluster(
        "apply",
        {
            "nodes": [
                {"name": "a[1-2]", "region": "r1", "zone": "z1", "network_group": "rack-1", "slurm": HW},
                {"name": "a[3-4]", "region": "r1", "zone": "z1", "network_group": "rack-2", "slurm": HW},
            ]
        },
    ) as c:
        yield c


def rendered_for(c: slurmctl.Cluster, inventory: dict, work: Path) -> dict[str, str]:
    """What `generate` would write for ``inventory`` with the launcher's options (so an unchanged inventory
    renders byte-identical files)."""
    path = work / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return render_all(
        merge([load_inventory_file(path)]),
        c.version,
        None,
        RenderOptions(True, str(c.base / "dev" / "nvidia")),
    )


def options(c: slurmctl.Cluster, **kw: object) -> ApplyOptions:
    """The cluster's release given, and its own slurmctld (inside the release's root for 24.11/26.05) as
    the throwaway controller that proves each set."""
    wrapper = c.base / "clients" / "slurmctld"
    kw.setdefault("min_interval", 0)
    kw.setdefault(
        "prover",
        ThrowawayController(slurmctld=str(wrapper) if wrapper.exists() else None, expect=c.version),
    )
    return ApplyOptions(  # type: ignore[arg-type]
        slurm_dir=c.etc, state_dir=c.base / "apply-state", slurm_version=c.version, **kw
    )


def live_bytes(c: slurmctl.Cluster) -> dict[str, bytes | None]:
    return {n: (c.etc / n).read_bytes() if (c.etc / n).exists() else None for n in LIVE}


def reconfigures(c: slurmctl.Cluster) -> int:
    return (
        (c.base / "log" / "slurmctld.log")
        .read_text(errors="replace")
        .count("Processing Reconfiguration Request")
    )


def inventory_of(c: slurmctl.Cluster) -> dict:
    return yaml.safe_load((c.etc / "inventory.yaml").read_text())


def test_a_moved_node_reaches_slurmctld_and_the_next_job_and_a_second_run_changes_nothing(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    slurm = cluster.slurm
    slurm.quiesce()
    runner = EnvRunner(dict(cluster.env))
    inv = inventory_of(cluster)
    same = run_apply(options(cluster), rendered_for(cluster, inv, tmp_path), runner)
    assert same.status == "unchanged" and runner.calls == [], same

    for node in inv["nodes"]:
        if node["name"] == "a2":
            node["network_group"] = "rack-2"
    before_log = reconfigures(cluster)
    res = run_apply(options(cluster, detailed_exitcodes=True), rendered_for(cluster, inv, tmp_path), runner)
    assert (res.exit_code, res.status) == (10, "applied"), res
    assert reconfigures(cluster) == before_log + 1
    topo = slurm.topology()
    assert topo["ng_z1.rack-2"].nodes == {"a2", "a3", "a4"} and topo["ng_z1.rack-1"].nodes == {"a1"}
    assert "ng_z1.rack-2" in slurm.node_features("a2")
    job = slurm.submit("--exclusive", "-N3", "--switches=1", "--wrap", "sleep 30")
    slurm.wait_state(job, "RUNNING")
    assert set(slurm.allocation_of(job).nodes) == {"a2", "a3", "a4"}
    slurm.quiesce()

    files = live_bytes(cluster)
    again = run_apply(options(cluster), rendered_for(cluster, inv, tmp_path), runner)
    assert again.status == "unchanged", again
    assert reconfigures(cluster) == before_log + 1, "the second run reconfigured"
    assert live_bytes(cluster) == files


def test_refusals_leave_the_live_files_byte_identical(cluster: slurmctl.Cluster, tmp_path: Path) -> None:
    runner = EnvRunner(dict(cluster.env))
    inv = inventory_of(cluster)
    files = live_bytes(cluster)
    count = reconfigures(cluster)

    # a bad inventory never renders, so apply is never reached; a set that slipped through fails lint
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - name: a1\n    zone: 'z 1'\n")
    with pytest.raises(InputError):
        load_inventory_file(bad)
    broken = rendered_for(cluster, inv, tmp_path)
    broken["topology.conf"] += "SwitchName=stray Nodes=a1\n"
    res = run_apply(options(cluster), broken, runner)
    assert res.exit_code == 11 and "lint" in res.summary, res

    # over-threshold removal: three of four nodes gone
    few = {"nodes": [n for n in inv["nodes"] if n["name"] == "a1"]}
    res = run_apply(options(cluster), rendered_for(cluster, few, tmp_path), runner)
    assert res.exit_code == 11 and "would disappear" in res.summary, res

    # controller down: a client configuration pointing at a port where no slurmctld listens
    down = tmp_path / "down"
    down.mkdir()
    port = slurmctl.free_port_block(1)
    conf = (cluster.etc / "slurm.conf").read_text()
    conf = "\n".join(
        f"SlurmctldPort={port}" if ln.startswith("SlurmctldPort=") else ln for ln in conf.splitlines()
    )
    (down / "slurm.conf").write_text(conf + "\n")
    shutil.copyfile(cluster.etc / "slurm-topo-nodes.conf", down / "slurm-topo-nodes.conf")
    os.chmod(down, 0o755)
    os.chmod(tmp_path, 0o755)
    down_env = dict(cluster.env, SLURM_CONF=str(down / "slurm.conf"))
    for node in inv["nodes"]:
        if node["name"] == "a1":
            node["network_group"] = "rack-9"
    res = run_apply(
        options(cluster, command_timeout=10), rendered_for(cluster, inv, tmp_path), EnvRunner(down_env)
    )
    assert res.exit_code == 11 and "does not answer" in res.summary, res

    assert live_bytes(cluster) == files
    assert reconfigures(cluster) == count


def controller_up(c: slurmctl.Cluster) -> bool:
    p = subprocess.run(
        ["scontrol", "ping"], capture_output=True, text=True, timeout=30, env=dict(c.env), check=False
    )
    return p.returncode == 0 and "is UP" in p.stdout


def test_a_set_slurm_would_not_load_is_refused_and_the_running_slurmctld_stays_up(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    """Slurm's own parser (a throwaway slurmctld on the staged set) rejects what our checks let through:
    exit 11 naming Slurm's fatal line; the controller answers and the live files are byte-identical."""
    runner = EnvRunner(dict(cluster.env))
    inv = inventory_of(cluster)
    files = live_bytes(cluster)
    count = reconfigures(cluster)
    for node in inv["nodes"]:
        if node["name"] == "a1":
            node["network_group"] = "rack-7"  # a real change, so apply means to reconfigure
    staged = rendered_for(cluster, inv, tmp_path)
    lines = staged["slurm-topo-nodes.conf"].splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if ln.startswith("NodeName="))
    name, rest = lines[first].split(" ", 1)
    lines[first] = f"{name} State=BOGUS {rest}"
    staged["slurm-topo-nodes.conf"] = "".join(lines)
    assert "State=BOGUS" in staged["slurm-topo-nodes.conf"]

    res = run_apply(options(cluster, detailed_exitcodes=True), staged, runner)
    assert (res.exit_code, res.status) == (11, "refused"), res
    assert "Slurm's own parser rejects the new set" in res.summary
    assert "Invalid state BOGUS" in res.summary, res.summary
    assert controller_up(cluster), "the running slurmctld stopped"
    assert live_bytes(cluster) == files
    assert reconfigures(cluster) == count
    assert ["scontrol", "reconfigure"] not in runner.calls

    # the same change without the bad value is proven and applied
    good = rendered_for(cluster, inv, tmp_path)
    res = run_apply(options(cluster), good, runner)
    assert res.status == "applied", res
    assert any(d.startswith("proof: throwaway slurmctld") and "loaded the set" in d for d in res.details)
    assert controller_up(cluster)
    assert "ng_z1.rack-7" in cluster.slurm.node_features("a1")


def test_a_set_slurm_loads_only_after_changing_it_is_refused_with_slurms_error_line(
    cluster: slurmctl.Cluster, tmp_path: Path
) -> None:
    """``Sockets=`` beside ``SocketsPerBoard=`` loads, but every client command then prints
    ``error: NodeNames=… Sockets=# and SocketsPerBoard=# is invalid``: the proof fails on that ``error:``
    line as on a ``fatal:`` one, naming it; nothing changes."""
    runner = EnvRunner(dict(cluster.env))
    inv = inventory_of(cluster)
    files = live_bytes(cluster)
    for node in inv["nodes"]:
        if node["name"] == "a1":
            node["network_group"] = "rack-8"
    staged = rendered_for(cluster, inv, tmp_path)
    lines = staged["slurm-topo-nodes.conf"].splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if ln.startswith("NodeName=") and "SocketsPerBoard=" in ln)
    lines[first] = lines[first].replace(" SocketsPerBoard=", " Sockets=1 SocketsPerBoard=", 1)
    staged["slurm-topo-nodes.conf"] = "".join(lines)
    res = run_apply(options(cluster, detailed_exitcodes=True), staged, runner)
    assert (res.exit_code, res.status) == (11, "refused"), res
    assert "Slurm's own parser rejects the new set" in res.summary, res.summary
    assert "Sockets=# and SocketsPerBoard=# is invalid" in res.summary, res.summary
    assert res.summary.count("nothing changed") == 1, res.summary
    assert live_bytes(cluster) == files and controller_up(cluster)


def test_hardware_merged_from_scontrol_never_pairs_sockets_with_sockets_per_board(
    cluster: slurmctl.Cluster,
) -> None:
    """``generate --scontrol`` on an inventory with SocketsPerBoard: Slurm's records say ``Sockets=``; the
    merge keeps the inventory's form, and the rendered lines load without a complaint."""
    from slurm_topo.access.text import parse_scontrol_nodes
    from slurm_topo.inventory import with_slurm_nodes

    inventory = merge([load_inventory_file(cluster.etc / "inventory.yaml")])
    records = parse_scontrol_nodes(cluster.slurm.out("scontrol", "show", "node", "-o"))
    assert all("Sockets" in r for r in records)
    merged = with_slurm_nodes(inventory, records)
    for node in merged.nodes:
        keys = dict(node.slurm)
        assert not ("Sockets" in keys and "SocketsPerBoard" in keys), node.slurm
        assert keys.get("SocketsPerBoard") == "1", node.slurm
