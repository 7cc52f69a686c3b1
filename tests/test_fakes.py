"""The shared fakes answer as their docstrings say (a fake that answered wrongly would make other tests
lie)."""

from __future__ import annotations

import pytest
from fakes import ScriptedRunner

from slurm_topo.core.errors import CommandError


def test_the_longest_prefix_answers_and_every_call_is_recorded() -> None:
    r = ScriptedRunner(
        {"scontrol": "any", "scontrol show job": "jobs", ("scontrol", "show", "job", "7"): "seven"}
    )
    assert r.run(["scontrol", "ping"]) == "any"
    assert r.run(["scontrol", "show", "job", "-o"]) == "jobs"
    assert r.run(["scontrol", "show", "job", "7"]) == "seven"
    assert r.calls == [
        ("scontrol", "ping"),
        ("scontrol", "show", "job", "-o"),
        ("scontrol", "show", "job", "7"),
    ]


def test_an_exception_is_raised_and_an_unscripted_command_fails_as_a_program() -> None:
    boom = CommandError(["squeue"], 1, "squeue: unrecognized option '--json'")
    r = ScriptedRunner({"squeue": boom})
    with pytest.raises(CommandError) as got:
        r.run(["squeue", "--json"])
    assert got.value is boom
    with pytest.raises(CommandError, match="no answer"):
        r.run(["sinfo"])


def test_a_program_is_available_when_an_answer_names_it() -> None:
    runner = ScriptedRunner({"scontrol show node": "x", ("sinfo",): "y"})
    assert runner.available("scontrol") and runner.available("sinfo")
    assert not runner.available("squeue") and not runner.available("show")
