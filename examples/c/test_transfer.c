/* opsel_transfer_send_fd / opsel_transfer_recv_fd: one transfer over
 * loopback between two threads (a bound socket for the receiver, a
 * connected one for the sender) with each hash; the destination must equal
 * the source and both reports must name the same digest. Then the refusals:
 * a bad spec, a negative descriptor, NULL path. Run under ASan and valgrind
 * by `make asan` / `make valgrind` (no leak: every report string is freed). */
#include <opsel.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    opsel_status st = opsel_transfer_send_fd(cfd, src, spec, &sent);
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

int main(void) {
    char dir[] = "/tmp/opsel-c-transfer-XXXXXX";
    if (!mkdtemp(dir)) return 2;
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

    /* Refusals: a report pointer is set to NULL, the status says why. */
    char *rep = (char *)1;
    CHECK(opsel_transfer_send_fd(0, src, "{\"hsah\":1}", &rep) == OPSEL_INVALID_INPUT && rep == NULL,
          "unknown spec field");
    CHECK(strstr(opsel_last_error_message(), "hsah") != NULL, "%s", opsel_last_error_message());
    CHECK(opsel_transfer_send_fd(-1, src, NULL, &rep) == OPSEL_INVALID_INPUT, "negative fd");
    CHECK(opsel_transfer_recv_fd(-1, src, NULL, NULL) == OPSEL_INVALID_INPUT, "negative fd");
    CHECK(opsel_transfer_send_fd(0, NULL, NULL, NULL) == OPSEL_NULL_POINTER, "NULL path");

    remove(src);
    rmdir(dir);
    printf("test_transfer: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
