/* Document 003 through the C API: eq 3.1-3.3 on hand-worked records (an
 * alpha report has >= H sampling-corrected bytes; alpha-bytes add up;
 * alpha-time is the union of the alpha-intervals), the tc advice, and the
 * decision cache's file handling, and a capture file the real nfcapd wrote
 * read as nfdump reads it. Usage: test_flows TMPDIR [FLOWS_FIXTURE_DIR].
 * Prints "N passed, M failed". */
#include <opsel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mini_json.h"
#include "check.h"

static const uint64_t S = 1000000000ull;

static opsel_flow_record rec(const char *src, const char *dst, uint64_t sampled, uint64_t first_s,
                             uint64_t last_s, uint16_t sport) {
    opsel_flow_record r = {src, dst, sport, 2811, 6, sampled, sampled / 1500 + 1,
                           first_s * S, last_s * S, 1000};
    return r;
}

static void identifier(void) {
    opsel_alpha_identifier *id = NULL;
    CHECK(opsel_alpha_identifier_new(NULL, &id) == OPSEL_OK, "new");
    opsel_flow_record r[3] = {
        rec("10.1.2.3", "10.9.9.9", 1500000, 0, 60, 40000),   /* 1.5 GB: alpha */
        rec("10.1.2.77", "10.9.9.1", 2000000, 30, 90, 40001), /* same /24 pair, overlapping */
        rec("10.1.2.3", "10.9.9.9", 500000, 100, 200, 40002), /* 0.5 GB: not alpha */
    };
    size_t alpha = 0;
    CHECK(opsel_alpha_identifier_push(id, r, 3, &alpha) == OPSEL_OK && alpha == 2, "alpha %zu",
          alpha);
    char *json = NULL;
    CHECK(opsel_alpha_identifier_take_days_json(id, 1, &json) == OPSEL_OK && json, "days");
    mj_value *days = json ? mj_parse(json) : NULL;
    CHECK(days && days->type == MJ_ARRAY && days->len == 1, "one day");
    if (days && days->len == 1) {
        const mj_value *pfs = mj_get(&days->items[0], "prefix_flows");
        CHECK(pfs && pfs->len == 1, "one prefix flow");
        if (pfs && pfs->len == 1) {
            const mj_value *pf = &pfs->items[0];
            CHECK(mj_get(pf, "alpha_bytes")->number == 3.5e9, "alpha-bytes (eq 3.2)");
            CHECK(mj_get(pf, "alpha_time_ns")->number == 90e9, "alpha-time (eq 3.3)");
            CHECK(strcmp(mj_get(mj_get(pf, "id"), "src")->string, "10.1.2.0/24") == 0, "src /24");
        }
    }
    mj_free(days);
    opsel_string_free(json);
    opsel_flow_record bad = rec("not-an-ip", "10.0.0.1", 1, 0, 1, 1);
    CHECK(opsel_alpha_identifier_push(id, &bad, 1, NULL) == OPSEL_INVALID_INPUT &&
              strstr(opsel_last_error_message(), "records[0].src_addr"),
          "bad address: %s", opsel_last_error_message());
    opsel_flow_record backwards = rec("10.0.0.1", "10.0.0.2", 1, 50, 10, 1);
    CHECK(opsel_alpha_identifier_push(id, &backwards, 1, NULL) == OPSEL_INVALID_INPUT,
          "last before first");
    CHECK(opsel_alpha_identifier_push(id, NULL, 1, NULL) == OPSEL_NULL_POINTER, "NULL records");
    opsel_alpha_identifier_free(id);
    CHECK(opsel_alpha_identifier_new("{\"prefix_len_v4\": 40}", &id) == OPSEL_INVALID_INPUT && !id,
          "bad spec");
}

static void qos(void) {
    char *plan = NULL, *script = NULL;
    CHECK(opsel_qos_plan("10.1.2.0/24 -> 10.9.9.0/24\n192.0.2.0/24 198.51.100.0/24\n", "default",
                         100000000, "eth0", NULL, &plan, &script) == OPSEL_OK,
          "plan: %s", opsel_last_error_message());
    CHECK(plan && strstr(plan, "\"default_class\":\"1:20\""), "default class");
    int u32 = 0;
    for (const char *p = script; p && (p = strstr(p, "u32")); p += 3) u32++;
    CHECK(u32 == 2, "one u32 filter per prefix ID (%d)", u32);
    opsel_string_free(plan);
    opsel_string_free(script);
    CHECK(opsel_qos_plan("", "fast", 0, "eth0", NULL, &plan, NULL) == OPSEL_INVALID_INPUT,
          "unknown preset");
}

