"""Seeded fuzzing of every input a fleet can hand us: inventories (each trust level), node records (YAML and
JSON), cloud listings (gcp, aws, azure) and Slurm's node list (``--nodes-from``).

Each case puts hostile values into one to three fields (or mutates the document's text: tags, alias bombs,
duplicate keys, deep nesting, cuts) and requires: the loader either accepts it or raises ``SlurmTopoError``
(one clear line) — never another exception (0 tracebacks); no case runs longer than ``CASE_LIMIT_S`` (0
hangs); what is accepted renders to Slurm text with no injected line or key. One case in ``CLI_EVERY`` also
runs ``slurm-topo generate`` in-process into a directory that already holds good outputs: exit 0 with every
file from the same content, or exit 2 with the directory untouched (0 partial writes).

Seeded and bounded: ``SLURM_TOPO_FUZZ_SEED`` and ``SLURM_TOPO_FUZZ_CASES`` change the run (the default is
14 000 cases, 10 000 of them inventories and node records, about 40 s on two busy cores);
``benchmarks/bench_fuzz_inputs.py`` runs the same generator larger.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from slurm_topo.access.text import parse_scontrol_nodes
from slurm_topo.core.errors import SlurmTopoError
from slurm_topo.inventory import merge, parse_inventory, with_slurm_nodes
from slurm_topo.render import render_all
from slurm_topo.sources.providers import import_listing
from slurm_topo.sources.records import load_record_file

SEED = int(os.environ.get("SLURM_TOPO_FUZZ_SEED", "20261130"))
CASES = int(os.environ.get("SLURM_TOPO_FUZZ_CASES", "14000"))
CASE_LIMIT_S = 5.0
CLI_EVERY = 70

HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    2**64,
    10**30,
    1e308,
    float("nan"),
    "",
    " ",
    "a b",
    "ab\n",
    "\n",
    "a\tb",
    "a#b",
    "a=b",
    "a,b",
    "a[1]",
    "a]",
    "a|b",
    "a&b",
    "a%sb",
    "%s%s%n",
    "{}",
    "x" * 10_000,
    "é",
    "\u202e",
    "a\0b",
    "zone_us-central1-c",
    "region_r1",
    "ng_r1-a.g1",
    "nvl_0",
    "n[1-1000000000]",
    "n[0-99999999]",
    "n18446744073709551616",
    "n[18446744073709551614-18446744073709551615]",
    "10.0.0.1,10.0.0.2",
    "BOGUS",
    "99999999999999999999",
    "010",
    "0x10",
    "gpu:8 Features=x",
    "gpu:a100:x:y:8",
    "State=DRAIN",
    ["a", "b"],
    [["deep"]],
    {"k": "v"},
    {"nodes": []},
]
NICE = [
    "r1",
    "r1-a",
    "europe-west1",
    "europe-west1-b",
    "us-east-1a",
    "g1",
    "n[1-3]",
    "n1",
    "8",
    "h100",
    "DRAIN",
]
ENTRY_FIELDS = [
    "name",
    "region",
    "zone",
    "network_group",
    "labels",
    "labels.gpulayer.dev/zone",
    "labels.topology.kubernetes.io/region",
    "features",
    "features[0]",
    "gpus",
    "gpu_type",
    "source",
    "slurm",
    "found_by",
    "notes",
    "gpu_topology",
    *(
        f"slurm.{k}"
        for k in (
            "NodeHostname",
            "NodeAddr",
            "Port",
            "CPUs",
            "Boards",
            "Sockets",
            "SocketsPerBoard",
            "CoresPerSocket",
            "ThreadsPerCore",
            "RealMemory",
            "TmpDisk",
            "Gres",
            "Weight",
            "State",
            "Feature",
        )
    ),
    "unknown_key",
    "policy",
    "policy.default",
    "policy.partitions",
    "policy.families",
]
RECORD_FIELDS = [
    "name",
    "region",
    "zone",
    "network_group",
    "source",
    "found_by",
    "notes",
    "features",
    "slurm",
]
INVENTORY_KINDS = ("operator", "provider", "self", "record-yaml", "record-json")
KINDS = ("operator", "provider", "self", "record-yaml", "record-json", "gcp", "aws", "azure", "nodes-from")
SCHEDULE = (*INVENTORY_KINDS, *KINDS)
"""Kinds in turn: inventories and records come twice in every 14 cases (10 000 of the default 14 000)."""
_SAFE_TOKEN = re.compile(r"^[A-Za-z0-9._:/+,=\[\]-]+\Z")


class Hang(Exception):
    pass


@dataclass
class Tally:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    cli_runs: int = 0
    per_kind: dict[str, int] = field(default_factory=dict)
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    partial_writes: list[str] = field(default_factory=list)
    bad_output: list[str] = field(default_factory=list)
    slowest_s: float = 0.0


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"over {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _value(rng: random.Random) -> Any:
    return rng.choice(HOSTILE) if rng.random() < 0.8 else rng.choice(NICE)


def _put(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b`` / ``a[0]`` in a nested mapping (a label key with dots is kept whole after its first
    part)."""
    if path.startswith("labels."):
        labels = doc.setdefault("labels", {})
        if isinstance(labels, dict):
            labels[path[len("labels.") :]] = value
        return
    if path.endswith("[0]"):
        doc[path[:-3]] = [value]
        return
    head, _, rest = path.partition(".")
    if rest:
        inner = doc.setdefault(head, {})
        if isinstance(inner, dict):
            inner[rest] = value
        return
    doc[head] = value


