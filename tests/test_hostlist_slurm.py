"""slurm_topo.core.hostlist against Slurm's own hostlist reading (``scontrol show hostnames``: no daemon is
contacted, only a minimal slurm.conf is needed).

The property test compares 11 000 generated expressions (digits before a range, padding, multi-range
brackets, several bracket groups, comma lists inside and outside brackets, text after the last bracket, and
malformed brackets) with ``hostlist.expand_keep_duplicates``: the same names in the same order, or both
refuse. Those both should read go to scontrol comma-joined, a marker name after each, 250 in one call; those
slurm-topo refuses go to one scontrol process reading a ``show hostnames`` command a line. What
``hostlist.compress`` folds their names into is read back by Slurm, too. Without scontrol the tests that need
it are skipped; in CI (which installs Slurm) they fail (tests/preconditions.py).
"""

from __future__ import annotations

import random
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preconditions import unavailable

from slurm_topo import parse_inventory
from slurm_topo.core import hostlist
from slurm_topo.core.errors import HostlistError, InventoryError
from slurm_topo.core.model import MAX_NODES

BATCH = 250
"""Expressions per generated example: one scontrol process reads them all."""
BATCHES = 44
"""Examples the property test runs: 44 x 250 = 11 000 expressions (at least 10 000 are asserted)."""


# ---- Slurm's reading


