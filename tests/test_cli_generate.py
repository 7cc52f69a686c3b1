"""``slurm-topo generate``, ``show`` and ``files`` through the command line (in-process, CliRunner): the
inputs they merge (inventories, node records, Slurm's node list), the Slurm release they render for, what
they print and what they leave on disk."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from test_cli import FakeSlurm, error_line, invoke

from slurm_topo.cli import common

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "tests" / "fixtures" / "real" / "slurm-24.11"
OUTPUTS = ("topology.conf", "slurm-topo-nodes.conf", "slurm_topo_data.lua")


def body(text: str) -> list[str]:
    """A generated file without its comment header (which names the slurm-topo version)."""
    return [line for line in text.splitlines() if not line.startswith("#")]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def trimmed_inventory(tmp_path: Path, drop: set[str]) -> Path:
    """The captured cluster's inventory without the nodes in ``drop`` (Slurm still knows them)."""
    doc = yaml.safe_load((REAL / "inventory.yaml").read_text())
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] not in drop]
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_generate_reproduces_the_topology_the_real_cluster_ran_on(tmp_path: Path) -> None:
    """The 24.11 capture's inventory, rendered for 24.11: the topology.conf slurmctld loaded (captured from
    the cluster), switch for switch; one `created` line per file, in the order they are written."""
    out = tmp_path / "out"
    result = invoke(
        "generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out), "--slurm-version", "24.11"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [f"created   {out / name}" for name in OUTPUTS]
    assert body((out / "topology.conf").read_text()) == body((REAL / "topology.conf").read_text())
    assert (out / "topology.conf").read_text().splitlines()[0].endswith("for Slurm 24.11")


def test_rerun_is_unchanged_and_a_change_replaces_keeping_the_mode(tmp_path: Path) -> None:
    """README: a replaced file keeps its mode, an unchanged one is not touched (same inode, same mtime)."""
    out = tmp_path / "out"
    args = ["generate", "-o", str(out), "--slurm-version", "24.11", "--json"]
    assert invoke(*args, "-i", str(REAL / "inventory.yaml")).exit_code == 0
    (out / "topology.conf").chmod(0o600)
    before = {name: os.stat(out / name) for name in OUTPUTS}
    again = json.loads(invoke(*args, "-i", str(REAL / "inventory.yaml")).stdout)
    assert [f["status"] for f in again["files"]] == ["unchanged"] * 3
    for name in OUTPUTS:
        now = os.stat(out / name)
        assert (now.st_ino, now.st_mtime_ns) == (before[name].st_ino, before[name].st_mtime_ns)
    moved = tmp_path / "moved.yaml"
    moved.write_text((REAL / "inventory.yaml").read_text().replace("rack-a2", "rack-a1"))
    doc = json.loads(invoke(*args, "-i", str(moved)).stdout)
    assert doc["nodes"] == 12 and doc["out"] == str(out)
    status = {Path(f["path"]).name: f["status"] for f in doc["files"]}
    assert status["topology.conf"] == "replaced"
    assert (out / "topology.conf").stat().st_mode & 0o777 == 0o600
    assert "SwitchName=ng_us-east-1a.rack-a1 Nodes=n[01-04]" in (out / "topology.conf").read_text()


def test_bad_partitions_leave_an_existing_output_folder_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "out"
    good = ["generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out), "--slurm-version", "24.11"]
    assert invoke(*good).exit_code == 0
    before = snapshot(out)
    parts = tmp_path / "parts.txt"
    parts.write_text("PartitionName=gpu Nodes=n[01-12 Default=YES State=UP\n")  # a hostlist cut short
    moved = tmp_path / "moved.yaml"
    moved.write_text((REAL / "inventory.yaml").read_text().replace("rack-a2", "rack-a1"))
    result = invoke(*good[:2], str(moved), *good[3:], "--partitions-from", str(parts))
    assert result.exit_code == 2 and error_line(result).startswith(f"{parts}:1: ")
    assert snapshot(out) == before


def test_a_bad_device_prefix_is_refused_before_any_inventory_is_read(tmp_path: Path) -> None:
    result = invoke(
        "generate",
        "-i",
        str(tmp_path / "missing.yaml"),
        "-o",
        str(tmp_path / "out"),
        "--slurm-version",
        "24.11",
        "--gpu-device-prefix",
        "dev/nvidia",
    )
    assert result.exit_code == 2
    assert error_line(result).startswith("--gpu-device-prefix must be an absolute path")
    assert not (tmp_path / "out").exists()


def test_the_device_prefix_names_the_gres_files(tmp_path: Path) -> None:
    inv = tmp_path / "fleet.yaml"
    capture = REAL.parent / "topo" / "h800-8gpu-nv18-10nic-merged-affinity-numa.txt"
    inv.write_text(f"nodes:\n  - {{name: g1, region: r1, gpus: 8, gpu_topology: {capture}}}\n")
    out = tmp_path / "out"
    args = ["generate", "-i", str(inv), "-o", str(out), "--slurm-version", "24.11"]
    result = invoke(*args, "--assume-minor-equals-index", "--gpu-device-prefix", "/dev/gpu")
    assert result.exit_code == 0, result.stderr
    assert "warning: --assume-minor-equals-index: gres.conf names /dev/nvidia<index>" in result.stderr
    gres = (out / "gres.conf").read_text()
    files = [
        w.split("=", 1)[1]
        for line in gres.splitlines()
        if not line.startswith("#")
        for w in line.split()
        if w.startswith("File=")
    ]
    assert files == [f"/dev/gpu{i}" for i in range(8)], gres


def test_the_minor_number_warning_is_only_for_fleets_with_gpus(tmp_path: Path) -> None:
    inv = tmp_path / "cpu.yaml"
    inv.write_text("nodes:\n  - {name: 'c[1-4]', region: r1, zone: z1}\n")
    result = invoke(
        "generate",
        "-i",
        str(inv),
        "-o",
        str(tmp_path / "out"),
        "--slurm-version",
        "22.05",
        "--assume-minor-equals-index",
    )
    assert result.exit_code == 0 and result.stderr == ""


def test_one_node_slurm_knows_beyond_the_inventory_is_named_in_the_singular(tmp_path: Path) -> None:
    inv = trimmed_inventory(tmp_path, {"n12"})
    result = invoke(
        "generate", "-i", str(inv), "-o", str(tmp_path / "out"), "--slurm-version", "24.11",
        "--nodes-from", str(REAL / "scontrol-show-node-o.txt"),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "1 node Slurm knows is in no inventory; placed in the root's leaf: n12" in result.stderr


def test_nodes_slurm_knows_beyond_the_inventory_go_to_the_roots_leaf(tmp_path: Path) -> None:
    """README: nodes Slurm knows that no inventory places go into the root's leaf switch, listed on
    stderr (the capture knows n01-n12; the inventory lacks n11 and n12)."""
    inv = trimmed_inventory(tmp_path, {"n11", "n12"})
    out = tmp_path / "out"
    result = invoke(
        "generate",
        "-i",
        str(inv),
        "-o",
        str(out),
        "--slurm-version",
        "24.11",
        "--nodes-from",
        str(REAL / "scontrol-show-node-o.txt"),
    )
    assert result.exit_code == 0, result.stderr
    assert "2 nodes Slurm knows are in no inventory; placed in the root's leaf: n11 n12" in result.stderr
    topology = (out / "topology.conf").read_text()
    switches = dict(line.split(" ", 1) for line in topology.splitlines() if line.startswith("SwitchName="))
    (leaf,) = [name for name, rest in switches.items() if rest == "Nodes=n[11-12]"]
    assert leaf.removeprefix("SwitchName=") in switches["SwitchName=root"].split("=", 1)[1].split(","), (
        topology
    )


def test_nodes_from_and_scontrol_together_or_an_unreadable_list_are_refused(tmp_path: Path) -> None:
    args = [
        "generate",
        "-i",
        str(REAL / "inventory.yaml"),
        "-o",
        str(tmp_path / "out"),
        "--slurm-version",
        "24.11",
    ]
    both = invoke(*args, "--nodes-from", str(REAL / "scontrol-show-node-o.txt"), "--scontrol")
    assert both.exit_code == 2 and error_line(both) == "give --nodes-from or --scontrol, not both"
    missing = invoke(*args, "--nodes-from", str(tmp_path / "nodes.txt"))
    assert missing.exit_code == 2
    assert error_line(missing) == f"{tmp_path / 'nodes.txt'}: cannot read: No such file or directory"
    assert not (tmp_path / "out").exists()


def test_scontrol_reads_the_nodes_and_partitions_from_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--scontrol asks the running Slurm for its nodes and partitions (the captured answers here): the data
    file gets the default partition the capture names."""
    fake = FakeSlurm(
        {
            "scontrol show node -o": (REAL / "scontrol-show-node-o.txt").read_text(),
            "scontrol show partition -o": (REAL / "scontrol-show-partition-o.txt").read_text(),
        }
    )
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    out = tmp_path / "out"
    result = invoke(
        "generate",
        "-i",
        str(REAL / "inventory.yaml"),
        "-o",
        str(out),
        "--slurm-version",
        "24.11",
        "--scontrol",
    )
    assert result.exit_code == 0, result.stderr
    assert fake.calls == [("scontrol", "show", "node", "-o"), ("scontrol", "show", "partition", "-o")]
    assert 'default_partition="main"' in (out / "slurm_topo_data.lua").read_text()


# ---- the Slurm release: --slurm-version, else the installed Slurm, else 22.05 with a warning


def rendered_for(out: Path) -> str:
    return (out / "topology.conf").read_text().splitlines()[0].rsplit(" ", 1)[1]


def test_without_slurm_version_the_installed_scontrol_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm({"scontrol --version": (REAL / "scontrol--version.txt").read_text()})
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out))
    assert result.exit_code == 0 and result.stderr == ""
    assert rendered_for(out) == "24.11" and fake.calls == [("scontrol", "--version")]


def test_a_failing_scontrol_falls_back_to_the_daemons_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """22.05's `scontrol --version` needs a readable slurm.conf; slurmctld -V does not."""
    from slurm_topo.core.errors import CommandError

    fake = FakeSlurm(
        {
            "scontrol --version": CommandError(["scontrol", "--version"], 1, "fatal: Could not establish"),
            "/usr/sbin/slurmctld -V": "slurm 23.02.7\n",
        }
    )
    monkeypatch.setattr(common, "SubprocessRunner", lambda: fake)
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out))
    assert result.exit_code == 0 and result.stderr == ""
    assert rendered_for(out) == "23.02"


def test_no_slurm_anywhere_renders_for_22_05_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "SubprocessRunner", lambda: FakeSlurm({}))
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out))
    assert result.exit_code == 0
    assert result.stderr == ("no Slurm found to ask and no --slurm-version: rendering for Slurm 22.05\n")
    assert rendered_for(out) == "22.05"


