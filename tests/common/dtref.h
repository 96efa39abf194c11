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
extern const char *const dt_name[]; /* "int8" ... "double", "int16", "uint16", "bool" */
extern const char *const op_name[]; /* "sum" ... "avg", "band", "bor", "bxor" */

int dt_is_float(int dt);
int dt_is_signed(int dt);
int op_is_bitwise(int op);
/* Is op defined on dt?  Bitwise ops take integers and bool only; AVG is not for bool. */
int dt_op_defined(int dt, int op);
/* Pairs of int16, uint16 or bool, or with a bitwise op: the multi-process tests run them in a
 * part of their matrix only (their kernels' own test is tests/unit/test_reduce.c). */
int dt_op_narrow(int dt, int op);

uint16_t ref_half(double v);    /* float16 bits; exact for integers |v| <= 2048 */
double ref_half_val(uint16_t h);
uint16_t ref_bf16(double v);    /* bfloat16 bits by truncation; exact for small integers */
double ref_bf16_val(uint16_t b);

/* Element i of buf: floats encoded from v, integers from (int64_t)v truncated to the width. */
void ref_store(void *buf, int dt, size_t i, double v);
/* The low bytes of v as element i (integer types; raw bits). */
void ref_store_bits(void *buf, int dt, size_t i, uint64_t v);
/* Element i as a double (integers by their signed or unsigned value; bool by its raw byte, so
 * that a result that is not 0 or 1 shows). */
double ref_load(const void *buf, int dt, size_t i);

/* Inputs and results of the all-reduce matrices (test_coll_matrix, test_netplug_coll): rank
 * r's element i as a small integer exact in every type (bool: 0, 1 or 2, true but not 1, so
 * the result must still be 0 or 1), salt varying it between calls; the result of op over
 * ranks 0..n-1 with rcoll's semantics (integers wrap, integer AVG truncates); and whether a
 * result read with ref_load is right (float AVG within a relative error). */
int64_t ref_gen(int dt, int op, int r, size_t i, int salt);
double ref_expected(int dt, int op, int n, size_t i, int salt);
int ref_close_enough(int dt, int op, double got, double want);

#endif
