/* opsel_transfer_send_fd / opsel_transfer_recv_fd: one transfer over
 * loopback between two threads (a bound socket for the receiver, a
 * connected one for the sender) with each hash; the destination must equal
 * the source and both reports must name the same digest. With the model
 * given as argv[1] (tests/fixtures/ops_send_silent.model.json): an OPS send
 * whose report shows the decision and the CCAs used. A stop flag raised by
 * another thread ends a send early with a verified prefix. Then the
 * refusals: a bad spec, a bad ops section, a negative descriptor, NULL path.
 * Run under ASan and valgrind by `make asan` / `make valgrind` (no leak:
 * every report string and stop flag is freed). */
#include <opsel.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

struct recv_job {
    int fd;
    const char *path;
    opsel_status status;
    char *report;
};

static void *receive(void *p) {
    struct recv_job *j = p;
    j->status = opsel_transfer_recv_fd(j->fd, j->path, "{\"idle_s\": 10, \"accept_timeout_s\": 20}",
                                       &j->report);
    return NULL;
}

/* The value of "key":"..." in a JSON report, copied into out (or ""). */
static void field(const char *json, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *s = json ? strstr(json, pat) : NULL;
    out[0] = 0;
    if (!s) return;
    s += strlen(pat);
    size_t n = strcspn(s, "\"");
    if (n >= cap) n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* A listening loopback socket; its address in *a. */
static int listener(struct sockaddr_in *a) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof *a;
    CHECK(bind(lfd, (struct sockaddr *)a, sizeof *a) == 0, "bind");
    CHECK(getsockname(lfd, (struct sockaddr *)a, &alen) == 0, "getsockname");
    CHECK(listen(lfd, 16) == 0, "listen");
    return lfd;
}

/* An OPS send with the silent-probe model: one decision (the table policy's
 * reno) before any byte moves, then the whole file with it. */
static void ops_transfer(const char *dir, const char *model) {
    char src[512], dst[512], spec[1024];
    snprintf(src, sizeof src, "%s/src.bin", dir);
    snprintf(dst, sizeof dst, "%s/dst-ops.bin", dir);
    snprintf(spec, sizeof spec,
             "{\"ops\":{\"model\":\"%s\",\"pattern\":\"S3\",\"steady_s\":0,"
             "\"lead_in\":false,\"policy\":\"*=reno\"}}",
             model);
    struct sockaddr_in a;
    int lfd = listener(&a);
    struct recv_job job = {lfd, dst, OPSEL_OK, NULL};
    pthread_t t;
    pthread_create(&t, NULL, receive, &job);
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    char *sent = NULL;
    opsel_status st = opsel_transfer_send_fd(cfd, src, spec, NULL, &sent);
    pthread_join(t, NULL);
    CHECK(st == OPSEL_OK, "ops: send status %d: %s", (int)st, opsel_last_error_message());
    CHECK(job.status == OPSEL_OK, "ops: recv status %d", (int)job.status);
    CHECK(sent && strstr(sent, "\"file_identical\":true"), "ops: %s", sent ? sent : "(null)");
    CHECK(sent && strstr(sent, "\"ccas\":[\"cubic\",\"reno\"]"), "ops ccas: %s",
          sent ? sent : "(null)");
    CHECK(sent && strstr(sent, "\"decisions\":[{") && strstr(sent, "\"cca\":\"reno\""),
          "ops decisions: %s", sent ? sent : "(null)");
    CHECK(same_file(src, dst), "ops: the destination differs from the source");
    opsel_string_free(sent);
    opsel_string_free(job.report);
    close(cfd);
    close(lfd);
    remove(dst);
}

struct watch_job {
    const char *part;
    opsel_stop *stop;
};

/* Raise the stop flag once the receiver holds data (the send is running). */
static void *watch(void *p) {
    struct watch_job *w = p;
    struct stat st;
    while (stat(w->part, &st) != 0 || st.st_size < (1 << 20)) usleep(1000);
    opsel_stop_set(w->stop);
    return NULL;
}

