/*
 * The socket adapter, the OPS controller and its policies through the C API
 * (everything is exposed in Python, C and Node):
 *
 * - the controller driven over the synthetic RTT trace of
 *   tests/fixtures/ops_golden.json produces exactly the outputs the Rust
 *   controller produced (rendered as the fixture's canonical lines);
 * - a C function-pointer policy is called and its failures become
 *   DECISION_FAILED events, not crashes; Jain's index;
 * - on a live loopback TCP connection: CCA switch + read-back, error codes
 *   for an unknown CCA and for a UDP descriptor, TCP_INFO after a transfer,
 *   the sampler, the SO_MAX_PACING_RATE cap;
 * - a paced UDP train on loopback with the backend and every packet's
 *   achieved departure time reported, received with kernel RX stamps;
 * - SO_TXTIME enforcement detection; a UDP echo RTT burst on loopback;
 * - the probe gate (004 §8 B.1): the shipped models/passive/gate.json ends a
 *   probe of a reference-like trace at one of its checks with the full
 *   window's class (gate_exits 1); gate_threshold 1 never fires; a threshold
 *   without a gate file is an error.
 *
 *   ./test_sys_ops tests/fixtures/ops_golden.json
 */
#include <opsel.h>

#include "mini_json.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static const char *PHASES[] = {"idle", "probe", "classify", "select", "steady"};

/* The fixture's canonical line for one output (see make_ops_golden.rs). */
static void render(const opsel_ops_output *o, char *buf, size_t cap) {
    char until[32];
    if (o->has_until)
        snprintf(until, sizeof until, "%llu", (unsigned long long)o->until_ns);
    else
        snprintf(until, sizeof until, "none");
    switch (o->kind) {
    case OPSEL_OPS_SET_CCA: snprintf(buf, cap, "set_cca %s", o->cca); break;
    case OPSEL_OPS_SEND_FULL_SPEED: snprintf(buf, cap, "send_full_speed %s until=%s", o->cca, until); break;
    case OPSEL_OPS_SILENCE: snprintf(buf, cap, "silence until=%s", until); break;
    case OPSEL_OPS_STEADY: snprintf(buf, cap, "steady %s until=%s", o->cca, until); break;
    case OPSEL_OPS_EVENT_PHASE:
        snprintf(buf, cap, "phase %s cycle=%llu at=%llu", PHASES[o->phase], (unsigned long long)o->cycle,
                 (unsigned long long)o->at_ns);
        break;
    case OPSEL_OPS_EVENT_CLASSIFIED:
        snprintf(buf, cap, "classified %s samples=%zu early=%s at=%llu", o->label, o->samples,
                 o->early ? "true" : "false", (unsigned long long)o->at_ns);
        break;
    case OPSEL_OPS_EVENT_SELECTED:
        snprintf(buf, cap, "selected %s steady=%s at=%llu", o->cca, until, (unsigned long long)o->at_ns);
        break;
    case OPSEL_OPS_EVENT_DECISION_FAILED:
        snprintf(buf, cap, "decision_failed at=%llu", (unsigned long long)o->at_ns);
        break;
    case OPSEL_OPS_EVENT_PROBE_INCOMPLETE:
        snprintf(buf, cap, "probe_incomplete samples=%zu needed=%zu at=%llu", o->samples, o->needed,
                 (unsigned long long)o->at_ns);
        break;
    default: snprintf(buf, cap, "unknown kind %u", o->kind);
    }
}

/* Drain the controller, comparing each output with expected[*next]. */
static void drain(opsel_ops_controller *c, const mj_value *expected, size_t *next, const char *name) {
    opsel_ops_output o;
    bool has = true;
    char line[160];
    while (opsel_ops_controller_poll(c, &o, &has) == OPSEL_OK && has) {
        render(&o, line, sizeof line);
        if (*next < expected->len) {
            CHECK(strcmp(line, expected->items[*next].string) == 0, "%s output %zu: got \"%s\" want \"%s\"", name,
                  *next, line, expected->items[*next].string);
        } else {
            CHECK(0, "%s: extra output \"%s\"", name, line);
        }
        (*next)++;
    }
}

