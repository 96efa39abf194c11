/*
 * status.h - error detail text that travels with an rcoll_status_t.
 * The function that detects an error records one sentence with rcoll_err_set(); callers
 * higher up may prefix context (rcoll_err_prefix()) and the communicator copies the final text
 * into its last-error buffer.  Thread-local, so transports need no communicator to report.
 */
#ifndef RCOLL_UTIL_STATUS_H
#define RCOLL_UTIL_STATUS_H

#include "rcoll.h"

#define RCOLL_ERR_TEXT_MAX 512

/* Record the detail text of the error being returned; returns st for `return rcoll_err_set(...)`
 * style.  Logged at TRACE only: the layer that reports the error to the user logs it once. */
rcoll_status_t rcoll_err_set(rcoll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* As rcoll_err_set, with ": <strerror(errnum)>" appended; st is RCOLL_ERR_SYSTEM usually. */
rcoll_status_t rcoll_err_set_errno(rcoll_status_t st, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepend context ("rank 3: ") to the current detail text. */
void rcoll_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Current detail text of this thread ("" if none). */
const char *rcoll_err_get(void);
void rcoll_err_clear(void);
/* Map an errno from a socket call to a status: peer resets/closes are RCOLL_ERR_REMOTE,
 * ENOMEM is RCOLL_ERR_NO_MEMORY, everything else RCOLL_ERR_SYSTEM. */
rcoll_status_t rcoll_status_from_errno(int errnum);
/* Whether an error's text says this process ran out of file descriptors (EMFILE or ENFILE
 * from a system call here, as rcoll_err_set_errno writes them): a local failure, whichever
 * peer the call was for. */
int rcoll_err_out_of_fds(const char *text);

#endif
