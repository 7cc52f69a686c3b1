"""The inventory's ``links:`` table is in the fingerprint: the filter reloads its data file only when the
fingerprint on its first line changes, and the data file's auto budgets come from the table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_topo import merge, parse_inventory, render_all
from slurm_topo.render import fingerprint

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "adr-gcp-locality.yaml"


def _doc(links: dict[str, object] | None) -> str:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc.pop("links", None)
    if links is not None:
        doc["links"] = links
    return yaml.safe_dump(doc)


def _fp(links: dict[str, object] | None) -> str:
    return fingerprint(merge([parse_inventory(_doc(links))]), (24, 11))


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def test_a_table_changes_the_fingerprint_and_the_data_files_first_line() -> None:
    plain = merge([parse_inventory(_doc(None))])
    gcp = merge([parse_inventory(_doc({"profile": "gcp"}))])
    data_plain = render_all(plain, (24, 11))["slurm_topo_data.lua"]
    data_gcp = render_all(gcp, (24, 11))["slurm_topo_data.lua"]
    # the tables give the site plan's auto budgets other figures ...
    assert data_plain.split("auto_units", 1)[1] != data_gcp.split("auto_units", 1)[1]
    # ... so the line the filter compares must differ too, or slurmctld keeps the old budgets
    assert _first_line(data_plain) != _first_line(data_gcp)
    assert fingerprint(plain, (24, 11)) != fingerprint(gcp, (24, 11))


# the documented table (docs/cost.md): every level further out slower and farther than the one inside it
TABLE: dict[str, object] = {
    "nvlink": {"bandwidth": 450, "latency_us": 1},
    "network_group": {"bandwidth": 50, "latency_us": 5},
    "zone": {"bandwidth": 25, "latency_us": 100},
    "rails": {"mlx5_0": 0, "mlx5_1": 1, "mlx5_2": 2, "mlx5_3": 3},
}


@settings(max_examples=40, deadline=None)
@given(
    st.floats(min_value=5, max_value=25, allow_nan=False).map(lambda x: round(x, 2)),
    st.floats(min_value=5, max_value=25, allow_nan=False).map(lambda x: round(x, 2)),
    st.floats(min_value=100, max_value=400, allow_nan=False).map(lambda x: round(x, 1)),
)
def test_any_changed_figure_changes_the_fingerprint(a: float, b: float, latency: float) -> None:
    one = _fp({**TABLE, "region": {"bandwidth": a, "latency_us": latency}})
    assert one == _fp({**TABLE, "region": {"bandwidth": a, "latency_us": latency}})
    assert (one == _fp({**TABLE, "region": {"bandwidth": b, "latency_us": latency}})) == (a == b)
    assert one != _fp(TABLE) != _fp(None)


def test_the_fingerprint_does_not_depend_on_the_process() -> None:
    """Sets of level names hash differently in each Python process: the key sorts them."""
    links = TABLE
    code = (
        "import sys, yaml\n"
        "from slurm_topo import merge, parse_inventory\n"
        "from slurm_topo.render import fingerprint\n"
        "print(fingerprint(merge([parse_inventory(sys.stdin.read())]), (24, 11)))\n"
    )
    seen = set()
    for seed in ("1", "2", "3", "4"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=_doc(links),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        seen.add(out.stdout.strip())
    assert seen == {_fp(links)}
