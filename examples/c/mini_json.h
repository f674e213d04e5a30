/*
 * A minimal JSON reader for the opsel C tests: just enough to read the shared
 * golden fixture (tests/fixtures/knn_golden.json) without a dependency.
 * Numbers are parsed with strtod, which rounds correctly, so doubles written
 * by the Rust generator come back bit for bit.
 */
#ifndef OPSEL_MINI_JSON_H
#define OPSEL_MINI_JSON_H

#include <stddef.h>

typedef enum { MJ_NULL, MJ_BOOL, MJ_NUMBER, MJ_STRING, MJ_ARRAY, MJ_OBJECT } mj_type;

typedef struct mj_value mj_value;
struct mj_value {
    mj_type type;
    double number;   /* MJ_NUMBER, MJ_BOOL (0/1) */
    char *string;    /* MJ_STRING (NUL-terminated, unescaped) */
    size_t len;      /* items in an array or object */
    mj_value *items; /* MJ_ARRAY / MJ_OBJECT values */
    char **keys;     /* MJ_OBJECT keys */
};

/* Parse `text`; returns NULL on a syntax error. Free with mj_free. */
mj_value *mj_parse(const char *text);
void mj_free(mj_value *v);
/* Member of an object, or NULL. */
const mj_value *mj_get(const mj_value *obj, const char *key);
/* Read a whole file into a NUL-terminated buffer (free with free()), or NULL. */
char *mj_read_file(const char *path, size_t *out_len);

#endif
