# The common commands, each a thin wrapper over one you can type yourself (README.md, docker-slurm/README.md).
#   make install       python3 -m venv .venv && .venv/bin/pip install -e '.[test]' (development; the
#                      README installs the wheel as a site does)
#   make test          the README's test command (integration tests start their own Slurm cluster; root);
#                      SLURM_VERSIONS=native,24.11,26.05 runs the integration tests on each (Debian roots)
#   make roots         build (once) the Debian roots of Slurm 24.11 and 26.05 in the cache
#   make lint          ruff format --check, ruff check, mypy --strict on the package (pyproject.toml)
#   make fixtures      capture real Slurm output into tests/fixtures/real/slurm-<X.Y>/ (root); SLURM=24.11
#   make cluster-up    start the test cluster (docker-slurm/cluster up) in BASE; CLUSTER_ARGS='--with-filter'
#   make cluster-down  stop the cluster in BASE and delete its directory
#   make bench         the benchmarks named in BENCH (benchmarks/bench_<name>.py); results in benchmarks/results/
# Variables: PYTHON (makes the venv), VENV, BASE (default: the launcher's), CLUSTER_ARGS, BENCH, SLURM,
# SLURM_VERSIONS.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BASE ?=
CLUSTER_ARGS ?=
SLURM ?= native
SLURM_VERSIONS ?=
BASE_ARG := $(if $(BASE),--base $(BASE))
# Without a Slurm cluster: generate, filter, pick. On real Slurm (root): submit, gres_picks, placement,
# apply_faults.
BENCH ?= generate filter pick

.PHONY: help install test lint fixtures cluster-up cluster-down bench roots

help:
	@sed -n '2,12s/^# //p' Makefile

install:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[test]'

test:
	$(if $(SLURM_VERSIONS),SLURM_TOPO_SLURM_VERSIONS=$(SLURM_VERSIONS) )$(VENV)/bin/pytest -m 'not gpu'

roots:
	$(PY) docker-slurm/cluster root --slurm 24.11
	$(PY) docker-slurm/cluster root --slurm 26.05

# The launcher scripts have no .py suffix, so ruff only reads them when named.
SCRIPTS := docker-slurm/cluster docker-slurm/capture-fixtures

lint:
	$(PY) -m ruff format --check . $(SCRIPTS)
	$(PY) -m ruff check . $(SCRIPTS)
	$(PY) -m mypy

fixtures:
	$(PY) docker-slurm/capture-fixtures --slurm $(SLURM)

cluster-up:
	$(PY) docker-slurm/cluster up $(BASE_ARG) --slurm $(SLURM) $(CLUSTER_ARGS)

cluster-down:
	$(PY) docker-slurm/cluster down $(BASE_ARG)

bench:
	@set -e; for b in $(BENCH); do echo "== $(PY) benchmarks/bench_$$b.py"; $(PY) benchmarks/bench_$$b.py; done
