# Quick start: `make demo` (set up + render the bundled sample scene), `make test` (set up + tests).
# Each target installs what is missing, from the one dependency list in pyproject.toml: `demo`
# the project's dependencies, `test` also the dev, loc and compat extras. CUDA kernels build when
# a GPU is visible or FORCE_CUDA=1 (CI); GSRENDER_NO_CUDA=1 makes a CPU-only build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q
TORCH_VERSION ?= 2.14.1
export TORCH_CUDA_ARCH_LIST ?= 8.0;9.0
export MAX_JOBS ?= $(shell nproc)

.PHONY: setup setup-test build demo test bench browser lint clean

# The build tools and torch (pinned: the project's dependency says only "torch").
$(VENV)/.tools:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip setuptools wheel ninja
	$(PIP) torch==$(TORCH_VERSION)
	touch $@

# pyproject.toml's [project] dependencies: all that `demo` needs.
$(VENV)/.deps: pyproject.toml $(VENV)/.tools
	$(PY) tools/pyproject_deps.py >$(VENV)/requirements.txt
	$(PIP) -r $(VENV)/requirements.txt
	touch $@

# The extras the tests use: dev (pytest, hypothesis, ruff), loc (PoseLib, SplitGS-Loc's default
# PnP + RANSAC) and compat (gsplat, for its pure-PyTorch reference functions: installed without
# its dependencies, jaxtyping & co., which those functions do not need, and without building its
# CUDA kernels, which would only be JIT-built on first CUDA use).
$(VENV)/.deps-test: pyproject.toml $(VENV)/.deps
	$(PY) tools/pyproject_deps.py dev loc >$(VENV)/requirements-test.txt
	$(PIP) -r $(VENV)/requirements-test.txt
	$(PY) tools/pyproject_deps.py compat >$(VENV)/requirements-compat.txt
	BUILD_NO_CUDA=1 $(PIP) --no-deps -r $(VENV)/requirements-compat.txt
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

# The benchmarks behind the figures in README.md and docs/ (~15 min on 2 cores): results in
# benchmarks/results/*.json (machine, load, commit, date), the figure tables rewritten from them
# (benchmarks/report.py), then docs/gallery.md's pictures in docs/images/ (time vs D / N, stages,
# channels, the plant turntable, the viewer screenshot when Chromium is there).
bench: build
	$(PY) benchmarks/report.py
	$(PY) scripts/gallery_images.py

lint: setup-test
	$(VENV)/bin/ruff check gsrender tests benchmarks scripts

clean:
	rm -rf build gsrender/_C*.so *.egg-info