class Slurm:
    """``scontrol show hostnames`` on many expressions at a time."""

    def __init__(self, scontrol: str, conf: Path):
        self.scontrol = scontrol
        self.env = {"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin", "HOME": str(conf.parent)}
        out = self._run(["--version"]).stdout
        m = re.search(r"(\d+)\.(\d+)", out)
        assert m is not None, out
        self.version = (int(m[1]), int(m[2]))
        self.calls = 0

    def _run(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.scontrol, *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc

    @property
    def reads_suffixes(self) -> bool:
        """Slurm 23.11 and later read text after the last bracket (``n[1-2]-ib``); 22.05 and 23.02 refuse
        it."""
        return self.version >= (23, 11)

    def read(self, expressions: Sequence[str]) -> list[list[str] | None]:
        """Each expression's names as Slurm prints them, or None where Slurm says "Invalid hostlist".

        One call reads them all, comma-joined with a marker name after each (``E0,#0#,E1,#1#``: Slurm reads
        comma items one by one, so the answer is each expression's names followed by its marker); when Slurm
        refuses the whole, each half is read again, down to the expressions it refuses."""
        for e in expressions:
            assert e and "#" not in e and not re.search(r"\s", e) and not e.startswith("/"), e
        out: list[list[str] | None] = []
        start = 0
        while start < len(expressions):  # one argument stays under Linux's 128 KiB
            end, size = start, 0
            while end < len(expressions) and (end == start or size + len(expressions[end]) < 100_000):
                size += len(expressions[end]) + 8
                end += 1
            out.extend(self._read(expressions[start:end]))
            start = end
        return out

    def _read(self, expressions: Sequence[str]) -> list[list[str] | None]:
        joined = "#-#," + ",".join(f"{e},#{i}#" for i, e in enumerate(expressions))  # never an option: -x
        self.calls += 1
        proc = self._run(["show", "hostnames", joined])
        if "Invalid hostlist" in proc.stderr:
            assert not proc.stdout, proc.stdout[:200]
            if len(expressions) == 1:
                return [None]
            half = len(expressions) // 2
            return self._read(expressions[:half]) + self._read(expressions[half:])
        blocks: list[list[str]] = []
        current: list[str] = []
        lines = proc.stdout.splitlines()
        assert lines[:1] == ["#-#"], lines[:3]
        for line in lines[1:]:
            if line == f"#{len(blocks)}#":
                blocks.append(current)
                current = []
            else:
                current.append(line)
        assert len(blocks) == len(expressions) and not current, (len(blocks), current[:5])
        return list(blocks)

    def refused(self, expressions: Sequence[str]) -> set[str]:
        """The expressions Slurm refuses, in one process: scontrol reads one ``show hostnames`` command a line
        from its standard input and writes "Invalid hostlist: EXPR" to stderr for each it refuses."""
        for e in expressions:  # scontrol built without readline reads 4 095 bytes a line
            assert e and len(e) < 4000 and not re.search(r"[\s\"'!]", e) and not e.startswith("/"), e
        self.calls += 1
        proc = self._run([], stdin="".join(f"show hostnames {e}\n" for e in expressions))
        prefix = "Invalid hostlist: "
        return {line[len(prefix) :] for line in proc.stderr.splitlines() if line.startswith(prefix)}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Slurm:
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        unavailable("scontrol is not installed: Slurm's own hostlist reading not compared")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\n")
    return Slurm(str(scontrol), conf)


def _mine(expression: str) -> list[str] | None:
    try:
        return hostlist.expand_keep_duplicates(expression)
    except HostlistError:
        return None


def _items(expression: str) -> list[str]:
    """The top-level comma items (a comma inside brackets stays)."""
    return re.findall(r"(?:[^,\[\]]|\[[^\[\]]*\])+", expression)


def _suffixed(expression: str) -> bool:
    """Text after the last bracket of a comma item (``n[1-2]-ib``): Slurm 23.11+ reads it, 22.05 refuses."""
    return any(re.search(r"\][^\[\]]+\Z", item) for item in _items(expression))


def _dropped_by_slurm(item: str) -> bool:
    """An item Slurm reads as no names, silently: three or more bracket groups, the last two well formed and
    one before them not. Slurm's ``_push_range_list`` recurses for those earlier groups and keeps the worst
    result as ``MAX(rc, rc1)``, so a nested -1 is lost behind 0 (22.05 to 26.05); slurm-topo refuses it."""
    groups = re.findall(r"\[([^\[\]]*)\]", item)

    def bad(content: str) -> bool:
        return _mine(f"n[{content}]") is None

    return len(groups) >= 3 and not any(map(bad, groups[-2:])) and any(map(bad, groups[:-2]))


def _slurms_reading(expression: str) -> list[str] | None:
    """What Slurm should make of an expression slurm-topo refuses: its reading of the items Slurm does not
    drop (``_dropped_by_slurm``), or None (refused) when no item is dropped."""
    items = _items(expression)
    kept = [item for item in items if not _dropped_by_slurm(item)]
    if len(kept) == len(items):
        return None
    return _mine(",".join(kept)) if kept else []


def _compare(slurm: Slurm, expressions: Sequence[str], dropped: list[str]) -> None:
    """Assert that hostlist reads every expression as Slurm does, and that what compress folds their names
    into Slurm reads back as exactly those names. Expressions both should read are read in one call; those
    slurm-topo refuses (or Slurm before 23.11 must refuse: text after the last bracket) are checked refused
    in one more; those Slurm reads while it silently drops an item (``_dropped_by_slurm``) are read one by
    one, and added to ``dropped``."""
    mine = {e: _mine(e) for e in expressions}
    readable = [e for e in expressions if mine[e] is not None and (slurm.reads_suffixes or not _suffixed(e))]
    unreadable = sorted(set(expressions) - set(readable))
    theirs = slurm.read(readable)
    wrong = [(e, mine[e], t) for e, t in zip(readable, theirs, strict=True) if mine[e] != t]
    accepted = set(unreadable) - slurm.refused(unreadable)
    for e in sorted(accepted):
        theirs_e = slurm.read([e])[0]
        if mine[e] is not None or theirs_e != _slurms_reading(e):  # not the one documented disagreement
            wrong.append((e, mine[e], theirs_e))
    dropped.extend(e for e in accepted if mine[e] is None)
    wrong.sort(key=lambda w: len(w[0]))
    assert not wrong, (
        f"{len(wrong)} differ from Slurm {slurm.version}; the shortest: {wrong[0]} (ours, Slurm's)"
    )
    folded = [hostlist.compress(names) for names in mine.values() if names]
    for expr, names, again in zip(folded, [n for n in mine.values() if n], slurm.read(folded), strict=True):
        assert again is not None, f"Slurm {slurm.version} refuses compress() output {expr!r}"
        assert len(set(again)) == len(again) and set(again) == set(names), (names, expr, again)
        assert sorted(hostlist.expand_keep_duplicates(expr)) == sorted(again), expr


# ---- generated expressions


def _number(value: int, pad: int) -> str:
    return str(value).zfill(pad)


def _value(rng: random.Random) -> int:
    if rng.random() < 0.2:  # where the number of digits changes
        return rng.choice([0, 7, 9, 10, 98, 99, 100, 999, 1000, 9999])
    return rng.randint(0, 130)


def _pad(rng: random.Random) -> int:
    return rng.choice([0, 0, 0, 1, 2, 3, 4, 5])


def _range(rng: random.Random) -> str:
    """``N`` or ``LO-HI``, each zero-padded its own way (Slurm pads to the width of LO as written)."""
    lo = _value(rng)
    lo_text = _number(lo, _pad(rng))
    if rng.random() < 0.3:
        return lo_text
    return f"{lo_text}-{_number(lo + rng.randint(0, 12), _pad(rng))}"


BAD_RANGES = ["5-3", "", "1-9/2", "a", "1x2", "3-2,4", "1,,2", "-1", "1--3", "x", "01-0", "2-1x"]
"""Bracket contents every release refuses: a descending range, an empty item, a step, a letter, a sign."""

TEXT = "abnrx-.019"
"""Text around brackets: digits before a range (``gpu1[8-12]``) and between groups (``r[1-2]0[1-3]``)."""


def _text(rng: random.Random, least: int = 0) -> str:
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(least, 4)))


