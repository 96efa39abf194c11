/*
 * bootstrap_wire.h - the bootstrap's wire messages (bootstrap.c) and the pure steps that
 * decode them, apart from its sockets, so that tests/fuzz can feed them any bytes.  Internal
 * to core/; all fields travel in host byte order (one byte order per job).
 */
#ifndef RCOLL_CORE_BOOTSTRAP_WIRE_H
#define RCOLL_CORE_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/bootstrap.h"

#define BS_MAGIC 0x52434f42u /* "RCOB" */
#define BS_VERSION 4 /* 2: the peer record carries the rank's affinity mask (cpus); 3: the
                      * shrink of a communicator of some ranks (its members, BS_LATE); 4: relays
                      * (BS_RELAY, BS_FWD, BS_GONE; later BS_HELLOS, which a relay sends only
                      * to a parent of the same build: the unique id, which carries this
                      * version, is not changed by it) */
#define BS_RETRY_STATUS 1     /* a NACK with this status: evicted under load, connect again */

enum { BS_HELLO = 1, BS_NACK, BS_TABLE, BS_BYE, BS_ABORT, BS_FAIL, BS_SIG, BS_STALL,
       BS_SHRINK, BS_SHRUNK, BS_EXCLUDED, BS_WDOG, BS_WDOG_REPLY, BS_REVOKE, BS_LATE,
       BS_RELAY, BS_FWD, BS_GONE, BS_HELLOS };

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t len;  /* payload bytes */
    uint32_t path; /* the sender's critical-path clock, microseconds (util/cpath.h) */
} bs_hdr_t;

typedef struct {
    char secret[RCOLL_SECRET_BYTES];
    int32_t rank;
    int32_t nranks;
    rcoll_peer_info_t info;
} bs_hello_t;

typedef struct {
    int32_t culprit;
    int32_t status;
    char text[RCOLL_BS_TEXT_MAX];
} bs_note_t; /* NACK, ABORT, FAIL, EXCLUDED, LATE */

/* One member of a shrink's result (BS_SHRUNK), sent as n messages to each survivor. */
typedef struct {
    uint32_t round; /* the root's shrink count: part of the new communicator's id */
    int32_t index;  /* this member's new rank */
    int32_t count;  /* the new size */
    int32_t sub;    /* a communicator of some ranks: the job's size is unchanged */
    rcoll_bs_member_t member;
} bs_shrunk_t;

/* A communicator revoked by one of its ranks (BS_REVOKE: to the root, relayed to every other
 * rank): the communicators with that id fail; the others sharing the bootstrap do not. */
typedef struct {
    uint64_t ctx;
    int32_t rank; /* the revoking rank, in that communicator */
    int32_t pad;
    char text[RCOLL_BS_TEXT_MAX];
} bs_revoke_t;

/* Relays (bootstrap_relay.c): a relay's hello to its parent (the root or another relay). */
typedef struct {
    char secret[RCOLL_SECRET_BYTES];
    int32_t index;  /* the relay's node in the tree, 1..nrelays (the root is node 0) */
    int32_t nranks;
} bs_relay_hello_t;

/* A message carried between the root and a rank through relays (BS_FWD): this, then the
 * message itself (header and payload).  Upward rank is the sender (its hello, its control
 * messages, or BS_GONE with a note when its connection ended: culprit the rank at fault);
 * downward the addressee, or BS_FWD_ALL for every rank of the relays below but except
 * (BS_GONE downward: close that rank's connection). */
#define BS_FWD_ALL (-1)
typedef struct {
    int32_t rank;
    int32_t except;
} bs_fwd_t;

/* The largest frame around one message (BS_FWD): around a hello or a control message. */
#define RCOLL_BS_FWD_MAX                                                                        \
    (sizeof(bs_fwd_t) + sizeof(bs_hdr_t) +                                                      \
     (sizeof(bs_hello_t) > sizeof(bs_payload_t) ? sizeof(bs_hello_t) : sizeof(bs_payload_t)))

/* Hellos going up together (BS_HELLOS, from a relay to its parent): the payload is 1 to
 * BS_HELLOS_MAX of these, each the frame a relay puts around one rank's hello (BS_FWD naming
 * the rank, then the hello as the rank sent it).  The receiver takes the block's path clock
 * once; the stamps inside are not read. */
typedef struct {
    bs_hdr_t outer;
    bs_fwd_t fwd;
    bs_hdr_t inner;
    bs_hello_t hello;
} bs_up_hello_t;
#define BS_HELLOS_MAX 128

/* The largest message a relay sends up: a block of hellos. */
#define RCOLL_BS_FRAME_UP_MAX                                                                   \
    (BS_HELLOS_MAX * sizeof(bs_up_hello_t) > RCOLL_BS_FWD_MAX                                   \
         ? BS_HELLOS_MAX * sizeof(bs_up_hello_t)                                                \
         : RCOLL_BS_FWD_MAX)

