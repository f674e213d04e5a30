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

.PHONY: py-models dist npm-pack install crate-check test-rustdoc test-packaging \
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

# --- Node: npm tarball --------------------------------------------------------
# The package is staged in target/npm-package (package.json, index.js,
# index.d.ts, README, licences, the addon without its debug info) so packing
# never touches bindings/node; the tarball goes to dist/.
PKG_NPM_STAGE := $(PKG_ROOT)/target/npm-package
STRIP ?= strip

npm-pack: node-build
	rm -rf $(PKG_NPM_STAGE) && mkdir -p $(PKG_NPM_STAGE) $(PKG_DIST)
	cd $(PKG_ROOT)/bindings/node && cp package.json index.js index.d.ts README.md $(PKG_NPM_STAGE)/
	cp $(PKG_ROOT)/LICENSE-APACHE $(PKG_ROOT)/LICENSE-MIT $(PKG_NPM_STAGE)/
	for f in $(PKG_ROOT)/bindings/node/*.node; do $(STRIP) --strip-debug -o $(PKG_NPM_STAGE)/$$(basename $$f) $$f; done
	rm -f $(PKG_DIST)/opsel-$(PKG_VERSION).tgz
	cd $(PKG_NPM_STAGE) && npm pack --silent --pack-destination $(PKG_DIST) </dev/null
	@ls -l $(PKG_DIST)/opsel-$(PKG_VERSION).tgz

# --- C: make install ----------------------------------------------------------
# PREFIX=DIR (default /usr/local; DESTDIR is honoured). Debug info is stripped
# from the installed library, archive and binary (the in-tree release profile
# keeps it for profiling); OPSEL_INSTALL_STRIP=0 keeps it.
OPSEL_INSTALL_STRIP ?= 1
PKG_DEST = $(DESTDIR)$(abspath $(PREFIX))
PKG_REL := $(PKG_ROOT)/target/release
PKG_SUBST = sed -e 's|@PREFIX@|$(abspath $(PREFIX))|' -e 's|@LIBDIR@|$${prefix}/lib|' \
	  -e 's|@INCLUDEDIR@|$${prefix}/include|' -e 's|@VERSION@|$(PKG_VERSION)|'

install: ffi-release
	cd $(PKG_ROOT) && $(CARGO) build --release -p opsel-cli
	install -d $(PKG_DEST)/bin $(PKG_DEST)/lib/pkgconfig $(PKG_DEST)/lib/cmake/opsel \
	  $(PKG_DEST)/include $(PKG_DEST)/share/opsel/models
	install -m 755 $(PKG_REL)/libopsel_ffi.so $(PKG_DEST)/lib/
	install -m 644 $(PKG_REL)/libopsel_ffi.a $(PKG_DEST)/lib/
	install -m 755 $(PKG_REL)/opsel $(PKG_DEST)/bin/
	@if [ "$(OPSEL_INSTALL_STRIP)" = 1 ]; then \
	  $(STRIP) --strip-debug $(PKG_DEST)/lib/libopsel_ffi.so $(PKG_DEST)/lib/libopsel_ffi.a $(PKG_DEST)/bin/opsel; fi
	install -m 644 $(PKG_ROOT)/ffi/include/opsel.h $(PKG_DEST)/include/
	$(PKG_SUBST) $(PKG_ROOT)/ffi/opsel.pc.in > $(PKG_DEST)/lib/pkgconfig/opsel.pc
	$(PKG_SUBST) $(PKG_ROOT)/ffi/cmake/opselConfig.cmake.in > $(PKG_DEST)/lib/cmake/opsel/opselConfig.cmake
	$(PKG_SUBST) $(PKG_ROOT)/ffi/cmake/opselConfigVersion.cmake.in > $(PKG_DEST)/lib/cmake/opsel/opselConfigVersion.cmake
	@# The models the binary finds at ../share/opsel/models: model files and cards only.
	cd $(PKG_ROOT)/models && for d in */; do \
	  install -d $(PKG_DEST)/share/opsel/models/$$d; \
	  find $$d -maxdepth 1 -type f \( -name '*.json' -o -name '*.md' \) -exec install -m 644 {} $(PKG_DEST)/share/opsel/models/$$d \; ; \
	done
	@echo "installed opsel $(PKG_VERSION) into $(PKG_DEST)"

# --- Rust: the crate ----------------------------------------------------------
crate-check:
	cd $(PKG_ROOT) && $(CARGO) package -p opsel --locked
	cd $(PKG_ROOT) && RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" $(CARGO) doc -p opsel --no-deps

# --- the checks ---------------------------------------------------------------
# Each installs one package into a fresh temp dir outside the repository, with
# no network, and uses it there; the temp dir is removed however the check ends.
test-packaging: test-packaging-python test-packaging-node test-packaging-c

