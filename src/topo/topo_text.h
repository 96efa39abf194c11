/*
 * topo_text.h - the text-scanning pieces both topology file readers (topo_json.c, topo_xml.c)
 * use: a block arena freed at once, and a cursor over the file text that counts lines and
 * words its errors "<what> line N: ...", naming what it found ("'x'", "the end of the line").
 */
#ifndef RCOLL_TOPO_TOPO_TEXT_H
#define RCOLL_TOPO_TOPO_TEXT_H

#include <stddef.h>

#include "rcoll.h"

/* Many small allocations, all freed together by topo_arena_fini. */
typedef struct topo_arena_block topo_arena_block_t;
typedef struct {
    topo_arena_block_t *blocks;
} topo_arena_t;

void topo_arena_init(topo_arena_t *a);
/* size bytes, zeroed and 8-byte aligned; NULL when out of memory (nothing recorded). */
void *topo_arena_alloc(topo_arena_t *a, size_t size);
/* Frees every block; the arena is empty again and may be reused. */
void topo_arena_fini(topo_arena_t *a);

/* A cursor over text[0..len): need not be NUL-terminated.  Holds nothing to release. */
typedef struct {
    const char *what;    /* names the source in messages: "topology file x.json" */
    const char *s;
    size_t len, pos;
    int line;            /* of s[pos], from 1 */
    topo_arena_t *arena; /* where the reader puts what it decodes */
    char fbuf[32];       /* topo_text_found's answer */
} topo_text_t;

/* At the start of text, line 1, past a leading UTF-8 BOM. */
void topo_text_init(topo_text_t *p, const char *what, const char *text, size_t len,
                    topo_arena_t *arena);
/* The byte at the cursor (0..255), or -1 at the end. */
int topo_text_peek(const topo_text_t *p);
/* Whether the text at the cursor starts with lit. */
int topo_text_at(const topo_text_t *p, const char *lit);
/* Advance n bytes (no further than the end), counting newlines. */
void topo_text_step(topo_text_t *p, size_t n);
/* Skip blanks, tabs, CRs and newlines (counted). */
void topo_text_skip_ws(topo_text_t *p);
/* What is at the cursor, for "found %s": "'x'", "byte 0x01", "the end of the line" or "the end
 * of the file".  The text lives in p->fbuf until the next call. */
const char *topo_text_found(topo_text_t *p);
/* Error "<what> line <p->line>: <fmt...>" (at most 255 characters of text); returns
 * RCOLL_ERR_INVALID_ARG. */
rcoll_status_t topo_text_err(const topo_text_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records "<what>: out of memory"; returns RCOLL_ERR_NO_MEMORY. */
rcoll_status_t topo_text_nomem(const topo_text_t *p);

#endif
