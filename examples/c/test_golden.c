/*
 * The shared golden fixture through the C API ("the same golden
 * vectors drive the Rust, Python, C and Node tests"), plus the bad-input
 * contract: NULL pointers, zero lengths, NaN data and invalid UTF-8 paths get
 * a status and a message, never a crash. Run under AddressSanitizer and
 * valgrind by `make test-c`.
 *
 *   ./test_golden tests/fixtures/knn_golden.json
 */
#include <opsel.h>

#include "mini_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static double tol;

static int close_to(double got, double want) {
    double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    return fabs(got - want) <= tol * scale;
}

/* Copy a JSON number array into a new double buffer. */
static double *doubles(const mj_value *arr, size_t *n) {
    size_t i;
    double *out = malloc((arr->len ? arr->len : 1) * sizeof *out);
    for (i = 0; out && i < arr->len; i++) out[i] = arr->items[i].number;
    *n = arr->len;
    return out;
}

static void check_prediction(const opsel_prediction *p, const mj_value *q, const char *how) {
    int id = (int)mj_get(q, "id")->number;
    CHECK(p->class_index == (size_t)mj_get(q, "class_index")->number, "%s query %d class %zu", how, id, p->class_index);
    CHECK(p->neighbor == (size_t)mj_get(q, "neighbor")->number, "%s query %d neighbor %zu", how, id, p->neighbor);
    CHECK(p->votes == (uint32_t)mj_get(q, "votes")->number, "%s query %d votes %u", how, id, p->votes);
    CHECK(close_to(p->distance, mj_get(q, "distance")->number), "%s query %d distance %.17g", how, id, p->distance);
    CHECK(close_to(p->confidence, mj_get(q, "confidence")->number), "%s query %d confidence", how, id);
}

static void test_predictions(const opsel_model *model, const mj_value *golden) {
    const mj_value *queries = mj_get(golden, "queries");
    size_t nq = queries->len, w = opsel_model_window(model), i, j, n;
    double *flat = malloc(nq * w * sizeof *flat);
    opsel_prediction *batch = calloc(nq, sizeof *batch);
    opsel_workspace *ws = NULL;
    double probs[6];

    CHECK(nq >= 10, "fixture has %zu queries", nq);
    CHECK(opsel_workspace_new(model, &ws) == OPSEL_OK, "workspace");
    for (i = 0; i < nq; i++) {
        const mj_value *q = &queries->items[i];
        double *win = doubles(mj_get(q, "window"), &n);
        opsel_prediction p;
        const char *name = NULL;
        const mj_value *want_probs = mj_get(q, "probabilities");
        CHECK(n == w, "query window length %zu", n);
        memcpy(flat + i * w, win, w * sizeof *win);
        CHECK(opsel_model_classify(model, ws, win, n, &p) == OPSEL_OK, "classify query %zu", i);
        check_prediction(&p, q, "classify");
        CHECK(opsel_model_class_name(model, p.class_index, &name) == OPSEL_OK && name &&
                  !strcmp(name, mj_get(q, "class")->string),
              "class name of query %zu", i);
        CHECK(opsel_model_class_probabilities(model, ws, win, n, probs, 6, NULL) == OPSEL_OK, "probabilities");
        for (j = 0; j < 6 && j < want_probs->len; j++)
            CHECK(close_to(probs[j], want_probs->items[j].number), "query %zu probability %zu", i, j);
        free(win);
    }
    CHECK(opsel_model_classify_batch(model, flat, nq * w, 2, batch, nq) == OPSEL_OK, "batch");
    for (i = 0; i < nq; i++) check_prediction(&batch[i], &queries->items[i], "batch");
    opsel_workspace_free(ws);
    free(batch);
    free(flat);
}