def _bracket(rng: random.Random, ranges: int) -> str:
    if rng.random() < 1 / 60:
        return f"[{rng.choice(BAD_RANGES)}]"
    return "[" + ",".join(_range(rng) for _ in range(rng.randint(1, ranges))) + "]"


def _item(rng: random.Random) -> str:
    """One comma item: a plain name, or text with one to three bracket groups (few enough ranges that an
    item stays within a few hundred names), now and then text after the last bracket."""
    groups = rng.choice([0, 1, 1, 1, 2, 2, 3])
    if not groups:
        return _text(rng, least=1)
    ranges = {1: 4, 2: 2, 3: 1}[groups]
    out = _text(rng)
    for i in range(groups):
        out += _bracket(rng, ranges) + (_text(rng) if i < groups - 1 else "")
    if rng.random() < 1 / 16:
        out += rng.choice(["-ib", "x", "a1", ".e"])
    return out


def expressions(rng: random.Random, n: int) -> list[str]:
    """``n`` expressions of one to three comma items (now and then an empty item, which Slurm skips)."""
    out = []
    for _ in range(n):
        joiner = ",," if rng.random() < 0.05 else ","
        out.append(joiner.join(_item(rng) for _ in range(rng.randint(1, 3))))
    return out


_names = st.lists(
    st.builds(
        lambda prefix, value, pad, suffix: f"{prefix}{_number(value, pad)}{suffix}",
        st.sampled_from(["n", "gpu1", "r2n", "a-0", "x.9", ""]),
        st.one_of(st.integers(0, 130), st.sampled_from([0, 7, 9, 10, 98, 99, 100, 999, 1000, 9999])),
        st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5]),
        st.sampled_from(["", "", "", "-ib", "a", "b7"]),
    ),
    min_size=1,
    max_size=40,
)
"""Name sets for compress: digits in prefixes, padding of every width, text after the last digit."""


# ---- tests


