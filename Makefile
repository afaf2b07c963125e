# Quick start: `make demo` (set up + render the bundled sample scene), `make test` (set up + tests).
# Each target installs what is missing, from the one dependency list in pyproject.toml: `demo`
# the project's dependencies and the `view` extra, `test` also the dev, loc, sfm and compat extras.
# CUDA kernels build when a GPU is visible or FORCE_CUDA=1 (CI); GSRENDER_NO_CUDA=1 makes a
# CPU-only build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q
TORCH_VERSION ?= 2.14.1
# torch's build: `cuda` (the default wheel, with the CUDA runtime and the nvidia / triton wheels)
# where an NVIDIA GPU answers or CI compiles the CUDA kernels (FORCE_CUDA=1), else `cpu`: the
# index's CPU-only wheel TORCH_CPU_VERSION (a +cpu local version), about 1 GB where the CUDA one
# takes 5; TORCH_CPU_INDEX names an extra index that has it. An index without it: the default one.
TORCH_BUILD ?= $(if $(or $(filter 1,$(FORCE_CUDA)),$(shell nvidia-smi -L 2>/dev/null)),cuda,cpu)
TORCH_CPU_VERSION ?= 2.13.0+cpu
TORCH_CPU_INDEX ?=
export TORCH_CUDA_ARCH_LIST ?= 8.0;9.0
export MAX_JOBS ?= $(shell nproc)
# The CPU kernels' instruction-set copies (setup.py): this machine's alone for a local build,
# every copy in CI (whose binaries must run on any x86-64, and whose suite runs each copy).
export GSRENDER_CPU_ISA_BUILD ?= $(if $(CI),all,host)

.PHONY: setup setup-test build build-profile demo test test-fast bench bench-real voda-real loc-real browser lint clean

# The build tools and torch (pinned: the project's dependency says only "torch").
$(VENV)/.tools:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip setuptools wheel ninja
ifeq ($(TORCH_BUILD),cpu)
	$(PIP) $(if $(TORCH_CPU_INDEX),--extra-index-url $(TORCH_CPU_INDEX)) torch==$(TORCH_CPU_VERSION) || \
	  { echo "torch $(TORCH_CPU_VERSION) (CPU-only) not offered here: the default build"; $(PIP) torch==$(TORCH_VERSION); }
else
	$(PIP) torch==$(TORCH_VERSION)
endif
	touch $@

# pyproject.toml's [project] dependencies and the `view` extra (the demo's last line suggests
# `gsrender view`): all that `demo` needs.
$(VENV)/.deps: pyproject.toml $(VENV)/.tools
	{ $(PY) tools/pyproject_deps.py && $(PY) tools/pyproject_deps.py view; } >$(VENV)/requirements.txt
	$(PIP) -r $(VENV)/requirements.txt
	touch $@

# The extras the tests use: dev (pytest, hypothesis, ruff), loc (PoseLib, SplitGS-Loc's default
# PnP + RANSAC), sfm (pycolmap: `gsrender prepare`'s SfM) and compat (gsplat, for its pure-PyTorch
# reference functions: installed without its dependencies, jaxtyping & co., which those functions
# do not need, and without building its CUDA kernels, which would only be JIT-built on first CUDA
# use).
$(VENV)/.deps-test: pyproject.toml $(VENV)/.deps
	$(PY) tools/pyproject_deps.py dev loc sfm >$(VENV)/requirements-test.txt
	$(PIP) -r $(VENV)/requirements-test.txt
	$(PY) tools/pyproject_deps.py compat >$(VENV)/requirements-compat.txt
	BUILD_NO_CUDA=1 $(PIP) --no-deps -r $(VENV)/requirements-compat.txt
	touch $@

# The sfm extra alone (pycolmap: `gsrender prepare`), for bench-real without the test extras.
$(VENV)/.deps-sfm: pyproject.toml $(VENV)/.deps
	$(PY) tools/pyproject_deps.py sfm >$(VENV)/requirements-sfm.txt
	$(PIP) -r $(VENV)/requirements-sfm.txt
	touch $@

setup: $(VENV)/.deps
setup-test: $(VENV)/.deps-test

