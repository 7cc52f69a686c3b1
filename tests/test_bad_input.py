"""Every invalid inventory: exit != 0, exactly one stderr line naming FILE: nodes[i].key, and no file
touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = """\
nodes:
  - name: n[01-04]
    region: r1
    zone: r1-a
"""

LAUGHS_DOC = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "nodes: *i\n"
)

CASES = [
    pytest.param("nodes:\n  - region: r1\n", "nodes[0].name: missing", id="missing name"),
    pytest.param("nodes:\n  - name: n[01-\n", "nodes[0].name:", id="bad hostlist"),
    pytest.param("nodes:\n  - name: n1\n    rack: r3\n", "nodes[0].rack: unknown key", id="unknown key"),
    pytest.param(
        "nodes:\n  - name: n1\n    gpus: eight\n", "nodes[0].gpus: must be an integer", id="wrong type gpus"
    ),
    pytest.param(
        "nodes:\n  - name: n1\n    region: [r1]\n",
        "nodes[0].region: must be a string",
        id="wrong type region",
    ),
    pytest.param(
        "nodes:\n  - name: n1\n    features: torch\n",
        "nodes[0].features: must be a list",
        id="features not a list",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1}\n  - {name: 'n[1-2]', region: r2}\n",
        "nodes[1]: node n1 is at region=r2 here but at region=r1",
        id="same-trust duplicate",
    ),
    pytest.param(
        'nodes:\n  - name: n1\n    region: r1\n    zone: "z1\\n\\n    SwitchName=evil Nodes=n1"\n',
        "nodes[0].zone: must be 1-63 characters",
        id="label with newline injection",
    ),
    pytest.param("nodes:\n  - {name: n1, region: 'a=b'}\n", "nodes[0].region:", id="label with equals"),
    pytest.param("nodes:\n  - {name: n1, region: 'a#b'}\n", "nodes[0].region:", id="label with hash"),
    pytest.param("nodes:\n  - {name: n1, region: 'a[1]'}\n", "nodes[0].region:", id="label with brackets"),
    pytest.param(
        "nodes:\n  - {name: n1, region: 'a]'}\n", "nodes[0].region:", id="label with closing bracket"
    ),
    pytest.param("nodes:\n  - {name: n1, region: 'a,b'}\n", "nodes[0].region:", id="label with comma"),
    pytest.param("nodes:\n  - {name: n1, region: 'a b'}\n", "nodes[0].region:", id="label with space"),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, network_group: '" + "x" * 10_000 + "'}\n",
        "nodes[0].network_group: must be 1-63 characters",
        id="10 kB label",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, features: ['a&b']}\n", "nodes[0].features[0]:", id="feature with operator"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, labels: {foo/bar: x}}\n",
        "nodes[0].labels.foo/bar: unknown label",
        id="unknown label",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, network_group: g1, labels: {gpulayer.dev/network-group: g2}}\n",
        "disagrees with network_group=g1",
        id="label disagrees with key",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: europe-west1-b, zone: europe-west1-c}\n",
        "nodes[0].region: looks like a zone but zone is 'europe-west1-c'",
        id="zone-shaped region disagrees",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, zone: hall-a}\n", "nodes[0].zone: needs a region", id="zone without region"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, source: cloud}\n", "nodes[0].source: must be provider", id="bad source"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Feature: x}}\n",
        "nodes[0].slurm.Feature: unknown node attribute",
        id="unknown slurm attribute",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {CPUs: -4}}\n",
        "nodes[0].slurm.CPUs: must be a non-negative",
        id="negative cpus",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Gres: 'gpu:8 Features=x'}}\n",
        "nodes[0].slurm.Gres: not a valid",
        id="slurm value with space injection",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[1-3]', slurm: {NodeAddr: 10.0.0.1}}\n",
        "nodes[0].slurm.NodeAddr: names one node but the entry has 3",
        id="one address for three nodes",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[1-3]', slurm: {Port: '[7001-7002]'}}\n",
        "nodes[0].slurm.Port: has 2 values for 3 nodes",
        id="port count mismatch",
    ),
    pytest.param("nodes:\n  - {name: 'bad/name'}\n", "nodes[0].name: node names must be", id="bad node name"),
    pytest.param("nodes: [\n", "not valid YAML", id="yaml syntax error"),
    pytest.param("- name: n1\n", "must be a mapping with a 'nodes' list", id="top level not a mapping"),
    pytest.param("nodes:\n  - n1\n", "nodes[0]: must be a mapping", id="entry not a mapping"),
    pytest.param("nodes: []\nrules: {}\n", "rules: unknown key", id="unknown top-level key"),
    pytest.param(
        "nodes:\n  - {name: n1}\npolicy: {default: nearby}\n",
        "policy.default: must be LEVEL",
        id="bad policy default",
    ),
    # What Slurm itself refuses (slurmctld would not start): every value is checked against slurm.conf's
    # parser.
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {State: BOGUS}}\n",
        "nodes[0].slurm.State: must be one of",
        id="bad state",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {State: IDLE}}\n",
        "nodes[0].slurm.State: must be one of",
        id="idle state",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Port: 99999999}}\n", "slurm.Port: must be from 1", id="port"
    ),
    pytest.param("nodes:\n  - {name: n1, slurm: {Port: 0}}\n", "slurm.Port: must be from 1", id="port 0"),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {CPUs: 99999999}}\n", "slurm.CPUs: must be from 1", id="cpus"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {CPUs: 65535}}\n", "slurm.CPUs: must be from 1", id="cpus 16"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {ThreadsPerCore: 0}}\n",
        "slurm.ThreadsPerCore: must be",
        id="threads 0",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {SocketsPerBoard: 70000}}\n",
        "slurm.SocketsPerBoard: must be",
        id="spb",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {RealMemory: 99999999999999999999}}\n",
        "slurm.RealMemory: must be from 1",
        id="realmemory",
    ),
    pytest.param(  # loads, but `error: NodeNames=n1 MemSpecLimit=0 is invalid` (22.05, 24.11, 26.05)
        "nodes:\n  - {name: n1, slurm: {RealMemory: 0}}\n",
        "nodes[0].slurm.RealMemory: must be from 1 to 1099511627776 (what Slurm accepts) ('0')",
        id="realmemory 0",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {TmpDisk: 4294967296}}\n",
        "slurm.TmpDisk: must be from 0",
        id="tmpdisk",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Weight: 99999999999}}\n", "slurm.Weight: must be from 0", id="weight"
    ),
    pytest.param("nodes:\n  - {name: n1, slurm: {Boards: '010'}}\n", "no leading zeros", id="octal"),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Gres: 'gpu:a100:x:y:8'}}\n", "slurm.Gres: must be NAME", id="gres"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Gres: ':8'}}\n", "slurm.Gres: must be NAME", id="gres no name"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {NodeAddr: '10.0.0.1,10.0.0.2'}}\n",
        "slurm.NodeAddr: the entry names one node: give one value, not 2",
        id="two addresses on one node",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {Port: '7001,7002'}}\n",
        "slurm.Port: the entry names one node",
        id="two ports on one node",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, slurm: {NodeHostname: 'h18446744073709551616'}}\n",
        "slurm.NodeHostname: number 18446744073709551616 is too large",
        id="hostname suffix over 2^64",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n18446744073709551616'}\n",
        "nodes[0].name: number 18446744073709551616 is too large",
        id="name suffix over 2^64",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n18446744073709551615'}\n",
        "nodes[0].name: number 18446744073709551615 is too large",
        id="name suffix 2^64-1",
    ),
    # Hostile documents: bounded in time and memory, one line each.
    pytest.param(
        "nodes:\n  - {name: 'n[1-1000000000]'}\n",
        "nodes[0].name: names 1000000000 hosts, over the limit",
        id="1e9",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[0-99999999]'}\n",
        "nodes[0].name: names 100000000 hosts, over the limit",
        id="1e8",
    ),
    pytest.param(
        "nodes:\n  - {name: 'n[1-200000]'}\n  - {name: 'm[1-200000]'}\n",
        "nodes[1].name: names 200000 hosts, over the limit of 262144 nodes in all (",
        id="limit over entries",
    ),
    pytest.param(LAUGHS_DOC, "not valid YAML: aliases expand to more than", id="billion laughs"),
    pytest.param(
        "nodes: *i\n", "not valid YAML", id="alias without anchor"
    ),  # the expansion check runs only where an '&' is: an alias with none is libyaml's own error
    pytest.param(
        "nodes:\n  - {name: n1, 'region': r1, \"region\": r2}\n",
        "duplicate key 'region'",
        id="duplicate key, quoted",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: !!timestamp x}\n",
        "not valid YAML: a tagged value",
        id="timestamp tag",
    ),
    pytest.param("nodes:\n  - {name: n1, region: !!int x}\n", "not valid YAML: a tagged value", id="int tag"),
    pytest.param(
        "nodes:\n  - {name: n1, region: !!python/object:os.system x}\n", "not valid YAML", id="python tag"
    ),
    pytest.param(
        "nodes:\n  - name: n1\n    region: r1\n    zone: z\n    region: r2\n",
        "line 5: not valid YAML: duplicate key 'region' at line 5 (first at line 3)",
        id="duplicate key",
    ),
    pytest.param("nodes:\n" + "[" * 5000 + "\n", "not valid YAML", id="deep nesting"),
    pytest.param(
        "nodes:\n  - name: n1\n    ? " + "k" * 10_000 + "\n    : 1\n", "unknown key", id="10 kB unknown key"
    ),
    pytest.param("nodes: []\n? [" + "a, " * 3000 + "b]\n: 1\n", "not valid YAML", id="huge complex key"),
    # Location is not forgeable; names are names.
    pytest.param(
        'nodes:\n  - {name: "ab\\n", region: r1}\n', "nodes[0].name: node names must", id="name newline"
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, features: [zone_us-central1-c]}\n",
        "nodes[0].features[0]: region_*, zone_*, ng_*",
        id="level feature",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, source: self, features: [region_r1.torch-2.4]}\n",
        "nodes[0].features[0]: region_*",
        id="bucket feature from self",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r1, source: self, slurm: {State: DRAIN}}\n",
        "nodes[0].slurm.State: a source: self entry cannot set",
        id="state from self",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: us-east-1, zone: eu-west-1a}\n",
        "nodes[0].zone: is not in region 'us-east-1'",
        id="cloud zone in another cloud region",
    ),
    pytest.param(
        'nodes:\n  - {name: n1, gpu_topology: "a\\0b"}\n',
        "nodes[0].gpu_topology: must be the path",
        id="gpu_topology with NUL",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r, slurm: {CPUs: 65533, Sockets: 65533, CoresPerSocket: 65533, "
        "ThreadsPerCore: 65533}}\n",
        "above the 65533 CPUs slurmctld can count on a node",
        id="hardware product overflows",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r, slurm: {CPUs: 12, Sockets: 2, CoresPerSocket: 4, "
        "ThreadsPerCore: 2}}\n",
        "CPUs=12 is none of Sockets (2)",
        id="CPUs slurmctld would reset",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r, slurm: {Sockets: 2, SocketsPerBoard: 2}}\n",
        "give Sockets or SocketsPerBoard, not both",
        id="Sockets with SocketsPerBoard",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r}\nlinks:\n  nvlink: {bandwidth: 1" + "0" * 400 + "}\n",
        "links.nvlink.bandwidth: too large",
        id="bandwidth of 10^400",
    ),
    pytest.param(
        'nodes:\n  - {name: "n[1-' + "9" * 4301 + ']", region: r}\n',
        "a number of more than 20 digits",
        id="4301-digit hostlist range",
    ),
    pytest.param(
        'nodes:\n  - {name: n1, region: r, slurm: {Gres: "gpu:h100:9223372036854775808"}}\n',
        "count too large",
        id="GRES count of 2^63",
    ),
    pytest.param(
        'nodes:\n  - {name: n1, region: r, slurm: {Gres: "mps:100"}}\n',
        "mps and shard need a gpu GRES",
        id="mps without gpu",
    ),
    pytest.param(
        'nodes:\n  - {name: n1, region: r, slurm: {Gres: "bogus:1"}}\n',
        "not one Slurm knows without GresTypes=",
        id="GRES name Slurm drops",
    ),
    pytest.param(
        "nodes:\n  - {name: n1, region: r, zone: " + "z" * 5000 + "}\n",
        "nodes[0].zone",
        id="multi-kilobyte label",
    ),
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", *args], capture_output=True, text=True, timeout=60, check=False
    )


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_bad_inventory_is_one_line_and_writes_nothing(tmp_path: Path, text: str, expected: str) -> None:
    """A bad inventory exits non-zero with one stderr line naming file and key; no output appears or
    changes."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    good = tmp_path / "good.yaml"
    good.write_text(GOOD, encoding="utf-8")
    existing = tmp_path / "existing"
    assert _run("generate", "-i", str(good), "-o", str(existing), "--slurm-version", "22.05").returncode == 0
    before = _snapshot(existing)

    for out, inventories in ((tmp_path / "new", [bad]), (existing, [good, bad])):
        argv = [
            "generate",
            *sum((["-i", str(p)] for p in inventories), []),
            "-o",
            str(out),
            "--slurm-version",
            "22.05",
        ]
        proc = _run(*argv)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        if "nodes[" in expected or "not valid YAML" in expected or "mapping" in expected:
            assert f"{bad}: " in lines[0]
        assert expected in lines[0]
        assert len(lines[0]) < 400, "values are cut, never dumped whole"
        assert proc.stdout == ""
    assert not (tmp_path / "new").exists()
    assert _snapshot(existing) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_long_value_is_repr_escaped_and_cut(tmp_path: Path) -> None:
    """The offending value is shown as a repr, cut at 40 characters, so a hostile label cannot break the
    line."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        'nodes:\n  - {name: n1, region: r1, zone: "z1\\n\\n    SwitchName=evil Nodes=n1 and more"}\n'
    )
    proc = _run("generate", "-i", str(bad), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    line = proc.stderr.strip()
    assert "\\n\\n" in line and "…" in line
    value = line[line.index("('") + 1 : line.rindex(")")]
    assert len(value) == 41  # 40 characters of repr plus the ellipsis


def test_version_without_scontrol(tmp_path: Path) -> None:
    """Without --slurm-version and without scontrol, generate asks the installed daemons, else renders for
    22.05 and says so."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    env = dict(os.environ, PATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_topo", "generate", "-i", str(good), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    header = (tmp_path / "o" / "topology.conf").read_text().splitlines()[0]
    daemon = Path("/usr/sbin/slurmctld")
    if daemon.exists():
        version = subprocess.run(
            [str(daemon), "-V"], capture_output=True, text=True, check=True
        ).stdout.split()[1]
        assert header.endswith("for Slurm " + ".".join(version.split(".")[:2]))
        assert proc.stderr == ""
    else:
        assert "rendering for Slurm 22.05" in proc.stderr
        assert header.endswith("for Slurm 22.05")


