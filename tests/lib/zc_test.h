/* zc_test.h: what the C test programs share (header only; each program
 * includes it as "../lib/zc_test.h" and checks the results its own way).
 *
 *   zt_listen_lo(backlog, &a)        a TCP listener on 127.0.0.1, an
 *                                    ephemeral port; its address in a
 *   zt_connect_lo(&a)                a TCP socket connected to a
 *   zt_accept_pair(l, &a, &c, &s)    a client connected through listener l
 *                                    and its accepted end
 *   zt_tcp_pair(&c, &s)              the same with a listener of its own,
 *                                    closed after
 *   zt_fill(p, n, seed)              a byte pattern of seed
 *
 * Each returns -1 with errno set on failure and closes what it made. */
#ifndef ZC_TEST_H
#define ZC_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int zt_close_keep_errno(int fd)
{
    int e = errno;

    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

static inline int zt_listen_lo(int backlog, struct sockaddr_in *a)
{
    socklen_t al = sizeof(*a);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) || listen(l, backlog) ||
        getsockname(l, (struct sockaddr *)a, &al))
        return zt_close_keep_errno(l);
    return l;
}

static inline int zt_connect_lo(const struct sockaddr_in *a)
{
    int c = socket(AF_INET, SOCK_STREAM, 0);

    if (c < 0 || connect(c, (const struct sockaddr *)a, sizeof(*a)))
        return zt_close_keep_errno(c);
    return c;
}

static inline int zt_accept_pair(int l, const struct sockaddr_in *a, int *c, int *s)
{
    *c = zt_connect_lo(a);
    if (*c < 0)
        return -1;
    *s = accept(l, NULL, NULL);
    if (*s < 0)
        return *c = zt_close_keep_errno(*c);
    return 0;
}

static inline int zt_tcp_pair(int *c, int *s)
{
    struct sockaddr_in a;
    int l = zt_listen_lo(1, &a), rc;

    if (l < 0)
        return -1;
    rc = zt_accept_pair(l, &a, c, s);
    zt_close_keep_errno(l);
    return rc;
}

static inline void zt_fill(void *p, size_t n, unsigned seed)
{
    unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 13));
}

#endif
