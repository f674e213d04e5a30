# The opsel CLI's generated documentation and the demo report.
# man          man pages from the clap definitions: target/man/opsel.1, opsel-<command>.1
# completions  shell completions: target/completions/opsel.bash, _opsel (zsh), opsel.fish
# demo-report  `make demo-quick` with --report: target/demo-report/report.html (+ record.json)
#              and, when chromium is installed, its screenshot target/demo-report/report.png
#              (root, netlab, ~3 min after the build; docs/results/report.md)
# test-report  the report's unit tests and the chromium screenshot test (no root; ~10 s)
CARGO ?= cargo
DEMO_REPORT_DIR ?= target/demo-report

.PHONY: man completions demo-report test-report

man:
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel man --dir target/man

completions:
	$(CARGO) build --release -p opsel-cli
	mkdir -p target/completions
	./target/release/opsel completions bash > target/completions/opsel.bash
	./target/release/opsel completions zsh > target/completions/_opsel
	./target/release/opsel completions fish > target/completions/opsel.fish

demo-report:
	$(MAKE) ops-demo-quick OPS_DEMO_ARGS="--report $(DEMO_REPORT_DIR) $(OPS_DEMO_ARGS)"
	@if command -v chromium >/dev/null; then \
	  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
	    --screenshot=$(abspath $(DEMO_REPORT_DIR))/report.png --window-size=1280,2000 \
	    file://$(abspath $(DEMO_REPORT_DIR))/report.html; \
	else echo "chromium not installed: no screenshot (make sys-deps installs it)"; fi

test-report: sys-deps
	$(CARGO) test --release -p opsel-cli --bin opsel report::
	$(CARGO) test --release -p opsel-cli --test report_screenshot -- --nocapture