def test_a_bad_slurm_version_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out), "--slurm-version", "24")
    assert result.exit_code == 2 and "not a Slurm version: '24'" in error_line(result)
    assert not out.exists()


SUPPORTED = "22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05"


@pytest.mark.parametrize("command", ["generate", "lint", "apply"])
@pytest.mark.parametrize("given", ["99.1", "21.08", "24.06"])
def test_a_slurm_release_the_renderers_do_not_know_is_a_usage_error(
    command: str, given: str, tmp_path: Path
) -> None:
    """--slurm-version takes only the releases the renderers know, wherever the option is: a release Slurm
    never made (99.1, 24.06) or one older than 22.05 is exit 2, one line naming the supported ones, and
    nothing is written or asked of Slurm (it rendered 99.1 as a 26.05)."""
    out = tmp_path / "out"
    args = {
        "generate": ["-i", str(REAL / "inventory.yaml"), "-o", str(out)],
        "lint": ["--topology", str(REAL / "topology.conf")],
        "apply": [
            "-i",
            str(REAL / "inventory.yaml"),
            "--slurm-dir",
            str(out),
            "--state-dir",
            str(tmp_path / "s"),
        ],
    }[command]
    result = invoke(command, *args, "--slurm-version", given)
    assert result.exit_code == 2, result.output
    assert error_line(result) == (
        f"invalid value for '--slurm-version': '{given}': not a Slurm release slurm-topo renders for; give "
        f"one of {SUPPORTED} (see 'slurm-topo {command} --help')"
    )
    assert not out.exists() and not (tmp_path / "s").exists()


