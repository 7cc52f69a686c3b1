"""One fleet and one table of job_desc cases for the policy: run through Python and through the real Lua."""

from __future__ import annotations

import itertools
from typing import Any

from slurm_topo import merge, parse_inventory
from slurm_topo.policy import NO_VAL, NO_VAL16, SPANK_LOCALITY, SPANK_REGIONS, Partition

# us-east: 1a (rack-a1: n01-n03 8x h100 torch-2.4, rack-a2: n04 8x h100 torch-2.3), 1b (rack-b1: n05-n06 4x
# a100)
# us-west: 2a (rack-c1: n07-n08, rack-c2: n09), 2b (rack-d1: n10-n11), 2c (no rack: n12); login1 with no
# location. NVLink domains: nvl-a = n01-n03, nvl-b = n04-n06 (across two zones), nvl-c = n07-n08.
FLEET = """
nodes:
  - {name: "n[01-03]", region: us-east, zone: us-east-1a, network_group: rack-a1,
     gpus: 8, gpu_type: h100, features: [torch-2.4, ib], nvlink_domain: nvl-a}
  - {name: "n04", region: us-east, zone: us-east-1a, network_group: rack-a2,
     gpus: 8, gpu_type: h100, features: [torch-2.3, ib], nvlink_domain: nvl-b}
  - {name: "n[05-06]", region: us-east, zone: us-east-1b, network_group: rack-b1,
     gpus: 4, gpu_type: a100, features: [torch-2.4], nvlink_domain: nvl-b}
  - {name: "n[07-08]", region: us-west, zone: us-west-2a, network_group: rack-c1,
     gpus: 4, gpu_type: a100, features: [torch-2.4], nvlink_domain: nvl-c}
  - {name: "n09", region: us-west, zone: us-west-2a, network_group: rack-c2,
     gpus: 4, gpu_type: a100, features: [torch-2.3]}
  - {name: "n[10-11]", region: us-west, zone: us-west-2b, network_group: rack-d1,
     gpus: 4, gpu_type: a100, features: [torch-2.4]}
  - {name: "n12", region: us-west, zone: us-west-2c, gpus: 4, gpu_type: a100, features: [torch-2.4]}
  - {name: "login1"}
"""
FAMILIES = (
    "policy: {default: prefer, partitions: {cpu: 'any', strict: 'zone:fail'}, families: {torch: 'torch-*'}}\n"
)
POLICY = "policy: {default: prefer, partitions: {cpu: 'any', strict: 'zone:fail'}}\n"
AUTO_POLICY = (
    "policy: {default: prefer, partitions: {cpu: 'any', strict: 'zone:fail', timed: 'zone:auto'}, "
    "plan: 'tp=4,pp=2,bytes=20G,tp_bytes=2G'}\n"
)
"""What ``inventory()`` uses: POLICY with a partition defaulting to zone:auto and a site plan (the data
carries ``auto`` budget factors; tp=4 x pp=2 fits an even number of the most common node, 4x a100: auto jobs
of odd sizes get the note). FAMILIES has no plan (auto jobs get the note)."""
PARTITIONS = [
    Partition("gpu", tuple(f"n{i:02d}" for i in range(1, 13)), default=True),
    Partition("east", tuple(f"n{i:02d}" for i in range(1, 7))),
    Partition("strict", tuple(f"n{i:02d}" for i in range(1, 13))),
    Partition("cpu", ("login1",)),
    Partition("timed", tuple(f"n{i:02d}" for i in range(1, 13))),
]


def inventory(families: bool = False):  # type: ignore[no-untyped-def]
    return merge([parse_inventory(FLEET + (FAMILIES if families else AUTO_POLICY))])


