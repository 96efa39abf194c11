/*
 * topo_json.c - strict JSON text -> tree of json_value_t, every value tagged with its line.
 * Recursive descent with a depth limit, all memory from one arena freed at once, and an
 * error that names the line and what was expected and found.  No schema knowledge here
 * (topo_file.c gives the values their meaning).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "topo/topo_json.h"
#include "topo/topo_text.h"
#include "util/status.h"

#define JSON_MAX_DEPTH 64

struct json_doc {
    topo_arena_t arena;
    json_value_t *root;
};

void json_doc_free(json_doc_t *doc)
{
    if (!doc) return;
    topo_arena_fini(&doc->arena);
    free(doc);
}

const json_value_t *json_doc_root(const json_doc_t *doc) { return doc ? doc->root : NULL; }

const char *json_type_name(json_type_t type)
{
    switch (type) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "?";
}

const json_value_t *json_get(const json_value_t *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (const json_value_t *m = v->child; m; m = m->next)
        if (!strcmp(m->key, key)) return m;
    return NULL;
}

static json_value_t *new_value(topo_text_t *p, json_type_t type)
{
    json_value_t *v = topo_arena_alloc(p->arena, sizeof(*v));
    if (!v) return NULL;
    v->type = type;
    v->line = p->line;
    return v;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* At the opening quote.  Decoded text into *out (arena). */
static rcoll_status_t parse_string(topo_text_t *p, const char **out)
{
    int start_line = p->line;
    size_t start = ++p->pos, end = start;
    /* Find the closing quote first, so the decoded text (never longer) fits one allocation. */
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\n') {
            p->pos = end;
            return topo_text_err(p, "string not closed before the end of the line (opened on "
                                    "line %d)",
                                 start_line);
        }
        end += p->s[end] == '\\' ? 2 : 1;
    }
    if (end >= p->len) {
        p->pos = p->len;
        return topo_text_err(p, "string not closed before the end of the file (opened on line "
                                "%d)",
                             start_line);
    }
    char *o = topo_arena_alloc(p->arena, end - start + 1);
    if (!o) return topo_text_nomem(p);
    size_t n = 0;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20)
            return topo_text_err(p, "control character %s inside a string (escape it)",
                                 topo_text_found(p));
        if (c != '\\') {
            o[n++] = (char)c;
            p->pos++;
            continue;
        }
        char e = p->s[p->pos + 1];
        p->pos += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (p->pos + 4 > end || hex4(p->s + p->pos, &cp))
                return topo_text_err(p, "\\u must be followed by 4 hex digits");
            p->pos += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->pos + 6 > end || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                    hex4(p->s + p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return topo_text_err(p, "\\ud800-\\udbff (high surrogate) must be followed "
                                         "by a low surrogate");
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return topo_text_err(p, "\\udc00-\\udfff (low surrogate) without a high one");
            }
            if (cp == 0) return topo_text_err(p, "\\u0000 is not allowed in a string");
            n += put_utf8(o + n, cp);
            break;
        }
        default: {
            p->pos -= 1;
            return topo_text_err(p, "invalid escape: backslash followed by %s",
                                 topo_text_found(p));
        }
        }
    }
    o[n] = '\0';
    p->pos = end + 1;
    *out = o;
    return RCOLL_OK;
}

static rcoll_status_t parse_number(topo_text_t *p, json_value_t *v)
{
    size_t i = p->pos;
    int integral = 1;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') goto bad;
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9')
            return topo_text_err(p, "invalid number: leading zeros are not allowed");
    } else {
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && p->s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') goto bad;
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') goto bad;
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    char buf[64];
    size_t n = i - p->pos;
    if (n >= sizeof(buf)) return topo_text_err(p, "number too long");
    memcpy(buf, p->s + p->pos, n);
    buf[n] = '\0';
    errno = 0;
    v->number = strtod(buf, NULL);
    if (errno == ERANGE && (v->number > 1 || v->number < -1))
        return topo_text_err(p, "number %s is out of range", buf);
    v->integral = integral;
    p->pos = i;
    return RCOLL_OK;
bad:
    p->pos = i;
    return topo_text_err(p, "invalid number: found %s", topo_text_found(p));
}

static rcoll_status_t parse_value(topo_text_t *p, int depth, json_value_t **out);