static void test_dtw(const mj_value *golden) {
    const mj_value *pairs = mj_get(golden, "dtw");
    size_t i, na, nb;
    CHECK(pairs->len >= 5, "fixture has %zu DTW pairs", pairs->len);
    for (i = 0; i < pairs->len; i++) {
        const mj_value *p = &pairs->items[i];
        double *a = doubles(mj_get(p, "a"), &na), *b = doubles(mj_get(p, "b"), &nb), d = NAN;
        const mj_value *r = mj_get(p, "radius");
        size_t radius = r->type == MJ_NULL ? OPSEL_RADIUS_UNCONSTRAINED : (size_t)r->number;
        uint32_t cost = strcmp(mj_get(p, "cost")->string, "abs") ? OPSEL_COST_SQUARED : OPSEL_COST_ABS;
        CHECK(opsel_dtw_distance(a, na, b, nb, radius, cost, &d) == OPSEL_OK, "dtw pair %zu", i);
        CHECK(close_to(d, mj_get(p, "distance")->number), "dtw pair %zu: %.17g", i, d);
        free(a);
        free(b);
    }
}

/* Round trips: to_json -> from_json, save -> load, and fit on the references. */
static void test_round_trips(const opsel_model *model, const char *model_path, const mj_value *golden) {
    const mj_value *queries = mj_get(golden, "queries");
    const mj_value *q = &queries->items[3];
    char *json = NULL, *text, tmpl[400], path[512];
    size_t len = 0, n, i;
    opsel_model *again = NULL, *loaded = NULL, *fitted = NULL;
    opsel_workspace *ws = NULL;
    opsel_prediction p;
    double *win = doubles(mj_get(q, "window"), &n);
    mj_value *file;
    opsel_knn_config cfg;

    CHECK(opsel_model_to_json(model, &json, &len) == OPSEL_OK && json && strlen(json) == len, "to_json");
    CHECK(opsel_model_from_json(json, len, &again) == OPSEL_OK, "from_json");
    opsel_string_free(json);
    CHECK(opsel_workspace_new(again, &ws) == OPSEL_OK, "workspace");
    CHECK(opsel_model_classify(again, ws, win, n, &p) == OPSEL_OK, "classify after JSON round trip");
    check_prediction(&p, q, "json");

    if (temp_dir(tmpl, sizeof tmpl, "opsel-c-test") == 0) {
        snprintf(path, sizeof path, "%s/m.json", tmpl);
        CHECK(opsel_model_save(again, path) == OPSEL_OK, "save");
        CHECK(opsel_model_load(path, &loaded) == OPSEL_OK, "load saved");
        CHECK(opsel_model_classify(loaded, ws, win, n, &p) == OPSEL_OK, "classify saved");
        check_prediction(&p, q, "saved");
        remove(path);
        remove(tmpl);
    } else {
        CHECK(0, "mkdtemp");
    }

    /* Fit through the C API on the model file's own references. */
    text = mj_read_file(model_path, NULL);
    file = text ? mj_parse(text) : NULL;
    CHECK(file != NULL, "parse model file");
    if (file) {
        const mj_value *refs = mj_get(mj_get(file, "references"), "windows");
        const mj_value *labels_v = mj_get(mj_get(file, "references"), "labels");
        const mj_value *classes = mj_get(file, "classes");
        size_t w = opsel_model_window(model), nr = refs->len;
        double *x = malloc(nr * w * sizeof *x);
        uint32_t *labels = malloc(nr * sizeof *labels);
        const char **names = malloc(classes->len * sizeof *names);
        for (i = 0; i < nr; i++) {
            size_t j;
            for (j = 0; j < w; j++) x[i * w + j] = refs->items[i].items[j].number;
            labels[i] = (uint32_t)labels_v->items[i].number;
        }
        for (i = 0; i < classes->len; i++) names[i] = classes->items[i].string;
        CHECK(opsel_model_config(model, &cfg) == OPSEL_OK && cfg.k == 3 && cfg.radius == 10, "config");
        CHECK(opsel_model_fit(x, nr * w, w, labels, nr, names, classes->len, &cfg, &fitted) == OPSEL_OK, "fit");
        for (i = 0; fitted && i < queries->len; i++) {
            double *qw = doubles(mj_get(&queries->items[i], "window"), &n);
            CHECK(opsel_model_classify(fitted, ws, qw, n, &p) == OPSEL_OK, "classify fitted");
            check_prediction(&p, &queries->items[i], "fitted");
            free(qw);
        }
        free(x);
        free(labels);
        free(names);
        mj_free(file);
    }
    free(text);
    free(win);
    opsel_workspace_free(ws);
    opsel_model_free(fitted);
    opsel_model_free(loaded);
    opsel_model_free(again);
}

