/*
 * fuzz_handle.c - connect handles: the 128 bytes that a listener publishes and a connector
 * reads, through the rank table of the bootstrap or through NCCL (the net plugin passes
 * ncclNet's connect handle straight to the transport's connect).  Each transport checks the
 * bytes before it uses them; a handle that passes must be safe to use: its address printed,
 * its names terminated, its counts in range.
 * Input: a selector byte (tcp, shm, verbs), then the handle.
 */
#include "fuzz.h"

#include "rcoll_build.h"
#include "transport/shm.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "util/net.h"
#if RCOLL_HAVE_VERBS
#include "transport/verbs.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = {data, size};
    int which = fz_u8(&f) % 3;
    /* The handle on the heap, exactly its size: reads past it are caught. */
    uint8_t *handle = malloc(RCOLL_TRANSPORT_HANDLE_BYTES);
    fz_take(&f, handle, RCOLL_TRANSPORT_HANDLE_BYTES);
    char abuf[64];
    if (which == 0) {
        rcoll_tcp_handle_t h;
        memcpy(&h, handle, sizeof(h));
        if (!rcoll_tcp_handle_check(&h)) {
            FZ_ASSERT(h.nsocks >= 1 && h.nsocks <= RCOLL_TCP_MAX_NSOCKS);
            rcoll_net_addr_str(&h.addr, abuf, sizeof(abuf));
            (void)rcoll_net_addr_len(&h.addr);
        }
    } else if (which == 1) {
        rcoll_shm_handle_t h;
        memcpy(&h, handle, sizeof(h));
        if (!rcoll_shm_handle_check(&h)) {
            FZ_ASSERT(memchr(h.name, '\0', sizeof(h.name)) && h.name[0]);
            h.host[sizeof(h.host) - 1] = '\0'; /* as shm_connect does before printing it */
            snprintf(abuf, sizeof(abuf), "%s %s", h.name, h.host);
        }
    } else {
#if RCOLL_HAVE_VERBS
        rcoll_vrb_handle_t h;
        memcpy(&h, handle, sizeof(h));
        if (!rcoll_vrb_handle_check(&h)) rcoll_net_addr_str(&h.addr, abuf, sizeof(abuf));
#endif
    }
    free(handle);
    return 0;
}
