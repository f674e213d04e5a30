# C and Node.js bindings. Included by the root Makefile; also
# usable alone: `make -f mk/bind.mk test-bind`.
#
#   test-bind       test-c + test-node (what `make test` needs beyond cargo test)
#   test-c          C API: golden test + example, built with make and CMake,
#                   run plain, under ASan/UBSan and under valgrind
#   test-node       Node package: npm ci, napi build, checked-in index.d.ts /
#                   index.js must be fresh, node:test suite, examples/node
#   bench-bindings  binding overhead vs core -> docs/results/bindings-bench.md
#   header          regenerate ffi/include/opsel.h (cbindgen)
#
# Works from a fresh clone with CI=true and no stdin: missing tools (cc,
# cmake, pkg-config, valgrind) are installed with apt-get, npm packages with
# `npm ci`.

CARGO ?= cargo
BIND_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BIND_REL := $(BIND_ROOT)/target/release
BIND_PC_DIR := $(BIND_REL)/pkgconfig
BIND_NODE := $(BIND_ROOT)/bindings/node
BIND_C := $(BIND_ROOT)/examples/c
BIND_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' $(BIND_ROOT)/Cargo.toml | head -1)

.PHONY: test-bind test-c test-node bench-bindings header ffi-release \
        bind-deps-c bind-deps-node node-build ffi-pc

test-bind: test-c test-node

# --- tools ------------------------------------------------------------------
bind-deps-c:
	@missing=""; \
	for t in cc:gcc make:make cmake:cmake pkg-config:pkg-config valgrind:valgrind; do \
	  command -v $${t%%:*} >/dev/null 2>&1 || missing="$$missing $${t#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing </dev/null; \
	fi

bind-deps-node:
	@command -v node >/dev/null 2>&1 || { echo "node (>= 18) is required for the Node binding; install Node.js" >&2; exit 1; }
	@if [ ! -x $(BIND_NODE)/node_modules/.bin/napi ] || [ $(BIND_NODE)/package-lock.json -nt $(BIND_NODE)/node_modules/.package-lock.json ]; then \
	  cd $(BIND_NODE) && npm ci --no-audit --no-fund </dev/null; \
	fi

# --- C API ------------------------------------------------------------------
ffi-release:
	cd $(BIND_ROOT) && $(CARGO) build --release -p opsel-ffi
	@$(MAKE) --no-print-directory -f $(BIND_ROOT)/mk/bind.mk ffi-pc

# pkg-config file for the build tree (an install would use /usr/local paths).
ffi-pc:
	@mkdir -p $(BIND_PC_DIR)
	@sed -e 's|@PREFIX@|$(BIND_ROOT)|' -e 's|@LIBDIR@|$(BIND_REL)|' \
	     -e 's|@INCLUDEDIR@|$(BIND_ROOT)/ffi/include|' -e 's|@VERSION@|$(BIND_VERSION)|' \
	     $(BIND_ROOT)/ffi/opsel.pc.in > $(BIND_PC_DIR)/opsel.pc

header:
	cd $(BIND_ROOT) && OPSEL_UPDATE_HEADER=1 $(CARGO) test -p opsel-ffi --test header

test-c: bind-deps-c ffi-release
	cd $(BIND_ROOT) && $(CARGO) test -p opsel-ffi --test header
	$(MAKE) -C $(BIND_C) OPSEL_PC_DIR=$(BIND_PC_DIR) test
	$(MAKE) -C $(BIND_C) OPSEL_PC_DIR=$(BIND_PC_DIR) asan
	$(MAKE) -C $(BIND_C) OPSEL_PC_DIR=$(BIND_PC_DIR) valgrind
	cmake -S $(BIND_C) -B $(BIND_C)/build/cmake -DCMAKE_BUILD_TYPE=Release -DOPSEL_LIB_DIR=$(BIND_REL)
	cmake --build $(BIND_C)/build/cmake
	cd $(BIND_C)/build/cmake && ctest --output-on-failure

# --- Node -------------------------------------------------------------------
# Build the addon; the generated index.d.ts and index.js are checked in and
# must not change (a stale copy fails here; commit the regenerated files).
node-build: bind-deps-node
	@tmp=$$(mktemp -d); cp $(BIND_NODE)/index.d.ts $(BIND_NODE)/index.js $$tmp/; \
	cd $(BIND_NODE) && CARGO="$(CARGO)" npx --no-install napi build --platform --release --js index.js --dts index.d.ts </dev/null || exit 1; \
	for f in index.d.ts index.js; do \
	  cmp -s $$tmp/$$f $(BIND_NODE)/$$f || { echo "bindings/node/$$f was stale: it has been regenerated; review and commit it" >&2; rm -rf $$tmp; exit 1; }; \
	done; rm -rf $$tmp

test-node: node-build
	cd $(BIND_NODE) && node --test test/
	cd $(BIND_ROOT) && node examples/node/classify.js tests/fixtures/knn_golden.model.json
	cd $(BIND_ROOT) && node examples/node/fit_predict.js
	cd $(BIND_ROOT) && node examples/node/dps.js

# --- bench ------------------------------------------------------------------
bench-bindings: bind-deps-c ffi-release node-build python
	cd $(BIND_ROOT) && $(CARGO) build --release -p opsel-ffi --example bench_core
	$(MAKE) -C $(BIND_C) OPSEL_PC_DIR=$(BIND_PC_DIR) all
	PYTHON=$(VPY) $(BIND_ROOT)/benches/bindings/run.sh