/* The contract: bad input gets a status and a message, never a crash. */
static void test_bad_input(const opsel_model *model, const char *model_path) {
    double good[20], nan_win[20], d = -1.0;
    opsel_prediction p, batch[2];
    opsel_workspace *ws = NULL;
    opsel_model *m = (opsel_model *)1; /* must be reset to NULL on failure */
    const char *name = NULL;
    const char bad_utf8[] = {'/', 't', 'm', 'p', '/', (char)0xff, (char)0xfe, '\0'};
    const char *names[] = {"a", "a"};
    uint32_t labels[] = {0, 1};
    opsel_knn_config cfg = opsel_knn_config_default();
    int i;

    for (i = 0; i < 20; i++) good[i] = nan_win[i] = 70.0;
    nan_win[4] = NAN;
    memset(&p, 0x5a, sizeof p);
    CHECK(opsel_workspace_new(model, &ws) == OPSEL_OK, "workspace");

    CHECK(opsel_model_classify(NULL, ws, good, 20, &p) == OPSEL_NULL_POINTER, "NULL model");
    CHECK(opsel_model_classify(model, NULL, good, 20, &p) == OPSEL_NULL_POINTER, "NULL workspace");
    CHECK(opsel_model_classify(model, ws, NULL, 20, &p) == OPSEL_NULL_POINTER, "NULL window");
    CHECK(strstr(opsel_last_error_message(), "window is NULL") != NULL, "message names the NULL argument");
    CHECK(opsel_model_classify(model, ws, good, 20, NULL) == OPSEL_NULL_POINTER, "NULL out");
    CHECK(opsel_model_classify(model, ws, good, 0, &p) == OPSEL_INVALID_INPUT, "zero length");
    CHECK(opsel_model_classify(model, ws, good, 19, &p) == OPSEL_INVALID_INPUT, "wrong length");
    CHECK(strstr(opsel_last_error_message(), "19") != NULL, "message names the length");
    CHECK(opsel_model_classify(model, ws, nan_win, 20, &p) == OPSEL_INVALID_INPUT, "NaN sample");
    CHECK(strstr(opsel_last_error_message(), "index 4") != NULL, "message names the NaN index");
    CHECK(p.votes == 0x5a5a5a5a, "output untouched on error");
    CHECK(opsel_model_classify_batch(model, good, 0, 1, batch, 0) == OPSEL_INVALID_INPUT, "batch zero length");
    CHECK(opsel_model_classify_batch(model, good, 20, 1, batch, 2) == OPSEL_INVALID_INPUT, "batch wrong out length");
    CHECK(opsel_model_classify_batch(model, good, 20, 1, NULL, 1) == OPSEL_NULL_POINTER, "batch NULL out");
    CHECK(opsel_dtw_distance(nan_win, 20, good, 20, 10, OPSEL_COST_ABS, &d) == OPSEL_INVALID_INPUT, "dtw NaN");
    CHECK(opsel_dtw_distance(good, 0, good, 20, 10, OPSEL_COST_ABS, &d) == OPSEL_INVALID_INPUT, "dtw zero length");
    CHECK(opsel_dtw_distance(good, 20, good, 20, 10, 42, &d) == OPSEL_INVALID_INPUT, "dtw bad cost");
    CHECK(opsel_dtw_distance(NULL, 20, good, 20, 10, OPSEL_COST_ABS, &d) == OPSEL_NULL_POINTER, "dtw NULL");
    CHECK(d == -1.0, "distance untouched on error");
    CHECK(opsel_model_class_name(model, 6, &name) == OPSEL_INVALID_INPUT, "class index out of range");

    CHECK(opsel_model_load(NULL, &m) == OPSEL_NULL_POINTER && m == NULL, "load NULL path");
    CHECK(opsel_model_load(model_path, NULL) == OPSEL_NULL_POINTER, "load NULL out");
    m = (opsel_model *)1;
    CHECK(opsel_model_load(bad_utf8, &m) == OPSEL_INVALID_INPUT && m == NULL, "load invalid UTF-8 path");
    CHECK(strstr(opsel_last_error_message(), "UTF-8") != NULL, "message says UTF-8");
    CHECK(opsel_model_load("/nonexistent/opsel/model.json", &m) == OPSEL_IO, "load missing file");
    CHECK(opsel_model_from_json("{\"format\":\"x\"}", 14, &m) == OPSEL_INVALID_MODEL, "foreign JSON");
    CHECK(opsel_model_from_json("{\"format\":\"opsel-model\",\"version\":5,\"kind\":\"knn-dtw\"}", 53, &m) ==
              OPSEL_UNSUPPORTED_VERSION, "future version");
    CHECK(opsel_model_from_json("{}", 0, &m) == OPSEL_INVALID_INPUT, "JSON zero length");
    CHECK(opsel_model_save(model, "/nonexistent/dir/m.json") == OPSEL_IO, "save to missing dir");
    CHECK(opsel_model_fit(good, 20, 10, labels, 2, names, 2, NULL, &m) == OPSEL_INVALID_INPUT && m == NULL,
          "duplicate class names");
    cfg.cost = 9;
    CHECK(opsel_model_fit(good, 20, 10, labels, 2, names, 1, &cfg, &m) == OPSEL_INVALID_INPUT, "bad cost");
    CHECK(opsel_model_fit(good, 20, 10, NULL, 2, names, 1, NULL, &m) == OPSEL_NULL_POINTER, "NULL labels");

    /* After all that, the same handles still work, and success clears the message. */
    CHECK(opsel_model_classify(model, ws, good, 20, &p) == OPSEL_OK, "classify after errors");
    CHECK(opsel_last_error_message()[0] == '\0', "message cleared on success");
    CHECK(!strcmp(opsel_status_name(OPSEL_INVALID_MODEL), "OPSEL_INVALID_MODEL"), "status name");
    opsel_model_free(NULL);
    opsel_workspace_free(NULL);
    opsel_string_free(NULL);
    opsel_workspace_free(ws);
}

