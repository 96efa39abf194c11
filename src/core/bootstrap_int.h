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
    /* 1 + the rank hosting the relay root leads to (rcoll_bs_make_relay_id); 0: the root. */
    int32_t via_host;
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

/* Whole messages of any type, read into a buffer that grows to the largest: the bytes from
 * off to got are not yet handed over; msg is the whole message handed over last. */
typedef struct {
    size_t off, got, cap;
    char *buf;
    char *msg;
} bs_frx_t;

/* Read what has arrived (up to BS_FRAME_READ_BYTES at once, more for a larger message) into
 * f, messages of at most max_len payload bytes.  RCOLL_OK with *complete = 1 while a whole
 * message is at f->msg (without reading when one is there already; the caller handles it,
 * then calls rcoll_bs_frame_consume, and reads again until *complete is 0),
 * RCOLL_ERR_PROTOCOL for a malformed header or a frame (BS_FWD) whose inner message is
 * malformed, or the connection's error (RCOLL_ERR_REMOTE when it closed), met only once
 * the whole messages before it were handed over. */
#define BS_FRAME_READ_BYTES 65536
rcoll_status_t rcoll_bs_frame_read(int fd, bs_frx_t *f, uint32_t max_len, int *complete);
/* Drop the whole message at f->msg, keeping what followed it (in place: the buffer's rest
 * moves only when a message is cut at its end, before the next read). */
void rcoll_bs_frame_consume(bs_frx_t *f);
void rcoll_bs_frame_free(bs_frx_t *f);

/* Send message (type, payload, len) in a frame for rank (BS_FWD: BS_FWD_ALL with except). */
rcoll_status_t rcoll_bs_send_fwd(int fd, int rank, int except, int type, const void *payload,
                                 uint32_t len, uint64_t deadline_ns);

/* Before passing on a whole message (header at msg) as it came: stamp its header, and the
 * inner header of a frame, with this thread's critical-path clock (util/cpath.h). */
void rcoll_bs_restamp(void *msg);

/* Fill the note n (NACK, ABORT, FAIL, EXCLUDED, LATE): culprit, status st, and text (cut to
 * fit). */
void rcoll_bs_note_fill(bs_note_t *n, int culprit, rcoll_status_t st, const char *text);

/* Whether the secrets a and b (RCOLL_SECRET_BYTES each) are equal: 1 or 0.  Constant-time
 * comparison, so response timing does not leak the secret. */
int rcoll_bs_secret_equal(const char *a, const char *b);

/* The addresses a rank tries for the root of id b, the first first, into out (room for
 * RCOLL_BS_ROOT_ADDRS); returns how many. */
int rcoll_bs_id_addrs(const bs_id_t *b, rcoll_sockaddr_t *out);

/* A relay's state (bootstrap_relay.c), run by a root's thread (rcoll_bs_relay_start). */
typedef struct bs_relay bs_relay_t;
/* Listen on addr for node's block and children (*out: the relay); listen_fd >= 0: a socket
 * listening there already, which the relay takes over (closed on failure too). */
rcoll_status_t rcoll_bs_relay_new(const rcoll_config_t *cfg, const rcoll_bs_tree_t *t, int node,
                                  const rcoll_sockaddr_t *addr, int listen_fd,
                                  const rcoll_sockaddr_t *parent,
                                  const char secret[RCOLL_SECRET_BYTES], bs_relay_t **out);
/* The relay's thread: returns once its parent has closed (or it never reached it). */
void rcoll_bs_relay_run(bs_relay_t *r);
void rcoll_bs_relay_free(bs_relay_t *r); /* NULL: nothing */

#endif
