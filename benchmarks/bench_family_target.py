"""How often prefer's first satisfiable alternative reaches the family target (issue 44, item 4).

Seeded fleets with families (2-4 regions of 1-4 zones of racks, 2-5 torch values spread unevenly over zones,
2-3 overlapping partitions, a third to two thirds of the nodes busy) and jobs of 2-16 nodes. For each job the
Python filter (the Lua twin agrees by the parity tests) writes its ``--prefer`` bracket; Slurm's matching OR
takes the first alternative whose free nodes of the job's partition can hold the job (docs/slurm-facts.md,
"matching-OR"). The job *reaches the target* when the best placement inside that alternative's free nodes —
fewest regions, then zones, of one family value — equals the best placement over all the partition's free
nodes (the oracle, a brute force over the nodes). Only jobs where some value has room are counted (otherwise
no alternative can hold them and the plain tree places the job). Inside an alternative the tree is assumed to
pack (the alternative's best placement), so this measures what the bracket allows, not the leaf choice.

    python benchmarks/bench_family_target.py --seeds 1000-1059 --patterns 6
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.policy import JobRequest, Partition, decide
from slurm_topo.render import make_context

SIZES = (2, 3, 4, 6, 8, 10, 12, 16)


@dataclass(frozen=True)
class Fleet:
    doc: str
    """The inventory document (families: ``torch-*``)."""
    place: Mapping[str, tuple[str, str, str]]
    """node -> (region, zone, family value)."""
    partitions: tuple[Partition, ...]


RACKS, RACK = 3, 4
REGIONS = ("us-east1", "us-central1", "europe-west4", "asia-southeast1", "northamerica-northeast2")


def make_fleet(rng: random.Random) -> Fleet:
    """A fleet with families: regions, zones of racks, values spread unevenly, overlapping partitions; cloud
    names (bucket features of 40-70 characters: the cascade meets Slurm's 1 024 characters)."""
    values = [f"torch-2.{v}.{rng.randint(0, 3)}-cu12{rng.randint(1, 8)}" for v in range(rng.randint(2, 5))]
    weights = [rng.random() ** 2 + 0.05 for _ in values]
    rows, place, racks = [], {}, []
    i = 0
    for region in rng.sample(REGIONS, rng.randint(2, 5)):
        for z in "abcdef"[: rng.randint(1, 6)]:
            zone = f"{region}-{z}"
            zone_values = rng.choices(values, weights, k=rng.randint(1, 2))  # a zone holds 1-2 values
            for k in range(rng.randint(1, RACKS)):
                value, n = rng.choice(zone_values), rng.randint(1, RACK)
                names = [f"n{i + j:04d}" for j in range(n)]
                racks.append(names)
                for name in names:
                    place[name] = (region, zone, value)
                    rows.append(
                        f"  - {{name: {name}, region: {region}, zone: {zone}, "
                        f"network_group: rack-{zone}-{k:03d}, features: [{value}]}}\n"
                    )
                i += n
    everything = tuple(place)
    parts = [Partition("all", everything, default=True)]
    for p in range(rng.randint(1, 2)):
        picked = [n for rack in racks if rng.random() < 0.6 for n in rack]
        if picked:
            parts.append(Partition(f"p{p}", tuple(picked)))
    doc = "nodes:\n" + "".join(rows) + "policy: {families: {torch: 'torch-*'}}\n"
    return Fleet(doc, place, tuple(parts))


def best(place: Mapping[str, tuple[str, str, str]], nodes: Iterable[str], n: int) -> tuple[int, int] | None:
    """The oracle: the fewest (regions, zones) holding ``n`` of ``nodes``, all of one family value; None when
    no value has ``n`` nodes. Brute force over every set of regions of each value, the zones of those
    regions taken largest first."""
    free: dict[str, dict[str, dict[str, int]]] = {}  # value -> region -> zone -> free nodes
    for node in nodes:
        region, zone, value = place[node]
        zones = free.setdefault(value, {}).setdefault(region, {})
        zones[zone] = zones.get(zone, 0) + 1
    found: list[tuple[int, int]] = []
    for regions in free.values():
        for k in range(1, len(regions) + 1):
            for chosen in itertools.combinations(regions.values(), k):
                sizes = sorted((c for zones in chosen for c in zones.values()), reverse=True)
                total, used = 0, 0
                while used < len(sizes) and total < n:
                    total, used = total + sizes[used], used + 1
                if total >= n:
                    found.append((k, used))
    return min(found) if found else None


def alternatives(prefer: str) -> list[list[str]]:
    """The matching-OR bracket's alternatives, each as its features (a union's several)."""
    inner = prefer[prefer.index("[") + 1 : prefer.rindex("]")]
    out, depth, cur = [], 0, ""
    for ch in inner + "|":
        if ch == "|" and depth == 0:
            out.append(cur.strip("()").split("|"))
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    return out


def node_features(fleet: Fleet, data) -> dict[str, frozenset[str]]:  # type: ignore[no-untyped-def]
    """What Slurm sees on each node: its bucket features and its own value."""
    return {n: frozenset((*data.bucket_features.get(n, ()), fleet.place[n][2])) for n in fleet.place}


def first_alternative(
    bracket: Sequence[Sequence[str]], feats: Mapping[str, frozenset[str]], free: Sequence[str], n: int
) -> list[str] | None:
    """The free nodes of the first alternative that holds ``n`` (Slurm's matching OR), else None."""
    for alt in bracket:
        members = [x for x in free if feats[x].intersection(alt)]
        if len(members) >= n:
            return members
    return None


def spread(place: Mapping[str, tuple[str, str, str]], nodes: Sequence[str]) -> tuple[int, int, int]:
    """(regions, zones, family values) of a placement."""
    return tuple(len({place[x][i] for x in nodes}) for i in range(3))  # type: ignore[return-value]


def measure(seeds: Iterable[int], patterns: int, sizes: Sequence[int] = SIZES) -> dict[int, list[int]]:
    """Per job size: [reached, counted, no alternative held it, alternatives in the longest bracket, placed
    at the target by the tree model]."""
    from bench_placement import TreeModel  # the model of Slurm's leaf choice (placement.md)

    out = {n: [0, 0, 0, 0, 0] for n in sizes}
    for seed in seeds:
        rng = random.Random(seed)
        fleet = make_fleet(rng)
        inv = merge([parse_inventory(fleet.doc)])
        data = make_context(inv, (22, 5), fleet.partitions).policy
        model = TreeModel(
            render_all(inv, (22, 5), fleet.partitions)["topology.conf"], sorted(fleet.place), "22.05"
        )
        feats = node_features(fleet, data)
        for part, n in itertools.product(fleet.partitions, sizes):
            d = decide(data, JobRequest(locality="prefer", min_nodes=n, partition=part.name))
            bracket = alternatives(d.prefer) if d.prefer else []
            out[n][3] = max(out[n][3], len(bracket))
            for _ in range(patterns):
                busy = rng.uniform(0.3, 0.8)
                free = [x for x in part.nodes if rng.random() >= busy]
                target = best(fleet.place, free, n)
                if target is None:
                    continue
                out[n][1] += 1
                members = first_alternative(bracket, feats, free, n)
                if members is None:
                    out[n][2] += 1
                    continue
                out[n][0] += best(fleet.place, members, n) == target
                placed = model.select(set(members), n) or []
                out[n][4] += spread(fleet.place, placed) == (*target, 1)
    return out


def table(result: Mapping[int, list[int]]) -> str:
    lines = [
        "| nodes | reached | placed there (tree model 22.05) | jobs with a target | no alternative held it "
        "| longest bracket |",
        "|---|---|---|---|---|---|",
    ]
    for n, (hit, total, none, longest, placed) in result.items():
        pct = f"{100 * hit / total:.1f} %" if total else "-"
        model = f"{100 * placed / total:.1f} %" if total else "-"
        lines.append(f"| {n} | {pct} ({hit}) | {model} ({placed}) | {total} | {none} | {longest} |")
    return "\n".join(lines) + "\n"


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-40", help="a seed or a range lo-hi")
    ap.add_argument("--patterns", type=int, default=8, help="busy patterns per job")
    ap.add_argument("--out", help="append the table to this file")
    ap.add_argument("--write-data", metavar="PATH", help="write the first seed's filter data file and stop")
    args = ap.parse_args(argv)
    if args.write_data:
        fleet = make_fleet(random.Random(_seeds(args.seeds)[0]))
        inv = merge([parse_inventory(fleet.doc)])
        with open(args.write_data, "w", encoding="utf-8") as f:
            f.write(render_all(inv, (22, 5), fleet.partitions)["slurm_topo_data.lua"])
        return 0
    text = f"seeds {args.seeds}, {args.patterns} busy patterns per job\n\n" + table(
        measure(_seeds(args.seeds), args.patterns)
    )
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
