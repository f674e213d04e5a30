/* DPS agent and fairness manager through the C API: the core's own doc
 * scenario (core/src/dps/mod.rs), so C must reach the same decisions as Rust,
 * Python and Node; bad specs and NULLs get clear statuses; two managed agents
 * are unlocked one at a time, round robin. Prints "N passed, M failed". */
#include <opsel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static const uint64_t S = 1000000000ull;
static const char *SPEC =
    "{\"ccas\": [\"cubic\", \"bbr\"],"
    " \"metrics\": [{\"metric\": \"rtt_ms\", \"range\": [0, 300, 0, 350], \"priority\": 0.4},"
    "  {\"metric\": \"throughput_mbps\", \"range\": [9.5, null, 8, null], \"priority\": 0.6}],"
    " \"selection_period_ms\": 6000, \"random_period_ms\": 3000, \"seed\": 1}";

/* Drain an agent: set *cca from set_cca outputs, hand reports to the manager. */
static void drain(opsel_dps_agent *a, char cca[16], opsel_fair_manager *m, uint64_t flow,
                  int *decided) {
    for (;;) {
        char *json = NULL;
        if (opsel_dps_agent_poll(a, &json) != OPSEL_OK || json == NULL) return;
        if (strstr(json, "\"kind\":\"set_cca\"")) {
            const char *p = strstr(json, "\"cca\":\"") + 7;
            size_t n = strcspn(p, "\"");
            memcpy(cca, p, n < 15 ? n : 15);
            cca[n < 15 ? n : 15] = 0;
        }
        if (strstr(json, "\"kind\":\"decided\"") && decided) (*decided)++;
        if (m && strstr(json, "\"kind\":\"report\""))
            CHECK(opsel_fair_manager_handle_report(m, flow, json) == OPSEL_OK, "report: %s",
                  opsel_last_error_message());
        opsel_string_free(json);
    }
}

static void learns_like_the_core(void) {
    opsel_dps_agent *a = NULL;
    CHECK(opsel_dps_agent_new(SPEC, false, &a) == OPSEL_OK, "new: %s", opsel_last_error_message());
    CHECK(opsel_dps_agent_start(a, 0) == OPSEL_OK, "start");
    char cca[16] = "";
    int decided = 0;
    for (uint64_t t = 1; t <= 120; t++) {
        drain(a, cca, NULL, 0, &decided);
        double tput = strcmp(cca, "bbr") == 0 ? 9.8 : 8.5;
        CHECK(opsel_dps_agent_feedback(a, t * S, 60.0, tput) == OPSEL_OK, "feedback");
    }
    char cur[16];
    bool has = false;
    CHECK(opsel_dps_agent_current(a, &cur, &has) == OPSEL_OK && has && strcmp(cur, "bbr") == 0,
          "current should be bbr, got %s", has ? cur : "(none)");
    char *stats = NULL;
    CHECK(opsel_dps_agent_stats_json(a, &stats) == OPSEL_OK && stats &&
              strstr(stats, "\"learning_cycles\":2"),
          "stats: %s", stats ? stats : "NULL");
    opsel_string_free(stats);
    CHECK(decided > 0, "decided events");
    uint64_t next = 0;
    CHECK(opsel_dps_agent_poll_timeout(a, &next, &has) == OPSEL_OK && has && next > 0, "timeout");
    opsel_dps_agent_free(a);
}

