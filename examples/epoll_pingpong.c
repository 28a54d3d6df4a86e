/* epoll_pingpong: request/response the way event-driven servers do it
 * (non-blocking sockets, epoll_wait, read until EAGAIN), which zcbench's
 * blocking ping-pong does not show.  make bench runs it with and without
 * the library, side by side, and prints the ratios.
 *
 * A client and a server process (pinned to CPUs 0 and 1) over TCP loopback
 * (TCP_NODELAY) or an AF_UNIX stream socket bounce SIZE bytes N times.
 *
 * usage: epoll_pingpong tcp|unix [size [round_trips]]   (default 1, 3000)
 * prints: "<tport> <size> <mean round trip in us>" */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

static int ep_send_all(int fd, const char *p, int n)
{
    for (int off = 0; off < n;) {
        ssize_t k = send(fd, p + off, (size_t)(n - off), MSG_NOSIGNAL);

        if (k > 0)
            off += (int)k;
        else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        else
            return -1;
    }
    return 0;
}

/* Bounce n messages of size bytes; the client sends first.  0 or -1. */
static int ep_loop(int fd, int n, int client, int size)
{
    static char buf[1 << 16];
    struct epoll_event e = { EPOLLIN, { .fd = fd } }, out;
    int ep = epoll_create1(EPOLL_CLOEXEC);

    if (ep < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e))
        return -1;
    for (int i = 0; i < n; i++) {
        if (client && ep_send_all(fd, buf, size))
            return -1;
        for (int got = 0; got < size;) {
            ssize_t k;

            int w = epoll_wait(ep, &out, 1, 10000);

            if (w < 0 && errno == EINTR)
                continue;
            if (w != 1) {
                fprintf(stderr, "epoll_pingpong: %s: epoll_wait gave %d (%s) at round trip %d\n",
                        client ? "client" : "server", w, w ? strerror(errno) : "timeout", i);
                return -1;
            }
            while ((k = recv(fd, buf, sizeof(buf), 0)) > 0)
                got += (int)k;
            if ((k == 0 && got < size) || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                fprintf(stderr, "epoll_pingpong: %s: recv gave %zd (%s) at round trip %d\n",
                        client ? "client" : "server", k, k ? strerror(errno) : "EOF", i);
                return -1;
            }
        }
        if (!client && ep_send_all(fd, buf, size))
            return -1;
    }
    close(ep);
    return 0;
}

static int ep_connect_pair(int unix_, int *srv, int *cli_pid, int n, int size)
{
    union {
        struct sockaddr_in in;
        struct sockaddr_un un;
    } a;
    socklen_t len;
    int ls, one = 1;
    pid_t pid;

    memset(&a, 0, sizeof(a));
    if (unix_) {
        a.un.sun_family = AF_UNIX;
        snprintf(a.un.sun_path, sizeof(a.un.sun_path), "/tmp/epoll_pingpong.%d", (int)getpid());
        unlink(a.un.sun_path);
        len = sizeof(a.un);
    } else {
        a.in.sin_family = AF_INET;
        a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(a.in);
    }
    ls = socket(unix_ ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, len) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &len))
        return -1;
    pid = fork();
    if (pid == 0) {
        int c = socket(unix_ ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        probe_pin(1);
        if (!unix_)
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (c < 0 || connect(c, (struct sockaddr *)&a, len))
            _exit(1);
        _exit(ep_loop(c, n, 0, size) ? 1 : 0);
    }
    *srv = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (unix_)
        unlink(a.un.sun_path);
    close(ls);
    if (*srv < 0)
        return -1;
    if (!unix_)
        setsockopt(*srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *cli_pid = (int)pid;
    return 0;
}

int main(int argc, char **argv)
{
    int unix_ = argc > 1 && !strcmp(argv[1], "unix");
    int size = argc > 2 ? atoi(argv[2]) : 1, n = argc > 3 ? atoi(argv[3]) : 3000;
    int fd, pid, st = 0, rc;
    double t0, us;

    if (argc < 2 || (!unix_ && strcmp(argv[1], "tcp")) || size < 1 || size > (1 << 16) || n < 1) {
        fprintf(stderr, "usage: epoll_pingpong tcp|unix [size 1..65536 [round_trips]]\n");
        return 2;
    }
    if (ep_connect_pair(unix_, &fd, &pid, n, size)) {
        perror("epoll_pingpong: setup");
        return 1;
    }
    probe_pin(0);
    /* The accepted side plays the client role (sends first). */
    t0 = probe_now();
    rc = ep_loop(fd, n, 1, size);
    us = (probe_now() - t0) / n * 1e6;
    waitpid(pid, &st, 0);
    if (rc || st) {
        fprintf(stderr, "epoll_pingpong: the exchange failed\n");
        return 1;
    }
    printf("%s %d %.2f\n", unix_ ? "unix" : "tcp", size, us);
    return 0;
}