def test_empty_inventory_writes_nothing(tmp_path: Path) -> None:
    """An inventory with no nodes is refused: slurm-topo never writes an empty topology.conf."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("nodes: []\n")
    proc = _run("generate", "-i", str(empty), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"slurm-topo: error: {empty}: the inventory has no nodes; refusing to render empty Slurm files"
    ]
    assert not (tmp_path / "o").exists()


def test_trailing_newline_in_a_label_is_refused(tmp_path: Path) -> None:
    """A label ending in a newline is refused (a `$` anchor would let it through into topology.conf)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text('nodes:\n  - {name: n1, region: "r1\\n"}\n')
    proc = _run("generate", "-i", str(bad), "-o", str(tmp_path / "o"), "--slurm-version", "22.05")
    assert proc.returncode == 2 and "nodes[0].region: must be 1-63 characters" in proc.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("listing", "shown"),
    [
        ("NodeName=a#b CPUTot=4\n", "'a#b'"),
        ("NodeName=a=b CPUTot=4\n", "'a=b'"),
        ("NodeName=a%sb CPUTot=4\n", "'a%sb'"),
        ("n[1-2]\na b\n", "'a b'"),
        ("NodeName=" + "x" * 10_000 + " CPUTot=4\n", "'xxxxxxxxxx"),
        ("NodeName=n18446744073709551616 CPUTot=4\n", "too large for Slurm's hostlist"),
    ],
    ids=["hash", "equals", "percent-s", "space", "10 kB", "suffix over 2^64"],
)
def test_nodes_from_names_are_validated_like_inventory_names(
    tmp_path: Path, listing: str, shown: str
) -> None:
    """Names read from `scontrol show node -o` (or a hostlist per line) reach Nodes= and NodeName=: a bad one
    is one clear line naming the file, exit 2, nothing written (never a traceback)."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    nodes = tmp_path / "nodes.txt"
    nodes.write_text(listing)
    proc = _run("generate", "-i", str(good), "--nodes-from", str(nodes), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{nodes}: node name" in lines[0] and shown in lines[0] and len(lines[0]) < 300
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("prefix", ["/dev/nvidia[0-1]", "/dev/a|b", "/dev/x y", "/dev/x\n"])
def test_gpu_device_prefix_that_slurm_would_misread_is_refused(tmp_path: Path, prefix: str) -> None:
    """gres.conf File= takes a hostlist and `|` alternatives: a prefix with them is one clear line, exit 2."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    proc = _run("generate", "-i", str(good), "-o", str(tmp_path / "o"), "--gpu-device-prefix", prefix)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "--gpu-device-prefix" in proc.stderr
    assert not (tmp_path / "o").exists()
