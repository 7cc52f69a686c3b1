"""The SPANK plugin (job_submit/locality.c) checks ``--locality`` on the submit host against its own C
tables. These tests keep it equal to the Python policy: its tables (levels, modes, plan keys, the label
length) equal ``policy/vocab.py``'s and ``cost.comm.PLAN_KEYS``, and its check, compiled from the source
against the real ``spank.h``, accepts exactly the localities ``vocab.parse_locality`` accepts (every level
with every mode and near misses of each, and seeded random strings over the characters that matter). The
plugin itself is built by ``job_submit/build-spank``, which must keep compiling it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preconditions import unavailable

from slurm_topo.core.errors import InputError
from slurm_topo.core.model import LABEL_RE
from slurm_topo.cost.comm import PLAN_KEYS
from slurm_topo.policy import vocab

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "job_submit" / "locality.c"
INCLUDE = Path(os.environ.get("SLURM_INCLUDE", "/usr/include"))


def c_list(source: str, name: str) -> tuple[str, ...]:
    """The strings of ``static const char *NAME[] = { "a", "b", NULL };`` in ``source``, in order."""
    m = re.search(r"static const char \*" + re.escape(name) + r"\[\]\s*=\s*\{(.*?)\};", source, re.S)
    assert m is not None, f"no table {name}[] in locality.c"
    body = m[1]
    assert re.search(r",\s*NULL\s*$", body), f"{name}[] does not end with NULL"
    return tuple(re.findall(r'"([^"]*)"', body))


def c_define(source: str, name: str) -> str:
    """The value of ``#define NAME value`` (a string literal without its quotes)."""
    m = re.search(r"^#define " + re.escape(name) + r"\s+(.+?)\s*$", source, re.M)
    assert m is not None, f"no #define {name} in locality.c"
    return m[1][1:-1] if m[1].startswith('"') else m[1]


def differences(source: str) -> list[str]:
    """Where the C tables of ``source`` differ from the Python vocabulary (empty: equal)."""
    out = []
    levels, modes = c_list(source, "levels"), c_list(source, "modes")
    if levels != vocab.LOCALITIES:
        out.append(f"levels[] {levels} != vocab.LOCALITIES {vocab.LOCALITIES}")
    if modes != vocab.MODES:
        out.append(f"modes[] {modes} != vocab.MODES {vocab.MODES}")
    if c_define(source, "LEVELS") != "|".join(vocab.LOCALITIES):
        out.append(f"LEVELS {c_define(source, 'LEVELS')!r} != {'|'.join(vocab.LOCALITIES)!r}")
    literals = re.sub(r'"\s*\n\s*"', "", source)  # adjacent string literals joined, as the compiler does
    usage = "LEVEL[" + "|".join(f":{m}" for m in vocab.MODES) + "]"
    if f'"{usage}"' not in literals:
        out.append(f"the --locality usage does not read {usage!r}")
    policies = c_list(source, "segment_policies")
    if policies != vocab.SEGMENT_POLICIES:
        out.append(f"segment_policies[] {policies} != vocab.SEGMENT_POLICIES {vocab.SEGMENT_POLICIES}")
    if c_define(source, "SEGMENT_KEY") != vocab.SEGMENT_KEY:
        out.append(f"SEGMENT_KEY {c_define(source, 'SEGMENT_KEY')!r} != {vocab.SEGMENT_KEY!r}")
    if int(c_define(source, "MAX_SEGMENT_DIGITS")) != len(str(vocab.MAX_SEGMENT)):
        out.append(f"MAX_SEGMENT_DIGITS is not the digits of vocab.MAX_SEGMENT ({vocab.MAX_SEGMENT})")
    plan_keys = c_list(source, "plan_keys")
    if frozenset(plan_keys) != PLAN_KEYS or len(plan_keys) != len(PLAN_KEYS):
        out.append(f"plan_keys[] {sorted(plan_keys)} != cost.comm.PLAN_KEYS {sorted(PLAN_KEYS)}")
    if f"KEY one of {', '.join(plan_keys)};" not in literals:
        out.append("the --plan message does not list plan_keys[]")
    label = int(c_define(source, "MAX_LABEL"))
    if not (LABEL_RE.match("a" * label) and not LABEL_RE.match("a" * (label + 1))):
        out.append(f"MAX_LABEL {label} is not the inventory's longest label (model.LABEL_RE)")
    return out