def _mutate_text(rng: random.Random, text: str) -> str:
    """Document-level hostility: tags, an alias bomb, a duplicate key, deep nesting, a cut, stray bytes."""
    pick = rng.randrange(8)
    if pick == 0:
        tag = rng.choice(["!!int", "!!timestamp", "!!float", "!!binary", "!!python/name:os.system", "!!set"])
        return re.sub(r"(region|zone|name): ", lambda m: f"{m[1]}: {tag} ", text, count=1)
    if pick == 1:
        bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        return bomb + text.replace("region: ", "region: *i\n    zone: ", 1) if rng.random() < 0.5 else bomb
    if pick == 2:
        return text.replace("  - name:", "  - name: dup\n    name:", 1)
    if pick == 3:
        return text + "extra: " + "[" * rng.choice([100, 1000, 20_000]) + "\n"
    if pick == 4:
        return text[: rng.randrange(max(1, len(text)))]
    if pick == 5:
        i = rng.randrange(max(1, len(text)))
        return (
            text[:i]
            + rng.choice(["\0", "\x85", "\ufeff", "\t", "{", "*", "&x ", "? ", "%YAML 9\n"])
            + text[i:]
        )
    if pick == 6:
        return text.replace("nodes:", "nodes: &n", 1) + "more: *n\n"
    return text * rng.choice([2, 3])


def _inventory_text(rng: random.Random, kind: str) -> str:
    entry: dict[str, Any] = {"name": "n[1-3]", "region": "r1", "zone": "r1-a", "source": kind}
    doc: dict[str, Any] = {"nodes": [entry]}
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(ENTRY_FIELDS)
        if path.startswith("policy"):
            if kind == "operator":
                doc.setdefault("policy", {})
                _put(doc, path, _value(rng))
        else:
            _put(entry, path, _value(rng))
    if rng.random() < 0.05:  # a hostile key, at the top or in the entry
        key = rng.choice([v for v in HOSTILE if isinstance(v, str)])
        (doc if rng.random() < 0.5 else entry)[key] = _value(rng)
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=rng.random() < 0.5)
    return _mutate_text(rng, text) if rng.random() < 0.2 else text


def _record_text(rng: random.Random, form: str) -> str:
    entry: dict[str, Any] = {"name": "n1", "region": "r1", "zone": "r1-a", "source": "self"}
    for _ in range(rng.randint(1, 3)):
        entry[rng.choice(RECORD_FIELDS)] = _value(rng)
    if form == "json":
        text = json.dumps(entry, default=str, allow_nan=True)
        return text[: rng.randrange(len(text))] if rng.random() < 0.1 else text
    text = yaml.safe_dump({"nodes": [entry]}, sort_keys=False)
    return _mutate_text(rng, text) if rng.random() < 0.2 else text


