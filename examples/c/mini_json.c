/* Minimal JSON reader; see mini_json.h. */
#include "mini_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    int ok;
} parser;

static void skip_ws(parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t') ps->p++;
}

static void free_inner(mj_value *v) {
    size_t i;
    if (v->type == MJ_STRING) free(v->string);
    if (v->type == MJ_ARRAY || v->type == MJ_OBJECT) {
        for (i = 0; i < v->len; i++) {
            free_inner(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
}

static char *parse_string(parser *ps) {
    size_t cap = 16, n = 0;
    char *out;
    if (*ps->p != '"') { ps->ok = 0; return NULL; }
    ps->p++;
    out = malloc(cap);
    if (!out) { ps->ok = 0; return NULL; }
    while (*ps->p && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            char e = *ps->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* the fixture is ASCII; keep \uXXXX as '?' */
                if (strlen(ps->p) < 4) { ps->ok = 0; free(out); return NULL; }
                ps->p += 4; c = '?'; break;
            case '"': case '\\': case '/': c = e; break;
            default: ps->ok = 0; free(out); return NULL;
            }
        }
        if (n + 1 >= cap) {
            char *bigger = realloc(out, cap *= 2);
            if (!bigger) { free(out); ps->ok = 0; return NULL; }
            out = bigger;
        }
        out[n++] = c;
    }
    if (*ps->p != '"') { ps->ok = 0; free(out); return NULL; }
    ps->p++;
    out[n] = '\0';
    return out;
}

static void parse_value(parser *ps, mj_value *v);

static void push(parser *ps, mj_value *v, size_t *cap) {
    if (v->len == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        mj_value *items = realloc(v->items, ncap * sizeof *items);
        if (!items) { ps->ok = 0; return; }
        v->items = items;
        if (v->type == MJ_OBJECT) {
            char **keys = realloc(v->keys, ncap * sizeof *keys);
            if (!keys) { ps->ok = 0; return; }
            v->keys = keys;
        }
        *cap = ncap;
    }
    memset(&v->items[v->len], 0, sizeof v->items[0]);
}

static void parse_container(parser *ps, mj_value *v, char close) {
    size_t cap = 0;
    ps->p++;
    skip_ws(ps);
    if (*ps->p == close) { ps->p++; return; }
    for (;;) {
        char *key = NULL;
        skip_ws(ps);
        if (v->type == MJ_OBJECT) {
            key = parse_string(ps);
            if (!ps->ok) return;
            skip_ws(ps);
            if (*ps->p != ':') { free(key); ps->ok = 0; return; }
            ps->p++;
        }
        push(ps, v, &cap);
        if (!ps->ok) { free(key); return; }
        if (v->type == MJ_OBJECT) v->keys[v->len] = key;
        parse_value(ps, &v->items[v->len]);
        v->len++;
        if (!ps->ok) return;
        skip_ws(ps);
        if (*ps->p == ',') { ps->p++; continue; }
        if (*ps->p == close) { ps->p++; return; }
        ps->ok = 0;
        return;
    }
}

static void parse_value(parser *ps, mj_value *v) {
    skip_ws(ps);
    memset(v, 0, sizeof *v);
    switch (*ps->p) {
    case '{': v->type = MJ_OBJECT; parse_container(ps, v, '}'); return;
    case '[': v->type = MJ_ARRAY; parse_container(ps, v, ']'); return;
    case '"': v->type = MJ_STRING; v->string = parse_string(ps); return;
    case 't': if (!strncmp(ps->p, "true", 4)) { v->type = MJ_BOOL; v->number = 1; ps->p += 4; return; } break;
    case 'f': if (!strncmp(ps->p, "false", 5)) { v->type = MJ_BOOL; ps->p += 5; return; } break;
    case 'n': if (!strncmp(ps->p, "null", 4)) { v->type = MJ_NULL; ps->p += 4; return; } break;
    default: {
        char *end;
        v->number = strtod(ps->p, &end);
        if (end != ps->p) { v->type = MJ_NUMBER; ps->p = end; return; }
    }
    }
    ps->ok = 0;
}

mj_value *mj_parse(const char *text) {
    parser ps = {text, 1};
    mj_value *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    parse_value(&ps, v);
    skip_ws(&ps);
    if (!ps.ok || *ps.p) { mj_free(v); return NULL; }
    return v;
}

void mj_free(mj_value *v) {
    if (!v) return;
    free_inner(v);
    free(v);
}

const mj_value *mj_get(const mj_value *obj, const char *key) {
    size_t i;
    if (!obj || obj->type != MJ_OBJECT) return NULL;
    for (i = 0; i < obj->len; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

char *mj_read_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) { fclose(f); return NULL; }
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (out_len) *out_len = (size_t)n;
    return buf;
}