def test_digits_before_a_range_are_the_prefix() -> None:
    """Issue 43 item 8: ``gpu1[8-12]`` is the prefix gpu1 and the numbers 8-12, five nodes (ClusterShell read
    gpu[18-112], 95); its NodeName= line folds them so that Slurm reads the same five."""
    want = ["gpu18", "gpu19", "gpu110", "gpu111", "gpu112"]
    assert hostlist.expand("gpu1[8-12]") == want
    assert hostlist.count("gpu1[8-12]") == 5
    assert hostlist.compress(want) == "gpu[18-19,110-112]"
    assert hostlist.expand("n9[8-10]") == ["n98", "n99", "n910"]


def test_generate_writes_the_five_nodes_of_a_digit_prefix(tmp_path: Path) -> None:
    """Through ``generate``: the NodeName= and Nodes= lines name exactly the five nodes."""
    inv = tmp_path / "fleet.yaml"
    inv.write_text("nodes:\n  - {name: 'gpu1[8-12]', region: r1}\n")
    out = tmp_path / "out"
    proc = _generate(inv, out)
    assert proc.returncode == 0, proc.stderr
    line = next(
        ln for ln in (out / "slurm-topo-nodes.conf").read_text().splitlines() if ln.startswith("NodeName=")
    )
    assert line.split()[0] == "NodeName=gpu[18-19,110-112]"
    assert "Nodes=gpu[18-19,110-112]" in (out / "topology.conf").read_text()


def _generate(inventory: Path, out: Path, memory: int = 3 << 30) -> subprocess.CompletedProcess[str]:
    """``slurm-topo generate`` in a child limited to ``memory`` bytes and 120 s (the old ClusterShell
    reading of ``x88[1-65535]`` took 8.1 GB and 388 s)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "slurm_topo", "generate", "-i", str(inventory), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limit,
    )


def test_the_node_limit_counts_slurms_expansion(tmp_path: Path) -> None:
    """Issue 43 item 8: ``x88[1-65535]`` is 65 535 nodes as Slurm reads it (ClusterShell made 8 864 655 of
    it, past the 262 144-node limit counted on the expression); the count is the expansion's, computed
    before expanding, and an inventory over the limit exits 2 with one line at once."""
    assert hostlist.count("x88[1-65535]") == 65_535
    names = hostlist.expand("x88[1-65535]")
    assert len(names) == 65_535 and names[0] == "x881" and names[-1] == "x8865535"
    assert hostlist.count("r[1-4]n0[1-65536]") == MAX_NODES
    with pytest.raises(HostlistError, match=r"names 327680 hosts, over the limit of 262144 nodes"):
        hostlist.expand("r[1-5]n[1-65536]")
    with pytest.raises(HostlistError, match=r"names 10000000000000 hosts"):
        hostlist.check_size("a[1-1000000]b[1-10000000]")

    fine = tmp_path / "fine.yaml"
    fine.write_text("nodes:\n  - {name: 'x88[1-65535]', region: r1}\n")
    proc = _generate(fine, tmp_path / "fine")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "# 65535 nodes on 1 NodeName= lines" in (tmp_path / "fine" / "slurm-topo-nodes.conf").read_text()

    over = tmp_path / "over.yaml"
    over.write_text(
        "nodes:\n  - {name: 'x88[1-65535]', region: r1}\n  - {name: 'r[1-4]y[1-50000]', region: r1}\n"
    )
    proc = _generate(over, tmp_path / "over", memory=1 << 30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        "nodes[1].name: names 200000 hosts, over the limit of 262144 nodes in all (196609 left)"
        in proc.stderr
    )
    assert not (tmp_path / "over").exists() or not any((tmp_path / "over").iterdir())


def test_per_node_values_pair_in_slurms_order() -> None:
    """A per-node attribute pairs with the names in Slurm's order, as slurmctld pairs NodeName= with NodeAddr=
    (``n[3,1,2]`` with ``10.0.0.[1-3]``: n3 is 10.0.0.1; ClusterShell's sorted reading paired n1 with it); a
    node named twice in one entry is an error, as slurmctld's "Duplicated NodeName"."""
    inv = parse_inventory("nodes:\n  - {name: 'n[3,1,2]', region: r, slurm: {NodeAddr: '10.0.0.[1-3]'}}\n")
    assert {n.name: dict(n.slurm)["NodeAddr"] for n in inv.nodes} == {
        "n3": "10.0.0.1",
        "n1": "10.0.0.2",
        "n2": "10.0.0.3",
    }
    with pytest.raises(InventoryError, match=r"nodes\[0\]\.name: names node n2 twice"):
        parse_inventory("nodes:\n  - {name: 'n[1-3],n2', region: r}\n")


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("n[08-12]", ["n08", "n09", "n10", "n11", "n12"]),  # padding from the low end
        ("n[8-012]", ["n8", "n9", "n10", "n11", "n12"]),  # the high end's zeros do not pad
        ("n[0001-3]", ["n0001", "n0002", "n0003"]),
        ("n[00-0]", ["n00"]),
        ("n0[1-3]", ["n01", "n02", "n03"]),
        ("n[98-100]", ["n98", "n99", "n100"]),
        ("n[098-100]", ["n098", "n099", "n100"]),
        ("r[1-2]n[1-3]", ["r1n1", "r1n2", "r1n3", "r2n1", "r2n2", "r2n3"]),
        ("n[1-2][3-4]", ["n13", "n14", "n23", "n24"]),
        ("n[7-8]0[1-2]", ["n701", "n702", "n801", "n802"]),
        (
            "x[1-2]y[3-4]z[5-6]",
            ["x1y3z5", "x1y3z6", "x2y3z5", "x2y3z6", "x1y4z5", "x1y4z6", "x2y4z5", "x2y4z6"],
        ),
        ("n[3,1-2],m[5,4],n1", ["n3", "n1", "n2", "m5", "m4", "n1"]),  # Slurm's order, a repeat kept
        ("n1,,n2,", ["n1", "n2"]),
        ("[1-3]", ["1", "2", "3"]),
    ],
)
def test_fixed_cases_read_as_slurm_does(expression: str, names: list[str], slurm: Slurm) -> None:
    """The cases the issue names, and ClusterShell's disagreements with Slurm, each checked against Slurm."""
    assert hostlist.expand_keep_duplicates(expression) == names
    assert hostlist.expand(expression) == list(dict.fromkeys(names))
    assert slurm.read([expression]) == [names]