static void test_golden(const mj_value *g, const opsel_model *model) {
    const mj_value *trace = mj_get(g, "trace_rtt_ms"), *scen = mj_get(g, "scenarios");
    uint64_t period = (uint64_t)mj_get(g, "sample_period_ns")->number;
    size_t s, k;
    for (s = 0; s < scen->len; s++) {
        const mj_value *sc = &scen->items[s], *cfgj = mj_get(sc, "config"), *exp = mj_get(sc, "expected");
        const char *name = mj_get(sc, "name")->string, *pol = mj_get(cfgj, "policy")->string;
        const mj_value *adaptive = mj_get(cfgj, "adaptive"), *progressive = mj_get(cfgj, "progressive");
        opsel_ops_config cfg = strcmp(mj_get(cfgj, "mode")->string, "active") == 0 ? opsel_ops_config_active()
                                                                                   : opsel_ops_config_passive();
        size_t lens[8], nlens = 0, next = 0;
        opsel_ops_policy *policy = NULL;
        opsel_ops_controller *c = NULL;
        if (mj_get(cfgj, "pattern")) cfg.pattern = mj_get(cfgj, "pattern")->string;
        cfg.steady_ns = (uint64_t)mj_get(cfgj, "steady_s")->number * 1000000000ull;
        cfg.adaptive = adaptive && adaptive->number != 0;
        /* The golden model is passive; a scenario that drives the active state machine on it turns the check off. */
        cfg.check_model = !(mj_get(cfgj, "check_model") && mj_get(cfgj, "check_model")->number == 0);
        if (progressive && progressive->number != 0) {
            const mj_value *pl = mj_get(cfgj, "prefix_lens");
            cfg.progressive = true;
            for (nlens = 0; nlens < pl->len && nlens < 8; nlens++) lens[nlens] = (size_t)pl->items[nlens].number;
            cfg.prefix_lens = lens;
            cfg.prefix_lens_len = nlens;
        }
        if (strcmp(pol, "stump") == 0)
            CHECK(opsel_ops_policy_stump(NULL, NULL, &policy) == OPSEL_OK, "stump");
        else
            CHECK(opsel_ops_policy_table(pol, &policy) == OPSEL_OK, "table %s", pol);
        CHECK(opsel_ops_controller_new(model, policy, &cfg, &c) == OPSEL_OK, "%s: controller_new", name);
        opsel_ops_policy_free(policy); /* the controller keeps a copy */
        if (!c) continue;
        CHECK(opsel_ops_controller_start(c, 0) == OPSEL_OK, "start");
        drain(c, exp, &next, name);
        for (k = 0; k < trace->len; k++) {
            uint64_t t = (k + 1) * period;
            CHECK(opsel_ops_controller_handle_timeout(c, t) == OPSEL_OK, "timeout");
            CHECK(opsel_ops_controller_handle_sample(c, t, trace->items[k].number) == OPSEL_OK, "sample");
            drain(c, exp, &next, name);
        }
        CHECK(next == exp->len, "%s: %zu outputs, fixture has %zu", name, next, exp->len);
        {
            opsel_ops_stats st;
            CHECK(opsel_ops_controller_stats(c, trace->len * period, &st) == OPSEL_OK, "stats");
            CHECK(st.decisions == (uint64_t)mj_get(mj_get(sc, "stats"), "decisions")->number, "%s decisions", name);
            CHECK(st.cca_switches == (uint64_t)mj_get(mj_get(sc, "stats"), "cca_switches")->number, "%s switches", name);
            CHECK(st.window_len == 20, "w");
        }
        /* Bad input keeps the state: NaN RTT, time going backwards. */
        CHECK(opsel_ops_controller_handle_sample(c, trace->len * period, NAN) == OPSEL_INVALID_INPUT, "NaN rtt");
        CHECK(opsel_ops_controller_handle_sample(c, 1, 50.0) == OPSEL_INVALID_INPUT, "time backwards");
        opsel_ops_controller_free(c);
        printf("golden %s: %zu outputs match the Rust controller\n", name, next);
    }
}

static int calls;

/* A user policy: reno for any mix with BBR, cubic otherwise; fails on B1-B1. */
static int32_t my_policy(void *user_data, const opsel_ops_classified *c, char *out_cca) {
    int *n = user_data;
    (*n)++;
    if (strcmp(c->label, "B1-B1") == 0) return 42;
    strcpy(out_cca, c->bbr_present ? "reno" : "cubic");
    return 0;
}

