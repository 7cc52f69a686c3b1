"""generate writes all or nothing, keeps modes and owners, and leaves unchanged files alone."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from preconditions import needs_root

from slurm_topo import OutputError
from slurm_topo.plumbing.output import write_files


def test_new_directory_appears_whole_with_0644_files(tmp_path: Path) -> None:
    """A missing output directory is created with every file at once, each 0644."""
    out = tmp_path / "a" / "gen"
    written = write_files(out, {"x.conf": "x\n", "y.conf": "y\n"})
    assert [w.status for w in written] == ["created", "created"]
    for name in ("x.conf", "y.conf"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["gen"]


def test_replaced_file_keeps_its_mode_and_unchanged_file_is_not_touched(tmp_path: Path) -> None:
    """A replaced file keeps the mode of the one it replaces; identical content is left as is (mtime kept)."""
    write_files(tmp_path, {"x.conf": "old\n", "y.conf": "same\n"})
    os.chmod(tmp_path / "x.conf", 0o640)
    mtime = (tmp_path / "y.conf").stat().st_mtime_ns
    written = write_files(tmp_path, {"x.conf": "new\n", "y.conf": "same\n"})
    assert [(w.path.name, w.status) for w in written] == [("x.conf", "replaced"), ("y.conf", "unchanged")]
    assert stat.S_IMODE((tmp_path / "x.conf").stat().st_mode) == 0o640
    assert (tmp_path / "x.conf").read_text() == "new\n"
    assert (tmp_path / "y.conf").stat().st_mtime_ns == mtime


@needs_root("chown to another owner needs root")
def test_replaced_file_keeps_its_owner(tmp_path: Path) -> None:
    """A replaced file keeps the owner and group of the one it replaces."""
    write_files(tmp_path, {"x.conf": "old\n"})
    os.chown(tmp_path / "x.conf", 65534, 65534)
    write_files(tmp_path, {"x.conf": "new\n"})
    st = (tmp_path / "x.conf").stat()
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_failure_part_way_changes_nothing(tmp_path: Path) -> None:
    """When one output cannot be written, no other output is replaced and no temporary is left."""
    write_files(tmp_path, {"a.conf": "old\n"})
    (tmp_path / "b.conf").mkdir()  # b.conf cannot be read or replaced as a file
    with pytest.raises(OutputError):
        write_files(tmp_path, {"a.conf": "new\n", "b.conf": "new\n"})
    assert (tmp_path / "a.conf").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.conf", "b.conf"]


def test_output_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    """--out naming an existing regular file is an error, and the file is untouched."""
    f = tmp_path / "f"
    f.write_text("keep")
    with pytest.raises(OutputError, match="not a directory"):
        write_files(f, {"x.conf": "x"})
    assert f.read_text() == "keep"


def test_generate_reports_progress_on_stderr_only_when_the_work_takes_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Long generations (100 000 nodes take seconds) say what they do on stderr; quick ones stay quiet."""
    from slurm_topo.cli import main

    inventory = tmp_path / "fleet.yaml"
    inventory.write_text("nodes:\n  - {name: 'n[1-4]', region: r1}\n")
    argv = ["generate", "-i", str(inventory), "--slurm-version", "22.05", "-o"]
    main([*argv, str(tmp_path / "quick")])
    assert capsys.readouterr().err == ""
    clock = iter(range(0, 10_000, 2))  # every reading of the clock is two seconds later
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    main([*argv, str(tmp_path / "slow")])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("slurm-topo: 4 nodes loaded in ") and err[0].endswith(" s; rendering")
    assert err[1].startswith("slurm-topo: rendered in ") and err[1].endswith(
        f" s; writing {tmp_path / 'slow'}"
    )
