# Packages: the Python wheel + sdist, the npm tarball, the C install tree, the
# Rust crate, and the checks that each installs and works outside the repository.
#
#   py-models        stage the shipped models (models/*/, model files and cards;
#                    no traces or figures) into the Python package as package data
#   dist             abi3 wheel + sdist into dist/ (maturin)
#   npm-pack         bindings/node -> dist/opsel-<version>.tgz with the prebuilt addon
#   install          PREFIX=DIR: C library (shared + static), opsel.h, opsel.pc, CMake
#                    package config (opsel::opsel), the opsel binary, the models in
#                    DIR/share/opsel/models
#   crate-check      cargo package -p opsel + rustdoc with broken intra-doc links denied
#   test-packaging   each package installed into a clean temp dir and used there
#                    (part of `make test`); temp dirs are removed on exit
CARGO ?= cargo
PKG_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
PKG_PY := $(PKG_ROOT)/bindings/python
PKG_PY_MODELS := $(PKG_PY)/python/opsel/models
PKG_DIST ?= $(PKG_ROOT)/dist
PKG_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' $(PKG_ROOT)/Cargo.toml | head -1)
PKG_VPY = $(abspath $(VENV))/bin/python
PREFIX ?= /usr/local

.PHONY: py-models dist npm-pack install crate-check test-packaging \
        test-packaging-python test-packaging-node test-packaging-c

py-models:
	@cd $(PKG_ROOT) && find $(PKG_PY_MODELS) -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +; \
	for d in models/*/; do \
	  n=$$(basename $$d); mkdir -p $(PKG_PY_MODELS)/$$n; \
	  find $$d -maxdepth 1 -type f \( -name '*.json' -o -name '*.md' \) -exec cp {} $(PKG_PY_MODELS)/$$n/ \; ; \
	done

dist: deps py-models
	rm -f $(PKG_DIST)/opsel-*.whl $(PKG_DIST)/opsel-*.tar.gz
	cd $(PKG_PY) && $(abspath $(VENV))/bin/maturin build --release --quiet --out $(PKG_DIST)
	cd $(PKG_PY) && $(abspath $(VENV))/bin/maturin sdist --out $(PKG_DIST)
	@ls -l $(PKG_DIST)