static void test_callback_policy(const mj_value *g, const opsel_model *model) {
    const mj_value *trace = mj_get(g, "trace_rtt_ms");
    opsel_ops_policy *p = NULL;
    opsel_ops_controller *c = NULL;
    opsel_ops_config cfg = opsel_ops_config_passive();
    opsel_ops_output o;
    bool has;
    size_t k;
    int reno = 0, failed_decisions = 0;
    cfg.steady_ns = 10000000000ull;
    CHECK(opsel_ops_policy_callback(NULL, NULL, &p) == OPSEL_NULL_POINTER, "NULL callback");
    CHECK(opsel_ops_policy_callback(my_policy, &calls, &p) == OPSEL_OK, "callback policy");
    CHECK(opsel_ops_controller_new(model, p, &cfg, &c) == OPSEL_OK, "controller with callback");
    opsel_ops_policy_free(p);
    opsel_ops_controller_start(c, 0);
    for (k = 0; k < trace->len; k++) {
        uint64_t t = (k + 1) * 1000000000ull;
        opsel_ops_controller_handle_timeout(c, t);
        CHECK(opsel_ops_controller_handle_sample(c, t, trace->items[k].number) == OPSEL_OK, "sample");
        while (opsel_ops_controller_poll(c, &o, &has) == OPSEL_OK && has) {
            if (o.kind == OPSEL_OPS_EVENT_SELECTED && strcmp(o.cca, "reno") == 0) reno++;
            if (o.kind == OPSEL_OPS_EVENT_DECISION_FAILED) {
                failed_decisions++;
                CHECK(strstr(o.message, "returned 42") != NULL, "failure message: %s", o.message);
            }
        }
    }
    CHECK(calls > 0 && reno > 0, "callback called %d times, reno chosen %d times", calls, reno);
    CHECK(failed_decisions > 0, "a B1-B1 window made the callback fail (%d)", failed_decisions);
    opsel_ops_controller_free(c);

    /* A table policy that misses classes is rejected up front. */
    CHECK(opsel_ops_policy_table("B1-C0=bbr", &p) == OPSEL_OK, "table");
    CHECK(opsel_ops_controller_new(model, p, NULL, &c) == OPSEL_INVALID_INPUT && c == NULL, "table misses classes");
    opsel_ops_policy_free(p);
    CHECK(opsel_ops_policy_table("B1-C0", &p) == OPSEL_INVALID_INPUT && p == NULL, "bad table syntax");
    cfg = opsel_ops_config_active();
    cfg.pattern = "S5-X5";
    CHECK(opsel_ops_controller_new(model, NULL, &cfg, &c) == OPSEL_INVALID_INPUT, "bad pattern");
}

static void test_fair(void) {
    double r[2] = {250, 250}, bad[2] = {1, NAN}, j = 0, share = 0;
    CHECK(opsel_fair_jain(r, 2, &j) == OPSEL_OK && j == 1.0, "jain equal = %g", j);
    r[0] = 500; r[1] = 0;
    CHECK(opsel_fair_jain(r, 2, &j) == OPSEL_OK && fabs(j - 0.5) < 1e-12, "jain one-takes-all = %g", j);
    CHECK(opsel_fair_jain(bad, 2, &j) == OPSEL_INVALID_INPUT, "jain NaN");
    CHECK(opsel_fair_share(500e6, 2, &share) == OPSEL_OK && share == 250e6, "fair share");
}

/* A connected loopback TCP pair: *cli and *srv. */
static int tcp_pair(int *cli, int *srv) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr *)&a, &len))
        return -1;
    *cli = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*cli, (struct sockaddr *)&a, sizeof a)) return -1;
    *srv = accept(l, NULL, NULL);
    close(l);
    return *srv < 0 ? -1 : 0;
}

