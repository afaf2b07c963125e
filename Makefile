# Quick start: `make demo` (set up + render the bundled sample scene), `make test` (set up + tests).
# Each target installs what is missing. CUDA kernels build when nvcc and a CUDA torch are present
# (no GPU needed); GSRENDER_NO_CUDA=1 makes a CPU-only build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.14.1
export TORCH_CUDA_ARCH_LIST ?= 8.0;9.0
export MAX_JOBS ?= $(shell nproc)

.PHONY: setup build demo test bench browser lint clean

# gsplat is installed for its pure-PyTorch reference functions (the compatibility tests): a
# pure-Python wheel whose CUDA kernels would only be JIT-built on first CUDA use. PoseLib is
# SplitGS-Loc's default PnP + RANSAC (OpenCV's USAC when it is absent).
$(VENV)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel ninja
	$(PY) -m pip install -q torch==$(TORCH_VERSION)
	$(PY) -m pip install -q numpy plyfile imageio opencv-python-headless tqdm matplotlib pytest hypothesis ruff
	BUILD_NO_CUDA=1 $(PY) -m pip install -q --no-deps gsplat==1.5.3
	$(PY) -m pip install -q poselib==2.0.5
	$(PY) -m pip install -q viser==1.1.1 selenium==4.51.0
	touch $@

setup: $(VENV)/.deps

# pip's editable install registers the `gsrender` command; build_ext rebuilds what changed.
build: setup
	@test -f $(VENV)/.editable || ($(PY) -m pip install -q --no-build-isolation --no-deps -e . && touch $(VENV)/.editable)
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

test: build browser
	$(PY) -m pytest -q

# also refreshes docs/gallery.md's pictures in docs/images/ (time vs D / N, stages, channels,
# the plant turntable, the viewer screenshot when Chromium is there)
bench: build
	$(PY) benchmarks/cpu_render.py --quick --out out/bench
	$(PY) benchmarks/fps.py --quick --out out/fps
	$(PY) benchmarks/channels.py --quick --out out/channels
	$(PY) benchmarks/viewer.py --out out/viewer
	$(PY) scripts/gallery_images.py

lint: setup
	$(VENV)/bin/ruff check gsrender tests benchmarks scripts

clean:
	rm -rf build gsrender/_C*.so *.egg-info