# pip's editable install registers the `gsrender` command (GSRENDER_NO_EXT=1: without compiling
# the extension a second time, see setup.py), again whenever pyproject.toml (where the command's
# entry point is) changes; build_ext rebuilds what changed.
$(VENV)/.editable: pyproject.toml $(VENV)/.deps
	GSRENDER_NO_EXT=1 $(PIP) --no-build-isolation --no-deps -e .
	touch $@

build: setup $(VENV)/.editable
	$(PY) setup.py -q build_ext --inplace

demo: build
	$(VENV)/bin/gsrender demo

# Each translation unit's wall and CPU time and peak compiler memory, from a clean build in a
# temporary folder (tools/build_profile.py; MAX_JOBS=1 unless given: each unit's wall time its own),
# into benchmarks/results/build_profile.json, beside the torch-in-kernels build's figures
# (docs/testing.md renders both: tools/figures/report.py --render)
PROFILE_BEFORE := benchmarks/results/build_profile_torch_kernels.json
build-profile: setup
	MAX_JOBS=$(or $(PROFILE_JOBS),1) $(PY) tools/build_profile.py --json benchmarks/results/build_profile.json \
	  $(if $(wildcard $(PROFILE_BEFORE)),--compare $(PROFILE_BEFORE))

# The viewer's browser test drives Debian's headless Chromium through selenium (no browser
# download at test time). Installed only as root and when missing (~3 min); else the test skips.
browser:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then \
	    echo "installing chromium + chromium-driver (the viewer's browser test)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
	      >/dev/null; } || echo "could not install chromium: the viewer's browser test will skip"; fi

test: build setup-test browser
	$(PY) -m pytest -q

# The inner loop: everything but the tests marked slow (builds of the SIMT driver, subprocess and
# torchrun launches, the browser, benchmark smokes, SfM and the real-scene chain, study quick runs)
test-fast: build setup-test
	$(PY) -m pytest -q -m "not slow"

# The benchmarks behind the figures in README.md and docs/: results in benchmarks/results/*.json
# (machine, load, commit, date, wall time), the figure tables rewritten from them
# (tools/figures/report.py; the long ones, the distributed check and the kernel mutants, only with
# `--only`), then docs/gallery.md's pictures in docs/images/ (time vs D / N, stages, channels,
# the plant turntable, the viewer screenshot when Chromium is there); each step's wall time in
# benchmarks/results/bench_run.json (docs/benchmarks.md).
bench: build
	$(PY) tools/figures/report.py

# A real scene end to end (scripts/bench_real.sh, docs/benchmarks.md): `gsrender prepare` on the
# photos in SCENE, `gsrender train --preset 3dgs`, benchmarks/mipnerf360.py on its held-out photos,
# all under BENCH_REAL_OUT. STEPS=N sets the training steps, QUICK=1 a 300-step smoke run.
DATA_ROOT ?= $(or $(GSRENDER_DATA),../shared/data)
SCENE ?= $(DATA_ROOT)/bonsai/images
BENCH_REAL_OUT ?= out/bench_real
bench-real: build $(VENV)/.deps-sfm
	PYTHON=$(PY) scripts/bench_real.sh $(SCENE) $(BENCH_REAL_OUT) $(if $(STEPS),--steps $(STEPS)) \
	  $(if $(filter 1,$(QUICK)),--quick)

# The applications on the real scene (studies/voda/REPORT.md, studies/loc/REPORT.md): both use the
# 7,000-step model bench-real trains (pinned to that iteration), trained first when out/ lacks it.
# voda-real: the removal study (3 seeds, ~1 h on 2 quiet cores); loc-real: localization.
REAL_MODEL = $(BENCH_REAL_OUT)/model/bonsai/point_cloud/iteration_7000/point_cloud.ply
$(REAL_MODEL):
	$(MAKE) bench-real SCENE=$(DATA_ROOT)/bonsai/images
voda-real: build setup-test $(REAL_MODEL)
	$(PY) -m studies.voda.real_removal --scene $(BENCH_REAL_OUT)/bonsai --model $(BENCH_REAL_OUT)/model/bonsai
loc-real: build setup-test $(REAL_MODEL)
	$(PY) studies/loc/real.py --scene $(BENCH_REAL_OUT)/bonsai --model $(BENCH_REAL_OUT)/model/bonsai

lint: setup-test
	$(VENV)/bin/ruff check gsrender tests benchmarks scripts examples tools studies

clean:
	rm -rf build gsrender/_C*.so *.egg-info