/* A 64 MiB send stopped from another thread: confirmed up to the bytes
 * sent, which the receiver keeps as its part file, equal to the source's
 * prefix. */
static void stopped_transfer(const char *dir) {
    char src[512], dst[512], part[512];
    snprintf(src, sizeof src, "%s/big.bin", dir);
    snprintf(dst, sizeof dst, "%s/dst-big.bin", dir);
    snprintf(part, sizeof part, "%s/.dst-big.bin.opsel-part", dir);
    static unsigned char block[1 << 20];
    for (size_t i = 0; i < sizeof block; i++) block[i] = (unsigned char)(i * 7 + (i >> 12));
    FILE *f = fopen(src, "wb");
    for (int i = 0; i < 64; i++) fwrite(block, 1, sizeof block, f);
    fclose(f);

    struct sockaddr_in a;
    int lfd = listener(&a);
    struct recv_job job = {lfd, dst, OPSEL_OK, NULL};
    pthread_t t, w;
    pthread_create(&t, NULL, receive, &job);
    opsel_stop *stop = NULL;
    CHECK(opsel_stop_new(&stop) == OPSEL_OK && stop && !opsel_stop_is_set(stop), "stop_new");
    struct watch_job wj = {part, stop};
    pthread_create(&w, NULL, watch, &wj);
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    char *sent = NULL;
    opsel_status st = opsel_transfer_send_fd(cfd, src, "{\"cca\":\"cubic\"}", stop, &sent);
    pthread_join(w, NULL);
    pthread_join(t, NULL);
    CHECK(st == OPSEL_OK, "stop: send status %d: %s", (int)st, opsel_last_error_message());
    CHECK(opsel_stop_is_set(stop), "the flag stays set");
    CHECK(sent && strstr(sent, "\"end\":\"stopped\"") && strstr(sent, "\"complete\":false"),
          "stop: %s", sent ? sent : "(null)");
    CHECK(job.report && strstr(job.report, "\"verified\":true") &&
              strstr(job.report, "\"complete\":false"),
          "stop recv: %s", job.report ? job.report : "(null)");
    /* The part file: shorter than the source, and its prefix. */
    struct stat ps;
    CHECK(stat(part, &ps) == 0 && ps.st_size >= (1 << 20) && ps.st_size < (64L << 20),
          "part file size %ld", (long)ps.st_size);
    FILE *pf = fopen(part, "rb");
    long off = 0;
    int same = pf != NULL;
    for (int c; same && (c = fgetc(pf)) != EOF; off++)
        same = (unsigned char)c == block[off % (long)sizeof block];
    if (pf) fclose(pf);
    CHECK(same && off == ps.st_size, "the part file is the source's prefix");
    char want[64];
    snprintf(want, sizeof want, "\"bytes_sent\":%ld,", (long)ps.st_size);
    CHECK(sent && strstr(sent, want), "the report names the kept prefix (%s): %s", want,
          sent ? sent : "(null)");
    CHECK(access(dst, F_OK) != 0, "a prefix is not renamed into place");
    opsel_stop_free(stop);
    opsel_string_free(sent);
    opsel_string_free(job.report);
    close(cfd);
    close(lfd);
    remove(part);
    remove(src);
}

