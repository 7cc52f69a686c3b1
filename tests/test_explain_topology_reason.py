"""``explain`` shows Slurm 26.05's own topology reason for a pending job.

26.05 keeps ``Reason=Resources`` in ``state_reason`` and writes the topology rejection (``ESLURM_TOPO_*``,
``src/common/slurm_errno.c``) into ``state_desc``, which ``scontrol show job`` prints as ``Reason=`` with
blanks turned into ``_`` (``src/scontrol/info_job.c``). The lines here are the real 26.05 capture of a
pending job (tests/fixtures/real/slurm-26.05/scontrol-show-job-o-pending.txt) with its ``Reason=`` replaced,
as scontrol would print each of the eight texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_topo.access import text as slurm_text
from slurm_topo.reports import explain

REAL = Path(__file__).parent / "fixtures" / "real" / "slurm-26.05" / "scontrol-show-job-o-pending.txt"
LINE = REAL.read_text().splitlines()[0]


def _explained(reason: str) -> str:
    assert " Reason=Resources " in LINE
    line = LINE.replace(" Reason=Resources ", f" Reason={reason} ", 1)
    return explain.explain_record(slurm_text.parse_record_line(line), None).text()


def test_eight_reasons_from_slurms_table() -> None:
    assert len(explain.TOPOLOGY_REASONS) == 8
    assert all(" " in text and "_" not in text for text in explain.TOPOLOGY_REASONS)


@pytest.mark.parametrize("text", sorted(explain.TOPOLOGY_REASONS))
def test_each_topology_reason_is_named_with_its_meaning(text: str) -> None:
    shown = "".join("_" if c.isspace() else c for c in text)  # info_job.c: isspace() -> '_'
    out = _explained(shown)
    waiting = next(line for line in out.splitlines() if line.lstrip().startswith("waiting:"))
    assert f"Reason={shown}; Slurm's topology reason: {text} ({explain.TOPOLOGY_REASONS[text]})" in waiting
    assert explain.topology_reason(text) == explain.topology_reason(shown)  # squeue prints the blanks


@pytest.mark.parametrize("reason", ["Resources", "Priority", "No_suitable_topology", "ReqNodeNotAvail"])
def test_other_reasons_say_nothing_of_topology(reason: str) -> None:
    assert explain.topology_reason(reason) is None
    assert "topology reason" not in _explained(reason)
