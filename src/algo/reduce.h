/*
 * reduce.h - element-wise CPU reductions (dst = a OP b) for every rcoll datatype and op, and
 * the float16 / bfloat16 conversions they rely on.
 *
 * The kernels are vectorized (AVX-512, AVX2+F16C, portable fallback); the instruction set is
 * chosen once, at the first call, from what the CPU supports.  Callers validate dt and op;
 * the functions here do nothing on a bad datatype or op and never allocate, log or block.
 */
#ifndef RCOLL_ALGO_REDUCE_H
#define RCOLL_ALGO_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

/* Bytes per element of dt; 0 for a value that is no rcoll datatype.  The one size table of
 * the library (rcoll_datatype_size, the public form, returns this). */
size_t rcoll_dt_size(rcoll_datatype_t dt);

/* "int8" ... "float64", "int16", "uint16", "bool" / "sum" ... "avg", "band", "bor", "bxor";
 * "?" for a value out of range.  The library's one name table (messages, signatures). */
const char *rcoll_dt_name(rcoll_datatype_t dt);
const char *rcoll_op_name(rcoll_op_t op);

/* 1 when op is defined on dt: every op on the integer types; BAND/BOR/BXOR not on the
 * floating types; AVG not on BOOL.  0 as well for values out of range.  Callers check this
 * before reducing; the kernels of an undefined pair write nothing. */
int rcoll_reduce_defined(rcoll_datatype_t dt, rcoll_op_t op);

/* dst[i] = a[i] OP b[i] for i < count.  dst may alias a or b exactly (also a == b == dst), but
 * must not partially overlap either.  a == b is fine.
 *   Integers: SUM and PROD wrap modulo 2^bits; MIN and MAX compare signed or unsigned as the
 *   type says; BAND, BOR, BXOR are bitwise.
 *   BOOL: a byte is true when non-zero; SUM, MAX, BOR are or, PROD, MIN, BAND and, BXOR
 *   exclusive or; every result is 0 or 1.
 *   FLOAT16 / BFLOAT16: each element is widened to float32, the op is applied in float32 and
 *   the result is rounded back to the element type (round to nearest even).
 *   MIN / MAX on floating types use plain comparisons, MIN = (a < b ? a : b) and
 *   MAX = (a > b ? a : b): when either operand is NaN the result is b, and min(-0, +0) is b.
 *   NaN payloads are not specified (they may be quieted).
 *   RCOLL_AVG: computes the SUM, rounded to the element type; then, if avg_divisor > 1,
 *   divides each result by avg_divisor in the element's own type (integers truncate toward
 *   zero as C division does; FLOAT16/BFLOAT16 divide in float32 and round back).  So
 *   AVG with divisor d gives bit-for-bit what SUM followed by rcoll_reduce_avg_finish(d)
 *   gives.  avg_divisor is ignored for the other ops.
 * Floating-point results assume the default environment (round to nearest even, no
 * flush-to-zero), as the rest of the process's float arithmetic does.
 * count == 0 does nothing (pointers may then be NULL). */
void rcoll_reduce_local(void *dst, const void *a, const void *b, size_t count,
                        rcoll_datatype_t dt, rcoll_op_t op, int avg_divisor);

/* buf[i] /= divisor in the element's type, with the rounding rules of RCOLL_AVG above.  Used
 * when a rank's value is final without a reduction (one rank, tree algorithms).  A divisor
 * <= 1 leaves buf unchanged. */
void rcoll_reduce_avg_finish(void *buf, size_t count, rcoll_datatype_t dt, int divisor);

/* What a reduction over one rank makes of its input buf, in place: BOOL elements become 0 or
 * 1; every other type is unchanged (for every op: AVG over one rank divides by 1). */
void rcoll_reduce_single(void *buf, size_t count, rcoll_datatype_t dt);

/* IEEE 754 binary16 and bfloat16 <-> float32.  Widening is exact.  Narrowing rounds to nearest
 * even, overflows to infinity, produces subnormals where due, and keeps NaN a NaN (quieted,
 * with the top payload bits kept). */
float rcoll_half_to_float(uint16_t h);
uint16_t rcoll_float_to_half(float f);
float rcoll_bf16_to_float(uint16_t h);
uint16_t rcoll_float_to_bf16(float f);

/* Instruction-set variants of the kernels.  Every variant gives bit-identical results except
 * for NaN payloads. */
typedef enum {
    RCOLL_REDUCE_ISA_GENERIC = 0, /* portable C, whatever the base target vectorizes */
    RCOLL_REDUCE_ISA_AVX2 = 1,    /* x86-64 AVX2 + F16C */
    RCOLL_REDUCE_ISA_AVX512 = 2,  /* x86-64 AVX-512 F/BW/VL/DQ + F16C */
    RCOLL_REDUCE_ISA_COUNT = 3
} rcoll_reduce_isa_t;

/* The best variant this CPU (and this build) supports. */
rcoll_reduce_isa_t rcoll_reduce_isa_best(void);

/* The variant in use (the best one unless rcoll_reduce_isa_set changed it). */
rcoll_reduce_isa_t rcoll_reduce_isa_get(void);

/* Use another variant, process-wide; meant for tests, benchmarks and a configuration knob.
 * Safe while other threads reduce (each call uses one variant throughout).
 * Errors: RCOLL_ERR_INVALID_ARG (unknown isa), RCOLL_ERR_UNSUPPORTED (the CPU or the build
 * lacks it; the variant in use is unchanged). */
rcoll_status_t rcoll_reduce_isa_set(rcoll_reduce_isa_t isa);

/* "generic", "avx2", "avx512"; "unknown" for other values.  Never NULL. */
const char *rcoll_reduce_isa_name(rcoll_reduce_isa_t isa);

#endif /* RCOLL_ALGO_REDUCE_H */
