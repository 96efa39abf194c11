/*
 * topo_text.c - the text-scanning pieces both topology file readers use: the block arena and
 * the line-counting cursor with its "found ..." and "<what> line N: ..." errors.  Knows no
 * syntax: what a token is, and every message but out-of-memory, stays with the readers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_int.h"
#include "topo/topo_text.h"
#include "util/status.h"

#define TOPO_ARENA_BLOCK 16384

struct topo_arena_block {
    struct topo_arena_block *next;
    size_t used, size;
    char data[]; /* flexible */
};

void topo_arena_init(topo_arena_t *a) { a->blocks = NULL; }

void *topo_arena_alloc(topo_arena_t *a, size_t size)
{
    size = (size + 7) & ~(size_t)7;
    topo_arena_block_t *b = a->blocks;
    if (!b || b->size - b->used < size) {
        size_t bsize = size > TOPO_ARENA_BLOCK ? size : TOPO_ARENA_BLOCK;
        b = malloc(sizeof(*b) + bsize);
        if (!b) return NULL;
        b->size = bsize;
        b->used = 0;
        b->next = a->blocks;
        a->blocks = b;
    }
    void *r = b->data + b->used;
    b->used += size;
    memset(r, 0, size);
    return r;
}

void topo_arena_fini(topo_arena_t *a)
{
    while (a->blocks) {
        topo_arena_block_t *n = a->blocks->next;
        free(a->blocks);
        a->blocks = n;
    }
}

void topo_text_init(topo_text_t *p, const char *what, const char *text, size_t len,
                    topo_arena_t *arena)
{
    *p = (topo_text_t){.what = what, .s = text, .len = len, .pos = 0, .line = 1, .arena = arena};
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) p->pos = 3;
}

int topo_text_peek(const topo_text_t *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

int topo_text_at(const topo_text_t *p, const char *lit)
{
    size_t n = strlen(lit);
    return p->len - p->pos >= n && !memcmp(p->s + p->pos, lit, n);
}

void topo_text_step(topo_text_t *p, size_t n)
{
    for (size_t i = 0; i < n && p->pos < p->len; i++)
        if (p->s[p->pos++] == '\n') p->line++;
}

void topo_text_skip_ws(topo_text_t *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == '\n') p->line++;
        else if (c != ' ' && c != '\t' && c != '\r') return;
        p->pos++;
    }
}

const char *topo_text_found(topo_text_t *p)
{
    if (p->pos >= p->len) return "the end of the file";
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '\n') return "the end of the line";
    if (c >= 0x20 && c < 0x7f) snprintf(p->fbuf, sizeof(p->fbuf), "'%c'", c);
    else snprintf(p->fbuf, sizeof(p->fbuf), "byte 0x%02x", c);
    return p->fbuf;
}

rcoll_status_t topo_text_err(const topo_text_t *p, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return topo_err(p->what, p->line, "%s", text);
}

rcoll_status_t topo_text_nomem(const topo_text_t *p)
{
    return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "%s: out of memory", p->what);
}
