"""slurmconf: the one reader of Slurm's text (hand-typed cases; tests/test_slurmconf_real.py runs the same
readers over what real daemons printed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo.access import text as slurm_text
from slurm_topo.core.errors import ParseError
from slurm_topo.slurmconfig import slurmconf, slurmconf_files

JOB = """JobId=42 JobName=train
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=gs[1-4] BatchHost=gs1
   NumNodes=4 NumCPUs=32 NumTasks=32 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
     Nodes=gs[1-2] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
     Nodes=gs[3-4] CPU_IDs=0-7 Mem=0 GRES=gpu:h100:8(IDX:0-7)
   TresPerNode=gres:gpu:8
"""
TOPOLOGY = """SwitchName=root Level=2 LinkSpeed=1 Nodes=gs[1-4] Switches=zone_r1-a
SwitchName=zone_r1-a Level=1 LinkSpeed=1 Nodes=gs[1-4] Switches=ng_r1-a.rack-1,ng_r1-a.rack-2
SwitchName=ng_r1-a.rack-1 Level=0 LinkSpeed=1 Nodes=gs[1-2]
SwitchName=ng_r1-a.rack-2 Level=0 LinkSpeed=1 Nodes=gs[3-4]
"""
GRES = "".join(
    f"NodeName=gs[1-4] Name=gpu Type=h100 File=/dev/nvidia{i} Links="
    + ",".join("-1" if j == i else ("18" if (i < 4) == (j < 4) else "0") for j in range(8))
    + "\n"
    for i in range(8)
)


# ---- scontrol show job -d


def test_parse_job_detail_reads_nodes_and_gpu_indices() -> None:
    a = slurm_text.parse_job_detail(JOB)
    assert a.job_id == "42" and a.nodes == ("gs1", "gs2", "gs3", "gs4")
    assert a.gpus["gs3"] == tuple(range(8))
    b = slurm_text.parse_job_detail(
        "JobId=7 JobName=x\n   NodeList=n[01-02]\n"
        " Nodes=n01 CPU_IDs=0 Mem=0 GRES=gpu:a:1(IDX:0),gpu:b:2(IDX:4-5)\n"
        " Nodes=n02 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:1,3)\n"
    )
    assert b.gpus == {"n01": (0, 4, 5), "n02": (1, 3)}


def test_a_job_name_or_comment_cannot_pass_for_the_node_list() -> None:
    """The node list is only a line's own NodeList= (a name on the first line, a comment or a path that says
    NodeList= are never read as it)."""
    hostile = JOB.replace("JobName=train", "JobName=x NodeList=evil[1-9]").replace(
        "   TresPerNode", "   Comment=y NodeList=evil2\n   TresPerNode"
    )
    a = slurm_text.parse_job_detail(hostile)
    assert a.nodes == ("gs1", "gs2", "gs3", "gs4"), a.nodes


def test_parse_job_detail_without_gpus_or_not_running() -> None:
    a = slurm_text.parse_job_detail(
        "JobId=9 JobName=x\n   NodeList=c1\n   Nodes=c1 CPU_IDs=0-3 Mem=0 GRES=\n"
    )
    assert a.gpus == {"c1": ()}
    with pytest.raises(ParseError, match="is the job running"):
        slurm_text.parse_job_detail("JobId=9 JobName=x\n   JobState=PENDING\n   NodeList=(null)\n")
    with pytest.raises(ParseError, match="scontrol show job -d"):
        slurm_text.parse_job_detail("JobId=9 JobName=x\n   NodeList=c[1-\n")


# ---- scontrol show config, cgroup.conf


def test_parse_show_config_keeps_the_first_value_and_skips_prose() -> None:
    text = (
        "Configuration data as of 2026-01-01T00:00:00\n"
        "SLURM_CONF               = /etc/slurm/slurm.conf\n"
        "SLURM_VERSION            = 22.05.8\n"
        "TaskPlugin               = task/affinity,task/cgroup\n"
        "TaskPlugin               = later\n"
        "Cgroup Support Configuration:\n"
    )
    config = slurm_text.parse_show_config(text)
    assert config["SLURM_VERSION"] == "22.05.8"
    assert config["TaskPlugin"] == "task/affinity,task/cgroup"
    assert "Cgroup Support Configuration:" not in config


def test_devices_constrained_needs_task_cgroup_and_constrain_devices() -> None:
    assert slurmconf.devices_constrained(
        {"TaskPlugin": "task/affinity,task/cgroup"}, "ConstrainDevices=yes\n"
    )
    assert not slurmconf.devices_constrained({"TaskPlugin": "task/none"}, "ConstrainDevices=yes\n")
    assert not slurmconf.devices_constrained({"TaskPlugin": "task/cgroup"}, "ConstrainCores=yes\n")
    assert not slurmconf.devices_constrained({"TaskPlugin": "task/cgroup"}, "#ConstrainDevices=yes\n")
    assert slurmconf.devices_constrained({"TaskPlugin": "task/cgroup"}, "constraindevices = YES # on\n")
    assert not slurmconf.devices_constrained({"TaskPlugin": "task/cgroup"}, None)


# ---- gres.conf Links=


def test_parse_gres_links_gives_two_islands() -> None:
    topos = slurmconf.parse_gres_links(GRES)
    assert set(topos) == {"gs1", "gs2", "gs3", "gs4"}
    assert topos["gs1"].link(0, 3) == "NV18" and topos["gs1"].link(3, 4) == "SYS"
    # nodes without Links= have no link data
    assert slurmconf.parse_gres_links("NodeName=n[01-02] Name=gpu File=/dev/nvidia[0-3]\n") == {}


@pytest.mark.parametrize(
    "links, words",
    [("-1,x", "bad Links=-1,x for n1"), ("-1,2,2", "expected 2 entries"), ("2,-1", "-1 at its own index")],
)
def test_parse_gres_links_refuses_a_bad_row(links: str, words: str) -> None:
    text = (
        f"NodeName=n1 Name=gpu File=/dev/nvidia0 Links={links}\n"
        "NodeName=n1 Name=gpu File=/dev/nvidia1 Links=2,-1\n"
    )
    with pytest.raises(ParseError, match=words):
        slurmconf.parse_gres_links(text, source="g.conf")


# ---- scontrol show topology


def test_parse_scontrol_topology_paths_and_levels() -> None:
    tree = slurm_text.parse_scontrol_topology(TOPOLOGY)
    assert tree.path("gs3") == ("ng_r1-a.rack-2", "zone_r1-a", "root")
    assert tree.level["root"] == 2 and tree.level["ng_r1-a.rack-1"] == 0
    assert slurm_text.parse_scontrol_topology("No topology information available\n").path("gs1") == ()


def test_parse_scontrol_topology_derives_missing_levels() -> None:
    """A switch printed without Level= sits one above its highest child."""
    tree = slurm_text.parse_scontrol_topology(
        "SwitchName=top Switches=mid\nSwitchName=mid Switches=leaf\nSwitchName=leaf Nodes=n1\n"
    )
    assert (tree.level["leaf"], tree.level["mid"], tree.level["top"]) == (0, 1, 2)
    assert tree.path("n1") == ("leaf", "mid", "top")


# ---- topology.conf, slurm.conf


def test_parse_topology_conf_lines_and_errors() -> None:
    lines = slurmconf.parse_topology_conf(
        "# c\nSwitchName=s1 \\\n  Nodes=n[1-2]\nSwitchName=top Switches=s1\n"
    )
    assert [(s.name, s.nodes, s.switches, s.lineno) for s in lines] == [
        ("s1", ("n1", "n2"), None, 2),
        ("top", None, ("s1",), 4),
    ]
    with pytest.raises(ParseError, match=r"t.conf:1: unknown key 'bogus'"):
        slurmconf.parse_topology_conf("SwitchName=s1 Bogus=1\n", source="t.conf")
    with pytest.raises(ParseError, match="expected SwitchName="):
        slurmconf.parse_topology_conf("BlockName=b1 Nodes=n1\n")


def test_slurm_conf_node_definitions_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(
        "NodeName=DEFAULT CPUs=4\nNodeName=n[1-2] CPUs=4\nInclude more.conf\n"
    )
    (tmp_path / "more.conf").write_text("NodeName=n3\n")
    found = slurmconf_files.slurm_conf_node_definitions(tmp_path / "slurm.conf")
    assert found == {str(tmp_path / "slurm.conf"): ["n1", "n2"], str(tmp_path / "more.conf"): ["n3"]}


def test_scontrol_partitions_and_nodes() -> None:
    rows = slurm_text.parse_scontrol_partitions(
        "PartitionName=gpu Default=YES Nodes=n[01-02] State=UP\nPartitionName=empty Nodes=(null)\n"
    )
    assert rows == [("gpu", ["n01", "n02"], True), ("empty", [], False)]
    nodes = slurm_text.parse_scontrol_nodes("NodeName=n1 Comment=locality=zone CPUTot=4\nn[2-3]\n")
    assert [n["NodeName"] for n in nodes] == ["n1", "n2", "n3"] and nodes[0]["Comment"] == "locality=zone"
    with pytest.raises(ParseError, match="expected PartitionName="):
        slurm_text.parse_scontrol_partitions("Nodes=n1\n")


def _split_pairs_by_matches(line: str, *, output: bool = False) -> dict[str, str]:
    """The Key=value split as it was written first (one match object a key, "line start or whitespace"
    before it): the reference the faster split_pairs must equal, value for value and key order too."""
    import re

    rx = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=" if output else r"(?:^|\s)([A-Za-z][A-Za-z0-9_/]*)=")
    matches = list(rx.finditer(line))
    if not matches or line[: matches[0].start()].strip():
        raise ValueError("expected Key=value pairs")
    out: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        if output:
            out.setdefault(m[1], line[m.end() : end].strip())
        else:
            out[m[1]] = line[m.end() : end].strip()
    return out


def _outcome(fn, line: str, output: bool):  # type: ignore[no-untyped-def]
    try:
        got = fn(line, output=output)
    except ValueError as exc:
        return ("error", str(exc))
    return ("pairs", list(got.items()))


def test_split_pairs_equals_the_reference_on_generated_lines() -> None:
    """On 100 000 seeded lines built from keys, '=', blanks, tabs, newlines, Unicode spaces (no-break, em,
    the ASCII separators), lower-case keys and repeated keys: the same pairs in the same order, or the same
    error, in both modes."""
    import random

    pieces = [
        "A", "b", "=", " ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "Key", "k", "x=", " A=", " a=", "Z:",
        "/", "_", "1", "é", "NodeName=", "  ", "B:c=", "==", " Comment=", "locality=zone", "\x0b", "\x0c",
        "\r", "\x1d", "\x1e", "\x1f", "\u3000", "\x85",
    ]  # fmt: skip
    rng = random.Random(515)
    for _ in range(50_000):
        line = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        for output in (False, True):
            assert _outcome(slurmconf.split_pairs, line, output) == _outcome(
                _split_pairs_by_matches, line, output
            ), (line, output)


def test_the_blank_only_pattern_is_taken_only_where_it_is_exact() -> None:
    """split_pairs splits on a plain blank only where the blank is the line's only whitespace: the ASCII
    characters it rules out are exactly those Python and the regular expressions count as whitespace."""
    import re

    others = {chr(i) for i in range(128) if chr(i).isspace() and chr(i) != " "}
    assert set(slurmconf._ASCII_SPACES_BUT_BLANK) == others
    assert others == {chr(i) for i in range(128) if re.match(r"\s", chr(i)) and chr(i) != " "}
    for space in sorted(others) + ["\u00a0", "\u2003"]:
        line = f"A=1{space}B=2 C=3"
        assert not slurmconf.blanks_only(line)
        assert slurmconf.split_pairs(line, output=True) == {"A": "1", "B": "2", "C": "3"}, repr(space)
    assert slurmconf.blanks_only("A=1 B=2")


def test_split_pairs_equals_the_reference_on_real_captures() -> None:
    """Every line of every real scontrol capture (node, partition, job -o; all releases) splits as the
    reference splits it."""
    root = Path(__file__).parent / "fixtures" / "real"
    lines = [
        line
        for path in sorted(root.glob("slurm-*/scontrol-show-*-o*.txt"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(lines) > 20
    for line in lines:
        assert _outcome(slurmconf.split_pairs, line, True) == _outcome(_split_pairs_by_matches, line, True), (
            line
        )


def test_a_value_cannot_add_or_change_a_field() -> None:
    """A user's text that spells `` Key=`` in scontrol's output: the first of a repeated key keeps its value
    (a later copy inside a comment cannot override it), and a lower-case key is part of the value."""
    line = (
        "JobId=7 JobName=x State=RUNNING Comment=hi State=COMPLETED NodeList=evil locality=zone NodeList=n1"
    )
    pairs = slurmconf.split_pairs(line, output=True)
    assert pairs["State"] == "RUNNING"
    assert pairs["Comment"] == "hi"
    assert pairs["NodeList"] == "evil locality=zone"
    assert list(pairs) == ["JobId", "JobName", "State", "Comment", "NodeList"]
    assert slurmconf.split_pairs("a=1 b=2 a=3") == {"a": "3", "b": "2"}  # a config line: the last wins


def test_key_names_are_shared_between_lines() -> None:
    """Each key name is one string for every line (a 100 000-node list holds 45 keys, not 4.5 million)."""
    first = slurmconf.split_pairs("NodeName=n1 State=IDLE", output=True)
    second = slurmconf.split_pairs("  NodeName=n2   State=MIXED ", output=True)
    assert second == {"NodeName": "n2", "State": "MIXED"}
    assert all(a is b for a, b in zip(first, second, strict=True))


def _nodes_outcome(text: str, keys: tuple[str, ...] | None):  # type: ignore[no-untyped-def]
    try:
        records = slurm_text.parse_scontrol_nodes(text, source="nodes.txt", keys=keys)
    except ParseError as exc:
        return ("error", str(exc))
    if keys is None:  # the full parse, restricted afterwards: what the keyed parse must equal
        wanted = ("NodeName", *keys_of_states())
        records = [{k: r[k] for k in wanted if k in r} for r in records]
    return ("records", records)


def keys_of_states() -> tuple[str, ...]:
    from slurm_topo.reports.capacity import STATE_KEYS

    return STATE_KEYS


def test_the_keyed_node_parse_equals_the_full_parse_on_generated_lines() -> None:
    """``parse_scontrol_nodes(keys=…)`` searches a line of blanks for the wanted keys alone: on 30 000 seeded
    listings whose values repeat, nest and forge the wanted keys (`` State=`` inside a Reason, ``GresUsed=``
    after ``Gres=``, ``XState=``, lower-case ``state=``, tabs and Unicode spaces that send a line to the full
    split, hostlist lines, comments, bad lines) it gives the full parse's values, or the same error."""
    import random

    pieces = [
        "NodeName=", "n1", " State=", "IDLE", "MIXED+DRAIN", " Gres=", "gpu:h100:8(S:0-1)", " GresUsed=",
        "gpu:h100:2(IDX:0-1)", " AllocTRES=", "cpu=4,gres/gpu=2", " Reason=", "down State=IDLE", " XState=",
        " state=", " ", "  ", "\t", "\u00a0", "=", " A:b=", "(null)", "x", " Comment=", "é", "#",
    ]  # fmt: skip
    rng = random.Random(4301)
    keys = keys_of_states()
    for _ in range(30_000):
        lines = []
        for _ in range(rng.randint(0, 4)):
            head = rng.choice(
                ["NodeName=", "NodeName=", "NodeName=", " NodeName=", "n[1-2]", "", "# c", "x="]
            )
            lines.append(head + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))))
        text = "\n".join(lines)
        assert _nodes_outcome(text, keys) == _nodes_outcome(text, None), text


def test_the_keyed_node_parse_equals_the_full_parse_on_real_captures() -> None:
    root = Path(__file__).parent / "fixtures" / "real"
    paths = sorted(root.glob("slurm-*/scontrol*show-node-o*.txt"))
    assert len(paths) >= 3
    for path in paths:
        text = path.read_text()
        keyed = _nodes_outcome(text, keys_of_states())
        assert keyed == _nodes_outcome(text, None), path
        assert keyed[0] == "records" and any("Gres" in r for r in keyed[1]), path