static void one_transfer(const char *dir, const char *hash) {
    char src[512], dst[512], spec[64];
    snprintf(src, sizeof src, "%s/src.bin", dir);
    snprintf(dst, sizeof dst, "%s/dst-%s.bin", dir, hash);
    snprintf(spec, sizeof spec, "{\"hash\":\"%s\"}", hash);

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0, "bind");
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0, "getsockname");
    CHECK(listen(lfd, 16) == 0, "listen");

    struct recv_job job = {lfd, dst, OPSEL_OK, NULL};
    pthread_t t;
    pthread_create(&t, NULL, receive, &job);

    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    char *sent = NULL;
    opsel_status st = opsel_transfer_send_fd(cfd, src, spec, NULL, &sent);
    pthread_join(t, NULL);
    CHECK(st == OPSEL_OK, "%s: send status %d", hash, (int)st);
    CHECK(job.status == OPSEL_OK, "%s: recv status %d", hash, (int)job.status);
    CHECK(sent && strstr(sent, "\"file_identical\":true"), "%s: %s", hash, sent ? sent : "(null)");
    CHECK(job.report && strstr(job.report, "\"verified\":true"), "%s: %s", hash,
          job.report ? job.report : "(null)");
    char h1[32], h2[32], d1[80], d2[80];
    field(sent, "hash", h1, sizeof h1);
    field(job.report, "hash", h2, sizeof h2);
    field(sent, "digest", d1, sizeof d1);
    field(job.report, "digest", d2, sizeof d2);
    CHECK(strcmp(h1, hash) == 0 && strcmp(h2, hash) == 0, "hash %s / %s", h1, h2);
    CHECK(strlen(d1) == (strcmp(hash, "xxh3") == 0 ? 32u : 64u) && strcmp(d1, d2) == 0,
          "digests %s / %s", d1, d2);
    CHECK(same_file(src, dst), "%s: the destination differs from the source", hash);
    opsel_string_free(sent);
    opsel_string_free(job.report);
    close(cfd);
    close(lfd);
    remove(dst);
}

int main(int argc, char **argv) {
    char dir[400];
    if (temp_dir(dir, sizeof dir, "opsel-c-transfer") != 0) return 2;
    char src[512];
    snprintf(src, sizeof src, "%s/src.bin", dir);
    FILE *f = fopen(src, "wb");
    unsigned long x = 88172645463325252UL;
    for (int i = 0; i < 1500007; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        fputc((int)(x & 0xff), f);
    }
    fclose(f);

    one_transfer(dir, "xxh3");
    one_transfer(dir, "blake3");
    if (argc > 1) ops_transfer(dir, argv[1]);
    stopped_transfer(dir);

    /* Refusals: a report pointer is set to NULL, the status says why. */
    char *rep = (char *)1;
    CHECK(opsel_transfer_send_fd(0, src, "{\"hsah\":1}", NULL, &rep) == OPSEL_INVALID_INPUT &&
              rep == NULL,
          "unknown spec field");
    CHECK(strstr(opsel_last_error_message(), "hsah") != NULL, "%s", opsel_last_error_message());
    /* A bad ops section fails before anything is sent, naming the value. */
    {
        struct sockaddr_in a;
        int lfd = listener(&a);
        int cfd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(connect(cfd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
        CHECK(opsel_transfer_send_fd(cfd, src, "{\"ops\":{\"rtt\":\"pigeon\"}}", NULL, &rep) ==
                  OPSEL_INVALID_INPUT,
              "bad ops rtt");
        CHECK(strstr(opsel_last_error_message(), "send spec: ops: rtt \"pigeon\"") != NULL, "%s",
              opsel_last_error_message());
        CHECK(opsel_transfer_send_fd(cfd, src, "{\"ops\":{\"model\":\"no-such-model\"}}", NULL,
                                     &rep) == OPSEL_INVALID_INPUT,
              "missing ops model");
        CHECK(strstr(opsel_last_error_message(), "no-such-model") != NULL, "%s",
              opsel_last_error_message());
        close(cfd);
        close(lfd);
    }
    CHECK(opsel_transfer_send_fd(-1, src, NULL, NULL, &rep) == OPSEL_INVALID_INPUT, "negative fd");
    CHECK(opsel_transfer_recv_fd(-1, src, NULL, NULL) == OPSEL_INVALID_INPUT, "negative fd");
    CHECK(opsel_transfer_send_fd(0, NULL, NULL, NULL, NULL) == OPSEL_NULL_POINTER, "NULL path");
    CHECK(opsel_stop_set(NULL) == OPSEL_NULL_POINTER && !opsel_stop_is_set(NULL), "NULL stop");
    CHECK(opsel_stop_new(NULL) == OPSEL_NULL_POINTER, "NULL out");
    opsel_stop_free(NULL);

    remove(src);
    rmdir(dir);
    printf("test_transfer: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
