# BPF struct_ops congestion controls (core/bpf): compile with clang against the
# running kernel's BTF and register with bpftool. Root.
BPF_OUT ?= target/bpf

.PHONY: bpf-deps bpf-vegas bpf-vegas-remove test-bpf-cca

bpf-deps:
	@command -v clang >/dev/null && command -v bpftool >/dev/null && test -e /usr/include/bpf/bpf_helpers.h || \
	  { apt-get update -qq && apt-get install -y -qq clang bpftool libbpf-dev; }

$(BPF_OUT)/vmlinux.h: | bpf-deps
	@test -e /sys/kernel/btf/vmlinux || { echo "this kernel has no BTF (/sys/kernel/btf/vmlinux): BPF congestion controls need CONFIG_DEBUG_INFO_BTF" >&2; exit 1; }
	mkdir -p $(BPF_OUT)
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BPF_OUT)/opsel_vegas.bpf.o: core/bpf/opsel_vegas.bpf.c $(BPF_OUT)/vmlinux.h
	clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I$(BPF_OUT) -c $< -o $@

# Registering twice fails, so an already registered opsel_vegas is kept.
bpf-vegas: $(BPF_OUT)/opsel_vegas.bpf.o
	@if grep -qw opsel_vegas /proc/sys/net/ipv4/tcp_available_congestion_control; then \
	  echo "opsel_vegas is already registered"; \
	else bpftool struct_ops register $<; fi
	@grep -qw opsel_vegas /proc/sys/net/ipv4/tcp_available_congestion_control

bpf-vegas-remove:
	-bpftool struct_ops unregister name opsel_vegas

# Registers opsel_vegas, then on netlab: one Vegas flow keeps the queue near
# empty at full rate where CUBIC fills it (tests/bpf_vegas.rs, ~70 s).
test-bpf-cca: bpf-vegas
	$(CARGO) test --release -p opsel-netlab --test bpf_vegas -- --ignored --test-threads=1 --nocapture