def job(locality: str | None = None, *, via: str = "spank", **fields: Any) -> dict[str, Any]:
    """A job_desc as slurmctld hands it to job_submit/lua (unset numbers are NO_VAL)."""
    desc: dict[str, Any] = {
        "min_nodes": NO_VAL,
        "max_nodes": NO_VAL,
        "num_tasks": NO_VAL,
        "contiguous": NO_VAL16,
        "script": "#!/bin/sh\ntrue\n",
    }
    regions = fields.pop("regions", None)
    env: dict[int, str] = {}
    if locality is not None and via == "spank":
        env[0] = f"{SPANK_LOCALITY}={locality}"
    if regions is not None and via == "spank":
        env[len(env)] = f"{SPANK_REGIONS}={regions}"
    if env:
        desc["spank_job_env"] = env
        desc["spank_job_env_size"] = len(env)
    if via == "comment":
        desc["comment"] = " ".join(
            x
            for x in (
                f"locality={locality}" if locality else "",
                f"locality-regions={regions}" if regions else "",
            )
            if x
        )
    if via == "environment" and locality is not None:
        desc["environment"] = {"SLURM_SPANK_" + SPANK_LOCALITY: locality}
    desc.update(fields)
    return desc


LEVELS = [
    None,
    "prefer",
    "network_group",
    "zone",
    "region",
    "any",
    "zone:fail",
    "region:fail",
    "network_group:fail",
    "bogus",
    "zone:maybe",
    "zone:",
    ":wait",
    "nvl",
    "nvl:fail",
    "nvl:auto",
]
CONSTRAINTS = [
    None,
    "ib",
    "torch-2.4",
    "ib&torch-2.4",
    "ib,torch-2.4",
    "ib|torch-2.3",
    "(ib|torch-2.3)&torch-2.4",
    "ib*2",
    "[zone_us-east-1a|zone_us-west-2a]",
    "torch-2.4&[zone_us-east-1b|zone_us-west-2b]",
    "[rack|x]",
    "region_us-west",
    "zone_us-west-2a|zone_us-east-1a",
    "a b",
    "nope&[x",
    "&[x]",
]
SIZES = [
    {},
    {"min_nodes": 2},
    {"min_nodes": 3},
    {"min_nodes": 4},
    {"min_nodes": 7},
    {"min_nodes": 13},
    {"tres_per_node": "gres:gpu:8"},
    {"tres_per_node": "gres/gpu:h100:8", "min_nodes": 2},
    {"tres_per_job": "gres:gpu:16"},
    {"tres_per_job": "gres/gpu:a100:12"},
    {"tres_per_job": "gres:gpu:40"},
    {"tres_per_task": "gres/gpu:2", "num_tasks": 6},
    {"tres_per_node": "gres:gpu:v100:1"},
    {"tres_per_node": "gres:gpu", "min_nodes": 2},
    {"tres_per_job": "gres/gpu:2,gres/nic:1"},
]
PARTS = [None, "gpu", "east", "strict", "cpu", "gpu,east", "nowhere", "timed"]
AUTO = ["zone:auto", "region:auto", "network_group:auto", "prefer:auto", "any:auto"]
TIME_LIMITS = [None, 1, 7, 60, 120, 1440, 43200, NO_VAL, 0xFFFFFFFF, 0, 2.5, -5]
"""job_desc.time_limit in minutes (unset: NO_VAL; --time=UNLIMITED: INFINITE)."""


