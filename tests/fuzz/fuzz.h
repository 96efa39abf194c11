/*
 * fuzz.h - what the libFuzzer targets of tests/fuzz share: the entry point's prototype and
 * a reader that takes bytes off the front of the input (zero-filled once it runs out), so
 * that every input, however short, is a valid case.
 */
#ifndef RCOLL_TESTS_FUZZ_H
#define RCOLL_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The nonce the targets' listeners expect (gen_corpus.c writes it into the seeds). */
#define FZ_NONCE 0x0123456789abcdefull

typedef struct {
    const uint8_t *p;
    size_t left;
} fz_t;

/* n bytes into out (zeros past the end of the input). */
static inline void fz_take(fz_t *f, void *out, size_t n)
{
    size_t k = n < f->left ? n : f->left;
    memcpy(out, f->p, k);
    memset((char *)out + k, 0, n - k);
    f->p += k;
    f->left -= k;
}

static inline uint8_t fz_u8(fz_t *f)
{
    uint8_t v;
    fz_take(f, &v, 1);
    return v;
}

static inline uint64_t fz_u64(fz_t *f)
{
    uint64_t v;
    fz_take(f, &v, sizeof(v));
    return v;
}

/* A contract the code under test broke: report and abort, so libFuzzer keeps the input. */
#define FZ_ASSERT(cond)                                                                    \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: fuzz contract broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif
