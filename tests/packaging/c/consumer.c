/*
 * A C program outside the repository using an installed opsel: built by
 * `make test-packaging` once with pkg-config and once with CMake
 * find_package(opsel), against `make install PREFIX=...`.
 *
 *   ./consumer PREFIX/share/opsel/models/passive/model.json
 *
 * Loads the shipped model, classifies a flat window at the 65 ms base RTT,
 * and checks that a bad call returns a status with a message (no crash).
 */
#include <opsel.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    opsel_model *model = NULL;
    opsel_workspace *ws = NULL;
    opsel_prediction p;
    const char *name = NULL;
    double window[256];
    size_t w, i;
    opsel_status st;

    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.json\n", argv[0]);
        return 2;
    }
    /* Header and library must be the same release. */
    if (strncmp(opsel_version(), "0.", 2) != 0 || OPSEL_VERSION_MAJOR != 0) {
        fprintf(stderr, "header/library version mismatch: library %s\n", opsel_version());
        return 1;
    }
    st = opsel_model_load("/nonexistent/opsel/model.json", &model);
    if (st == OPSEL_OK || model != NULL || strlen(opsel_last_error_message()) == 0) {
        fprintf(stderr, "loading a missing file did not fail cleanly\n");
        return 1;
    }
    st = opsel_model_load(argv[1], &model);
    if (st != OPSEL_OK) {
        fprintf(stderr, "opsel_model_load: %s: %s\n", opsel_status_name((int32_t)st), opsel_last_error_message());
        return 1;
    }
    w = opsel_model_window(model);
    if (w == 0 || w > sizeof window / sizeof window[0]) {
        fprintf(stderr, "unexpected window length %zu\n", w);
        opsel_model_free(model);
        return 1;
    }
    for (i = 0; i < w; i++) window[i] = 65.0;
    st = opsel_workspace_new(model, &ws);
    if (st == OPSEL_OK) st = opsel_model_classify(model, ws, window, w, &p);
    if (st == OPSEL_OK) st = opsel_model_class_name(model, p.class_index, &name);
    if (st != OPSEL_OK) {
        fprintf(stderr, "classify: %s: %s\n", opsel_status_name((int32_t)st), opsel_last_error_message());
        opsel_workspace_free(ws);
        opsel_model_free(model);
        return 1;
    }
    printf("opsel %s: flat 65 ms window of %zu samples -> %s (distance %.3f)\n", opsel_version(), w, name,
           p.distance);
    opsel_workspace_free(ws);
    opsel_model_free(model);
    return 0;
}