def cases() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for loc, cons, size in itertools.product(LEVELS, CONSTRAINTS, SIZES):
        fields = dict(size)
        if cons is not None:
            fields["features"] = cons
        out.append((f"{loc}|{cons}|{size}", job(loc, **fields)))
    for i, (loc, cons, size) in enumerate(itertools.product(AUTO, CONSTRAINTS[:9], SIZES)):
        fields = dict(size, time_limit=TIME_LIMITS[i % len(TIME_LIMITS)])
        if cons is not None:
            fields["features"] = cons
        out.append((f"{loc}|{cons}|{size}|t={fields['time_limit']}", job(loc, **fields)))
    for loc, n, t in itertools.product(["zone:auto", "network_group:auto"], range(1, 14), TIME_LIMITS):
        out.append((f"{loc}|-N{n}|t={t}", job(loc, min_nodes=n, time_limit=t)))
    for loc, part, size in itertools.product(LEVELS[:8], PARTS, SIZES[:6]):
        fields = dict(size)
        if part is not None:
            fields["partition"] = part
        out.append((f"{loc}|part={part}|{size}", job(loc, **fields)))
    extras: list[tuple[str, dict[str, Any]]] = [
        ("comment fallback", job("zone:fail", via="comment", min_nodes=3)),
        ("comment fallback auto", job("zone:auto", via="comment", min_nodes=3, time_limit=90)),
        ("environment fallback auto", job("region:auto", via="environment", min_nodes=2, time_limit=30)),
        ("partition default auto", job(None, partition="timed", min_nodes=3, time_limit=600)),
        ("partition default auto held", job(None, partition="timed", min_nodes=7, time_limit=600)),
        ("het auto", job("zone:auto", min_nodes=2, het_job_offset=1, time_limit=60)),
        ("auto with regions", job("zone:auto", regions="us-west", min_nodes=2, time_limit=60)),
        ("auto interactive impossible", job("zone:auto", min_nodes=7, script=None, time_limit=60)),
        ("environment fallback", job("region", via="environment", min_nodes=2)),
        ("user prefer kept", job("prefer", prefer="ib", min_nodes=2)),
        ("nodelist skips fit", job("zone", min_nodes=9, req_nodes="n[01-09]")),
        ("exclude skips fit", job("zone:fail", min_nodes=9, exc_nodes="n01")),
        ("reservation skips fit", job("zone", min_nodes=9, reservation="maint")),
        ("contiguous skips fit", job("zone", min_nodes=9, contiguous=1)),
        ("regions zone", job("zone", regions="us-west", min_nodes=2)),
        ("regions mixed", job("region", regions="us-west-2a,us-east-1b", min_nodes=2)),
        ("regions any", job("any", regions="us-east")),
        ("regions prefer", job("prefer", regions="us-east,us-west-2b", min_nodes=2)),
        ("regions unknown", job("zone", regions="mars-1")),
        ("regions empty list", job("zone", regions=",")),
        ("regions with or constraint", job("prefer", regions="us-east", features="ib|torch-2.3")),
        ("regions with complex constraint", job("prefer", regions="us-east", features="(ib|x)|y")),
        ("hostile locality", job("zone\n\n SwitchName=x'\"\\;[]" + "é" * 30)),
        ("hostile regions", job("zone", regions="a]|[b\n" * 20)),
        ("huge constraint", job("zone", features="f" * 5000)),
        ("nan nodes", job("zone", min_nodes=float("nan"))),
        ("float nodes", job("zone", min_nodes=2.7)),
        ("negative nodes", job("zone", min_nodes=-3)),
        ("string nodes", job("zone", min_nodes="3")),
        ("spank without equals", {"spank_job_env": {0: SPANK_LOCALITY}, "min_nodes": 2}),
        (
            "spank second entry",
            {"spank_job_env": {0: "LOCALITY=zone", 1: f"{SPANK_LOCALITY}=region:fail"}, "min_nodes": 20},
        ),
        ("comment with tabs", {"comment": "x\tlocality=zone:fail\vlocality=region", "min_nodes": 20}),
        ("comment empty value", {"comment": "locality= locality=zone", "min_nodes": 2}),
        ("het component 0", job("zone", min_nodes=2, het_job_offset=0)),
        ("het component 1 held", job("zone", min_nodes=9, het_job_offset=1)),
        ("het component long record", job("prefer", het_job_offset=2)),
        ("het unset", job("zone", min_nodes=2, het_job_offset=NO_VAL)),
        ("tres with trailing newline", job("zone:fail", tres_per_job="gres:gpu:2\n")),
        ("typed tres with trailing newline", job("zone:fail", tres_per_node="gres/gpu:h100\n:8")),
        ("constraint with trailing newline", job("zone", features="ib\n", min_nodes=2)),
        ("contiguous given", job("zone", min_nodes=2, contiguous=1)),
        ("contiguous unset (0)", job("zone", min_nodes=2, contiguous=0)),
        ("interactive impossible wait", job("zone", min_nodes=7, script=None)),
        ("interactive impossible fail", job("zone:fail", min_nodes=7, script=None)),
        ("interactive fits", job("zone", min_nodes=3, script=None)),
        ("interactive environment ignored", job("zone", via="environment", min_nodes=7, script=None)),
        ("interactive comment", job("region", via="comment", min_nodes=20, script=None)),
        ("huge partition list", job("zone", min_nodes=2, partition=",".join(f"p{i}" for i in range(5000)))),
        ("long partition list within limits", job("zone", min_nodes=2, partition=",".join(["main"] * 800))),
        ("huge tres", job("zone", tres_per_node=",".join(["gres:nic:1"] * 500))),
        ("huge prefer", job("prefer", prefer="a|" * 600 + "b")),
        ("constraint at the limit", job("zone", features="&".join(["ib"] * 341) + "&i")),
        (
            "long comment not read",
            job("zone", via="comment", min_nodes=7, comment="w " * 2100 + "locality=zone"),
        ),
        ("long spank entry skipped", job("zone", min_nodes=2, spank_job_env={0: "x=" + "y" * 5000})),
    ]
    nodelists = [
        "n01,n12",
        "n[01-03]",
        "n[01-04]",
        "n[01-06]",
        "n[05-06],n01",
        "n[10-11]",
        "n12",
        "login1",
        "n99",
        "n[0001-0002]",
        "n1",
        "x[",
        "n[03-01]",
        "n[01-02,12]",
        "n01,,n02",
        "rack[1-2]-n1",
        "n[1-999999999]",
        ",".join(f"n{i:02d}" for i in range(1, 13)),
        "n0123456789",
        # every hostlist form Slurm reads (issue 43: these escaped), and what it does not
        "n01 n12",
        "n01\tn12",
        "n01\nn12",
        " n01 , n12 ",
        "n0[1],n1[2]",
        "n0[1-1],n12",
        "n01,n1[2]",
        "n[0-1][1-2]",
        "n[01-01,12-12]",
        "n0[1-3]",
        "n0[4-6]",
        "n0[5-6] n04",
        "n[07-08]",
        "n1[0-1]",
        "n[1-]",
        "n[ 1]",
        "n[01-02",
        "n]01",
        "n01;n02",
        "n[+1]",
        "n[0000000000000001-2]",
        "n[1-9][0-9][0-9]",
        "n01," * 1100,
        ",",
    ]
    for level, nodes in itertools.product(
        ["zone", "region:fail", "network_group", "nvl", "prefer"], nodelists
    ):
        extras.append((f"nodelist {level} {nodes}", job(level, min_nodes=2, req_nodes=nodes)))
    extras.append(("exclude zone", job("zone", min_nodes=2, exc_nodes="n01")))
    # constraints naming the features slurm-topo makes (model.LEVEL_FEATURE_PREFIXES; issue 43: nvl_ turned
    # every required level off), with each level
    generated = [
        "nvl_nvl-a|nvl_nvl-c",
        "nvl_nvl-b",
        "nvl_nvl-a&ib",
        "[nvl_nvl-a|nvl_nvl-c]",
        "ng_us-east-1a.rack-a1",
    ]
    for level, cons, n in itertools.product(
        ["zone", "region:fail", "network_group", "nvl", "prefer"], generated, [2, 4]
    ):
        extras.append((f"generated {level} {cons} -N{n}", job(level, min_nodes=n, features=cons)))
    return out + extras


