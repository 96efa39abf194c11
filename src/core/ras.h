/*
 * ras.h - who is stuck, asked from outside (RCOLL_RAS=1; docs/reliability.md, "Who is stuck,
 * live").  Each communicator keeps a small record of its operations (how many started and
 * finished, the one running: its number, call, since when, the last progress, which peer it
 * waits on); one thread per process answers "status" on an abstract unix socket
 * @rcoll-ras.<uid>.<pid> with the records as JSON, to callers of the same user (or root) only.
 * tools/rcoll-top finds those sockets and prints one table.  With RCOLL_FLIGHT_DIR set the
 * record (and the last operations) is also kept, served or not, and written to a file on a
 * watchdog report or a timeout (the flight recorder).
 */
#ifndef RCOLL_CORE_RAS_H
#define RCOLL_CORE_RAS_H

#include <stddef.h>
#include <stdint.h>

#include "rcoll.h"

struct rcoll_comm;
struct rcoll_request;
typedef struct rcoll_ras_rec rcoll_ras_rec_t;

/* comm's record (its id, name, rank and size read now), and the process's answering thread
 * started if it is not running; NULL (and a WARN once) when either cannot be made: the
 * communicator works without. */
rcoll_ras_rec_t *rcoll_ras_attach(const struct rcoll_comm *comm);
/* Forget the record (comm is being freed). */
void rcoll_ras_detach(rcoll_ras_rec_t *rec);
/* Operation r of comm started (its signature set), is waiting (its waiting peer and last
 * progress, at most every millisecond), finished with st; the communicator failed (text). */
void rcoll_ras_op_start(rcoll_ras_rec_t *rec, const struct rcoll_comm *comm,
                        const struct rcoll_request *r);
void rcoll_ras_op_wait(rcoll_ras_rec_t *rec, const struct rcoll_comm *comm,
                       const struct rcoll_request *r);
void rcoll_ras_op_done(rcoll_ras_rec_t *rec, rcoll_status_t st);
void rcoll_ras_failed(rcoll_ras_rec_t *rec, rcoll_status_t st, const char *text);

/* The flight recorder (RCOLL_FLIGHT_DIR): write the record and the last operations of the
 * communicator to DIR/rcoll-flight.<id>.<rank>.json (replacing an earlier one), saying why
 * (reason "watchdog" or "timeout", text its sentence); tools/rcoll-flight merges a job's. */
void rcoll_ras_dump(rcoll_ras_rec_t *rec, const char *reason, const char *text);

#endif
