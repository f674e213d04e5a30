/*
 * opsel C example: load a background-mix model and classify RTT windows.
 *
 *   ./classify MODEL.json [WINDOW_SAMPLES...]
 *
 * With no samples it classifies two made-up 20 s windows: a flat path at the
 * 65 ms base RTT, and a CUBIC-like sawtooth well above it (000 Fig 5.3).
 * Shows the whole life cycle: load -> workspace -> classify -> class name ->
 * free, with every status checked and the error message printed.
 */
#include <opsel.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, opsel_status st) {
    fprintf(stderr, "%s failed: %s: %s\n", what, opsel_status_name((int32_t)st),
            opsel_last_error_message());
    return 1;
}

static int classify_one(const opsel_model *model, opsel_workspace *ws, const char *label,
                        const double *window, size_t len) {
    opsel_prediction p;
    const char *name = NULL;
    opsel_status st = opsel_model_classify(model, ws, window, len, &p);
    if (st != OPSEL_OK) return fail("opsel_model_classify", st);
    st = opsel_model_class_name(model, p.class_index, &name);
    if (st != OPSEL_OK) return fail("opsel_model_class_name", st);
    printf("%-10s -> %-6s (distance %.3f to reference %zu, %u vote%s, confidence %.2f)\n",
           label, name, p.distance, p.neighbor, p.votes, p.votes == 1 ? "" : "s", p.confidence);
    return 0;
}

int main(int argc, char **argv) {
    opsel_model *model = NULL;
    opsel_workspace *ws = NULL;
    opsel_status st;
    size_t w, i;
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.json [WINDOW_SAMPLES...]\n", argv[0]);
        return 2;
    }
    if (OPSEL_VERSION_MAJOR != 0 || opsel_version()[0] != '0') {
        fprintf(stderr, "header/library version mismatch: %s\n", opsel_version());
        return 1;
    }
    st = opsel_model_load(argv[1], &model);
    if (st != OPSEL_OK) return fail("opsel_model_load", st);
    w = opsel_model_window(model);
    printf("opsel %s: model with %zu classes, %zu references, window %zu\n", opsel_version(),
           opsel_model_class_count(model), opsel_model_reference_count(model), w);

    st = opsel_workspace_new(model, &ws);
    if (st != OPSEL_OK) {
        opsel_model_free(model);
        return fail("opsel_workspace_new", st);
    }

    if (argc > 2) {
        size_t n = (size_t)(argc - 2);
        double *window = malloc(n * sizeof *window);
        if (!window) { rc = 1; goto out; }
        for (i = 0; i < n; i++) window[i] = strtod(argv[2 + i], NULL);
        /* A wrong length is reported, not a crash: the message says what is expected. */
        rc = classify_one(model, ws, "argv", window, n);
        free(window);
    } else {
        double *flat = malloc(w * sizeof *flat), *saw = malloc(w * sizeof *saw);
        if (!flat || !saw) { free(flat); free(saw); rc = 1; goto out; }
        for (i = 0; i < w; i++) {
            flat[i] = 65.0 + 0.3 * (double)(i % 3);
            saw[i] = 65.0 + 58.5 + 39.0 * (double)(i % 12) / 12.0;
        }
        rc = classify_one(model, ws, "flat", flat, w) || classify_one(model, ws, "sawtooth", saw, w);
        free(flat);
        free(saw);
    }
out:
    opsel_workspace_free(ws);
    opsel_model_free(model);
    return rc;
}
