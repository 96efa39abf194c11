/*
 * topo_json.h - a small strict JSON parser (RFC 8259) for topology files: the whole text
 * becomes a tree of values that remember their line, so the schema code can name the line
 * of any mistake.  Errors read "<what> line N: expected ',' or '}', found '\"'".
 */
#ifndef RCOLL_TOPO_JSON_H
#define RCOLL_TOPO_JSON_H

#include <stddef.h>

#include "rcoll.h"

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type_t;

typedef struct json_value {
    json_type_t type;
    int line;                  /* line of the value's first character */
    int boolean;               /* JSON_BOOL */
    double number;             /* JSON_NUMBER */
    int integral;              /* JSON_NUMBER written without fraction or exponent */
    const char *str;           /* JSON_STRING: decoded UTF-8, NUL-terminated, no NUL inside */
    const char *key;           /* member name when the parent is an object, else NULL */
    struct json_value *child;  /* JSON_ARRAY / JSON_OBJECT: first element or member */
    struct json_value *next;   /* next sibling */
    int count;                 /* number of children */
} json_value_t;

typedef struct json_doc json_doc_t;

/* Parse text[0..len) (need not be NUL-terminated; a leading UTF-8 BOM is skipped).  On error
 * returns RCOLL_ERR_INVALID_ARG with "<what> line N: ..." recorded; RCOLL_ERR_NO_MEMORY. */
rcoll_status_t json_parse(const char *what, const char *text, size_t len, json_doc_t **out);
const json_value_t *json_doc_root(const json_doc_t *doc);
void json_doc_free(json_doc_t *doc);

/* Member `key` of an object (NULL when absent or v is not an object). */
const json_value_t *json_get(const json_value_t *v, const char *key);
/* "null", "boolean", "number", "string", "array", "object". */
const char *json_type_name(json_type_t type);

#endif
