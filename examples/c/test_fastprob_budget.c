/* FastProb error budgets through the C API (opsel_fastprob_probe_new_budget):
 * on a version-4 model with per-family budgets (lan 8 %, wan 4 %, shared 6 %)
 * a family's budget must decide exactly as the same budget given as E %, a
 * larger budget must never stop later and must stop earlier on some logs of
 * the fixture, and bad budgets get clear statuses. A model without
 * family_budgets refuses a family and says so.
 * Usage: test_fastprob_budget MODEL_V4_WITH_FAMILIES.json FIXTURE.json PLAIN_MODEL.json
 * Prints "N passed, M failed". */
#include <opsel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mini_json.h"
#include "check.h"

/* Samples until the stop (0 if the log ended first) under budget_json. */
static uint32_t stop_len(const opsel_fastprob_model *m, const char *budget_json,
                         const mj_value *s) {
    opsel_fastprob_probe *p = NULL;
    if (opsel_fastprob_probe_new_budget(m, -1.0, budget_json, &p) != OPSEL_OK) return 0;
    opsel_fastprob_decision d = {0};
    uint32_t n = 0;
    for (size_t k = 0; k < s->len; k++) {
        if (opsel_fastprob_probe_push(p, s->items[k].number, &d) != OPSEL_OK) break;
        if (d.decision != OPSEL_FASTPROB_CONTINUE) {
            n = d.samples;
            break;
        }
    }
    opsel_fastprob_probe_free(p);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_V4.json FIXTURE.json PLAIN_MODEL.json\n", argv[0]);
        return 2;
    }
    opsel_fastprob_model *model = NULL;
    if (opsel_fastprob_model_load(argv[1], &model) != OPSEL_OK) {
        fprintf(stderr, "load: %s\n", opsel_last_error_message());
        return 1;
    }
    char *budgets = NULL;
    CHECK(opsel_fastprob_model_family_budgets(model, &budgets) == OPSEL_OK && budgets &&
              strcmp(budgets, "{\"lan\":8.0,\"shared\":6.0,\"wan\":4.0}") == 0,
          "family budgets %s", budgets ? budgets : "(null)");
    opsel_string_free(budgets);
    char *text = mj_read_file(argv[2], NULL);
    mj_value *fx = text ? mj_parse(text) : NULL;
    const mj_value *logs = fx ? mj_get(fx, "logs") : NULL;
    CHECK(logs && logs->len >= 20, "fixture logs");
    int earlier = 0;
    for (size_t i = 0; logs && i < logs->len; i++) {
        const mj_value *s = mj_get(&logs->items[i], "samples_bps");
        uint32_t lan = stop_len(model, "{\"family\": \"lan\"}", s);
        uint32_t wan = stop_len(model, "{\"family\": \"wan\"}", s);
        uint32_t dflt = stop_len(model, NULL, s);
        CHECK(lan > 0 && wan > 0 && dflt > 0, "log %zu: every probe stops", i);
        CHECK(lan == stop_len(model, "{\"stop_error_pct\": 8}", s), "log %zu: lan = E 8 %%", i);
        CHECK(wan == stop_len(model, "{\"stop_error_pct\": 4}", s), "log %zu: wan = E 4 %%", i);
        CHECK(dflt == stop_len(model, "{}", s), "log %zu: {} is the default", i);
        CHECK(lan <= dflt && dflt <= wan, "log %zu: 8 %% stops no later than 5 %%, 5 %% than 4 %% (%u %u %u)",
              i, lan, dflt, wan);
        earlier += lan < wan;
    }
    CHECK(earlier > 0, "lan's budget stops earlier than wan's on some log (%d)", earlier);
    opsel_fastprob_probe *p = NULL;
    CHECK(opsel_fastprob_probe_new_budget(model, -1.0, "{\"family\": \"dsl\"}", &p) ==
                  OPSEL_INVALID_INPUT &&
              !p && strstr(opsel_last_error_message(), "\"lan\""),
          "unknown family lists the known ones");
    CHECK(opsel_fastprob_probe_new_budget(model, -1.0, "{\"family\": \"lan\", \"stop_error_pct\": 5}",
                                          &p) == OPSEL_INVALID_INPUT && !p,
          "family and E %% both");
    CHECK(opsel_fastprob_probe_new_budget(model, -1.0, "{\"stop_error_pct\": 0}", &p) ==
                  OPSEL_INVALID_INPUT && !p,
          "E 0 %%");
    CHECK(opsel_fastprob_probe_new_budget(model, -1.0, "{\"famly\": \"lan\"}", &p) ==
                  OPSEL_INVALID_INPUT && !p,
          "unknown key");
    CHECK(opsel_fastprob_probe_new_budget(NULL, -1.0, NULL, &p) == OPSEL_NULL_POINTER, "NULL model");
    opsel_fastprob_model_free(model);
    /* A file without family_budgets says so. */
    opsel_fastprob_model *plain = NULL;
    CHECK(opsel_fastprob_model_load(argv[3], &plain) == OPSEL_OK, "plain model");
    CHECK(opsel_fastprob_probe_new_budget(plain, -1.0, "{\"family\": \"lan\"}", &p) != OPSEL_OK && !p &&
              strstr(opsel_last_error_message(), "no family_budgets"),
          "no family_budgets");
    char *none = NULL;
    CHECK(opsel_fastprob_model_family_budgets(plain, &none) == OPSEL_OK && none && strcmp(none, "{}") == 0,
          "no budgets: {}");
    opsel_string_free(none);
    opsel_fastprob_model_free(plain);
    mj_free(fx);
    free(text);
    printf("fastprob budgets: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
