"""Runs the real job_submit/slurm_topo_filter/ (its modules) in Lua 5.1 in-process (lupa's lua51), with a
recording `slurm`."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from lupa import lua51

REPO = Path(__file__).resolve().parents[1]


def job_submit_dir() -> Path:
    """The job_submit/ folder of the package under test: the installed one's (``slurm_topo.files.job_submit``,
    the wheel in CI), else this checkout's (an editable install maps only real packages)."""
    try:
        installed = Path(str(resources.files("slurm_topo.files.job_submit")))
    except ModuleNotFoundError:
        return REPO / "job_submit"
    return installed if (installed / "slurm_topo_filter" / "init.lua").is_file() else REPO / "job_submit"


JOB_SUBMIT = job_submit_dir()

SLURM_STUB = """
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294, ESLURM_INVALID_NODE_COUNT = 2006,
          user_msgs = {}, errors = {}, infos = {} }
function slurm.log_user(fmt, ...) table.insert(slurm.user_msgs, string.format(fmt, ...)) end
function slurm.log_error(fmt, ...) table.insert(slurm.errors, string.format(fmt, ...)) end
function slurm.log_info(fmt, ...) table.insert(slurm.infos, string.format(fmt, ...)) end
function slurm.log_verbose(fmt, ...) table.insert(slurm.infos, string.format(fmt, ...)) end
"""


class LuaFilter:
    def __init__(self, data_path: Path | None = None):
        self.lua = lua51.LuaRuntime(unpack_returned_tuples=True)
        assert self.lua.eval("_VERSION") == "Lua 5.1"
        self.lua.execute(SLURM_STUB)
        here = JOB_SUBMIT
        self.lua.execute(f'package.path = "{here}/?.lua;{here}/?/init.lua;" .. package.path')
        self.mod = self.lua.eval('require("slurm_topo_filter")')
        if data_path is not None:
            self.configure(data_path)

    def configure(self, data_path: Path, recheck: int = 0) -> None:
        self.mod.configure(self.table({"data": str(data_path), "recheck": recheck}))

    def table(self, value: Any) -> Any:
        """Python values -> Lua values (dicts keep integer keys, so a 0-indexed spank_job_env stays
        0-indexed)."""
        if isinstance(value, Mapping):
            t = self.lua.table()
            for k, v in value.items():
                t[k] = self.table(v)
            return t
        if isinstance(value, (list, tuple)):
            return self.lua.table(*[self.table(v) for v in value])
        return value

    def load_data(self, path: Path) -> Any:
        chunk = self.lua.eval(f'loadfile("{path}")')
        return self.mod.prepare(chunk())  # the group lists from the data's columns, as load_data does

    def decide(self, data: Any, job: Mapping[str, Any]) -> dict[str, Any]:
        d = self.mod.decide(data, self.mod.request(self.table(job)))
        keys = ("action", "locality", "features", "prefer", "message", "record", "rejection", "segment")
        out = {k: d[k] if k != "rejection" else (d[k] or "") for k in keys}
        out["segment_policy"] = d["segment_policy"]
        return out

    def submit(self, job: Mapping[str, Any]) -> tuple[int, Any]:
        t = self.table(job)
        rc = self.mod.submit(t, self.lua.table(), 0)
        return rc, t

    def messages(self, kind: str = "user_msgs") -> list[str]:
        return list(self.lua.globals().slurm[kind].values())

    def decide_modify(
        self, data: Any, rec: Mapping[str, Any], upd: Mapping[str, Any], admin: bool
    ) -> dict[str, Any]:
        m = self.mod.decide_modify(data, self.table(rec), self.table(upd), admin)
        return {k: m[k] for k in ("action", "features", "prefer", "priority", "admin_comment", "log")}