static void bad_input(void) {
    opsel_dps_agent *a = (opsel_dps_agent *)1;
    CHECK(opsel_dps_agent_new(
              "{\"ccas\":[\"cubic\"],\"metrics\":[{\"metric\":\"rtt_ms\",\"range\":[400,300,0,450]}]}",
              false, &a) == OPSEL_INVALID_INPUT && a == NULL,
          "A > B must be refused");
    CHECK(strstr(opsel_last_error_message(), "400") != NULL, "message names A: %s",
          opsel_last_error_message());
    CHECK(opsel_dps_agent_new("{\"ccas\":[\"cubic\"],\"metrics\":[{\"metric\":\"rtt_ms\","
                              "\"range\":[0,300,0,450]}],\"exploration\":{\"p_learning\":1.5,"
                              "\"p_learnt\":0.2}}",
                              false, &a) == OPSEL_INVALID_INPUT,
          "p > 1 must be refused");
    CHECK(opsel_dps_agent_new("not json", false, &a) == OPSEL_INVALID_INPUT, "not JSON");
    CHECK(opsel_dps_agent_new(NULL, false, &a) == OPSEL_NULL_POINTER, "NULL spec");
    CHECK(opsel_dps_agent_start(NULL, 0) == OPSEL_NULL_POINTER, "NULL agent");
    opsel_dps_agent *ok = NULL;
    opsel_dps_agent_new(SPEC, false, &ok);
    opsel_dps_agent_start(ok, 0);
    CHECK(opsel_dps_agent_feedback(ok, S, 0.0 / 0.0, 1.0) == OPSEL_INVALID_INPUT, "NaN RTT");
    CHECK(opsel_dps_agent_handle_command(ok, S, "{\"cmd\":\"explode\"}") == OPSEL_INVALID_INPUT,
          "unknown command");
    opsel_dps_agent_free(ok);
    opsel_fair_manager *m = NULL;
    CHECK(opsel_fair_manager_new("{\"f_thresh\":0}", &m) == OPSEL_INVALID_INPUT && m == NULL,
          "f_thresh 0");
    opsel_dps_agent_free(NULL);
    opsel_fair_manager_free(NULL);
}

static void manager_round_robin(void) {
    opsel_fair_manager *m = NULL;
    CHECK(opsel_fair_manager_new(NULL, &m) == OPSEL_OK, "manager");
    opsel_dps_agent *agents[2] = {NULL, NULL};
    char cca[2][16] = {"", ""};
    for (int i = 0; i < 2; i++) {
        CHECK(opsel_dps_agent_new(SPEC, true, &agents[i]) == OPSEL_OK, "managed agent");
        CHECK(opsel_fair_manager_register(m, (uint64_t)i + 1) == OPSEL_OK, "register");
        opsel_dps_agent_start(agents[i], 0);
    }
    bool seen[2] = {false, false};
    for (uint64_t t = 1; t < 200; t++) {
        for (;;) {
            uint64_t flow = 0;
            char *cmd = NULL;
            CHECK(opsel_fair_manager_poll(m, &flow, &cmd) == OPSEL_OK, "poll");
            if (cmd == NULL) break;
            if (strstr(cmd, "unlock")) seen[flow - 1] = true;
            CHECK(opsel_dps_agent_handle_command(agents[flow - 1], t * S, cmd) == OPSEL_OK,
                  "command %s: %s", cmd, opsel_last_error_message());
            opsel_string_free(cmd);
        }
        for (int i = 0; i < 2; i++) {
            drain(agents[i], cca[i], m, (uint64_t)i + 1, NULL);
            opsel_dps_agent_feedback(agents[i], t * S, 60.0, strcmp(cca[i], "bbr") == 0 ? 9.8 : 8.5);
            if (cca[i][0]) opsel_fair_manager_report_rate(m, (uint64_t)i + 1, 5.0);
        }
        double jain = 0;
        bool has = false;
        CHECK(opsel_fair_manager_evaluate(m, &jain, &has) == OPSEL_OK, "evaluate");
        if (has) CHECK(jain > 0.999, "equal rates give Jain 1, got %f", jain);
    }
    CHECK(seen[0] && seen[1], "both flows unlocked in turn");
    for (int i = 0; i < 2; i++) opsel_dps_agent_free(agents[i]);
    opsel_fair_manager_free(m);
}

int main(void) {
    learns_like_the_core();
    bad_input();
    manager_round_robin();
    printf("dps: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
