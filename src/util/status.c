/*
 * status.c - status strings and the thread-local error detail that accompanies an error
 * status on its way up to the communicator (rcoll_comm_last_error).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "util/status.h"

static __thread char err_text[RCOLL_ERR_TEXT_MAX];

const char *rcoll_status_string(rcoll_status_t status)
{
    switch (status) {
    case RCOLL_OK: return "success";
    case RCOLL_INPROGRESS: return "operation in progress";
    case RCOLL_ERR_INVALID_ARG: return "invalid argument";
    case RCOLL_ERR_INVALID_USAGE: return "invalid usage";
    case RCOLL_ERR_SYSTEM: return "system error";
    case RCOLL_ERR_NO_MEMORY: return "out of memory";
    case RCOLL_ERR_REMOTE: return "remote peer failure";
    case RCOLL_ERR_PROTOCOL: return "protocol error from peer";
    case RCOLL_ERR_AUTH: return "authentication failure";
    case RCOLL_ERR_TIMEOUT: return "timeout";
    case RCOLL_ERR_UNSUPPORTED: return "unsupported";
    case RCOLL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

/* Formatted into a copy first: the arguments may include rcoll_err_get() itself (an outer
 * error quoting the inner one), which formatting in place would garble. */
static void err_vset(const char *suffix, const char *fmt, va_list ap)
{
    char text[RCOLL_ERR_TEXT_MAX];
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    if (suffix && n >= 0 && (size_t)n < sizeof(text))
        snprintf(text + n, sizeof(text) - (size_t)n, ": %s", suffix);
    memcpy(err_text, text, sizeof(err_text));
}

rcoll_status_t rcoll_err_set(rcoll_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(NULL, fmt, ap);
    va_end(ap);
    RCOLL_LOG(RCOLL_LOG_TRACE, RCOLL_SUBSYS_ALL, "error %d (%s): %s", (int)st,
              rcoll_status_string(st), err_text);
    return st;
}

rcoll_status_t rcoll_err_set_errno(rcoll_status_t st, int errnum, const char *fmt, ...)
{
    char ebuf[128];
    const char *etext = strerror_r(errnum, ebuf, sizeof(ebuf));
    va_list ap;
    va_start(ap, fmt);
    err_vset(etext, fmt, ap);
    va_end(ap);
    RCOLL_LOG(RCOLL_LOG_TRACE, RCOLL_SUBSYS_ALL, "error %d (%s): %s", (int)st,
              rcoll_status_string(st), err_text);
    return st;
}

void rcoll_err_prefix(const char *fmt, ...)
{
    char prefix[RCOLL_ERR_TEXT_MAX / 2];
    char old[RCOLL_ERR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err_text, sizeof(old));
    size_t plen = strlen(prefix);
    memcpy(err_text, prefix, plen);
    size_t rest = sizeof(err_text) - plen - 1;
    size_t olen = strnlen(old, rest);
    memcpy(err_text + plen, old, olen);
    err_text[plen + olen] = '\0';
}

const char *rcoll_err_get(void) { return err_text; }

void rcoll_err_clear(void) { err_text[0] = '\0'; }

rcoll_status_t rcoll_status_from_errno(int errnum)
{
    switch (errnum) {
    case ECONNRESET:
    case EPIPE:
    case ECONNREFUSED:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENOTCONN:
        return RCOLL_ERR_REMOTE;
    case ETIMEDOUT:
        return RCOLL_ERR_TIMEOUT;
    case ENOMEM:
    case ENOBUFS:
        return RCOLL_ERR_NO_MEMORY;
    default:
        return RCOLL_ERR_SYSTEM;
    }
}

int rcoll_err_out_of_fds(const char *text)
{
    char a[128], b[128];
    const char *emfile = strerror_r(EMFILE, a, sizeof(a));
    const char *enfile = strerror_r(ENFILE, b, sizeof(b));
    return text && (strstr(text, emfile) || strstr(text, enfile));
}
