"""What pyproject.toml cannot say by itself:

* the packages, discovered: every folder of ``slurm_topo/`` with an ``__init__.py`` (never a hand-kept
  list: one that missed ``slurm_topo.access`` once shipped a wheel whose commands did not start), plus the
  Slurm-side folders shipped as package data (``job_submit/``, ``gres/``, ``examples/``, ``contrib/`` as
  ``slurm_topo.files.*``, mapped in pyproject.toml);
* the man pages of ``slurm-topo`` and ``gpulayer-srun``, generated from the command definitions
  (man_pages.py) into build/man and installed with the wheel in share/man/man1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from man_pages import write_man_pages  # noqa: E402

#: folders shipped as data under slurm_topo.files (pyproject.toml [tool.setuptools.package-dir])
SHIPPED = ("job_submit", "gres", "examples", "contrib")

PACKAGES = find_packages(where=str(HERE), include=["slurm_topo", "slurm_topo.*"])
PACKAGES += [f"slurm_topo.files.{name}" for name in SHIPPED]

PAGES = write_man_pages(HERE / "build" / "man")
setup(packages=PACKAGES, data_files=[("share/man/man1", [str(p.relative_to(HERE)) for p in PAGES])])