def _listing_text(rng: random.Random, provider: str) -> str:
    if provider == "gcp":
        inst: dict[str, Any] = {"name": "gpu-1", "zone": "projects/p/zones/europe-west1-b", "id": "1"}
        keys = ["name", "zone", "id"]
        doc: Any = [inst]
    elif provider == "aws":
        inst = {
            "InstanceId": "i-1",
            "Tags": [{"Key": "Name", "Value": "gpu-1"}],
            "Placement": {"AvailabilityZone": "us-east-1a", "GroupName": "pg1"},
            "State": {"Name": "running"},
        }
        keys = ["InstanceId", "Tags", "Placement", "State", "PrivateDnsName"]
        doc = {"Reservations": [{"Instances": [inst]}]}
    else:
        inst = {"name": "gpu-1", "location": "eastus", "zones": ["1"], "vmId": "v"}
        keys = ["name", "location", "zones", "proximityPlacementGroup", "vmId"]
        doc = [inst]
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(keys)
        placement, tags = inst.get("Placement"), inst.get("Tags")
        if key == "Placement" and isinstance(placement, dict) and rng.random() < 0.7:
            placement[rng.choice(["AvailabilityZone", "GroupName"])] = _value(rng)
        elif key == "Tags" and isinstance(tags, list) and tags and isinstance(tags[0], dict):
            tags[0]["Value"] = _value(rng)
        else:
            inst[key] = _value(rng)
    if rng.random() < 0.1:
        doc = _value(rng)
    return json.dumps(doc, default=str)


def _nodes_from_text(rng: random.Random) -> str:
    lines = ["NodeName=n1 CPUTot=8 RealMemory=1000 State=IDLE"]
    for _ in range(rng.randint(1, 3)):
        value = _value(rng)
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        lines.append(rng.choice([f"NodeName={text} CPUTot=4", f"NodeName=n2 CPUTot={text}", text]))
    return "\n".join(lines) + "\n"


def _check_rendered(files: dict[str, str]) -> str | None:
    """Every line of the Slurm files is a comment or ``Key=token`` pairs from a strict alphabet."""
    for name in ("topology.conf", "slurm-topo-nodes.conf", "gres.conf"):
        for line in files.get(name, "").splitlines():
            if not line or line.startswith("#"):
                continue
            for token in line.split(" "):
                key, eq, value = token.partition("=")
                if not eq or not key.isalpha() or not _SAFE_TOKEN.match(value):
                    return f"{name}: {line[:120]!r}"
    return None


GOOD = "nodes:\n  - {name: 'g[1-4]', region: r1, zone: r1-a}\n"


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _run_cli(tmp: Path, kind: str, text: str) -> str | None:
    """``slurm-topo generate`` in-process on the case's input into a directory holding good outputs; the
    failure description, or None."""
    from slurm_topo.cli import main

    out = tmp / "out"
    good = tmp / "good.yaml"
    good.write_text(GOOD)
    argv = ["generate", "-i", str(good), "-o", str(out), "--slurm-version", "22.05"]
    for child in tmp.glob("case*"):
        if child.is_dir():
            for f in child.iterdir():
                f.unlink()
            child.rmdir()
        else:
            child.unlink()
    if not out.exists():
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            with contextlib.suppress(SystemExit):
                main(argv)
    before = _snapshot(out)
    if kind in ("record-yaml", "record-json"):
        records = tmp / "case-records"
        records.mkdir()
        (records / ("n1.json" if kind == "record-json" else "n1.yaml")).write_text(text, errors="replace")
        argv += ["--records", str(records)]
    elif kind == "nodes-from":
        listing = tmp / "case-nodes.txt"
        listing.write_text(text, errors="replace")
        argv += ["--nodes-from", str(listing)]
    else:
        inventory = tmp / "case.yaml"
        inventory.write_text(text, errors="replace")
        argv += ["-i", str(inventory)]
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    after = _snapshot(out)
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(".")] + [
        p.name for p in out.iterdir() if p.name.startswith(".")
    ]
    if leftovers:
        return f"temporary files left: {leftovers}"
    if code == 2:
        lines = err.getvalue().splitlines()
        if after != before:
            return "exit 2 but the output directory changed"
        if not lines or not lines[-1].startswith("slurm-topo: error: ") or "Traceback" in err.getvalue():
            return f"exit 2 without one error line: {err.getvalue()[-300:]!r}"
        return None
    if code != 0:
        return f"exit {code}: {err.getvalue()[-300:]!r}"
    prints = {re.search(r"fingerprint sha256:(\w+)", t.decode()) for t in after.values()}
    if len({m[1] if m else None for m in prints}) != 1:
        return "exit 0 but the files are from different content"
    return None