# numpy, the wheel's one dependency, comes from a local wheelhouse
# (target/wheelhouse) filled once from the index with the numpy version of
# the dev venv; the install itself is `pip install --no-index`.
PKG_WHEELHOUSE := $(PKG_ROOT)/target/wheelhouse
test-packaging-python: dist
	@mkdir -p $(PKG_WHEELHOUSE); np=$$($(PKG_VPY) -c 'import numpy; print(numpy.__version__)'); \
	ls $(PKG_WHEELHOUSE)/numpy-$$np-*.whl >/dev/null 2>&1 || \
	  $(PKG_VPY) -m pip download -q --disable-pip-version-check --only-binary=:all: -d $(PKG_WHEELHOUSE) numpy==$$np
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv $$tmp/venv && \
	$$tmp/venv/bin/pip install -q --disable-pip-version-check --no-index \
	  --find-links $(PKG_DIST) --find-links $(PKG_WHEELHOUSE) opsel==$(PKG_VERSION) && \
	cp $(PKG_ROOT)/tests/packaging/python_smoke.py $(PKG_ROOT)/examples/python/classify_demo.py $$tmp/ && \
	cd $$tmp && env -u PYTHONPATH -u OPSEL_MODELS venv/bin/python -I python_smoke.py && \
	env -u PYTHONPATH venv/bin/python -I classify_demo.py --per-class 20 >/dev/null && \
	cp -r $(PKG_ROOT)/examples/python $$tmp/examples && \
	$(abspath $(VENV))/bin/mypy --strict --no-incremental --python-executable $$tmp/venv/bin/python examples/*.py && \
	echo "test-packaging-python: wheel installs offline into a clean venv and works outside the repository"

test-packaging-node: npm-pack
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cd $$tmp && \
	echo '{"name":"opsel-consumer","version":"0.0.0","private":true}' > package.json && \
	npm install --offline --no-audit --no-fund --silent $(PKG_DIST)/opsel-$(PKG_VERSION).tgz </dev/null && \
	test -f node_modules/opsel/index.d.ts && ls node_modules/opsel/*.node >/dev/null && \
	for f in classify fit_predict; do \
	  sed "s|require('../../bindings/node')|require('opsel')|" $(PKG_ROOT)/examples/node/$$f.js > $$f.js; done && \
	node classify.js $(PKG_ROOT)/tests/fixtures/knn_golden.model.json >/dev/null && \
	node fit_predict.js >/dev/null && \
	cp $(PKG_ROOT)/examples/node/fit_predict.ts . && \
	$(PKG_ROOT)/bindings/node/node_modules/.bin/tsc --noEmit --strict --module commonjs --target es2020 \
	  --moduleResolution node --typeRoots $(PKG_ROOT)/bindings/node/node_modules/@types --types node fit_predict.ts && \
	$(PKG_ROOT)/bindings/node/node_modules/.bin/tsc --strict --module commonjs --target es2020 \
	  --moduleResolution node --typeRoots $(PKG_ROOT)/bindings/node/node_modules/@types --types node --outDir out fit_predict.ts && \
	out=$$(node out/fit_predict.js) && grep -q 'OPSEL_IO' <<< "$$out" && \
	echo "test-packaging-node: npm tarball installs offline, examples run, TypeScript types check"

test-packaging-c: bind-deps-c
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory -f $(PKG_ROOT)/Makefile -C $(PKG_ROOT) install PREFIX=$$tmp/prefix >/dev/null && \
	cp $(PKG_ROOT)/tests/packaging/c/consumer.c $(PKG_ROOT)/tests/packaging/c/CMakeLists.txt $$tmp/ && cd $$tmp && \
	model=$$tmp/prefix/share/opsel/models/passive/model.json && \
	export PKG_CONFIG_PATH=$$tmp/prefix/lib/pkgconfig && \
	cc -std=c99 -Wall -Wextra -Werror -pedantic consumer.c -o consumer-pc $$(pkg-config --cflags --libs opsel) \
	  -Wl,-rpath,$$(pkg-config --variable=libdir opsel) && ./consumer-pc $$model && \
	cmake -S . -B build -DCMAKE_PREFIX_PATH=$$tmp/prefix >/dev/null && cmake --build build >/dev/null && ./build/consumer $$model && \
	cmake -S . -B build-static -DCMAKE_PREFIX_PATH=$$tmp/prefix -DOPSEL_LINK=static >/dev/null && \
	cmake --build build-static >/dev/null && ./build-static/consumer $$model && \
	! ldd build-static/consumer | grep -q libopsel && \
	cd / && OPSEL_MODELS= $$tmp/prefix/bin/opsel --help >/dev/null && \
	echo "test-packaging-c: install tree builds with pkg-config and CMake (shared and static) and runs"

# The crate's rustdoc as docs.rs builds it, with broken intra-doc links as
# errors (part of `make test`; the module examples run in `cargo test`).
test-rustdoc:
	cd $(PKG_ROOT) && RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" $(CARGO) doc -p opsel --no-deps
