/*
 * perf_data.h - inputs, expected results and result checking for the perf harness.
 *
 * Everything here is a pure function of (datatype, op, rank, nranks, element index): a perf
 * binary fills its send buffer with perf_fill_input() and describes what its receive buffer
 * must hold with perf_fill_input() (data that was moved) or perf_fill_reduced() (data that
 * was reduced), computed here and never through the library under test.
 */
#ifndef RCOLL_PERF_DATA_H
#define RCOLL_PERF_DATA_H

#include <stddef.h>

#include "rcoll.h"

/* The orders in which "-d all" and "-o all" run (nccl-tests' orders). */
extern const rcoll_datatype_t perf_all_dtypes[RCOLL_NUM_DATATYPES];
extern const rcoll_op_t perf_all_ops[RCOLL_NUM_OPS];

/* Size in bytes of one element; 0 for an invalid datatype. */
size_t perf_dtype_size(rcoll_datatype_t dt);

/* Address of element k of buf in datatype dt (for block offsets in fill/expect callbacks). */
static inline void *perf_elem(void *buf, size_t k, rcoll_datatype_t dt)
{
    return (char *)buf + k * perf_dtype_size(dt);
}

/* Names as nccl-tests prints them ("float", "half", "sum", ...; rcoll's own: "int16",
 * "uint16", "bool", "band", "bor", "bxor"); "?" when out of range. */
const char *perf_dtype_name(rcoll_datatype_t dt);
const char *perf_op_name(rcoll_op_t op);

/* 1 when rcoll reduces dt with op: the bitwise ops take integer and bool types only, and AVG
 * is not defined on bool.  Stated here, independently of the library. */
int perf_op_defined(rcoll_datatype_t dt, rcoll_op_t op);

/* ---- Inputs whose reductions are exact in any order ----------------------------------------
 * value(r, i) is a pure function of (datatype, op, rank r, element index i):
 *  - integer types: a hash of (r, i) over the full range (sum/prod wrap exactly mod 2^bits);
 *  - bool: 0, 1 or another non-zero byte (true), from the same hash;
 *  - float types, op PROD: +-1 or +-2, at most ceil(nranks/8) factors of 2 per element (fits
 *    float16 up to 120 ranks);
 *  - other float ops: small integers in [-A, A] with A chosen so every partial sum of nranks
 *    values is exactly representable (A <= 256/nranks for bfloat16, 2048/nranks for float16).
 * nranks is needed for A and the prod period; it must be the communicator size. */

/* buf[k] = value(rank, first + k) for k < count, in datatype dt. */
void perf_fill_input(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int rank,
                     int nranks, size_t first);

/* buf[k] = op over r < nranks of value(r, first + k), computed exactly with rcoll's semantics
 * (integer wrap; integer AVG = wrapped sum / nranks truncating; float AVG = exact sum divided
 * by nranks in the element type, half/bfloat16 through float32; bool 0 or 1). */
void perf_fill_reduced(void *buf, size_t count, rcoll_datatype_t dt, rcoll_op_t op, int nranks,
                       size_t first);

/* Number of elements of got[] that differ from expected[]: integers bitwise, floats by value
 * (+0 == -0), float AVG within 2 units in the last place of the element type. */
size_t perf_count_wrong(const void *got, const void *expected, size_t count,
                        rcoll_datatype_t dt, rcoll_op_t op);

#endif /* RCOLL_PERF_DATA_H */