def test_the_c_tables_equal_the_python_vocabulary() -> None:
    assert differences(SOURCE.read_text()) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"region", "any", NULL', '"region", NULL'),  # a level dropped
        ('"wait", "fail", "auto", NULL', '"wait", "fail", NULL'),  # a mode dropped
        ('"network_group", "zone"', '"zone", "network_group"'),  # the order changed
        ('"cp_bytes", NULL', '"cp_bytes", "sp", NULL'),  # a plan key the cost model does not read
        ("#define MAX_LABEL 63", "#define MAX_LABEL 64"),
        ('{ "spread", "consolidate", NULL }', '{ "spread", NULL }'),  # a segment policy dropped
        ("#define MAX_SEGMENT_DIGITS 4", "#define MAX_SEGMENT_DIGITS 5"),
        ('"prefer|nvl|network_group|zone|region|any"', '"prefer|nvl|zone|region|any"'),
    ],
)
def test_a_changed_c_table_is_a_difference(old: str, new: str) -> None:
    """The comparison reads the tables it claims to: each edit of the source is reported."""
    source = SOURCE.read_text()
    assert source.count(old) == 1, old
    assert differences(source.replace(old, new))


# ---------------------------------------------------------------------------------------- the compiled check

SHIM = r"""
#include "locality.c"

/* locality.c's own check, callable from outside the plugin */
int locality_valid(const char *arg)
{
	return _valid_locality(arg);
}
"""

