/*
 * ranks.h - sets of ranks written for people: "0-3,7,9-12", cut at a range boundary with
 * " and N more" when the buffer is too small, so a list is never silently short.
 */
#ifndef RCOLL_UTIL_RANKS_H
#define RCOLL_UTIL_RANKS_H

#include <stddef.h>
#include <stdint.h>

/* Append the ranks p < n with in[p] set to buf[o..len) as ranges ("0-3,7"); when they do not
 * all fit, the list stops after a whole range and says " and N more" (N ranks left out).
 * Returns the new length (at most len - 1; buf stays terminated; o >= len writes nothing).
 * Leave at least 24 bytes after o: less may cut even the count. */
size_t rcoll_ranks_format(char *buf, size_t len, size_t o, const uint8_t *in, int n);

/* How many of in[0..n) are set. */
int rcoll_ranks_count(const uint8_t *in, int n);

#endif
