/*
 * fuzz_shm.c - what a shared-memory transport peer hands over: the hello on the Unix
 * socket, and the header of the segment it passes (mapped by the receiver, and still
 * writable by the sender).  A header that passes sets the slot ring's geometry, which the
 * data path indexes with a mask: it must fit the segment.
 * Input: a selector byte, then the case's bytes.
 */
#include "fuzz.h"

#include "transport/shm.h"

static void hello_case(fz_t *f)
{
    size_t n = fz_u8(f) % (sizeof(rcoll_shm_hello_t) + 8);
    rcoll_shm_hello_t *h = malloc(sizeof(*h));
    fz_take(f, h, sizeof(*h));
    const char *bad = rcoll_shm_hello_check(h, n, FZ_NONCE);
    if (!bad) FZ_ASSERT(n == sizeof(*h) && h->nonce == FZ_NONCE);
    free(h);
}

static void seg_case(fz_t *f)
{
    uint64_t seg_bytes = fz_u64(f);
    rcoll_shm_seg_t *hdr = malloc(sizeof(*hdr));
    fz_take(f, hdr, sizeof(*hdr));
    uint32_t nslots = 0, slot_bytes = 0;
    const char *bad = rcoll_shm_seg_check(hdr, seg_bytes, &nslots, &slot_bytes);
    if (!bad) {
        FZ_ASSERT(nslots && (nslots & (nslots - 1)) == 0 && slot_bytes >= 64);
        uint64_t stride = sizeof(rcoll_shm_slot_t) + slot_bytes;
        uint64_t end = RCOLL_SHM_SLOTS_OFFSET + (uint64_t)nslots * stride;
        FZ_ASSERT(end <= seg_bytes); /* the last slot lies inside the mapping */
    }
    free(hdr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = {data, size};
    if (fz_u8(&f) % 2)
        seg_case(&f);
    else
        hello_case(&f);
    return 0;
}
