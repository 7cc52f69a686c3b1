"""The build step pyproject.toml cannot say: the man pages of ``slurm-topo`` and ``gpulayer-srun``, generated
from the command definitions (man_pages.py) into build/man and installed with the wheel in share/man/man1."""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from man_pages import write_man_pages  # noqa: E402

PAGES = write_man_pages(HERE / "build" / "man")
setup(data_files=[("share/man/man1", [str(p.relative_to(HERE)) for p in PAGES])])