static void test_tcp(void) {
    int cli = -1, srv = -1, udp = socket(AF_INET, SOCK_DGRAM, 0);
    char buf[OPSEL_CCA_NAME_CAP], list[256], back[OPSEL_CCA_NAME_CAP];
    const char *seq[] = {"bbr", "reno", "cubic"};
    size_t needed = 0, i, sent = 0;
    static char data[1 << 16];
    opsel_tcp_info info;
    opsel_tcp_sampler *sampler = NULL;
    opsel_tcp_interval iv;
    bool has = false;
    uint64_t rate = 1, rtt_ns = 0;

    CHECK(tcp_pair(&cli, &srv) == 0, "loopback TCP pair");
    CHECK(opsel_cca_available(list, sizeof list, &needed) == OPSEL_OK && strstr(list, "cubic"), "available: %s", list);
    CHECK(opsel_cca_available(list, 2, &needed) == OPSEL_INVALID_INPUT && needed > 2, "small buffer reports size");
    CHECK(opsel_cca_allowed(list, sizeof list, NULL) == OPSEL_OK, "allowed: %s", list);
    CHECK(opsel_tcp_sampler_new(cli, &sampler) == OPSEL_OK, "sampler");
    /* Switch cubic -> bbr -> reno -> cubic on the live connection, reading back each. */
    for (i = 0; i < 3; i++) {
        CHECK(opsel_cca_set(cli, seq[i], back) == OPSEL_OK && strcmp(back, seq[i]) == 0, "set %s", seq[i]);
        CHECK(opsel_cca_get(cli, buf, sizeof buf) == OPSEL_OK && strcmp(buf, seq[i]) == 0, "get %s: %s", seq[i], buf);
        sent += (size_t)write(cli, data, sizeof data);
        while (recv(srv, data, sizeof data, MSG_DONTWAIT) > 0) {}
    }
    /* Stable error codes. */
    CHECK(opsel_cca_set(cli, "no_such_cca", NULL) == OPSEL_INVALID_INPUT, "unknown CCA -> OPSEL_INVALID_INPUT");
    CHECK(strstr(opsel_last_error_message(), "not available") != NULL, "ENOENT message: %s", opsel_last_error_message());
    CHECK(opsel_cca_set(udp, "bbr", NULL) == OPSEL_INVALID_INPUT, "UDP fd -> OPSEL_INVALID_INPUT");
    CHECK(opsel_cca_get(-1, buf, sizeof buf) == OPSEL_INVALID_INPUT, "negative fd");
    CHECK(opsel_cca_set(cli, NULL, NULL) == OPSEL_NULL_POINTER, "NULL name");
    /* TCP_INFO after the transfer. */
    CHECK(opsel_tcp_info_get(cli, &info) == OPSEL_OK, "tcp_info");
    CHECK(info.state == 1 && info.rtt_us > 0 && info.snd_cwnd > 0 && info.snd_mss > 0, "tcp_info sane: state %u rtt %u cwnd %u",
          info.state, info.rtt_us, info.snd_cwnd);
    CHECK(info.bytes_acked != OPSEL_NOT_AVAILABLE && info.bytes_acked >= 1, "bytes_acked %llu (sent %zu)",
          (unsigned long long)info.bytes_acked, sent);
    CHECK(opsel_tcp_info_get(udp, &info) == OPSEL_INVALID_INPUT, "tcp_info on UDP");
    CHECK(opsel_tcp_sampler_sample(sampler, &iv, &has) == OPSEL_OK && has, "sampler interval");
    CHECK(has && iv.interval_ns > 0 && iv.rtt_ns > 0 && iv.acked_bytes != OPSEL_NOT_AVAILABLE && iv.acked_bytes > 0,
          "interval acked %llu rtt %llu", (unsigned long long)iv.acked_bytes, (unsigned long long)iv.rtt_ns);
    CHECK(opsel_tcp_rtt_ns(cli, &rtt_ns) == OPSEL_OK && rtt_ns > 0, "tcp rtt %llu ns", (unsigned long long)rtt_ns);
    /* Pacing cap: 50 Mbit/s is 6 250 000 B/s exactly. */
    CHECK(opsel_max_pacing_rate_set(cli, 50000000) == OPSEL_OK, "set pacing");
    CHECK(opsel_max_pacing_rate_get(cli, &rate) == OPSEL_OK && rate == 50000000, "pacing read back %llu",
          (unsigned long long)rate);
    CHECK(opsel_max_pacing_rate_set(cli, 0) == OPSEL_OK && opsel_max_pacing_rate_get(cli, &rate) == OPSEL_OK && rate == 0,
          "cap removed");
    CHECK(opsel_max_pacing_rate_set(cli, 3) == OPSEL_INVALID_INPUT, "rate below 1 B/s");
    opsel_tcp_sampler_free(sampler);
    close(cli);
    close(srv);
    close(udp);
}

