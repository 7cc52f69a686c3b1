"""Man pages for ``slurm-topo`` and ``gpulayer-srun``, generated from the command definitions themselves
(click for slurm-topo, with click-man: one page per command; argparse for gpulayer-srun, with
argparse-manpage), so a page cannot drift from ``--help``. ``setup.py`` runs this at build time and installs
the pages with the wheel (``share/man/man1``); ``tests/test_man_pages.py`` checks every command has its page.
An editable install (``pip install -e``) installs no data files: read them there with
``man -l build/man/slurm-topo.1``.

    python man_pages.py DIR     # write the pages into DIR
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
# A fixed date keeps the build reproducible: the release's, not the build machine's clock.
DATE = "2026-12-03"


def write_man_pages(target: Path) -> list[Path]:
    """Write every page into ``target``; returns the paths written, slurm-topo's first."""
    sys.path.insert(0, str(HERE))  # the source tree's package, also inside an isolated build
    from argparse_manpage.manpage import Manpage
    from click_man.core import write_man_pages as click_pages

    from slurm_topo.cli import cli
    from slurm_topo.srun.cli import _parser
    from slurm_topo.version import __version__

    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.1"):
        old.unlink()
    with warnings.catch_warnings():  # click-man calls a click helper click 8.2 deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        click_pages("slurm-topo", cli, version=__version__, target_dir=str(target), date=DATE)
    parser = _parser()
    parser.prog = "gpulayer-srun"
    data = {
        "version": __version__,
        "date": DATE,
        "project_name": "slurm-topo",
        "description": "ranks ordered by TP/PP/DP over NVLink islands and the switch tree, run by srun",
        "manual_title": "slurm-topo manual",
    }
    page = Manpage(parser, _data=data)
    (target / "gpulayer-srun.1").write_text(str(page), encoding="utf-8")
    return sorted(target.glob("*.1"), key=lambda p: (p.name != "slurm-topo.1", p.name))


if __name__ == "__main__":
    for path in write_man_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "build/man")):
        print(path)