/* The largest control message after the hello and the table. */
typedef union {
    bs_note_t note;
    rcoll_bs_sig_t sig;           /* SIG, STALL, WDOG */
    rcoll_bs_shrink_req_t shrink; /* SHRINK */
    bs_shrunk_t shrunk;           /* SHRUNK */
    rcoll_bs_wdog_t wdog;         /* WDOG_REPLY */
    bs_revoke_t revoke;           /* REVOKE */
} bs_payload_t;

/* The buffer a control message (header and at most the largest payload) is read into. */
#define RCOLL_BS_CTL_BYTES (sizeof(bs_hdr_t) + sizeof(bs_payload_t))

/* The rank table on the wire (BS_TABLE): each record as the 8-byte words in which it differs
 * from the record before it (the first record: from zeros), that is a bitmap of those words
 * (BS_REC_MAP bytes, bit i of byte i / 8 for word i), then the words.  The ranks of one host
 * share host name, identity and CPU mask and differ in a few words (pid, listen handles), so
 * a table is several times smaller than its records (816 KB a rank at 1024 ranks raw). */
#define BS_REC_WORDS (sizeof(rcoll_peer_info_t) / 8)
#define BS_REC_MAP ((BS_REC_WORDS + 7) / 8)
/* The most and the fewest bytes n records take. */
size_t rcoll_bs_table_max(int n);
size_t rcoll_bs_table_min(int n);
/* Encode the n records at t into out (rcoll_bs_table_max(n) bytes); returns the bytes used. */
size_t rcoll_bs_table_encode(const rcoll_peer_info_t *t, int n, void *out);
/* Decode len bytes at in into exactly n records at t: 0, or -1 when the bytes are not
 * exactly n records (a word's bit past the record, bytes missing or left over). */
int rcoll_bs_table_decode(const void *in, size_t len, rcoll_peer_info_t *t, int n);

/* Whether h is a header of this version with a payload of at most max_len bytes. */
int rcoll_bs_hdr_valid(const bs_hdr_t *h, uint32_t max_len);

/* Root: the first got bytes a connection sent (header, then hello): -1 not an rcoll
 * bootstrap hello (drop it), 0 fine so far, 1 a complete hello. */
int rcoll_bs_hello_scan(const void *buf, size_t got);

/* What one complete control message means. */
typedef enum {
    RCOLL_BS_EV_NONE,       /* nothing (ignored) */
    RCOLL_BS_EV_SIG,        /* a signature to relay or keep: sig */
    RCOLL_BS_EV_STALL,      /* (to the root) a stalled call: sig */
    RCOLL_BS_EV_BYE,        /* (to the root) the rank leaves */
    RCOLL_BS_EV_NOTE,       /* a failure: note (text terminated) */
    RCOLL_BS_EV_SHRINK,     /* (to the root) a shrink request: shrink (host name terminated) */
    RCOLL_BS_EV_WDOG,       /* (to the root) a watchdog's question: sig */
    RCOLL_BS_EV_SHRUNK,     /* (to a rank) one member of a shrink's result: shrunk */
    RCOLL_BS_EV_EXCLUDED,   /* (to a rank) left out of a shrink, a failure too: note */
    RCOLL_BS_EV_WDOG_REPLY, /* (to a rank) the root's watchdog answer: wdog */
    RCOLL_BS_EV_REVOKE,     /* a communicator revoked (to the root: relay it): revoke */
    RCOLL_BS_EV_LATE        /* (to a rank) its shrink of some ranks was decided without it:
                             * note (not a failure) */
} rcoll_bs_event_kind_t;

typedef struct {
    rcoll_bs_event_kind_t kind;
    rcoll_bs_sig_t sig;
    bs_note_t note;
    rcoll_bs_shrink_req_t shrink;
    bs_shrunk_t shrunk;
    rcoll_bs_wdog_t wdog;
    bs_revoke_t revoke;
} rcoll_bs_event_t;

/* A complete control message in its buffer of RCOLL_BS_CTL_BYTES (whose header passed
 * rcoll_bs_hdr_valid with sizeof(bs_payload_t); bytes past its length are those of earlier
 * messages).  to_root: a rank's message to the root (SIG, STALL, WDOG, BYE, ABORT's note,
 * SHRINK; anything else is NONE); else the root's message to a rank (SIG, SHRUNK, WDOG_REPLY
 * of their exact sizes, EXCLUDED's and LATE's notes; those of another size NONE; anything else a failure
 * note). */
void rcoll_bs_ctl_decode(const void *msg, int to_root, rcoll_bs_event_t *ev);

#endif
