/*
 * bootstrap_int.h - what the bootstrap's root (bootstrap_root.c) and its ranks (bootstrap.c)
 * share, from bootstrap_msg.c: the unique id's layout, a control message read bit by bit,
 * and the helpers that send and read messages.  Only those three files include this.
 */
#ifndef RCOLL_CORE_BOOTSTRAP_INT_H
#define RCOLL_CORE_BOOTSTRAP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/bootstrap.h"
#include "core/bootstrap_wire.h"
#include "util/net.h"
#include "util/status.h"

/* What a unique id holds (rcoll_bs_make_id): where the root listens, and the job secret. */
typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t pad;
    rcoll_sockaddr_t root;
    char secret[RCOLL_SECRET_BYTES];
    /* The root's other IPv4 addresses (0 in ids of older versions: none), tried in turn when
     * root does not answer: address (network order) then port (network order). */
    uint8_t nalt;
    uint8_t pad2;
    uint8_t alt[RCOLL_BS_ROOT_ADDRS - 1][6];
} bs_id_t;

_Static_assert(sizeof(bs_id_t) <= RCOLL_UNIQUE_ID_BYTES, "unique id too small");

/* A control message (header and at most a note) read bit by bit from a non-blocking socket. */
typedef struct {
    size_t got;
    union {
        struct {
            bs_hdr_t hdr;
            bs_payload_t payload; /* decoded by rcoll_bs_ctl_decode */
        } m;
        char raw[RCOLL_BS_CTL_BYTES];
    } buf;
} bs_rx_t;

/* Send a message of type with len bytes of payload (none: NULL, 0) on fd, by deadline_ns.
 * Returns RCOLL_OK, or the connection's error (RCOLL_ERR_REMOTE when it closed). */
rcoll_status_t rcoll_bs_send_msg(int fd, int type, const void *payload, uint32_t len,
                                 uint64_t deadline_ns);

/* Read what has arrived of a control message.  RCOLL_OK with *complete = 1 once the whole
 * message is in rx (the caller then resets rx->got), RCOLL_ERR_PROTOCOL for a malformed
 * header, or the connection's error (RCOLL_ERR_REMOTE when it closed). */
rcoll_status_t rcoll_bs_rx_read(int fd, bs_rx_t *rx, int *complete);

/* Fill the note n (NACK, ABORT, FAIL, EXCLUDED, LATE): culprit, status st, and text (cut to
 * fit). */
void rcoll_bs_note_fill(bs_note_t *n, int culprit, rcoll_status_t st, const char *text);

/* Whether the secrets a and b (RCOLL_SECRET_BYTES each) are equal: 1 or 0.  Constant-time
 * comparison, so response timing does not leak the secret. */
int rcoll_bs_secret_equal(const char *a, const char *b);

/* The addresses a rank tries for the root of id b, the first first, into out (room for
 * RCOLL_BS_ROOT_ADDRS); returns how many. */
int rcoll_bs_id_addrs(const bs_id_t *b, rcoll_sockaddr_t *out);

#endif
