/* Small socket helpers for the preload tests (all bounded by timeouts). */
#ifndef T_NET_H
#define T_NET_H

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>

/* A listening TCP socket on 127.0.0.1 (or ::1), any port. */
static inline int t_listen(int family, struct sockaddr_storage *addr, socklen_t *len)
{
    int fd = socket(family, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;

    if (fd < 0)
        return -1;
    memset(addr, 0, sizeof(*addr));
    if (family == AF_INET) {
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *len = sizeof(*a4);
    } else {
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_loopback;
        *len = sizeof(*a6);
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)addr, *len) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)addr, len)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A connected TCP pair over loopback: *c client end, *s accepted end. */
static inline int t_tcp_pair(int family, int *c, int *s)
{
    struct sockaddr_storage a;
    socklen_t len;
    struct timeval tv = { 10, 0 };
    int l = t_listen(family, &a, &len);

    if (l < 0)
        return -1;
    *c = socket(family, SOCK_STREAM, 0);
    if (*c < 0 || connect(*c, (struct sockaddr *)&a, len)) {
        close(l);
        return -1;
    }
    *s = accept(l, NULL, NULL);
    close(l);
    if (*s < 0)
        return -1;
    /* no test may hang: bound every blocking call */
    setsockopt(*c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(*s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(*c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(*s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return 0;
}

/* Deterministic pattern for byte checks. */
static inline void t_fill(unsigned char *p, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
}

#endif