@pytest.mark.parametrize(
    "expression",
    ["n[5-3]", "n[1-9/2]", "n[1,,2]", "n[]", "n[1x2]", "n[a]", "n[1--3]", "n[-1]"],
)
def test_refused_as_slurm_refuses(expression: str, slurm: Slurm) -> None:
    with pytest.raises(HostlistError):
        hostlist.expand(expression)
    assert slurm.read([expression]) == [None]


@pytest.mark.parametrize(
    ("expression", "slurms"),
    [
        ("n[1-]", ["n1"]),  # a range with no end
        ("n[+1-2]", ["n01", "n02"]),  # strtoul's sign, and its width
        ("n[1-2", None),  # an unclosed bracket: 22.05 reads "n]", 23.11 refuses
        ("n1]", ["n1]"]),
        ("n[18446744073709551615]", None),  # 2**64-1: Slurm's end-of-range marker
        ("[a]r[1-2]n[1-2]", []),  # a malformed bracket before the last two: Slurm silently reads nothing
        ("m1,[a]r[1-2]n[1-2],m2", ["m1", "m2"]),
    ],
)
def test_refused_although_slurm_may_read_it(expression: str, slurms: list[str] | None, slurm: Slurm) -> None:
    """Forms slurm-topo refuses on purpose (likely typos, or read differently by releases): what Slurm makes
    of them is documented here, and checked where every release agrees."""
    with pytest.raises(HostlistError):
        hostlist.expand(expression)
    if slurms is not None:
        assert slurm.read([expression]) == [slurms]


