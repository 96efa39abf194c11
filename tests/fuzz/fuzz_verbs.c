/*
 * fuzz_verbs.c - the verbs transport's connection record (rcoll_vrb_meta_check): the 200
 * bytes each side of a verbs connection reads from the other over TCP.  A record that passes
 * is used as the connection's remote side: its device name is printed in messages, its QP
 * numbers indexed by QP count.  Input: the record (zero-filled when short), then the QP
 * count the connector asks for.
 */
#include "fuzz.h"

#include "transport/verbs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = {data, size};
    /* Exactly the record's size on the heap, so a read past it is caught. */
    rcoll_vrb_meta_t *m = malloc(sizeof(*m));
    fz_take(&f, m, sizeof(*m));
    int want = fz_u8(&f) % (RCOLL_VRB_MAX_QPS + 2);
    const char *bad = rcoll_vrb_meta_check(m, FZ_NONCE, want);
    if (!bad) {
        FZ_ASSERT(m->nqps >= 1 && m->nqps <= RCOLL_VRB_MAX_QPS);
        FZ_ASSERT(!want || (int)m->nqps == want);
        char line[256];
        uint32_t qsum = 0;
        for (uint32_t q = 0; q < m->nqps; q++) qsum += m->qpn[q];
        /* What rcoll_vrb_comm_connect_qps and the data path's messages print. */
        snprintf(line, sizeof(line), "%s GID[%u] QPN 0x%x MTU %d (%u)", m->dev, m->gid_index,
                 m->qpn[0], 128 << m->mtu, qsum);
    } else {
        FZ_ASSERT(strlen(bad) > 0);
    }
    free(m);
    return 0;
}