static void cache(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/opsel-decision-cache-test.json", dir);
    remove(path);
    opsel_decision_cache *c = NULL;
    CHECK(opsel_decision_cache_load(path, NULL, &c) == OPSEL_OK, "new cache");
    CHECK(opsel_decision_cache_record(c, "10.1.2.3", "B1-C1", "bbr", 0.9, 1000.0) == OPSEL_OK,
          "record");
    char *hit = NULL;
    CHECK(opsel_decision_cache_lookup(c, "10.1.2.200", 4600.0, &hit) == OPSEL_OK && hit &&
              strstr(hit, "\"cca\":\"bbr\""),
          "hit in the same /24");
    opsel_string_free(hit);
    CHECK(opsel_decision_cache_lookup(c, "10.1.2.3", 1000.0 + 30 * 86400.0, &hit) == OPSEL_OK &&
              !hit,
          "aged out at 30 days");
    CHECK(opsel_decision_cache_record(c, "10.1.2.3", "B1-C1", "bbr", 1.5, 0) == OPSEL_INVALID_INPUT,
          "confidence 1.5");
    CHECK(opsel_decision_cache_save(c, path, 2000.0) == OPSEL_OK, "save");
    opsel_decision_cache_free(c);
    size_t n = 0;
    CHECK(opsel_decision_cache_load(path, NULL, &c) == OPSEL_OK &&
              opsel_decision_cache_len(c, &n) == OPSEL_OK && n == 1,
          "reloaded %zu", n);
    opsel_decision_cache_free(c);
    FILE *f = fopen(path, "w");
    fputs("{broken", f);
    fclose(f);
    CHECK(opsel_decision_cache_load(path, NULL, &c) == OPSEL_INVALID_INPUT && !c &&
              strstr(opsel_last_error_message(), "left as it is"),
          "damaged file refused");
    remove(path);
    opsel_decision_cache_free(NULL);
}

/* tests/fixtures/flows: nfcapd.sample (written by nfcapd) and nfdump's own
 * reading of it; every record must agree, in file order. */
static void nfcapd(const char *dir) {
    char path[1024], want_path[1024];
    snprintf(path, sizeof path, "%s/nfcapd.sample", dir);
    snprintf(want_path, sizeof want_path, "%s/nfcapd.sample.nfdump.json", dir);
    char *json = NULL;
    CHECK(opsel_flows_read_nfcapd(path, &json) == OPSEL_OK && json, "read %s: %s", path,
          opsel_last_error_message());
    char *want_text = mj_read_file(want_path, NULL);
    CHECK(want_text != NULL, "read %s", want_path);
    mj_value *got = json ? mj_parse(json) : NULL;
    mj_value *want_doc = want_text ? mj_parse(want_text) : NULL;
    const mj_value *want = want_doc ? mj_get(want_doc, "records") : NULL;
    CHECK(got && want && got->type == MJ_ARRAY && got->len == want->len, "record count");
    if (got && want && got->len == want->len) {
        static const char *str_keys[] = {"src_addr", "dst_addr"};
        static const char *num_keys[] = {"src_port", "dst_port", "proto", "packets", "bytes"};
        int same = 1;
        for (size_t i = 0; i < got->len; i++) {
            for (int k = 0; k < 2; k++)
                same &= strcmp(mj_get(&got->items[i], str_keys[k])->string,
                               mj_get(&want->items[i], str_keys[k])->string) == 0;
            for (int k = 0; k < 5; k++)
                same &= mj_get(&got->items[i], num_keys[k])->number ==
                        mj_get(&want->items[i], num_keys[k])->number;
        }
        CHECK(same, "every record as nfdump reads it");
    }
    mj_free(got);
    mj_free(want_doc);
    free(want_text);
    opsel_string_free(json);
    json = NULL;
    CHECK(opsel_flows_read_nfcapd(want_path, &json) == OPSEL_INVALID_INPUT && !json &&
              strstr(opsel_last_error_message(), "not an nfdump file"),
          "a JSON file is refused");
    CHECK(opsel_flows_read_nfcapd(NULL, &json) != OPSEL_OK && !json, "NULL path refused");
}

int main(int argc, char **argv) {
    identifier();
    qos();
    const char *tmp = getenv("TMPDIR");
    cache(argc > 1 ? argv[1] : tmp && *tmp ? tmp : "/tmp");
    nfcapd(argc > 2 ? argv[2] : "../../tests/fixtures/flows");
    printf("flows: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
