/* FastProb (document 004) through the C API: the probe must reproduce the
 * scikit-learn reference decisions of the shared fixture
 * (tests/fixtures/fastprob/sklearn_small.json) that the Rust core, Python and
 * Node also match; bad samples and a stopped probe get clear statuses.
 * Usage: test_fastprob MODEL.json SKLEARN_FIXTURE.json
 * Prints "N passed, M failed". */
#include <math.h>
#include <opsel.h>
#include <stdio.h>
#include <stdlib.h>

#include "mini_json.h"
#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.json SKLEARN_FIXTURE.json\n", argv[0]);
        return 2;
    }
    opsel_fastprob_model *model = NULL;
    if (opsel_fastprob_model_load(argv[1], &model) != OPSEL_OK) {
        fprintf(stderr, "load: %s\n", opsel_last_error_message());
        return 1;
    }
    uint32_t cap = 0;
    uint64_t interval = 0;
    CHECK(opsel_fastprob_model_spec(model, &cap, &interval) == OPSEL_OK && cap == 15, "cap %u", cap);
    char *text = mj_read_file(argv[2], NULL);
    mj_value *fx = text ? mj_parse(text) : NULL;
    const mj_value *logs = fx ? mj_get(fx, "logs") : NULL;
    CHECK(logs && logs->len >= 20, "fixture logs");
    for (size_t i = 0; logs && i < logs->len; i++) {
        const mj_value *log = &logs->items[i];
        const mj_value *s = mj_get(log, "samples_bps");
        opsel_fastprob_probe *probe = NULL;
        CHECK(opsel_fastprob_probe_new(model, -1.0, &probe) == OPSEL_OK, "probe");
        opsel_fastprob_decision d = {0};
        for (size_t k = 0; k < s->len; k++) {
            CHECK(opsel_fastprob_probe_push(probe, s->items[k].number, &d) == OPSEL_OK, "push");
            if (d.decision != OPSEL_FASTPROB_CONTINUE) break;
        }
        int forced = (int)mj_get(log, "forced")->number;
        CHECK(d.decision == (forced ? OPSEL_FASTPROB_FORCED_STOP : OPSEL_FASTPROB_STOP),
              "log %zu: decision %u", i, d.decision);
        CHECK(d.samples == (uint32_t)mj_get(log, "stop_n")->number, "log %zu: stop at %u", i,
              d.samples);
        CHECK(close_to(d.throughput_bps, mj_get(log, "prediction_bps")->number),
              "log %zu: %.17g vs %.17g", i, d.throughput_bps,
              mj_get(log, "prediction_bps")->number);
        CHECK(d.probe_ns == (uint64_t)d.samples * interval, "probe_ns");
        /* A stopped probe refuses more samples until reset. */
        CHECK(opsel_fastprob_probe_push(probe, 1e9, &d) == OPSEL_INVALID_INPUT, "after stop");
        CHECK(opsel_fastprob_probe_reset(probe) == OPSEL_OK, "reset");
        opsel_fastprob_probe_free(probe);
    }
    /* Bad input, and a probe that outlives its model handle. */
    opsel_fastprob_probe *probe = NULL;
    CHECK(opsel_fastprob_probe_new(model, 1.5, &probe) == OPSEL_INVALID_INPUT && !probe,
          "threshold 1.5");
    CHECK(opsel_fastprob_probe_new(model, 0.5, &probe) == OPSEL_OK, "threshold 0.5");
    opsel_fastprob_model_free(model);
    opsel_fastprob_decision d;
    CHECK(opsel_fastprob_probe_push(probe, NAN, &d) == OPSEL_INVALID_INPUT, "NaN");
    CHECK(opsel_fastprob_probe_push(probe, 9e8, NULL) == OPSEL_NULL_POINTER, "NULL out");
    CHECK(opsel_fastprob_probe_push(probe, 9e8, &d) == OPSEL_OK && d.samples == 1,
          "model freed first: the probe still works (%u samples)", d.samples);
    opsel_fastprob_probe_free(probe);
    CHECK(opsel_fastprob_model_load("/nonexistent/model.json", &model) == OPSEL_IO && !model,
          "missing file");
    opsel_fastprob_model_free(NULL);
    opsel_fastprob_probe_free(NULL);
    mj_free(fx);
    free(text);
    printf("fastprob: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
