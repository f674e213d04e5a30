/* CHECK(cond, fmt, ...) for the opsel C tests: counts passes and failures and
 * prints each failure with its line and opsel's last error message; a test
 * prints the totals and returns `failed != 0`. Include after <opsel.h>. */
#ifndef OPSEL_CHECK_H
#define OPSEL_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int passed, failed;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (cond) {                                              \
            passed++;                                            \
        } else {                                                 \
            failed++;                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, " [last error: %s]\n", opsel_last_error_message()); \
        }                                                        \
    } while (0)

/* A fresh directory "$TMPDIR/<name>-XXXXXX" (/tmp without TMPDIR) in buf;
 * 0 on success. */
static inline int temp_dir(char *buf, size_t n, const char *name) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = "/tmp";
    if (snprintf(buf, n, "%s/%s-XXXXXX", t, name) >= (int)n) return -1;
    return mkdtemp(buf) ? 0 : -1;
}

#endif
