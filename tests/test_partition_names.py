"""Partition names Slurm takes but slurm-topo's labels do not (``gpu+big``, ``a"b``, ``débug``, ``a\\b``,
``x y``): ``generate``/``apply --scontrol`` keep working, the submit filter's data file holds each name
exactly, escaped (never code, never a new line), the real filter (Lua 5.1) finds the partition, and a name
the data cannot hold (``*``, bytes that are not UTF-8) is left out with one warning line. Slurm 22.05, 24.11
and 26.05 all take these names (``scontrol create PartitionName=…``): tests/integration/
test_apply_proof_ipv6_and_partitions.py runs them on a real cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from luafilter import LuaFilter
from lupa import lua51
from policy_cases import FLEET, job
from test_cli import invoke

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.policy import JobRequest, Partition, decide
from slurm_topo.render import make_context
from slurm_topo.render.filter_data import _slurm_name
from slurm_topo.render.topology_yaml import _shown

HOSTILE = ["gpu+big", 'a"b', "débug", "a\\b", "x y", "a;b", "a]]b", "a{b}", "a'b", "--x", "a=b", "a,b"]
"""What ``scontrol create PartitionName=…`` took on 22.05, 24.11 and 26.05 (checked live), and
``scontrol show partition -o`` printed back as written."""

NAMED = [n for n in HOSTILE if "," not in n]
"""The names a job can give: Slurm splits ``-p a,b`` at the comma (so does the filter)."""

EAST = tuple(f"n{i:02d}" for i in range(1, 7))  # us-east (zones us-east-1a and us-east-1b)


def lua_string(literal: str) -> bytes:
    """What Lua 5.1 reads from ``literal`` (a string literal), as bytes."""
    lua = lua51.LuaRuntime(encoding=None)
    value = lua.execute(f"return {literal}".encode())
    assert isinstance(value, bytes)
    return value


@pytest.mark.parametrize("name", [*HOSTILE, "a\nb", "a\rb", "a\0b", "]]--", "\\\\", "x" * 300, "日本"])
def test_a_name_is_written_as_one_ascii_lua_string_that_reads_back_exactly(name: str) -> None:
    literal = _slurm_name(name)
    assert literal.isascii() and "\n" not in literal and "\r" not in literal, literal
    assert literal.startswith('"') and literal.endswith('"') and '"' not in literal[1:-1], literal
    assert lua_string(literal) == name.encode(), literal


@given(st.text(min_size=1, max_size=40))
def test_any_text_reads_back_exactly(name: str) -> None:
    literal = _slurm_name(name)
    assert literal.isascii() and "\n" not in literal
    assert lua_string(literal) == name.encode("utf-8", "surrogatepass")


def test_a_plain_name_is_written_as_before() -> None:
    """Names of labels (and ``gpu+big``, which ``_q`` always took) are unchanged in the data file: the
    files of every fleet without odd partition names stay byte-identical."""
    assert _slurm_name("gpu") == '"gpu"' and _slurm_name("gpu+big") == '"gpu+big"'
    assert _slurm_name('a"b') == '"a\\034b"' and _slurm_name("débug") == '"d\\195\\169bug"'


def parts_file(tmp_path: Path, names: list[str], encoding: str = "utf-8") -> Path:
    """``scontrol show partition -o`` lines: ``gpu`` (default, every GPU node) and each of ``names`` on the
    us-east nodes."""
    lines = ["PartitionName=gpu AllowGroups=ALL Default=YES Nodes=n[01-12] State=UP"]
    lines += [f"PartitionName={n} AllowGroups=ALL Default=NO Nodes=n[01-06] State=UP" for n in names]
    path = tmp_path / "parts.txt"
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding, "surrogateescape"))
    return path


def fleet_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(FLEET)
    return path


def test_generate_keeps_every_partition_slurm_takes_and_the_filter_finds_each(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["-i", str(fleet_file(tmp_path)), "-o", str(out), "--slurm-version", "22.05"]
    result = invoke("generate", *args, "--partitions-from", str(parts_file(tmp_path, HOSTILE)))
    assert result.exit_code == 0, result.stderr
    assert "warning: partition" not in result.stderr, result.stderr
    data = out / "slurm_topo_data.lua"
    text = data.read_bytes()
    assert text.isascii(), "the data file is ASCII: every other byte escaped"
    lua = LuaFilter()
    table = lua.load_data(data)
    for name in HOSTILE:
        assert table.partitions[name] is not None, name
    for name in NAMED:
        # a required zone: a bracket of the zones of the partition's own nodes (us-east), not of every node
        said = lua.decide(table, job("zone", partition=name, min_nodes=2))
        assert said["action"] == "amend", (name, said)
        assert said["features"] == "[zone_us-east-1b|zone_us-east-1a]", (name, said)
        assert "not in the data" not in (said["record"] or ""), (name, said)
    # the Python reference agrees
    inventory = merge([parse_inventory(FLEET)])
    parts = [Partition("gpu", tuple(f"n{i:02d}" for i in range(1, 13)), True)]
    parts += [Partition(n, EAST) for n in HOSTILE]
    policy = make_context(inventory, (24, 11), parts).policy
    for name in NAMED:
        desc = job("zone", partition=name, min_nodes=2)
        assert lua.decide(table, desc) == decide(policy, JobRequest.from_job_desc(desc)).as_dict(), name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("*", "'*' is the data's own name for every node"),
        ("d\udce9bug", "Slurm printed it in bytes that are not UTF-8"),
    ],
)
def test_a_name_the_data_cannot_hold_is_left_out_with_one_warning(
    tmp_path: Path, name: str, why: str
) -> None:
    """``*`` (the data's every-node entry) and a Latin-1 ``débug`` (not UTF-8: the bytes are unknown once
    read): one warning line naming it, the rest is generated, the filter treats it as unknown."""
    out = tmp_path / "out"
    parts = parts_file(tmp_path, ["gpu+big", name])
    args = ["-i", str(fleet_file(tmp_path)), "-o", str(out), "--slurm-version", "22.05"]
    result = invoke("generate", *args, "--partitions-from", str(parts))
    assert result.exit_code == 0, result.stderr
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning: partition ")]
    assert len(warnings) == 1 and why in warnings[0], result.stderr
    assert "left out of the submit filter's data" in warnings[0], warnings
    assert "treats it as a partition it does not know" in warnings[0], warnings
    table = LuaFilter().load_data(out / "slurm_topo_data.lua")
    assert table.partitions["gpu+big"] is not None


def test_check_takes_a_hostile_partition_name(tmp_path: Path) -> None:
    """``slurm-topo check -p 'a"b'`` (the Python reference) counts that partition's nodes."""
    parts = parts_file(tmp_path, ['a"b'])
    args = ["check", "-i", str(fleet_file(tmp_path)), "--partitions-from", str(parts), "--json"]
    result = invoke(*args, "--locality", "zone", "-N", "2", "-p", 'a"b')
    assert result.exit_code == 0, result.stderr
    said = json.loads(result.stdout)
    assert "us-west" not in json.dumps(said), said


def test_the_topology_yaml_comment_names_a_partition_safely() -> None:
    assert _shown("gpu") == "gpu"
    for name in ('a"b', "a\nb", "débug", "a#b"):
        shown = _shown(name)
        assert shown.isascii() and "\n" not in shown and json.loads(shown) == name


def test_a_partition_with_a_quote_reaches_the_topology_yaml_comment_on_one_line(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "nodes:\n  - {name: 'g[1-4]', region: r1, zone: z1, nvlink_domain: d1}\n"
        "  - {name: 'g[5-8]', region: r1, zone: z1, nvlink_domain: d2}\n"
    )
    inventory = merge([parse_inventory(fleet.read_text())])
    parts = [Partition('nv"l\n#x', tuple(f"g{i}" for i in range(1, 9)), True)]
    text = render_all(inventory, (25, 5), parts)["topology.yaml"]
    (comment,) = [ln for ln in text.splitlines() if "Topology=nvl" in ln]
    assert '("nv\\"l\\n#x" have a domain on every node)' in comment, comment
    assert not any(ln.startswith("#x") for ln in text.splitlines())