@pytest.mark.parametrize(("given", "rendered"), [("25.11", "25.11"), ("24.11.5", "24.11"), ("23.2", "23.02")])
def test_a_supported_release_is_taken_with_or_without_its_patch_level(
    given: str, rendered: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = invoke("generate", "-i", str(REAL / "inventory.yaml"), "-o", str(out), "--slurm-version", given)
    assert result.exit_code == 0, result.output
    assert rendered_for(out) == rendered


def test_the_supported_releases_are_in_the_help() -> None:
    for command in ("generate", "lint", "apply"):
        assert SUPPORTED in " ".join(invoke(command, "--help").stdout.split())


# ---- several inputs merged: inventories by trust, node records from `discover`


def test_a_provider_record_wins_a_conflict_and_the_conflict_is_named(tmp_path: Path) -> None:
    provider, operator = tmp_path / "provider.yaml", tmp_path / "operator.yaml"
    provider.write_text("nodes:\n  - {name: n1, region: r1, zone: z1, network_group: g1, source: provider}\n")
    operator.write_text(
        "nodes:\n  - {name: n1, region: r1, zone: z2}\n  - {name: n2, region: r1, zone: z2}\n"
    )
    result = invoke("show", "-i", str(operator), "-i", str(provider), "--json")
    assert result.exit_code == 0
    (zone1,) = [z for r in json.loads(result.stdout)["regions"] for z in r["zones"] if z["name"] == "z1"]
    assert zone1["nodes"] == 1 and zone1["network_groups"][0]["name"] == "g1"
    assert result.stderr.startswith("conflict: node n1: zone: operator says z2, provider says z1")
    assert "keeping the provider record" in result.stderr


def test_records_written_by_discover_are_merged_and_a_bad_one_is_skipped(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    found = invoke(
        "discover",
        "--node-name",
        "n13",
        "--region",
        "us-west",
        "--zone",
        "us-west-2c",
        "--network-group",
        "rack-e1",
        "--dmi-root",
        str(tmp_path / "no-dmi"),
    )
    assert found.exit_code == 0, found.stderr
    (records / "n13.yaml").write_text(found.stdout)
    (records / "broken.yaml").write_text("nodes: [\n")
    out = tmp_path / "out"
    result = invoke(
        "generate",
        "-i",
        str(REAL / "inventory.yaml"),
        "--records",
        str(records),
        "-o",
        str(out),
        "--slurm-version",
        "24.11",
        "--json",
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["nodes"] == 13
    assert "SwitchName=ng_us-west-2c.rack-e1 Nodes=n[12-13]" in (out / "topology.conf").read_text()
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"warning: {records / 'broken.yaml'}: ") and warning.endswith("record skipped")


# ---- show --svg


def svg_titles(path: Path) -> dict[str, str]:
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text or "" for t in ET.parse(path).getroot().iter(f"{ns}title")]
    return {t.split(":", 1)[0]: t for t in titles}


def test_show_svg_draws_every_node_and_the_node_states_slurm_gave(tmp_path: Path) -> None:
    """The capture's cluster (README of the capture): job 1 runs on n01-n02, n12 was drained on purpose;
    the picture's rack tooltips say so, and the printed line says node states were drawn."""
    picture = tmp_path / "fleet.svg"
    result = invoke(
        "show",
        "-i",
        str(REAL / "inventory.yaml"),
        "--nodes-from",
        str(REAL / "scontrol-show-node-o.txt"),
        "--svg",
        str(picture),
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "fleet: 12 nodes, 64 GPUs; 2 regions, 5 zones"
    assert result.stdout.splitlines()[-1] == f"svg: {picture} (12 nodes, with node states)"
    titles = svg_titles(picture)
    assert {f"n{i:02}" for i in range(1, 13)} <= set(titles)
    assert "2 allocated" in titles["rack-a1"] and "1 free" in titles["rack-a1"]
    assert "drained" in titles["rack-e1"]


def test_show_json_names_the_svg_and_without_states_says_nothing_of_them(tmp_path: Path) -> None:
    picture = tmp_path / "pics" / "fleet.svg"
    result = invoke("show", "-i", str(REAL / "inventory.yaml"), "--svg", str(picture), "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["svg"] == str(picture) and doc["nodes"] == 12 and doc["gpus"] == 8 * 4 + 4 * 8
    assert "allocated" not in svg_titles(picture)["rack-a1"]
    plain = invoke("show", "-i", str(REAL / "inventory.yaml"), "--svg", str(tmp_path / "plain.svg"))
    assert plain.stdout.splitlines()[-1] == f"svg: {tmp_path / 'plain.svg'} (12 nodes)"


def test_show_svg_into_a_folder_is_an_output_error_that_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "pictures"
    folder.mkdir()
    result = invoke("show", "-i", str(REAL / "inventory.yaml"), "--svg", str(folder))
    assert result.exit_code == 4 and result.stdout == ""
    assert error_line(result).endswith("nothing was changed")
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["pictures"]


# ---- files


def test_files_lists_what_copy_writes(tmp_path: Path) -> None:
    listed = invoke("files")
    assert listed.exit_code == 0
    names = listed.stdout.splitlines()
    assert "job_submit/job_submit.lua" in names and "examples/gcp-two-regions.yaml" in names
    copied = invoke("files", "--copy", str(tmp_path))
    assert copied.exit_code == 0
    assert copied.stdout.splitlines() == [f"copied    {tmp_path / name}" for name in names]
    on_disk = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert on_disk == sorted(names)
    assert all((tmp_path / n).read_bytes() == (REPO / n).read_bytes() for n in names if (REPO / n).exists())
