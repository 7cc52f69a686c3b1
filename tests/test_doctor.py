"""``slurm-topo doctor``'s checks that need no live Slurm: the data file's checksum as the filter reads it,
the plugstack reader, gres.conf against the nodes' Gres=, the units, the exit code and the JSON. The checks
against real Slurm, each fault injected, are tests/integration/test_readme_wiring.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import ScriptedRunner
from luafilter import LuaFilter

from slurm_topo import load_inventories, render_all
from slurm_topo.cli import cli
from slurm_topo.core.errors import CommandError
from slurm_topo.render.filter_data import FORMAT
from slurm_topo.slurmconfig.doctor import (
    Doctor,
    DoctorOptions,
    data_file_problem,
    examine,
    plugstack_entries,
    render_text,
)

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "docker-slurm" / "fleet-filter.yaml"


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return dict(render_all(load_inventories([str(FLEET)]), (22, 5)))


def test_data_file_problem_agrees_with_the_filter(tmp_path: Path, rendered: dict[str, str]) -> None:
    """Every damage the real Lua filter refuses, doctor names, and a good file passes both."""
    good = rendered["slurm_topo_data.lua"].encode()
    variants = {
        "good": good,
        "truncated": good[: len(good) // 2],
        "edited": good.replace(b'"zone_us-east-1a"', b'"zone_us-east-1Z"', 1),
        "no header": good.split(b"\n", 1)[1],
        "no checksum": b"\n".join(good.split(b"\n")[:1] + good.split(b"\n")[2:]),
        "older format": good,  # checked with a newer reader below
    }
    for name, data in variants.items():
        path = tmp_path / f"{name}.lua"
        path.write_bytes(data)
        lua = LuaFilter()
        lua.configure(path)
        loads = lua.lua.eval('require("slurm_topo_filter.data").load() ~= nil')
        why = data_file_problem(data, FORMAT if name != "older format" else FORMAT + 1)
        if name == "older format":
            assert why is not None and f"reads {FORMAT + 1}" in why
            continue
        assert (why is None) == bool(loads), (name, why)
    assert data_file_problem(b"", FORMAT) == "has no slurm-topo-data header line"


def test_plugstack_entries_follow_includes(tmp_path: Path) -> None:
    (tmp_path / "plugstack.conf.d").mkdir()
    (tmp_path / "plugstack.conf").write_text(
        "# site plugins\nrequired /usr/lib/x.so arg\ninclude plugstack.conf.d/*.conf\n"
    )
    (tmp_path / "plugstack.conf.d" / "topo.conf").write_text("optional /opt/st/locality.so  # slurm-topo\n")
    assert plugstack_entries(tmp_path / "plugstack.conf") == ["/usr/lib/x.so", "/opt/st/locality.so"]
    assert plugstack_entries(tmp_path / "absent.conf") == []


def _site(tmp_path: Path, rendered: dict[str, str], **extra: str) -> Path:
    etc = tmp_path / "etc"
    etc.mkdir()
    for name, text in rendered.items():
        (etc / name).write_text(text)
    for name, text in extra.items():
        (etc / name).write_text(text)
    return etc


def _runner(etc: Path, answers: dict[str, object]) -> ScriptedRunner:
    base: dict[str, object] = {
        "scontrol show config": f"SLURM_CONF = {etc}/slurm.conf\nSLURM_VERSION = 22.05.8\n"
        "TopologyPlugin = topology/tree\nJobSubmitPlugins = lua\nPlugStackConfig = (null)\n",
        "systemctl": CommandError(["systemctl"], 1, "System has not been booted with systemd"),
    }
    base.update(answers)
    return ScriptedRunner(base)


GRES_NODE = (
    "NodeName=n01 Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 CPUTot=16 AvailableFeatures=a ActiveFeatures=a "
    "Gres=gpu:h100:{n} NodeAddr=127.0.0.1 NodeHostName=localhost State=IDLE Partitions=main\n"
)


@pytest.mark.parametrize(
    ("gres", "gpus", "finding"),
    [
        ("NodeName=n01 Name=gpu Type=h100 File=/dev/nvidia[0-1] Links=-1,2\n", 2, None),
        ("NodeName=n01 Name=gpu Type=h100 File=/dev/nvidia[0-1]\n", 4, "2 GPUs in gres.conf, 4 in its Gres="),
        (
            "NodeName=n01 Name=gpu File=/dev/nvidia0 Links=-1,2,2\nNodeName=n01 Name=gpu File=/dev/nvidia1 "
            "Links=2,-1,2\n",
            2,
            "does not fit its 2 GPUs",
        ),
        ("NodeName=n09 Name=gpu File=/dev/nvidia0\n", 1, "n09 is in gres.conf but unknown to slurmctld"),
    ],
)
def test_gres_lines_must_fit_each_nodes_gpus(
    tmp_path: Path, rendered: dict[str, str], gres: str, gpus: int, finding: str | None
) -> None:
    etc = _site(tmp_path, rendered, **{"gres.conf": gres})
    runner = _runner(etc, {"scontrol show node": GRES_NODE.format(n=gpus)})
    doctor = Doctor(runner, DoctorOptions())
    doctor.slurmctld()
    doctor.gres()
    found = [f.message for f in doctor.r.findings if f.check == "gres"]
    if finding is None:
        assert found == []
    else:
        assert len(found) == 1 and finding in found[0], found


def test_units_enabled_failed_and_missing(tmp_path: Path, rendered: dict[str, str]) -> None:
    etc = _site(tmp_path, rendered)
    show = "systemctl show -pLoadState -pUnitFileState -pActiveState -pResult -pExecMainExitTimestamp"
    runner = _runner(
        etc,
        {
            f"{show} slurm-topo-apply.timer": "LoadState=loaded\nUnitFileState=disabled\n",
            f"{show} slurm-topo-apply.service": "LoadState=loaded\nResult=exit-code\n"
            "ExecMainExitTimestamp=Sun 2026-12-06 07:00:00 UTC\n",
            f"{show} slurm-topo-relax.timer": "LoadState=not-found\n",
            f"{show} slurm-topo-health-sync.timer": "LoadState=loaded\nUnitFileState=enabled\n",
            f"{show} slurm-topo-health-sync.service": "LoadState=loaded\nResult=success\n"
            "ExecMainExitTimestamp=Sun 2026-12-06 07:05:00 UTC\n",
        },
    )
    doctor = Doctor(runner, DoctorOptions(state_dir=tmp_path))
    doctor.slurmctld()
    doctor.units()
    messages = [f.message for f in doctor.r.findings]
    assert "slurm-topo-apply.timer is installed but disabled" in messages
    assert any("slurm-topo-apply.service's last run failed (exit-code" in m for m in messages)
    assert "units: slurm-topo-relax.timer is not installed" in doctor.r.notes
    assert any(
        "slurm-topo-health-sync.service last ran Sun 2026-12-06 07:05:00" in p for p in doctor.r.passed
    )


def test_no_slurmctld_is_one_finding_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's exit code and JSON: a finding is exit 1, stdout one object."""
    from slurm_topo.slurmconfig import doctor as doctor_module

    monkeypatch.setattr(
        doctor_module,
        "examine",
        lambda runner, options: examine(
            ScriptedRunner({"scontrol": CommandError(["scontrol"], 1, "Unable to contact slurm controller")}),
            options,
        ),
    )
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and [f["check"] for f in report["findings"]] == ["slurmctld"]
    assert "Unable to contact" in report["findings"][0]["message"]
    text = render_text(examine(ScriptedRunner({}), DoctorOptions()))
    assert text.splitlines()[-1] == "doctor: 1 finding(s)" and text.startswith("FAIL  slurmctld: ")
