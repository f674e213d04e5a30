/*
 * opsel C example: run OPS on your own TCP connection with the driver.
 *
 * 1. Opens a loopback TCP connection (stand-in for the application's bulk
 *    transfer) and a UDP echo responder with a 20 ms delay line (stand-in
 *    for the peer's echo port, e.g. `opsel recv`).
 * 2. Builds a driver: active probing with the pattern cubic:1-silence:1-X:1
 *    (X = bbr when this process may set it, else reno), the thesis stump as
 *    policy, steady time Y = 2 s, a 5 s time limit.
 * 3. Runs it on the socket, sending a file-like stream from a read callback,
 *    and prints every phase, classification, CCA switch, decision latency,
 *    RTT sample and byte count as it happens.
 *
 *   ./ops_driver tests/fixtures/ops_driver_tiny.model.json
 *
 * With a real model (e.g. models/active-s5c5s5b5/model.json) use its
 * pattern ("S5-C5-S5-B5"), the default Y and the peer's echo address.
 */
#include <opsel.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *PHASES[] = {"idle", "probe", "classify", "select", "steady"};

static int loopback_tcp(int *cli, int *srv) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
        return -1;
    *cli = socket(AF_INET, SOCK_STREAM, 0);
    if (*cli < 0 || connect(*cli, (struct sockaddr *)&a, sizeof a)) return -1;
    *srv = accept(l, NULL, NULL);
    close(l);
    return *srv < 0 ? -1 : 0;
}

/* The peer: drain the connection. */
static void *drain(void *arg) {
    static char buf[1 << 16];
    unsigned long long *n = arg;
    int fd = (int)n[1];
    ssize_t r;
    while ((r = recv(fd, buf, sizeof buf, 0)) > 0) n[0] += (unsigned long long)r;
    return NULL;
}

/* The data source: any bytes; a real application reads its file here. */
static ptrdiff_t read_data(void *user, uint8_t *buf, size_t cap) {
    unsigned long long *offset = user;
    memset(buf, 'o', cap);
    *offset += cap;
    return (ptrdiff_t)cap;
}

static int on_event(void *user, const opsel_ops_driver_event *e) {
    (void)user;
    switch (e->kind) {
    case OPSEL_OPS_EVENT_PHASE: printf("phase    %s (cycle %llu)\n", PHASES[e->phase], (unsigned long long)e->cycle); break;
    case OPSEL_OPS_EVENT_CLASSIFIED:
        printf("class    %s (confidence %.2f, %zu samples)\n", e->label, e->confidence, e->samples);
        break;
    case OPSEL_OPS_EVENT_SELECTED: printf("selected %s\n", e->cca); break;
    case OPSEL_OPS_EVENT_DECISION_FAILED: printf("decision failed: %s\n", e->message); break;
    case OPSEL_OPS_EVENT_PROBE_INCOMPLETE: printf("probe incomplete (%zu of %zu samples)\n", e->samples, e->needed); break;
    case OPSEL_DRIVER_EVENT_CCA_SET: printf("cca      %s set on the socket\n", e->cca); break;
    case OPSEL_DRIVER_EVENT_DECISION:
        printf("decision %s carried out %.1f us after the last RTT sample%s\n", e->cca, e->latency_ns / 1e3,
               e->switched ? " (switched)" : "");
        break;
    case OPSEL_DRIVER_EVENT_RTT:
        if (isnan(e->rtt_ms)) printf("rtt      lost\n");
        else printf("rtt      %.2f ms (%u echoes answered)\n", e->rtt_ms, e->answered);
        break;
    case OPSEL_DRIVER_EVENT_INTERVAL:
        printf("bytes    %.1f MB in the last second with %s (%s)\n", e->bytes / 1e6, e->cca, PHASES[e->phase]);
        break;
    }
    return 0;
}

#define TRY(call)                                                                                \
    do {                                                                                         \
        opsel_status st_ = (call);                                                               \
        if (st_ != OPSEL_OK) {                                                                   \
            fprintf(stderr, "%s failed: %s: %s\n", #call, opsel_status_name(st_),                \
                    opsel_last_error_message());                                                 \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.json (w = 3, e.g. tests/fixtures/ops_driver_tiny.model.json)\n", argv[0]);
        return 2;
    }
    int cli, srv;
    if (loopback_tcp(&cli, &srv)) {
        perror("loopback TCP connection");
        return 1;
    }
    unsigned long long rx[2] = {0, (unsigned long long)srv};
    pthread_t t;
    pthread_create(&t, NULL, drain, rx);

    char allowed[256] = "", avail[256] = "", pattern[64], peer[64];
    opsel_cca_allowed(allowed, sizeof allowed, NULL);
    opsel_cca_available(avail, sizeof avail, NULL);
    int bbr = strstr(avail, "bbr") && (geteuid() == 0 || strstr(allowed, "bbr"));
    snprintf(pattern, sizeof pattern, "cubic:1-silence:1-%s:1", bbr ? "bbr" : "reno");

    opsel_model *model = NULL;
    opsel_udp_echo_responder *resp = NULL;
    opsel_ops_policy *policy = NULL;
    opsel_ops_driver *drv = NULL;
    uint16_t port;
    TRY(opsel_model_load(argv[1], &model));
    TRY(opsel_udp_echo_responder_new("127.0.0.1:0", 20000000, &resp));
    TRY(opsel_udp_echo_responder_port(resp, &port));
    snprintf(peer, sizeof peer, "127.0.0.1:%u", port);
    /* The stump (000 §4.1): BBR in the background mix -> bbr, else cubic. */
    TRY(opsel_ops_policy_stump(bbr ? "bbr" : "reno", "cubic", &policy));

    opsel_ops_config oc = opsel_ops_config_active();
    oc.pattern = pattern;
    oc.steady_ns = 2000000000ull;
    /* The tiny model was probed with cubic:1-silence:1-bbr:1: the
       model/pattern check holds only when bbr can be used. */
    oc.check_model = bbr;
    opsel_ops_driver_config dc = opsel_ops_driver_config_default();
    dc.probe_peer = peer;
    dc.time_limit_ns = 5000000000ull;
    TRY(opsel_ops_driver_new(model, policy, &oc, &dc, &drv));
    opsel_ops_policy_free(policy); /* the driver keeps its own copy */
    opsel_model_free(model);       /* likewise */

    unsigned long long offset = 0;
    opsel_ops_driver_report rep;
    printf("OPS with %s on fd %d, RTT probe toward %s\n", pattern, cli, peer);
    TRY(opsel_ops_driver_run(drv, cli, read_data, &offset, on_event, NULL, &rep));
    printf("sent %.1f MB in %.1f s (%s), %llu CCA switches, %llu decisions; resume the source at byte %llu\n",
           rep.bytes_sent / 1e6, (rep.ended_ns - rep.started_ns) / 1e9,
           rep.end == OPSEL_DRIVER_END_TIME_LIMIT ? "time limit" : rep.end == OPSEL_DRIVER_END_EOF ? "EOF" : "stopped",
           (unsigned long long)rep.cca_sets, (unsigned long long)rep.stats.decisions,
           (unsigned long long)rep.bytes_sent);
    opsel_ops_driver_free(drv);
    shutdown(cli, SHUT_WR);
    pthread_join(t, NULL);
    close(cli);
    close(srv);
    opsel_udp_echo_responder_free(resp);
    return rep.bytes_sent > 0 && rx[0] == rep.bytes_sent ? 0 : 1;
}
