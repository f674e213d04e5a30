# Linux socket adapter (core/src/sys): pacing accuracy bench and the root-only tests.
CARGO ?= cargo

.PHONY: bench-pacing test-sys sys-deps

# iproute2 (ip, tc), ethtool (offloads off) and iputils-ping (RTT comparison) for the netns tests;
# chromium (headless: the demo report's screenshot test, cli/tests/report_screenshot.rs) and
# groff (the man page render check, cli/tests/cli_tools.rs).
sys-deps:
	@command -v ip >/dev/null && command -v ethtool >/dev/null && command -v ping >/dev/null && \
	  command -v chromium >/dev/null && command -v groff >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      iproute2 ethtool iputils-ping chromium groff-base </dev/null; }

# Pacing accuracy with receiver kernel timestamps -> docs/results/pacing.md (root).
bench-pacing: sys-deps
	$(CARGO) bench -p opsel --bench pacing

# The sys integration tests (they create network namespaces: root).
test-sys: sys-deps
	$(CARGO) test --release -p opsel --test 'sys_*'
