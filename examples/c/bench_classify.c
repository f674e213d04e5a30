/*
 * Binding-overhead bench, C side: the same loop as ffi/examples/bench_core.rs
 * through the C API (opsel_model_classify with a reused workspace).
 *
 *   ./bench_classify DIR [ROUNDS]     (DIR from bench_core: model.json, queries.f64)
 *
 * Prints "RESULT lang=c median_ns=... checksum=..." (checksum must equal the
 * core's). Driven by benches/bindings/run.sh (`make bench-bindings`).
 */
#include <opsel.h>

#include "mini_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUERIES 200

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median per-call time over `rounds` rounds of reps x 200 calls (+1 warm-up). */
static void time_config(const char *config, const opsel_model *model, const double *queries, size_t w,
                        int reps, double *per_call, int rounds, unsigned long long checksum) {
    opsel_workspace *ws = NULL;
    opsel_prediction p;
    size_t i;
    int r, k;
    opsel_workspace_new(model, &ws);
    for (r = 0; r <= rounds; r++) {
        double t = now_ns();
        for (k = 0; k < reps; k++)
            for (i = 0; i < QUERIES; i++) opsel_model_classify(model, ws, queries + i * w, w, &p);
        per_call[r] = (now_ns() - t) / (QUERIES * reps);
    }
    /* per_call[0] is the warm-up round. */
    qsort(per_call + 1, (size_t)rounds, sizeof *per_call, cmp_double);
    printf("RESULT lang=c config=%s median_ns=%.1f rounds=%d checksum=%llu\n", config, per_call[1 + rounds / 2],
           rounds, checksum);
    opsel_workspace_free(ws);
}

int main(int argc, char **argv) {
    char path[4096];
    opsel_model *model = NULL, *tiny = NULL;
    opsel_workspace *ws = NULL;
    opsel_prediction p;
    size_t w, len = 0, i;
    int rounds = argc > 2 ? atoi(argv[2]) : 30;
    unsigned long long checksum = 0;
    double *queries, *per_call;
    char *raw;

    if (argc < 2 || rounds < 1) {
        fprintf(stderr, "usage: %s DIR [ROUNDS]\n", argv[0]);
        return 2;
    }
    snprintf(path, sizeof path, "%s/model.json", argv[1]);
    if (opsel_model_load(path, &model) != OPSEL_OK || opsel_workspace_new(model, &ws) != OPSEL_OK) {
        fprintf(stderr, "%s\n", opsel_last_error_message());
        return 1;
    }
    w = opsel_model_window(model);
    snprintf(path, sizeof path, "%s/queries.f64", argv[1]);
    raw = mj_read_file(path, &len);
    if (!raw || len != QUERIES * w * sizeof(double)) {
        fprintf(stderr, "cannot read %s (%zu bytes)\n", path, len);
        return 1;
    }
    queries = malloc(len);
    memcpy(queries, raw, len); /* aligned copy; the file is little-endian f64 */
    free(raw);
    per_call = malloc((size_t)(rounds + 1) * sizeof *per_call);

    for (i = 0; i < QUERIES; i++) {
        if (opsel_model_classify(model, ws, queries + i * w, w, &p) != OPSEL_OK) {
            fprintf(stderr, "%s\n", opsel_last_error_message());
            return 1;
        }
        checksum += (unsigned long long)(i + 1) * ((unsigned long long)p.class_index * 100000ULL + p.neighbor);
    }
    time_config("A", model, queries, w, 1, per_call, rounds, checksum);
    snprintf(path, sizeof path, "%s/tiny.json", argv[1]);
    if (opsel_model_load(path, &tiny) != OPSEL_OK) {
        fprintf(stderr, "%s\n", opsel_last_error_message());
        return 1;
    }
    time_config("tiny", tiny, queries, w, 50, per_call, rounds, 0);
    opsel_model_free(tiny);
    free(per_call);
    free(queries);
    opsel_workspace_free(ws);
    opsel_model_free(model);
    return 0;
}