static void test_paced_train(void) {
    opsel_probe_receiver *rx = NULL;
    opsel_paced_sender *tx = NULL;
    opsel_sender_info info;
    opsel_txtime_support ts;
    opsel_train_summary sum;
    enum { N = 50 };
    uint64_t sched[N];
    opsel_packet_report rep[N];
    opsel_rx_record rec[N];
    size_t i, got = 0, monotone = 1;
    uint16_t port = 0;
    char dst[64];

    CHECK(opsel_txtime_detect("127.0.0.1", &ts) == OPSEL_OK, "txtime detect");
    /* This machine has no fq/etf qdisc: launch times would be ignored. */
    CHECK(!ts.enforced && ts.reason[0] != 0, "SO_TXTIME not enforced on %s (root %s): %s", ts.device, ts.root_qdisc,
          ts.reason);
    CHECK(opsel_txtime_detect("not-an-ip", &ts) == OPSEL_INVALID_INPUT, "bad dst");

    CHECK(opsel_probe_receiver_new("127.0.0.1:0", 2048, &rx) == OPSEL_OK, "receiver");
    CHECK(opsel_probe_receiver_port(rx, &port) == OPSEL_OK && port != 0, "receiver port");
    snprintf(dst, sizeof dst, "127.0.0.1:%u", port);
    CHECK(opsel_paced_sender_new(dst, NULL, 1472, NULL, &tx) == OPSEL_OK, "sender");
    CHECK(opsel_paced_sender_info(tx, &info) == OPSEL_OK && info.backend == OPSEL_BACKEND_USERSPACE,
          "user-space backend chosen: %s", info.txtime.reason);
    for (i = 0; i < N; i++) sched[i] = i * 100000; /* 100 us gaps */
    CHECK(opsel_paced_sender_send_train(tx, sched, N, 1000, 7, rep, N, &sum) == OPSEL_OK, "send train");
    CHECK(sum.packets == N && sum.backend == OPSEL_BACKEND_USERSPACE, "summary");
    for (i = 1; i < N; i++) monotone &= rep[i].departure_ns >= rep[i - 1].departure_ns && rep[i].seq == i;
    CHECK(monotone, "departures non-decreasing, seq in order");
    /* The schedule spans 4.9 ms (re-basing after a stall only shifts it
       later); achieved departures span about as long (a late first packet
       shortens the achieved span by its lateness). */
    CHECK(rep[N - 1].scheduled_ns - rep[0].scheduled_ns >= 4900000, "scheduled span");
    CHECK(rep[N - 1].departure_ns - rep[0].departure_ns >= 4400000, "achieved span %llu ns",
          (unsigned long long)(rep[N - 1].departure_ns - rep[0].departure_ns));
    CHECK(opsel_probe_receiver_recv_train(rx, N, 200000000, rec, N, &got) == OPSEL_OK && got == N, "received %zu", got);
    CHECK(got > 0 && rec[0].train_id == 7 && rec[0].rx_kernel_ns != OPSEL_NOT_AVAILABLE, "kernel RX stamps");
    CHECK(opsel_paced_sender_send_train(tx, sched, 0, 1000, 8, rep, N, NULL) == OPSEL_INVALID_INPUT, "empty schedule");
    sched[3] = 0;
    CHECK(opsel_paced_sender_send_train(tx, sched, N, 1000, 8, rep, N, NULL) == OPSEL_INVALID_INPUT, "decreasing schedule");
    CHECK(opsel_paced_sender_send_train(tx, sched, N, 10, 8, rep, N, NULL) == OPSEL_INVALID_INPUT, "payload below header");
    opsel_paced_sender_free(tx);
    opsel_probe_receiver_free(rx);
}

