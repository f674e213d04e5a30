# Linux socket adapter (core/src/sys): pacing accuracy bench and the root-only tests.
CARGO ?= cargo

.PHONY: bench-pacing test-sys sys-deps

# iproute2 (ip, tc), ethtool (offloads off) and iputils-ping (RTT comparison) for the netns tests.
sys-deps:
	@command -v ip >/dev/null && command -v ethtool >/dev/null && command -v ping >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq iproute2 ethtool iputils-ping; }

# Pacing accuracy with receiver kernel timestamps -> docs/results/pacing.md (root).
bench-pacing: sys-deps
	$(CARGO) bench -p opsel --bench pacing

# The sys integration tests (they create network namespaces: root).
test-sys: sys-deps
	$(CARGO) test --release -p opsel --test 'sys_*'
