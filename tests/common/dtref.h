/*
 * dtref.h - the collective tests' own view of rcoll's datatypes, independent of the
 * library's conversion and reduction code: sizes and names, a float16/bfloat16 encoding
 * (exact for the small integers the tests use), and typed element access through double.
 */
#ifndef RCOLL_TESTS_DTREF_H
#define RCOLL_TESTS_DTREF_H

#include <stddef.h>
#include <stdint.h>

extern const size_t dt_size[];      /* bytes per element, by rcoll_datatype_t */
extern const char *const dt_name[]; /* "int8" ... "double" */
extern const char *const op_name[]; /* "sum" ... "avg" */

int dt_is_float(int dt);
int dt_is_signed(int dt);

uint16_t ref_half(double v);    /* float16 bits; exact for integers |v| <= 2048 */
double ref_half_val(uint16_t h);
uint16_t ref_bf16(double v);    /* bfloat16 bits by truncation; exact for small integers */
double ref_bf16_val(uint16_t b);

/* Element i of buf: floats encoded from v, integers from (int64_t)v truncated to the width. */
void ref_store(void *buf, int dt, size_t i, double v);
/* The low bytes of v as element i (integer types; raw bits). */
void ref_store_bits(void *buf, int dt, size_t i, uint64_t v);
/* Element i as a double (integers by their signed or unsigned value). */
double ref_load(const void *buf, int dt, size_t i);

#endif
