"""contrib/: the shipped systemd units and cron line, as an administrator installs them (docs/apply.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from preconditions import unavailable

REPO = Path(__file__).resolve().parents[1]
UNITS = sorted((REPO / "contrib" / "systemd").iterdir())


def test_every_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """The units as installed into /etc/systemd/system (copied as they are): systemd's own checker finds
    nothing, for every service and timer."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed (package systemd)")
    for unit in UNITS:
        shutil.copy(unit, tmp_path / unit.name)
    p = subprocess.run(
        [analyze, "verify", *(str(tmp_path / u.name) for u in UNITS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ours = [ln for ln in (p.stdout + p.stderr).splitlines() if "slurm-topo" in ln]
    assert p.returncode == 0 and not ours, p.stdout + p.stderr


def test_units_run_the_configured_command_and_apply_keeps_the_partitions() -> None:
    """No unit hard-codes where slurm-topo lives (``$SLURM_TOPO``, set in /etc/default/<unit>); none points
    at documentation that is not installed; every service has its timer; apply reads the live slurmctld
    (``--scontrol``), as the cron line does."""
    services = [u for u in UNITS if u.suffix == ".service"]
    assert {u.stem for u in services} == {
        "slurm-topo-apply",
        "slurm-topo-discover",
        "slurm-topo-health",
        "slurm-topo-health-sync",
        "slurm-topo-metrics",
        "slurm-topo-relax",
    }
    for u in UNITS:
        text = u.read_text()
        assert "/usr/local/bin/slurm-topo" not in text and "Documentation=" not in text, u.name
    for u in services:
        text = u.read_text()
        assert '"$SLURM_TOPO" ' in text and "Environment=SLURM_TOPO=" in text, u.name
        if u.stem != "slurm-topo-discover":  # discover runs once at boot
            assert (u.parent / f"{u.stem}.timer").exists(), u.name
    assert " --scontrol " in (REPO / "contrib" / "systemd" / "slurm-topo-apply.service").read_text()
    assert " --scontrol " in (REPO / "contrib" / "cron" / "slurm-topo-apply").read_text()


def test_the_docs_point_at_the_shipped_units_instead_of_copies() -> None:
    """One unit per job, in contrib/: the guides name the file, they do not carry a second copy."""
    for doc in ("discovery.md", "health.md", "apply.md", "relax.md"):
        text = (REPO / "docs" / doc).read_text()
        assert "[Service]" not in text, doc
