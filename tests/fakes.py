"""The test fakes several test modules share (one place, one behaviour): a :class:`ScriptedRunner` stands in
for :class:`slurm_topo.plumbing.runner.Runner` where a test needs Slurm's or another program's answers without
the program (the real clients run in tests/integration/)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slurm_topo.core.errors import CommandError


def _words(key: str | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(key.split()) if isinstance(key, str) else tuple(key)


class _Answers(dict[tuple[str, ...], object]):
    """The answers by key, a string key read as its words (also when a test sets one later)."""

    def __setitem__(self, key: str | tuple[str, ...], value: object) -> None:  # type: ignore[override]
        super().__setitem__(_words(key), value)


class ScriptedRunner:
    """Answers each command from ``answers``: the longest key that is a prefix of the argv wins (a key is a
    tuple of words, or a string split at spaces, so ``"scontrol"`` answers every scontrol call and
    ``("scontrol", "show", "job", "-o", "13")`` that one call). An answer that is an exception is raised; a
    command with no answer fails as a program would (:class:`CommandError`, exit 1). Every argv is recorded
    in ``calls``."""

    def __init__(self, answers: Mapping[str | tuple[str, ...], object]) -> None:
        self.answers = _Answers()
        for key, value in answers.items():
            self.answers[key] = value
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> str:
        argv = tuple(argv)
        self.calls.append(argv)
        for n in range(len(argv), 0, -1):
            if argv[:n] in self.answers:
                answer = self.answers[argv[:n]]
                if isinstance(answer, BaseException):
                    raise answer
                return str(answer)
        raise CommandError(list(argv), 1, "no answer scripted for this command")

    def available(self, program: str) -> bool:
        """Which programs are installed, as :meth:`slurm_topo.plumbing.runner.SubprocessRunner.available`
        says: those it has an answer for."""
        return any(key[0] == program for key in self.answers)