static void test_rtt(void) {
    opsel_udp_echo_responder *r = NULL;
    opsel_rtt_prober *p = NULL;
    uint16_t port = 0;
    char dst[64];
    double rtts[10], mean = 0;
    uint64_t echoed = 0;
    int answered = 0, i;
    /* A responder with a 2 ms delay line: the burst mean must see it. */
    CHECK(opsel_udp_echo_responder_new("127.0.0.1:0", 2000000, &r) == OPSEL_OK, "responder");
    CHECK(opsel_udp_echo_responder_port(r, &port) == OPSEL_OK, "responder port");
    snprintf(dst, sizeof dst, "127.0.0.1:%u", port);
    CHECK(opsel_rtt_prober_udp(dst, &p) == OPSEL_OK, "udp prober");
    CHECK(opsel_rtt_prober_burst(p, 0, 0, 0, rtts, 10, &mean) == OPSEL_OK, "burst");
    for (i = 0; i < 10; i++) answered += !isnan(rtts[i]);
    /* >= the 2 ms delay line; the upper bound only excludes nonsense (valgrind is slow). */
    CHECK(answered == 10 && mean >= 2.0 && mean < 1000.0, "10 echoes 1 ms apart -> mean %.3f ms", mean);
    CHECK(opsel_rtt_prober_burst(p, 10, 0, 0, rtts, 3, &mean) == OPSEL_INVALID_INPUT, "small rtts buffer");
    CHECK(opsel_udp_echo_responder_stop(r, &echoed) == OPSEL_OK && echoed >= 10, "echoed %llu",
          (unsigned long long)echoed);
    opsel_rtt_prober_free(p);
    opsel_udp_echo_responder_free(r);
    p = NULL;
    CHECK(opsel_rtt_prober_icmp("::1", &p) == OPSEL_INVALID_INPUT && p == NULL, "ICMP prober needs IPv4");
    /* ICMP echo to loopback: a ping socket or (root) a raw socket. */
    switch (opsel_rtt_prober_icmp("127.0.0.1", &p)) {
    case OPSEL_OK:
        CHECK(opsel_rtt_prober_burst(p, 0, 0, 0, rtts, 10, &mean) == OPSEL_OK, "icmp burst");
        for (answered = 0, i = 0; i < 10; i++) answered += !isnan(rtts[i]);
        CHECK(answered == 10 && mean > 0.0 && mean < 1000.0, "ICMP mean %.4f ms over %d replies", mean, answered);
        opsel_rtt_prober_free(p);
        break;
    case OPSEL_PERMISSION:
        CHECK(strstr(opsel_last_error_message(), "ping_group_range") != NULL, "EPERM names the sysctl");
        printf("skip ICMP burst: %s\n", opsel_last_error_message());
        break;
    default: CHECK(0, "icmp prober");
    }
}

/* First decision of a passive controller over q (1 Hz): the classified
 * output's samples and label (into label, cap bytes), and the stats. */
static void first_decision(const opsel_model *model, const opsel_ops_config *cfg, const double *q, size_t n,
                           size_t *samples, char *label, size_t cap, opsel_ops_stats *st) {
    opsel_ops_controller *c = NULL;
    opsel_ops_output o;
    bool has;
    const uint64_t s = 1000000000ull;
    *samples = 0;
    label[0] = 0;
    CHECK(opsel_ops_controller_new(model, NULL, cfg, &c) == OPSEL_OK, "gate: controller_new");
    if (!c) return;
    CHECK(opsel_ops_controller_start(c, 0) == OPSEL_OK, "gate: start");
    for (size_t k = 0; k < n && *samples == 0; k++) {
        uint64_t t = (k + 1) * s;
        CHECK(opsel_ops_controller_handle_timeout(c, t) == OPSEL_OK, "gate: timeout");
        CHECK(opsel_ops_controller_handle_sample(c, t, q[k]) == OPSEL_OK, "gate: sample");
        while (opsel_ops_controller_poll(c, &o, &has) == OPSEL_OK && has)
            if (o.kind == OPSEL_OPS_EVENT_CLASSIFIED) {
                *samples = o.samples;
                snprintf(label, cap, "%s", o.label);
            }
    }
    CHECK(opsel_ops_controller_stats(c, n * s, st) == OPSEL_OK, "gate: stats");
    opsel_ops_controller_free(c);
}

/* The probe gate through the C config; fixture_dir (< 4096 bytes) is
 * tests/fixtures/, so the shipped models are at fixture_dir/../../models. */
