/*
 * opsel C example: act on a live TCP socket and run the OPS controller.
 *
 *   ./sys_ops MODEL.json
 *
 * 1. Opens a loopback TCP connection (stand-in for the application's own
 *    bulk-transfer socket), lists the kernel's CCAs, switches the live socket
 *    to bbr and reads it back, prints TCP_INFO.
 * 2. Starts a UDP echo responder with a 30 ms delay line and takes 1 Hz RTT
 *    samples the 000 §3.2 way (10 echoes 1 ms apart, averaged).
 * 3. Feeds the samples to a passive OPS controller (time compressed: each
 *    sample is stamped one second after the previous one) and applies its
 *    SET_CCA actions to the socket until the first decision.
 */
#include <opsel.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRY(what, call)                                                                          \
    do {                                                                                         \
        opsel_status st_ = (call);                                                               \
        if (st_ != OPSEL_OK) {                                                                   \
            fprintf(stderr, "%s failed: %s: %s\n", what, opsel_status_name((int32_t)st_),      \
                    opsel_last_error_message());                                                 \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

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

static int run(const char *model_path, int fd) {
    char list[256], cca[OPSEL_CCA_NAME_CAP], dst[64];
    opsel_tcp_info info;
    opsel_model *model = NULL;
    opsel_ops_controller *ctl = NULL;
    opsel_udp_echo_responder *resp = NULL;
    opsel_rtt_prober *prober = NULL;
    opsel_ops_output out;
    bool has, decided = false;
    uint16_t port;
    uint64_t t;
    int rc = 0;

    TRY("opsel_cca_available", opsel_cca_available(list, sizeof list, NULL));
    printf("available CCAs: %s\n", list);
    TRY("opsel_cca_set", opsel_cca_set(fd, "bbr", cca));
    printf("socket switched to %s (read back)\n", cca);
    TRY("opsel_tcp_info_get", opsel_tcp_info_get(fd, &info));
    printf("TCP_INFO: srtt %u us, cwnd %u segments, mss %u\n", info.rtt_us, info.snd_cwnd, info.snd_mss);

    TRY("opsel_udp_echo_responder_new", opsel_udp_echo_responder_new("127.0.0.1:0", 30000000, &resp));
    TRY("opsel_udp_echo_responder_port", opsel_udp_echo_responder_port(resp, &port));
    snprintf(dst, sizeof dst, "127.0.0.1:%u", port);
    TRY("opsel_rtt_prober_udp", opsel_rtt_prober_udp(dst, &prober));

    /* The controller assumes the socket starts with its initial CCA (cubic). */
    TRY("opsel_cca_set", opsel_cca_set(fd, "cubic", cca));
    TRY("opsel_model_load", opsel_model_load(model_path, &model));
    TRY("opsel_ops_controller_new", opsel_ops_controller_new(model, NULL, NULL, &ctl));
    TRY("opsel_ops_controller_start", opsel_ops_controller_start(ctl, 0));
    for (t = 1; !decided && t <= 40; t++) {
        double mean_ms = 0;
        /* One 1 Hz sample: 10 echoes 1 ms apart (000 §3.2). */
        TRY("opsel_rtt_prober_burst", opsel_rtt_prober_burst(prober, 10, 1000000, 0, NULL, 0, &mean_ms));
        TRY("handle_timeout", opsel_ops_controller_handle_timeout(ctl, t * 1000000000ull));
        TRY("handle_sample", opsel_ops_controller_handle_sample(ctl, t * 1000000000ull, mean_ms));
        while (opsel_ops_controller_poll(ctl, &out, &has) == OPSEL_OK && has) {
            if (out.kind == OPSEL_OPS_SET_CCA) {
                TRY("opsel_cca_set", opsel_cca_set(fd, out.cca, cca));
                printf("t=%2llus  SET_CCA -> socket now %s\n", (unsigned long long)t, cca);
            } else if (out.kind == OPSEL_OPS_EVENT_CLASSIFIED) {
                printf("t=%2llus  window of %zu samples classified as %s (confidence %.2f)\n",
                       (unsigned long long)t, out.samples, out.label, out.confidence);
            } else if (out.kind == OPSEL_OPS_EVENT_SELECTED) {
                printf("t=%2llus  policy chose %s for the steady phase\n", (unsigned long long)t, out.cca);
                decided = true;
            }
        }
    }
    TRY("opsel_cca_get", opsel_cca_get(fd, cca, sizeof cca));
    printf("socket CCA at the end: %s\n", cca);
    if (!decided) rc = 1;
    opsel_ops_controller_free(ctl);
    opsel_model_free(model);
    opsel_rtt_prober_free(prober);
    opsel_udp_echo_responder_free(resp);
    return rc;
}

int main(int argc, char **argv) {
    int cli = -1, srv = -1, rc;
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.json\n", argv[0]);
        return 2;
    }
    if (loopback_tcp(&cli, &srv)) {
        perror("loopback TCP connection");
        return 1;
    }
    rc = run(argv[1], cli);
    close(cli);
    close(srv);
    return rc;
}