def job_record(data: Any, desc: dict[str, Any]) -> dict[str, Any]:
    """The job record slurmctld would hold after submitting ``desc`` through the filter (Python decision)."""
    from slurm_topo.policy import JobRequest, decide

    d = decide(data, JobRequest.from_job_desc(desc))
    rec = {k: v for k, v in desc.items() if k not in ("script", "environment", "contiguous")}
    rec.update(contiguous=1 if desc.get("contiguous") == 1 else 0, priority=0 if d.action == "hold" else 1000)
    rec["partition"] = desc.get("partition") or "gpu"
    if d.features is not None:
        rec["features"] = d.features
    if d.prefer is not None:
        rec["prefer"] = d.prefer
    if d.record:
        rec["admin_comment"] = d.record
    return rec


UPDATES: list[dict[str, Any]] = [
    {},
    {"time_limit": 60},
    {"min_nodes": 1},
    {"min_nodes": 3},
    {"min_nodes": 6},
    {"min_nodes": 13},
    {"features": ""},
    {"features": "ib"},
    {"features": "torch-2.4|ib"},
    {"features": "[zone_us-west-2a|zone_us-east-1b]"},
    {"comment": "locality=any"},
    {"comment": "locality=zone:fail"},
    {"comment": "hello"},
    {"comment": "locality=any", "features": ""},
    {"priority": 0xFFFFFFFF},
    {"priority": 0},
    {"priority": 0xFFFFFFFF, "min_nodes": 2},
    {"partition": "cpu"},
    {"partition": "east"},
    {"partition": "main"},
    {"tres_per_node": "gres:gpu:8"},
    {"tres_per_job": "gres/gpu:h100:16"},
    {"min_nodes": NO_VAL, "contiguous": NO_VAL16, "num_tasks": NO_VAL},
    {"req_nodes": "n01,n12", "min_nodes": 2},
    {"req_nodes": "n01 n12"},
    {"req_nodes": "n0[1],n1[2]"},
    {"req_nodes": "n0[1-1],n12"},
    {"req_nodes": "n01,n1[2]"},
    {"req_nodes": "n0[5-6]"},
    {"req_nodes": "n[1-]"},
    {"features": "nvl_nvl-a|nvl_nvl-c"},
    {"features": "nvl_nvl-b", "min_nodes": 3},
    {"prefer": "ib"},
]