static rcoll_status_t parse_container(topo_text_t *p, int depth, json_value_t *v)
{
    int is_obj = v->type == JSON_OBJECT;
    char close = is_obj ? '}' : ']';
    json_value_t **tail = &v->child;
    p->pos++; /* the opening bracket */
    topo_text_skip_ws(p);
    if (topo_text_peek(p) == close) {
        p->pos++;
        return RCOLL_OK;
    }
    for (;;) {
        const char *key = NULL;
        if (is_obj) {
            if (topo_text_peek(p) != '"')
                return topo_text_err(p, v->count ? "expected a member name in double quotes "
                                                   "after ',', found %s"
                                                 : "expected a member name in double quotes "
                                                   "or '}', found %s",
                                     topo_text_found(p));
            int kline = p->line;
            rcoll_status_t st = parse_string(p, &key);
            if (st) return st;
            for (const json_value_t *m = v->child; m; m = m->next) {
                if (!strcmp(m->key, key)) {
                    char msg[200];
                    snprintf(msg, sizeof(msg), "duplicate key \"%.80s\" (first on line %d)",
                             key, m->line);
                    return topo_err(p->what, kline, "%s", msg);
                }
            }
            topo_text_skip_ws(p);
            if (topo_text_peek(p) != ':')
                return topo_text_err(p, "expected ':' after a member name, found %s",
                                     topo_text_found(p));
            p->pos++;
            topo_text_skip_ws(p);
        } else if (topo_text_peek(p) == ']' && v->count) {
            return topo_text_err(p, "trailing ',' before ']'");
        }
        if (is_obj && topo_text_peek(p) == '}')
            return topo_text_err(p, "expected a value after ':', found %s", topo_text_found(p));
        json_value_t *c;
        rcoll_status_t st = parse_value(p, depth + 1, &c);
        if (st) return st;
        c->key = key;
        *tail = c;
        tail = &c->next;
        v->count++;
        topo_text_skip_ws(p);
        int ch = topo_text_peek(p);
        if (ch == close) {
            p->pos++;
            return RCOLL_OK;
        }
        if (ch != ',')
            return topo_text_err(p, is_obj ? "expected ',' or '}', found %s"
                                           : "expected ',' or ']', found %s",
                                 topo_text_found(p));
        p->pos++;
        topo_text_skip_ws(p);
        if (is_obj && topo_text_peek(p) == '}')
            return topo_text_err(p, "trailing ',' before '}'");
    }
}

static rcoll_status_t parse_literal(topo_text_t *p, json_value_t *v)
{
    static const struct {
        const char *text;
        json_type_t type;
        int b;
    } lits[] = {{"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        if (topo_text_at(p, lits[i].text)) {
            size_t e = p->pos + strlen(lits[i].text);
            if (e < p->len && ((p->s[e] >= 'a' && p->s[e] <= 'z') || (p->s[e] >= 'A' &&
                                                                       p->s[e] <= 'Z')))
                break;
            v->type = lits[i].type;
            v->boolean = lits[i].b;
            p->pos = e;
            return RCOLL_OK;
        }
    }
    return topo_text_err(p, "expected a value (true, false, null, a number, a string, [ or {), "
                            "found %s",
                         topo_text_found(p));
}

static rcoll_status_t parse_value(topo_text_t *p, int depth, json_value_t **out)
{
    if (depth > JSON_MAX_DEPTH)
        return topo_text_err(p, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    topo_text_skip_ws(p);
    int c = topo_text_peek(p);
    if (c < 0) return topo_text_err(p, "expected a value, found %s", topo_text_found(p));
    json_value_t *v = new_value(p, JSON_NULL);
    if (!v) return topo_text_nomem(p);
    rcoll_status_t st;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JSON_OBJECT : JSON_ARRAY;
        st = parse_container(p, depth, v);
    } else if (c == '"') {
        v->type = JSON_STRING;
        st = parse_string(p, &v->str);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        v->type = JSON_NUMBER;
        st = parse_number(p, v);
    } else {
        st = parse_literal(p, v);
    }
    if (st) return st;
    *out = v;
    return RCOLL_OK;
}

rcoll_status_t json_parse(const char *what, const char *text, size_t len, json_doc_t **out)
{
    json_doc_t *doc = calloc(1, sizeof(*doc));
    if (!doc) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "%s: out of memory", what);
    topo_arena_init(&doc->arena);
    topo_text_t p;
    topo_text_init(&p, what, text, len, &doc->arena);
    topo_text_skip_ws(&p);
    rcoll_status_t st;
    if (p.pos >= p.len) {
        st = topo_err(what, p.line, "the file is empty, expected a JSON object");
        goto err;
    }
    st = parse_value(&p, 0, &doc->root);
    if (st) goto err;
    topo_text_skip_ws(&p);
    if (p.pos < p.len) {
        st = topo_text_err(&p, "unexpected %s after the end of the top-level value",
                           topo_text_found(&p));
        goto err;
    }
    *out = doc;
    return RCOLL_OK;
err:
    json_doc_free(doc);
    return st;
}