def test_text_after_the_last_bracket_is_read_from_23_11_and_never_written(slurm: Slurm) -> None:
    """``n[1-3]-ib``: Slurm 23.11+ reads n1-ib n2-ib n3-ib, 22.05 and 23.02 refuse it; slurm-topo reads it as
    23.11 does, and compress never writes it (every release reads its output)."""
    assert hostlist.expand("n[1-3]-ib") == ["n1-ib", "n2-ib", "n3-ib"]
    assert slurm.read(["n[1-3]-ib"]) == [["n1-ib", "n2-ib", "n3-ib"] if slurm.reads_suffixes else None]
    folded = hostlist.compress(["n1-ib", "n2-ib", "n3-ib", "n4", "n5"])
    assert folded == "n[4-5],n1-ib,n2-ib,n3-ib"
    assert sorted(slurm.read([folded])[0] or []) == ["n1-ib", "n2-ib", "n3-ib", "n4", "n5"]


def test_generated_expressions_read_as_slurm_reads_them(slurm: Slurm) -> None:
    """Hypothesis, derandomized: 44 seeds, 250 generated expressions each (11 000). Every expression gives
    Slurm's names in Slurm's order, or is refused by both (text after the last bracket is refused by Slurm
    before 23.11), and what compress folds each one's names into, Slurm reads back as those names, each
    once. The expressions are drawn from a seeded random.Random (hypothesis drawing each piece took minutes);
    a failure names the shortest expression that differs."""
    seen: list[str] = []
    dropped: list[str] = []
    calls = slurm.calls

    @settings(max_examples=BATCHES, derandomize=True, database=None, deadline=None)
    @given(st.randoms(use_true_random=True))
    def check(rng: random.Random) -> None:
        batch = expressions(rng, BATCH)
        _compare(slurm, batch, dropped)
        seen.extend(batch)

    check()
    assert len(seen) >= 10_000, len(seen)
    covered = {  # what the generator reached (each a few thousand of the 11 000; the disagreement, a few)
        "digits before a range": sum(bool(re.search(r"\d\[", e)) for e in seen),
        "zero padding": sum(bool(re.search(r"[\[,-]0\d", e)) for e in seen),
        "several ranges in a bracket": sum(bool(re.search(r"\[[^\]]*,[^\]]*\]", e)) for e in seen),
        "two bracket groups or more": sum(any(i.count("[") >= 2 for i in _items(e)) for e in seen),
        "three bracket groups or more": sum(any(i.count("[") >= 3 for i in _items(e)) for e in seen),
        "a comma list": sum(len(_items(e)) > 1 for e in seen),
        "text after the last bracket": sum(map(_suffixed, seen)),
        "refused by slurm-topo": sum(_mine(e) is None for e in seen),
    }
    assert min(covered.values()) >= 300 and dropped, (covered, len(dropped))
    calls = slurm.calls - calls
    assert calls <= 4 * BATCHES + len(dropped), calls  # batched: a few calls a batch, one a dropped item


def test_compressed_name_sets_read_back_as_the_names(slurm: Slurm) -> None:
    """Hypothesis (derandomized): generated name sets (digits in prefixes, padding of every width, names with
    text after their last digit) folded by compress are read back by Slurm as exactly those names."""
    sets: list[list[str]] = []

    @settings(max_examples=400, derandomize=True, database=None, deadline=None)
    @given(_names)
    def collect(names: list[str]) -> None:
        sets.append(names)

    collect()
    folded = [hostlist.compress(names) for names in sets]
    for names, expr, slurms in zip(sets, folded, slurm.read(folded), strict=True):
        assert slurms is not None and len(slurms) == len(set(slurms)), (expr, slurms)
        assert sorted(slurms) == sorted(set(names)) == sorted(hostlist.expand(expr)), (names, expr, slurms)