ASK = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ask SHIM.so: reads one value a line on stdin, prints 1 or 0 (the plugin's verdict on it) */
int main(int argc, char **argv)
{
	static char line[8192];
	void *so = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
	int (*valid)(const char *);

	if (argc != 2 || !so) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	*(void **) &valid = dlsym(so, "locality_valid");
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		printf("%d\n", valid(line));
	}
	return 0;
}
"""


def _cc(cc: str, *args: str) -> None:
    p = subprocess.run([cc, *args], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr


@pytest.fixture(scope="module")
def c_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """locality.c's check as the plugin has it: the source compiled as build-spank compiles it (a shared
    object, -Wall -Werror, the real spank.h) with one exported wrapper, and a program that loads it lazily
    (the SPANK calls it never makes stay unresolved, as in the plugin before slurmctld or sbatch loads it)
    and prints its verdict on each line it reads. Returns the command line that asks it."""
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        unavailable(f"no C compiler ({cc})")
    if not (INCLUDE / "slurm" / "spank.h").is_file():
        unavailable(f"no {INCLUDE}/slurm/spank.h (libslurm-dev)")
    out = tmp_path_factory.mktemp("locality-c")
    (out / "shim.c").write_text(SHIM)
    (out / "ask.c").write_text(ASK)
    flags = ["-std=gnu99", "-O2", "-Wall", "-Werror", f"-I{INCLUDE}", f"-I{SOURCE.parent}"]
    _cc(cc, *flags, "-shared", "-fPIC", "-o", str(out / "shim.so"), str(out / "shim.c"))
    _cc(cc, *flags, "-o", str(out / "ask"), str(out / "ask.c"), "-ldl")
    return [str(out / "ask"), str(out / "shim.so")]


def c_accepts(command: list[str], values: Sequence[str]) -> list[bool]:
    """The plugin's verdict on each value (one run of the program for all of them)."""
    assert not any("\n" in v or "\0" in v for v in values)
    p = subprocess.run(
        command,
        input="".join(v + "\n" for v in values),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    verdicts = p.stdout.split()
    assert len(verdicts) == len(values)
    return [v == "1" for v in verdicts]


def python_accepts(value: str) -> bool:
    try:
        vocab.parse_locality(value)
    except InputError:
        return False
    return True


def every_spelling() -> list[str]:
    """Every level and mode, and near misses of each: with every suffix, doubled, cut, in other case."""
    words = [*vocab.LOCALITIES, "", "nv", "nvl_", "zones", "Zone", "ANY", "prefer ", " zone", "network-group"]
    suffixes = [
        "",
        ":",
        "::",
        *(f":{m}" for m in vocab.MODES),
        ":WAIT",
        ":auto:",
        ":wait:fail",
        ": wait",
        ":x",
    ]
    return [w + s for w in words for s in suffixes]


def test_the_c_check_accepts_exactly_what_parse_locality_accepts(c_check: list[str]) -> None:
    values = every_spelling()
    accepted = [v for v, ok in zip(values, c_accepts(c_check, values), strict=True) if ok]
    assert accepted == [v for v in values if python_accepts(v)]
    assert "nvl:auto" not in accepted and "nvl:fail" in accepted and "zone" in accepted  # not vacuous
    assert len(accepted) == len(vocab.LOCALITIES) * (1 + len(vocab.MODES)) - 1


def segment_spellings() -> list[str]:
    """``nvl:segment=N…`` and near misses: every size form, policy and mode, in and out of order."""
    sizes = ["1", "2", "18", "9999", "10000", "0", "02", "", "x", "2x", "-1", "+2", " 2", "１"]
    tails = [
        "",
        ":",
        "::",
        ":wait",
        ":fail",
        ":auto",
        ":spread",
        ":consolidate",
        ":spread:wait",
        ":consolidate:fail",
        ":spread:auto",
        ":wait:spread",
        ":spread:spread",
        ":spread:",
        ":fail:",
        ":Spread",
        ":spread:fail:x",
    ]
    heads = [
        "nvl:segment=",
        "nvl:Segment=",
        "nvl:segment",
        "zone:segment=",
        "nvl:segments=",
        "nvl:fail:segment=",
    ]
    return [h + n + t for h in heads for n in sizes for t in tails]


def test_the_c_check_reads_the_segment_form_as_parse_segment_does(c_check: list[str]) -> None:
    values = segment_spellings()
    accepted = [v for v, ok in zip(values, c_accepts(c_check, values), strict=True) if ok]
    assert accepted == [v for v in values if python_accepts(v)]
    assert "nvl:segment=2:consolidate:fail" in accepted and "nvl:segment=9999" in accepted  # not vacuous
    # 4 sizes x (bare, :wait, :fail, :spread, :consolidate, :spread:wait, :consolidate:fail) under one head
    assert len(accepted) == 4 * 7


# Strings over the characters the levels and modes are made of, ':' and a few others: most are near misses.
_ALPHABET = sorted(set("".join(vocab.LOCALITIES + vocab.MODES + vocab.SEGMENT_POLICIES)) | set(":_- AZ=0129"))
_TOKENS = [
    *vocab.LOCALITIES,
    *vocab.MODES,
    *vocab.SEGMENT_POLICIES,
    ":",
    "_",
    "nvl",
    "nvl:segment=",
    "2",
    "0",
]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(_ALPHABET, max_size=3)), max_size=4).map(
            "".join
        ),
        min_size=1,
        max_size=60,
    )
)
def test_on_random_strings_the_c_check_agrees_with_parse_locality(
    c_check: list[str], values: list[str]
) -> None:
    assert c_accepts(c_check, values) == [python_accepts(v) for v in values]


def test_build_spank_still_compiles_the_plugin(tmp_path: Path) -> None:
    """The shipped build script compiles locality.c into a plugin for the headers here (-Wall -Werror)."""
    if shutil.which(os.environ.get("CC", "gcc")) is None or not (INCLUDE / "slurm" / "spank.h").is_file():
        unavailable("no C compiler or no spank.h (libslurm-dev)")
    p = subprocess.run(
        ["sh", str(ROOT / "job_submit" / "build-spank"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "locality.so").stat().st_size > 0
    assert (tmp_path / "locality.so.slurm-version").read_text().strip()
