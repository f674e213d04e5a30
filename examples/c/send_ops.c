/* opsel C example: send a file with OPS choosing the congestion control.
 *
 * 1. Starts a receiver (opsel_transfer_recv_fd) on a loopback socket in a
 *    thread; it also answers the sender's UDP RTT echoes on its port.
 * 2. Sends a 16 MiB file with opsel_transfer_send_fd and an "ops" spec: OPS
 *    probes the path, classifies the background mix, picks a CCA and sets it
 *    on the live connection. A second thread raises an opsel_stop after
 *    STOP_AFTER_S seconds (default 30) if the send still runs; the receiver
 *    then keeps the bytes sent as a verified prefix.
 * 3. Prints the sender's JSON report: "ops" lists the decisions and the
 *    CCAs used.
 *
 *   ./send_ops tests/fixtures/ops_send_silent.model.json S3
 *
 * (a tiny model whose probe is 3 silent RTT samples: one decision, then the file).
 * Without arguments it uses the shipped passive model ("default"). */
#include <opsel.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct recv_job {
    int fd;
    const char *path;
    opsel_status status;
    char *report;
};

static void *receive(void *p) {
    struct recv_job *j = p;
    j->status = opsel_transfer_recv_fd(j->fd, j->path, "{\"idle_s\": 60}", &j->report);
    return NULL;
}

struct stopper {
    opsel_stop *stop;
    double after_s;
    volatile int done;
};

static void *stop_later(void *p) {
    struct stopper *s = p;
    for (double t = 0; t < s->after_s && !s->done; t += 0.01) usleep(10000);
    opsel_stop_set(s->stop);
    return NULL;
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "default";
    const char *pattern = argc > 2 ? argv[2] : NULL;
    const char *after = getenv("STOP_AFTER_S");
    /* A scratch directory under $TMPDIR (or /tmp). */
    const char *tmp = getenv("TMPDIR");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/opsel-send-ops-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return 2;
    char src[512], dst[512], part[512];
    snprintf(src, sizeof src, "%s/src.bin", dir);
    snprintf(dst, sizeof dst, "%s/dst.bin", dir);
    snprintf(part, sizeof part, "%s/.dst.bin.opsel-part", dir);
    FILE *f = fopen(src, "wb");
    for (int i = 0; i < (16 << 20); i++) fputc(i >> 20, f);
    fclose(f);

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || getsockname(lfd, (struct sockaddr *)&a, &alen) ||
        listen(lfd, 16))
        return 2;
    struct recv_job job = {lfd, dst, OPSEL_OK, NULL};
    pthread_t rt, st;
    pthread_create(&rt, NULL, receive, &job);

    /* An active pattern: probe, decide once (steady_s 0), then send the rest
     * with the chosen CCA; a table policy keeps the example independent of
     * which CCAs this host may set. */
    char spec[1024];
    if (pattern)
        snprintf(spec, sizeof spec,
                 "{\"ops\":{\"model\":\"%s\",\"pattern\":\"%s\",\"steady_s\":0,\"lead_in\":false,"
                 "\"policy\":\"*=reno\"}}",
                 model, pattern);
    else
        snprintf(spec, sizeof spec, "{\"ops\":{\"model\":\"%s\"}}", model);

    opsel_stop *stop = NULL;
    if (opsel_stop_new(&stop) != OPSEL_OK) return 2;
    struct stopper s = {stop, after ? atof(after) : 30.0, 0};
    pthread_create(&st, NULL, stop_later, &s);

    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cfd, (struct sockaddr *)&a, sizeof a)) return 2;
    char *report = NULL;
    opsel_status rc = opsel_transfer_send_fd(cfd, src, spec, stop, &report);
    s.done = 1;
    pthread_join(st, NULL);
    pthread_join(rt, NULL);
    if (rc != OPSEL_OK) {
        fprintf(stderr, "send failed (%d): %s\n", (int)rc, opsel_last_error_message());
    } else {
        printf("sender report: %s\n", report);
        printf("receiver: %s\n", job.report ? job.report : opsel_last_error_message());
    }
    int ok = rc == OPSEL_OK && job.status == OPSEL_OK && strstr(job.report, "\"verified\":true");
    opsel_string_free(report);
    opsel_string_free(job.report);
    opsel_stop_free(stop);
    close(cfd);
    close(lfd);
    remove(src);
    remove(dst);
    remove(part);
    rmdir(dir);
    return ok ? 0 : 1;
}
