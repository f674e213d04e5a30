// SPDX-License-Identifier: GPL-2.0
// A delay-based congestion control (TCP Vegas, Brakmo & Peterson 1995) as a
// BPF struct_ops program, so opsel can offer a delay-based CCA on kernels that
// ship none as a module. Document 002's portfolio (§5.1) includes Vegas; this
// kernel builds only cubic, bbr and reno.
//
// Once per round trip, Vegas compares the expected rate (cwnd / base RTT) with
// the actual one (cwnd / smallest RTT of the last round) and keeps the number of
// its own packets queued at the bottleneck, diff = cwnd * (rtt - base) / rtt,
// between ALPHA and BETA; in slow start it leaves slow start once diff exceeds
// GAMMA.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define ALPHA 2
#define BETA 4
#define GAMMA 1
#define TCP_INFINITE_SSTHRESH 0x7fffffff

extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

// Lives in icsk_ca_priv (104 bytes).
struct vegas {
	__u32 beg_snd_nxt; // the round ends when this sequence is acknowledged
	__u32 base_rtt_us; // smallest RTT seen on the connection (+1 so 0 means unset)
	__u32 min_rtt_us;  // smallest RTT of the current round
	__u32 cnt_rtt;     // RTT samples in the current round
	__u32 enabled;
};

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct vegas *vegas_of(const struct sock *sk)
{
	return (struct vegas *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

static __always_inline int in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

static __always_inline void vegas_enable(struct sock *sk)
{
	struct vegas *v = vegas_of(sk);

	v->enabled = 1;
	v->beg_snd_nxt = tcp_sk(sk)->snd_nxt;
	v->cnt_rtt = 0;
	v->min_rtt_us = 0x7fffffff;
}

SEC("struct_ops/opsel_vegas_init")
void BPF_PROG(opsel_vegas_init, struct sock *sk)
{
	struct vegas *v = vegas_of(sk);

	v->base_rtt_us = 0x7fffffff;
	vegas_enable(sk);
}

SEC("struct_ops/opsel_vegas_pkts_acked")
void BPF_PROG(opsel_vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct vegas *v = vegas_of(sk);
	__u32 rtt;

	if (sample->rtt_us < 0)
		return;
	rtt = (__u32)sample->rtt_us + 1;
	if (rtt < v->base_rtt_us)
		v->base_rtt_us = rtt;
	if (rtt < v->min_rtt_us)
		v->min_rtt_us = rtt;
	v->cnt_rtt++;
}

SEC("struct_ops/opsel_vegas_set_state")
void BPF_PROG(opsel_vegas_set_state, struct sock *sk, __u8 new_state)
{
	// Only an open connection's RTTs say anything about the queue.
	if (new_state == TCP_CA_Open)
		vegas_enable(sk);
	else
		vegas_of(sk)->enabled = 0;
}

SEC("struct_ops/opsel_vegas_cwnd_event")
void BPF_PROG(opsel_vegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		vegas_enable(sk);
}

SEC("struct_ops/opsel_vegas_cong_avoid")
void BPF_PROG(opsel_vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct vegas *v = vegas_of(sk);
	__u32 cwnd, rtt, base, diff, target;

	if (!v->enabled) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!seq_after(ack, v->beg_snd_nxt)) {
		if (in_slow_start(tp))
			tcp_slow_start(tp, acked);
		return;
	}

	// A round trip has ended.
	v->beg_snd_nxt = tp->snd_nxt;
	if (v->cnt_rtt <= 2) {
		// Too few samples to tell queueing from delayed ACKs.
		tcp_reno_cong_avoid(sk, ack, acked);
	} else {
		cwnd = tp->snd_cwnd;
		rtt = v->min_rtt_us;
		base = v->base_rtt_us;
		target = (__u32)(((__u64)cwnd * base) / rtt);
		diff = (__u32)(((__u64)cwnd * (rtt - base)) / rtt);

		if (diff > GAMMA && in_slow_start(tp)) {
			// Queue building in slow start: drop to the rate that empties it.
			tp->snd_cwnd = cwnd < target + 1 ? cwnd : target + 1;
			tp->snd_ssthresh = tp->snd_cwnd > 2 ? tp->snd_cwnd - 1 : 2;
		} else if (in_slow_start(tp)) {
			tcp_slow_start(tp, acked);
		} else if (diff > BETA) {
			tp->snd_cwnd = cwnd - 1;
			if (tp->snd_ssthresh > tp->snd_cwnd - 1)
				tp->snd_ssthresh = tp->snd_cwnd - 1;
		} else if (diff < ALPHA) {
			tp->snd_cwnd = cwnd + 1;
		}
		if (tp->snd_cwnd < 2)
			tp->snd_cwnd = 2;
		else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
			tp->snd_cwnd = tp->snd_cwnd_clamp;
	}
	v->cnt_rtt = 0;
	v->min_rtt_us = 0x7fffffff;
}

SEC("struct_ops/opsel_vegas_ssthresh")
__u32 BPF_PROG(opsel_vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/opsel_vegas_undo_cwnd")
__u32 BPF_PROG(opsel_vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops opsel_vegas = {
	.init = (void *)opsel_vegas_init,
	.ssthresh = (void *)opsel_vegas_ssthresh,
	.cong_avoid = (void *)opsel_vegas_cong_avoid,
	.set_state = (void *)opsel_vegas_set_state,
	.cwnd_event = (void *)opsel_vegas_cwnd_event,
	.pkts_acked = (void *)opsel_vegas_pkts_acked,
	.undo_cwnd = (void *)opsel_vegas_undo_cwnd,
	.name = "opsel_vegas",
};