def run_case(rng: random.Random, kind: str, tmp: Path) -> tuple[bool, str, Callable[[], str | None] | None]:
    """One case: (accepted, input text, a CLI check to run when sampled)."""
    if kind in ("operator", "provider", "self"):
        text = _inventory_text(rng, kind)
        try:
            loaded = parse_inventory(text, source="fuzz.yaml")
        except SlurmTopoError:
            return False, text, None
        files = render_all(merge([loaded]), (22, 5)) if loaded.nodes else {}
        problem = _check_rendered(files)
        if problem:
            raise AssertionError(f"unsafe output {problem}")
        return True, text, None
    if kind.startswith("record-"):
        form = kind.split("-", 1)[1]
        text = _record_text(rng, form)
        path = tmp / f"rec.{form}"
        path.write_text(text, errors="replace")
        try:
            load_record_file(path)
        except SlurmTopoError:
            return False, text, None
        return True, text, None
    if kind == "nodes-from":
        text = _nodes_from_text(rng)
        try:
            records = parse_scontrol_nodes(text, source="nodes.txt")
            base = merge([parse_inventory(GOOD)])
            inv = with_slurm_nodes(base, records, "nodes.txt")
            problem = _check_rendered(render_all(inv, (22, 5)))
        except SlurmTopoError:
            return False, text, None
        if problem:
            raise AssertionError(f"unsafe output {problem}")
        return True, text, None
    text = _listing_text(rng, kind)
    try:
        result = import_listing(kind, text, source="listing.json")
        parse_inventory(result.text, source="imported.yaml")
    except SlurmTopoError:
        return False, text, None
    return True, text, None


def fuzz(
    seed: int, cases: int, tmp: Path, *, cli_every: int = CLI_EVERY, budget_s: float | None = None
) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    started = time.monotonic()
    for i in range(cases):
        if budget_s is not None and time.monotonic() - started > budget_s:
            break
        kind = SCHEDULE[i % len(SCHEDULE)]
        case_rng = random.Random(rng.getrandbits(64))
        t0 = time.monotonic()
        text = ""
        try:
            with time_limit(CASE_LIMIT_S):
                accepted, text, _ = run_case(case_rng, kind, tmp)
                if cli_every and i % cli_every == 0 and kind not in ("gcp", "aws", "azure"):
                    tally.cli_runs += 1
                    problem = _run_cli(tmp, kind, text)
                    if problem:
                        tally.partial_writes.append(f"case {i} ({kind}): {problem}; input {text[:200]!r}")
        except Hang as exc:
            tally.hangs.append(f"case {i} ({kind}): {exc}; input {text[:200]!r}")
            continue
        except Exception as exc:  # the point: anything but SlurmTopoError is a traceback a user would see
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            tally.tracebacks.append(f"case {i} ({kind}) at {where}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        finally:
            tally.slowest_s = max(tally.slowest_s, time.monotonic() - t0)
        tally.cases += 1
        tally.per_kind[kind] = tally.per_kind.get(kind, 0) + 1
        if accepted:
            tally.accepted += 1
        else:
            tally.refused += 1
    return tally


def test_fuzzed_inputs_never_trace_hang_or_write_partially(tmp_path: Path) -> None:
    """≥ 10 000 seeded hostile cases over every input kind: 0 tracebacks, 0 hangs, 0 partial writes."""
    tally = fuzz(SEED, CASES, tmp_path)
    assert tally.tracebacks == []
    assert tally.hangs == []
    assert tally.partial_writes == []
    assert tally.cases == CASES
    assert tally.cli_runs >= CASES // CLI_EVERY // 2
    assert tally.accepted > 0 and tally.refused > tally.accepted  # the generator reaches both outcomes
    assert set(tally.per_kind) == set(KINDS)
    assert sum(tally.per_kind[k] for k in INVENTORY_KINDS) >= 10_000 * CASES // 14_000