static void test_gate(const char *fixture_dir) {
    char mpath[4160], gpath[4160], full_label[64], gated_label[64];
    char *text;
    mj_value *mj;
    const mj_value *win;
    double q[40];
    size_t n = 0, full = 0, gated = 0;
    opsel_model *model = NULL;
    opsel_ops_stats st;
    opsel_ops_config cfg = opsel_ops_config_passive();
    snprintf(mpath, sizeof mpath, "%s../../models/passive/model.json", fixture_dir);
    snprintf(gpath, sizeof gpath, "%s../../models/passive/gate.json", fixture_dir);
    CHECK(cfg.gate_path == NULL && cfg.gate_threshold == 0.0, "gate: presets have no gate");
    CHECK(opsel_model_load(mpath, &model) == OPSEL_OK, "load %s", mpath);
    text = mj_read_file(mpath, NULL);
    mj = text ? mj_parse(text) : NULL;
    win = mj && mj_get(mj, "references") ? mj_get(mj_get(mj, "references"), "windows") : NULL;
    CHECK(model && win && win->len > 9 && win->items[9].len == 40, "gate: the passive model's references");
    if (model && win && win->len > 9 && win->items[9].len == 40) {
        /* Reference 9 with a small deterministic ripple (as core/tests/alloc_ops_gate.rs). */
        for (n = 0; n < 40; n++) q[n] = win->items[9].items[n].number * (1.0 + 0.003 * ((double)(n % 5) - 2.0));
        first_decision(model, &cfg, q, n, &full, full_label, sizeof full_label, &st);
        CHECK(full == 40 && st.gate_exits == 0, "gate: no gate, %zu samples", full);
        cfg.gate_path = gpath;
        first_decision(model, &cfg, q, n, &gated, gated_label, sizeof gated_label, &st);
        CHECK(gated >= 5 && gated < 40 && gated % 5 == 0, "gate: the shipped gate decided at %zu samples", gated);
        CHECK(strcmp(gated_label, full_label) == 0, "gate: %s vs the full window's %s", gated_label, full_label);
        CHECK(st.gate_exits == 1 && st.decisions == 1, "gate: gate_exits %llu", (unsigned long long)st.gate_exits);
        cfg.gate_threshold = 1.0;
        first_decision(model, &cfg, q, n, &gated, gated_label, sizeof gated_label, &st);
        CHECK(gated == 40 && st.gate_exits == 0, "gate: threshold 1 never fires (%zu samples)", gated);
    }
    {
        opsel_ops_controller *c = NULL;
        opsel_ops_config bad = opsel_ops_config_passive();
        bad.gate_threshold = 0.9;
        CHECK(opsel_ops_controller_new(model, NULL, &bad, &c) == OPSEL_INVALID_INPUT && c == NULL,
              "gate: a threshold without a gate file");
        CHECK(strstr(opsel_last_error_message(), "gate_threshold") != NULL, "gate: the error names gate_threshold");
        bad.gate_path = gpath;
        bad.gate_threshold = 2.0;
        CHECK(opsel_ops_controller_new(model, NULL, &bad, &c) == OPSEL_INVALID_INPUT && c == NULL,
              "gate: threshold 2");
    }
    opsel_model_free(model);
    mj_free(mj);
    free(text);
}

int main(int argc, char **argv) {
    char *text, *dir, path[4096];
    mj_value *g;
    opsel_model *model = NULL;
    if (argc != 2) {
        fprintf(stderr, "usage: %s tests/fixtures/ops_golden.json\n", argv[0]);
        return 2;
    }
    text = mj_read_file(argv[1], NULL);
    g = text ? mj_parse(text) : NULL;
    if (!g) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    dir = strrchr(argv[1], '/');
    snprintf(path, sizeof path, "%.*s%s", dir ? (int)(dir - argv[1] + 1) : 0, argv[1], mj_get(g, "model_file")->string);
    CHECK(opsel_model_load(path, &model) == OPSEL_OK, "load %s", path);
    if (model) {
        test_golden(g, model);
        test_callback_policy(g, model);
    }
    {
        char fdir[4096];
        snprintf(fdir, sizeof fdir, "%.*s", dir ? (int)(dir - argv[1] + 1) : 0, argv[1]);
        test_gate(fdir);
    }
    test_fair();
    test_tcp();
    test_paced_train();
    test_rtt();
    opsel_model_free(model);
    mj_free(g);
    free(text);
    printf("test_sys_ops: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
