/*
 * test_net.c - util/net.c's connection checks: a TCP socket connected to itself (what a
 * connect to a local port nobody listens on can become, when the kernel picks that very port
 * as the source) is recognised and refused by rcoll_net_connect_check, so the bootstrap's
 * connect loop retries instead of holding the port its root is about to bind; a real
 * connection passes.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "util/net.h"
#include "util/status.h"

int main(void)
{
    /* A self-connection, made on purpose: bind a port, then connect to it. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0,
          "a bound loopback socket");
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect to its own port");
    CHECK(rcoll_net_self_connected(fd) == 1, "recognised as connected to itself");
    rcoll_status_t st = rcoll_net_connect_check(fd);
    CHECK(st == RCOLL_ERR_REMOTE && strstr(rcoll_err_get(), "connected to itself"),
          "connect_check refuses it: %s '%s'", rcoll_status_string(st), rcoll_err_get());
    close(fd);
    /* A real connection to a listener passes. */
    rcoll_sockaddr_t la;
    memset(&la, 0, sizeof(la));
    la.sin.sin_family = AF_INET;
    la.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int lfd = -1, cfd = -1;
    CHECK(rcoll_net_listen(&la, 4, 0, &lfd) == RCOLL_OK, "listen: %s", rcoll_err_get());
    CHECK(rcoll_net_connect_start(&la, &cfd) == RCOLL_OK, "connect: %s", rcoll_err_get());
    for (int i = 0; i < 1000 && (st = rcoll_net_connect_check(cfd)) == RCOLL_INPROGRESS; i++)
        usleep(1000);
    CHECK(st == RCOLL_OK && !rcoll_net_self_connected(cfd), "a real connection passes: %s",
          rcoll_status_string(st));
    close(cfd);
    close(lfd);
    return check_summary();
}
