"""apply's state store (slurm_topo/apply/store.py) on real files in tmp_path: staged writes keep mode and
owner, the two locks refuse a second holder, the journal's shape is checked before recovery trusts it,
state.json survives damage, and only the last ``keep`` completed sets stay."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path

import pytest
from preconditions import needs_root

from slurm_topo.apply import MANAGED, STAGE_SUFFIX, ApplyOptions, JournalUnreadable, Refusal
from slurm_topo.apply.store import (
    _clean_stage,
    _DirLock,
    _journal_shape_ok,
    _Lock,
    _locked,
    _meta,
    _put,
    _read,
    _State,
    _write_synced,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_synced_replaces_the_content_and_sets_the_mode_even_on_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"a much longer old content\n")
    os.chmod(target, 0o600)
    _write_synced(target, b"new\n", 0o640)
    assert target.read_bytes() == b"new\n" and mode(target) == 0o640
    big = os.urandom(3 * 1024 * 1024)  # more than one write(2) may take
    _write_synced(target, big)
    assert target.read_bytes() == big and mode(target) == 0o644


@needs_root("chown needs root")
def test_write_synced_gives_the_owner_when_root(tmp_path: Path) -> None:
    target = tmp_path / "f"
    _write_synced(target, b"x", 0o644, (4321, 8765))
    assert (target.stat().st_uid, target.stat().st_gid) == (4321, 8765)


def test_put_writes_through_a_staging_file_and_keeps_the_old_mode(tmp_path: Path) -> None:
    (tmp_path / "topology.conf").write_text("old\n")
    os.chmod(tmp_path / "topology.conf", 0o604)
    like = _meta(tmp_path / "topology.conf")
    assert like is not None and like["mode"] == 0o604
    _put(tmp_path, "topology.conf", b"new\n", like)
    assert (tmp_path / "topology.conf").read_text() == "new\n" and mode(tmp_path / "topology.conf") == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topology.conf"]
    _put(tmp_path, "gres.conf", b"g\n", None)
    assert mode(tmp_path / "gres.conf") == 0o644
    _put(tmp_path, "gres.conf", None, None)
    _put(tmp_path, "gres.conf", None, None)  # absent already: still fine
    assert not (tmp_path / "gres.conf").exists()


def test_read_and_meta_of_a_missing_file_are_none(tmp_path: Path) -> None:
    assert _read(tmp_path / "nope") is None and _meta(tmp_path / "nope") is None
    with pytest.raises(IsADirectoryError):
        _read(tmp_path)  # only a missing file is None: anything else is an error


def test_clean_stage_removes_only_our_staging_files(tmp_path: Path) -> None:
    ours = [f".{name}{STAGE_SUFFIX}" for name in MANAGED]
    for name in [*ours, ".other.slurm-topo.tmp", "topology.conf", ".topology.conf.swp"]:
        (tmp_path / name).write_text("x")
    assert sorted(_clean_stage(tmp_path)) == sorted(ours)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.slurm-topo.tmp",
        ".topology.conf.swp",
        "topology.conf",
    ]
    assert _clean_stage(tmp_path) == []


# --------------------------------------------------------------------------------------------------
# the locks


def test_a_second_holder_of_the_state_lock_is_refused_at_once(tmp_path: Path) -> None:
    with _Lock(tmp_path):
        with pytest.raises(Refusal, match=f"another slurm-topo apply holds {tmp_path / 'lock'}"):
            with _Lock(tmp_path):
                pass  # pragma: no cover
    with _Lock(tmp_path):  # released on exit
        pass
    assert mode(tmp_path / "lock") == 0o600


def test_a_state_lock_that_cannot_be_opened_is_a_refusal(tmp_path: Path) -> None:
    with pytest.raises(Refusal, match="cannot open the lock .*missing/lock"):
        with _Lock(tmp_path / "missing"):
            pass  # pragma: no cover


def test_the_directory_lock_waits_then_refuses_and_creates_nothing(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    fd = os.open(etc, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another writer, by another open file description
        with pytest.raises(
            Refusal,
            match=r"another slurm-topo apply is writing .*etc \(its lock on the directory was held for 0s",
        ):
            with _DirLock(etc, 0):
                pass  # pragma: no cover
    finally:
        os.close(fd)
    with _DirLock(etc, 0):
        pass
    assert list(etc.iterdir()) == []
    with pytest.raises(Refusal, match="cannot open --slurm-dir .*nowhere to lock it"):
        with _DirLock(tmp_path / "nowhere", 0):
            pass  # pragma: no cover


def test_locked_takes_both_locks_and_releases_them(tmp_path: Path) -> None:
    etc, state = tmp_path / "etc", tmp_path / "state"
    etc.mkdir()
    state.mkdir()
    o = ApplyOptions(slurm_dir=etc, state_dir=state, lock_wait=0)
    with _locked(o):
        with pytest.raises(Refusal, match="holds"):
            with _Lock(state):
                pass  # pragma: no cover
        with pytest.raises(Refusal, match="is writing"):
            with _DirLock(etc, 0):
                pass  # pragma: no cover
    with _locked(o):
        pass


# --------------------------------------------------------------------------------------------------
# the journal and state.json


def journal(**kw: object) -> dict[str, object]:
    j: dict[str, object] = {
        "id": "00000000000000000001-42",
        "phase": "prepared",
        "slurm_dir": "/etc/slurm",
        "files": [{"name": "topology.conf", "old_sha": None, "new_sha": "ab", "meta": None}],
        "order": ["topology.conf"],
    }
    j.update(kw)
    return j


def test_a_well_formed_journal_passes_the_shape_check() -> None:
    assert _journal_shape_ok(journal())
    assert _journal_shape_ok(journal(files=[], order=[]))


@pytest.mark.parametrize(
    "bad",
    [
        {"id": 1},
        {"phase": None},
        {"slurm_dir": ["/etc/slurm"]},
        {"files": {}},
        {"order": "topology.conf"},
        {"files": [{"name": "slurm.conf", "old_sha": None, "new_sha": None, "meta": None}], "order": []},
        {"files": [{"name": "topology.conf", "old_sha": None, "meta": None}]},
        {"files": ["topology.conf"]},
        {"order": ["topology.conf", "gres.conf"]},
        {"id": "../../etc"},
        {"id": ".."},
        {"id": ""},
    ],
)
def test_a_journal_recovery_could_not_trust_fails_the_shape_check(bad: dict[str, object]) -> None:
    assert not _journal_shape_ok(journal(**bad))


def test_the_journal_round_trips_atomically_and_private(tmp_path: Path) -> None:
    st = _State(tmp_path)
    assert st.journal() is None
    st.write_journal(journal())
    assert st.journal() == journal() and mode(st.journal_path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.json"]  # no .tmp left behind
    st.drop_journal()
    st.drop_journal()
    assert st.journal() is None


def test_a_damaged_journal_is_unreadable_not_ignored(tmp_path: Path) -> None:
    st = _State(tmp_path)
    for text in ("{", "null", json.dumps(journal(phase=3)), json.dumps([journal()])):
        st.journal_path.write_text(text)
        with pytest.raises(JournalUnreadable, match="is not a slurm-topo journal: fix or remove it by hand"):
            st.journal()


def test_state_json_merges_updates_and_a_damaged_one_reads_as_empty(tmp_path: Path) -> None:
    st = _State(tmp_path)
    assert st.state() == {}
    st.update_state(last_reconfigure=100.0, reconfigure_owed=True)
    st.update_state(reconfigure_owed=False, last_applied="x")
    assert st.state() == {"last_reconfigure": 100.0, "reconfigure_owed": False, "last_applied": "x"}
    assert mode(st.state_path) == 0o600
    st.state_path.write_text("{trunc")
    assert st.state() == {}


def make_set(st: _State, name: str, complete: bool) -> Path:
    d = st.sets / name
    (d / "old").mkdir(parents=True)
    (d / "new").mkdir()
    if complete:
        (d / "complete").write_bytes(b"")
    return d


def test_prune_keeps_the_last_complete_sets_and_the_journals_own(tmp_path: Path) -> None:
    st = _State(tmp_path)
    st.prune(3)  # no sets/ yet: nothing to do, nothing created
    assert st.completed_sets() == [] and not st.sets.exists()
    done = [make_set(st, f"{i:020d}-1", True) for i in range(1, 6)]
    failed = make_set(st, f"{6:020d}-1", False)
    running = make_set(st, f"{7:020d}-1", False)
    st.write_journal(journal(id=running.name))
    assert st.completed_sets() == done
    st.prune(3)
    assert sorted(p.name for p in st.sets.iterdir()) == [p.name for p in done[2:]] + [running.name]
    assert not failed.exists()
    st.prune(0)
    assert [p.name for p in st.sets.iterdir()] == [running.name]


def test_set_names_count_up_from_the_highest_in_the_directory_whatever_the_clock(tmp_path: Path) -> None:
    """Set names were the wall clock's nanoseconds; a new one is one past the highest name's number, so it
    sorts after every set there, those of earlier releases included."""
    st = _State(tmp_path)
    first = st.new_set_id()
    assert first == f"{1:020d}-{os.getpid()}"
    make_set(st, f"{1_800_000_000_000_000_000:020d}-7", True)  # an earlier release's, clock-named
    make_set(st, f"{5:020d}-8", False)
    (st.sets / "not-a-set").mkdir()
    names = []
    for _ in range(3):
        names.append(st.new_set_id())
        make_set(st, names[-1], True)
    assert names == [f"{1_800_000_000_000_000_000 + i:020d}-{os.getpid()}" for i in (1, 2, 3)]
    assert [p.name for p in st.completed_sets()][-3:] == names


def test_the_set_state_names_last_applied_sorts_last_and_is_never_pruned_first(tmp_path: Path) -> None:
    """Sets an earlier release named after a clock step back: the last one applied has the lowest name.
    state.json's last_applied puts it last, for --rollback and for prune."""
    st = _State(tmp_path)
    before = make_set(st, f"{1_800_000_000_000_000_000:020d}-7", True)
    after_step_back = make_set(st, f"{1_799_999_996_400_000_000:020d}-9", True)
    st.update_state(last_applied=after_step_back.name)
    assert st.completed_sets() == [before, after_step_back]
    st.prune(1)
    assert st.completed_sets() == [after_step_back]
