"""docker-slurm/: the Dockerfile, compose.yaml and entrypoint a user's CI runs (docker-slurm/README.md). The
image itself is built and its integration tests run by `.ci/run` (docker-slurm/build-image, buildah); here
the files are checked with the tools that read them: the Compose client's own ``config`` (no engine needed)
and ``sh -n``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml
from preconditions import unavailable

REPO = Path(__file__).resolve().parents[1]
D = REPO / "docker-slurm"


def compose_cli() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        p = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30, check=False)
        if p.returncode == 0:
            return ["docker", "compose"]
    return None


def test_compose_file_is_what_the_compose_client_reads() -> None:
    cli = compose_cli()
    if cli is None:
        unavailable("no Compose client (apt-get install docker-compose)")
    p = subprocess.run(
        [*cli, "-f", str(D / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    svc = yaml.safe_load(p.stdout)["services"]["slurm"]
    assert svc["build"]["dockerfile"] == "docker-slurm/Dockerfile"
    assert Path(svc["build"]["context"]) == REPO
    assert svc["command"] == ["cluster"]  # the entrypoint's long-running cluster, not the tests
    assert "SYS_ADMIN" in svc["cap_add"]


def test_dockerfile_builds_with_no_flags_and_takes_secrets_only_as_mounts() -> None:
    """``docker build`` with no extra flags works where the network is open (the default base, no build arg
    needed); an internal CA or index goes in as a secret mount, never as COPY/ADD/ENV/ARG."""
    text = (D / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=debian:bookworm-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    for line in text.splitlines():
        if re.match(r"(COPY|ADD|ENV|ARG)\b", line):
            assert "ca.crt" not in line and "pip.conf" not in line, line
    mounts = re.findall(r"--mount=type=secret,id=([\w.]+)", text)
    assert set(mounts) == {"ca.crt", "pip.conf"}
    assert re.search(r'^ENTRYPOINT \["/src/docker-slurm/entrypoint"\]$', text, re.M)
    assert re.search(r'^CMD \["test"\]$', text, re.M)
    ignore = (D / "Dockerfile.dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignore)


def test_entrypoint_is_valid_sh_and_knows_its_commands() -> None:
    p = subprocess.run(["sh", "-n", str(D / "entrypoint")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    text = (D / "entrypoint").read_text()
    assert "  test)" in text and "  cluster)" in text
    assert "SLURM_TOPO_SLURM_VERSIONS=native" in text  # the image's own Slurm
    for script in ("entrypoint", "build-image", "build-pyslurm"):
        assert os.access(D / script, os.X_OK), script
    for script in ("build-image", "build-pyslurm"):
        p = subprocess.run(["bash", "-n", str(D / script)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (script, p.stderr)
