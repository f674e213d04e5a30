# opsel: the two commands a fresh machine needs are `make demo` and `make test`.
# Each installs what is missing (a Python venv with maturin, numpy, pytest and
# the peer libraries), builds, and runs. Capability-specific targets live in mk/*.mk.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
PYTHON ?= python3
VENV ?= .venv
VPY := $(abspath $(VENV))/bin/python
ROOT := $(abspath .)
export CARGO_TERM_COLOR ?= never


.PHONY: all test demo demo-quick demo-classify toolchain deps python test-rust test-python bench bench-peers fmt clean
all: test

toolchain:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs) and retry" >&2; exit 1; }
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python >= 3.9 and retry" >&2; exit 1; }

# The venv is rebuilt when the dev requirements change.
$(VENV)/.stamp: bindings/python/requirements-dev.txt | toolchain
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --upgrade pip
	$(VENV)/bin/pip install -q --disable-pip-version-check -r bindings/python/requirements-dev.txt
	touch $@

deps: $(VENV)/.stamp

# Build the Python extension into the venv (editable install).
python: deps py-models
	cd bindings/python && VIRTUAL_ENV=$(abspath $(VENV)) $(abspath $(VENV))/bin/maturin develop --release -q

# Rust: every crate. The sys and netlab suites create network namespaces (root);
# sys-deps installs iproute2, ethtool, ping, chromium (the report screenshot test) and groff
# (the man page check) when missing.
test-rust: toolchain sys-deps
	$(CARGO) test --workspace --release --exclude opsel-python

test-python: python
	cd bindings/python && $(VPY) -m pytest -q tests

# Product targets in mk/; studies, evaluation sweeps and fixture generators in research/.
include $(wildcard mk/*.mk) $(wildcard research/*.mk)

# C (make + CMake, ASan, valgrind) and Node (node:test) suites come from mk/bind.mk;
# the root-only bounded network suites from mk/: netlab validation (~60 s), the
# socket/OPS binding examples, OpsDriver + send/recv (~1 min), live bwe (~15 s),
# a collect smoke run (~30 s), and the BPF Vegas CCA on netlab (~70 s); the packaging checks
# from mk/packaging.mk: the wheel, the npm tarball and the C install tree, each installed into
# a clean temp dir and used there.
test: test-rust test-rustdoc test-python test-bind test-packaging test-socket-examples test-driver-examples test-netlab test-ops test-bwe test-collect test-bpf-cca
	@echo "make test: all suites passed"

# The main job (000 Table 6.3): on netlab, fixed CUBIC, fixed BBR and OPS with
# passive probing and the default passive model (pooled over the condition grid,
# w = 40; OPS-60 as 000 Table 6.2) against a static CUBIC and a static BBR
# background (~10 min; `make demo-quick`: OPS only, ~3 min). mk/ops.mk has the recipes.
demo: ops-demo

demo-quick: ops-demo-quick

# The classifier alone on synthetic 6-class signatures (no root needed).
demo-classify: python
	$(VPY) examples/python/classify_demo.py

bench: toolchain
	$(CARGO) bench -p opsel --bench knn

# Per-query 1-NN latency against dtaidistance, aeon and tslearn.
bench-peers: python
	$(CARGO) build --release -p opsel --example knn_bench_core
	$(VPY) benches/peers/knn_peers.py --core-bin target/release/examples/knn_bench_core --out docs/results/knn-bench.md

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf $(VENV)