int main(int argc, char **argv) {
    char *text, *model_path, *slash;
    mj_value *golden;
    opsel_model *model = NULL;
    size_t dir_len;

    if (argc != 2) {
        fprintf(stderr, "usage: %s tests/fixtures/knn_golden.json\n", argv[0]);
        return 2;
    }
    text = mj_read_file(argv[1], NULL);
    golden = text ? mj_parse(text) : NULL;
    free(text);
    if (!golden) {
        fprintf(stderr, "cannot read or parse %s\n", argv[1]);
        return 2;
    }
    tol = mj_get(mj_get(golden, "tolerance"), "distance_relative")->number;
    /* The model file sits next to the fixture. */
    slash = strrchr(argv[1], '/');
    dir_len = slash ? (size_t)(slash - argv[1] + 1) : 0;
    model_path = malloc(dir_len + strlen(mj_get(golden, "model_file")->string) + 1);
    memcpy(model_path, argv[1], dir_len);
    strcpy(model_path + dir_len, mj_get(golden, "model_file")->string);

    CHECK(opsel_model_load(model_path, &model) == OPSEL_OK, "load %s", model_path);
    if (model) {
        CHECK(opsel_model_window(model) == 20 && opsel_model_class_count(model) == 6 &&
                  opsel_model_reference_count(model) == 60, "model shape");
        test_predictions(model, golden);
        test_dtw(golden);
        test_round_trips(model, model_path, golden);
        test_bad_input(model, model_path);
    }
    opsel_model_free(model);
    free(model_path);
    mj_free(golden);
    printf("golden: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