def modify_cases(data: Any) -> list[tuple[str, dict[str, Any], dict[str, Any], bool]]:
    """(name, job record, update, administrator?) over submitted jobs of every outcome."""
    submitted = [
        ("zone -N2", job("zone", min_nodes=2)),
        ("zone:fail -N2 ib", job("zone:fail", min_nodes=2, features="ib")),
        ("zone held -N7", job("zone", min_nodes=7)),
        ("region held -N20", job("region", min_nodes=20)),
        ("comment zone -N3", job("zone", via="comment", min_nodes=3)),
        ("comment zone held", job("zone", via="comment", min_nodes=7)),
        ("prefer -N2", job("prefer", min_nodes=2)),
        ("default", job(None, min_nodes=2)),
        ("any", job("any", min_nodes=2)),
        ("network_group gpus", job("network_group", tres_per_node="gres:gpu:4", min_nodes=2)),
        ("strict partition", job(None, partition="strict", min_nodes=2)),
        ("regions", job("zone", regions="us-west", min_nodes=2)),
        ("region -N2", job("region", min_nodes=2)),
        ("region -N2 own prefer", job("region", min_nodes=2, prefer="ib")),
        ("no record", {"min_nodes": 2, "features": "ib"}),
        ("zone:auto -N2", job("zone:auto", min_nodes=2, time_limit=120)),
        ("zone:auto held -N7", job("zone:auto", min_nodes=7, time_limit=120)),
        ("region:auto no limit", job("region:auto", min_nodes=2)),
        ("timed partition -N3", job(None, partition="timed", min_nodes=3, time_limit=60)),
        ("nvl -N2", job("nvl", min_nodes=2)),
    ]
    out = []
    for (name, desc), upd, admin in itertools.product(submitted, UPDATES, (False, True)):
        rec = job_record(data, desc)
        if name == "no record":
            rec = dict(desc)
        out.append((f"{name}|{upd}|{'admin' if admin else 'owner'}", rec, upd, admin))
    relaxed = job_record(data, job("zone:auto", min_nodes=2, time_limit=120))
    relaxed["admin_comment"] = (
        "site note; "
        + relaxed["admin_comment"]
        + "; slurm-topo-relax: zone->region waited=900s budget=612s at=2026-11-30T12:00:00Z"
    )
    relaxed["features"] = "[region_us-east|region_us-west]"
    for upd, admin in itertools.product(UPDATES + [{"features": "[region_us-east]"}], (False, True)):
        out.append((f"relaxed zone:auto|{upd}|{'admin' if admin else 'owner'}", relaxed, upd, admin))
    out.append(
        (
            "user-held fitting job released",
            {**job_record(data, job("zone", min_nodes=2)), "priority": 0},
            {"priority": 0xFFFFFFFF},
            False,
        )
    )
    return out
