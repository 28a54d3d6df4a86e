/* ready_chk: readiness and I/O calls the hooks must see although the program
 * does not call poll/epoll_wait/readv/writev by those names (DESIGN.md §3.10):
 *   - poll/ppoll built with _FORTIFY_SOURCE and a set of known size but a
 *     non-constant count become __poll_chk/__ppoll_chk, which call glibc's
 *     internal poll;
 *   - epoll_pwait2 (a timespec timeout);
 *   - preadv2/pwritev2 at offset -1, which read and write a socket like
 *     readv/writev (checked against ordinary calls on the other end).
 * One process connected to itself over TCP loopback (so, under the library,
 * both ends pair); after one byte each way both directions use the ring.
 * Each wait must report the byte the peer wrote (POLLIN, and for epoll the
 * application's own data word), and the byte must then read back.
 *
 * Build with -O2 -D_FORTIFY_SOURCE=2.  usage: ready_chk [N]: N (1 to 4,
 * default 1) entries of the poll set are passed, all but the first unused.
 * exit 0: pass; 1: a check failed (message on stderr), including "not
 * paired" when preloaded (the checks would prove nothing). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../lib/zc_test.h"

static int fail(const char *what)
{
    fprintf(stderr, "FAIL: %s\n", what);
    exit(1);
}

static uint64_t stat_get(const char *name)
{
    int (*get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v = 0;

    if (!get || get(name, &v))
        return UINT64_MAX;
    return v;
}

static void one_byte(int from, int to, char b)
{
    char got = 0;

    if (send(from, &b, 1, 0) != 1)
        fail("send");
    if (recv(to, &got, 1, 0) != 1 || got != b)
        fail("recv");
}

int main(int argc, char **argv)
{
    struct sockaddr_in a;
    struct pollfd set[4];
    /* a count the compiler cannot bound: the fortified poll calls __poll_chk */
    nfds_t n = (nfds_t)strtoul(argc > 1 ? argv[1] : "1", NULL, 10);
    struct timespec ts = { 2, 0 };
    struct epoll_event ev = { EPOLLIN, { .u64 = 0x5eed5eed5eedull } }, out[2];
    int l, c, s, ep, r;
    char b;

    alarm(30);
    l = zt_listen_lo(1, &a);
    if (l < 0)
        fail("listen");
    if (zt_accept_pair(l, &a, &c, &s))
        fail("connect");
    one_byte(s, c, 'h');        /* the server's first data call offers */
    one_byte(c, s, 'a');        /* both directions now on the ring */
    one_byte(s, c, 'b');
    if (getenv("LD_PRELOAD") && stat_get("local.paired.accepted") != 1)
        fail("not paired although preloaded");

    /* __poll_chk: nothing to read yet, then the peer's byte */
    for (r = 0; r < 4; r++)
        set[r] = (struct pollfd){ -1, 0, 0 };
    set[0] = (struct pollfd){ s, POLLIN, 0 };
    if (poll(set, n, 0) != 0)
        fail("poll (__poll_chk) reported an event on an empty connection");
    if (send(c, "1", 1, 0) != 1)
        fail("send 1");
    set[0] = (struct pollfd){ s, POLLIN, 0 };
    r = poll(set, n, 2000);
    if (r != 1 || !(set[0].revents & POLLIN))
        fail("poll (__poll_chk) did not report the byte the peer wrote");
    if (recv(s, &b, 1, 0) != 1 || b != '1')
        fail("recv after poll");

    /* __ppoll_chk */
    if (send(c, "2", 1, 0) != 1)
        fail("send 2");
    set[0] = (struct pollfd){ s, POLLIN, 0 };
    r = ppoll(set, n, &ts, NULL);
    if (r != 1 || !(set[0].revents & POLLIN))
        fail("ppoll (__ppoll_chk) did not report the byte the peer wrote");
    if (recv(s, &b, 1, 0) != 1 || b != '2')
        fail("recv after ppoll");

    /* epoll_pwait2 */
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev))
        fail("epoll_ctl");
    r = epoll_pwait2(ep, out, 2, &(struct timespec){ 0, 0 }, NULL);
    if (r != 0)
        fail("epoll_pwait2 reported an event on an empty connection");
    if (send(c, "3", 1, 0) != 1)
        fail("send 3");
    r = epoll_pwait2(ep, out, 2, &ts, NULL);
    if (r != 1 || !(out[0].events & EPOLLIN))
        fail("epoll_pwait2 did not report the byte the peer wrote");
    if (out[0].data.u64 != 0x5eed5eed5eedull)
        fail("epoll_pwait2 returned a data word the application did not register");
    if (recv(s, &b, 1, 0) != 1 || b != '3')
        fail("recv after epoll_pwait2");
    /* pwritev2/preadv2 at offset -1 (the socket's "position"), mixed with
     * ordinary calls on the other end */
    {
        struct iovec wv[2] = { { "ab", 2 }, { "cd", 2 } };
        char rb[8] = { 0 };
        struct iovec rv = { rb, sizeof(rb) };

        if (pwritev2(c, wv, 2, -1, 0) != 4)
            fail("pwritev2");
        if (recv(s, rb, 4, MSG_WAITALL) != 4 || memcmp(rb, "abcd", 4))
            fail("recv after pwritev2");
        if (send(c, "efg", 3, 0) != 3)
            fail("send efg");
        if (preadv2(s, &rv, 1, -1, 0) != 3 || memcmp(rb, "efg", 3))
            fail("preadv2 after send");
        errno = 0;
        if (preadv2(s, &rv, 1, -1, RWF_NOWAIT) != -1 || errno != EAGAIN)
            fail("preadv2 RWF_NOWAIT on an empty connection is not EAGAIN");
        errno = 0;
        if (preadv2(s, &rv, 1, 0, 0) != -1 || errno != ESPIPE)
            fail("preadv2 at an offset is not ESPIPE");
        errno = 0;
        if (preadv2(s, &rv, 1, -1, 0x40000000) != -1 || errno != EOPNOTSUPP)
            fail("preadv2 with an unknown flag is not EOPNOTSUPP");
    }
    printf("ok ready_chk%s\n", getenv("LD_PRELOAD") ? " (paired)" : "");
    return 0;
}
