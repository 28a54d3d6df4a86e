/* socket, socketpair, bind, listen, connect (blocking, non-blocking, refused),
 * accept, accept4, shutdown, getsockopt, setsockopt, over IPv4 and IPv6. */
#include <fcntl.h>
#include <poll.h>

#include "t_common.h"
#include "t_net.h"

static int t_family(int family)
{
    struct sockaddr_storage a;
    socklen_t len;
    int l, c, s, err = -1, one = 1;
    socklen_t elen = sizeof(err);
    char buf[8];
    struct pollfd p;

    l = t_listen(family, &a, &len);
    if (l < 0 && family == AF_INET6)
        return T_SKIP;
    T_CHECK(l >= 0);
    /* non-blocking connect: EINPROGRESS or immediate success, then poll */
    c = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    T_CHECK(c >= 0);
    if (connect(c, (struct sockaddr *)&a, len) < 0)
        T_CHECK(errno == EINPROGRESS);
    p = (struct pollfd){ .fd = c, .events = POLLOUT };
    T_CHECK(poll(&p, 1, 10000) == 1);
    T_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0);
    s = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    T_CHECK(s >= 0);
    T_CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC);
    T_CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
    T_CHECK(setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    /* half-close: the peer reads EOF, and can still send back */
    T_CHECK(shutdown(c, SHUT_WR) == 0);
    p = (struct pollfd){ .fd = s, .events = POLLIN };
    T_CHECK(poll(&p, 1, 10000) == 1);
    T_CHECK(read(s, buf, sizeof(buf)) == 0);
    T_CHECK(write(s, "ok", 2) == 2);
    p = (struct pollfd){ .fd = c, .events = POLLIN };
    T_CHECK(poll(&p, 1, 10000) == 1);
    T_CHECK(read(c, buf, sizeof(buf)) == 2);
    T_CHECK(shutdown(c, 42) == -1 && errno == EINVAL);
    close(c);
    close(s);
    /* a blocking accept through plain accept() */
    c = socket(family, SOCK_STREAM, 0);
    T_CHECK(connect(c, (struct sockaddr *)&a, len) == 0);
    s = accept(l, NULL, NULL);
    T_CHECK(s >= 0);
    close(s);
    close(c);
    close(l);
    /* refused: the errno must be the kernel's */
    c = socket(family, SOCK_STREAM, 0);
    T_CHECK(connect(c, (struct sockaddr *)&a, len) == -1 && errno == ECONNREFUSED);
    close(c);
    return T_PASS;
}

int t_main(void)
{
    int sv[2], rc;
    T_COUNT(socket); T_COUNT(socketpair); T_COUNT(bind); T_COUNT(listen);
    T_COUNT(connect); T_COUNT(accept); T_COUNT(accept4); T_COUNT(shutdown);
    T_COUNT(getsockopt); T_COUNT(setsockopt);

    rc = t_family(AF_INET);
    if (rc != T_PASS)
        return rc;
    rc = t_family(AF_INET6);
    if (rc == T_FAIL)
        return rc;
    T_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[0]);
    close(sv[1]);
    T_CHECK(socket(AF_INET, 12345, 0) == -1 && errno == EINVAL);
    T_CHECK(bind(-1, NULL, 0) == -1 && errno == EBADF);
    T_CALLED(socket); T_CALLED(socketpair); T_CALLED(bind); T_CALLED(listen);
    T_CALLED(connect); T_CALLED(accept); T_CALLED(accept4); T_CALLED(shutdown);
    T_CALLED(getsockopt); T_CALLED(setsockopt);
    return T_PASS;
}
