/* dup, dup2, dup3, fcntl (F_DUPFD, F_DUPFD_CLOEXEC, F_GETFL/F_SETFL
 * O_NONBLOCK, F_GETFD/F_SETFD), ioctl (FIONBIO, FIONREAD), close and
 * close_range: duplicated sockets keep working, closed ones fail with EBADF. */
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>

#include "t_common.h"
#include "t_net.h"

int t_main(void)
{
    int c, s, d1, d2, d3, d4, n = 0, on = 1, off = 0;
    char buf[16];
    T_COUNT(dup); T_COUNT(dup2); T_COUNT(dup3); T_COUNT(close); T_COUNT(close_range);
    T_COUNT(ioctl);
    uint64_t fcntls = t_stat("calls.fcntl") + t_stat("calls.fcntl64");

    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    d1 = dup(c);
    d2 = dup2(c, 150);
    d3 = dup3(c, 151, O_CLOEXEC);
    d4 = fcntl(c, F_DUPFD_CLOEXEC, 160);
    T_CHECK(d1 >= 0 && d2 == 150 && d3 == 151 && d4 >= 160);
    T_CHECK(fcntl(d3, F_GETFD) == FD_CLOEXEC && fcntl(d4, F_GETFD) == FD_CLOEXEC);
    T_CHECK(fcntl(c, F_DUPFD, 170) >= 170);
    T_CHECK(dup3(c, c, 0) == -1 && errno == EINVAL);
    T_CHECK(dup2(c, c) == c);
    T_CHECK(write(d1, "a", 1) == 1 && write(d2, "b", 1) == 1 && write(d3, "c", 1) == 1 &&
            write(d4, "d", 1) == 1);
    T_CHECK(ioctl(s, FIONREAD, &n) == 0 && n == 4);
    T_CHECK(recv(s, buf, 4, MSG_WAITALL) == 4 && !memcmp(buf, "abcd", 4));
    /* non-blocking through fcntl and through FIONBIO */
    T_CHECK(fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK) == 0);
    T_CHECK(read(s, buf, 1) == -1 && errno == EAGAIN);
    T_CHECK(fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) == 0);
    T_CHECK(ioctl(s, FIONBIO, &on) == 0);
    T_CHECK(recv(s, buf, 1, 0) == -1 && errno == EAGAIN);
    T_CHECK(ioctl(s, FIONBIO, &off) == 0);
    /* closing a duplicate leaves the others working */
    T_CHECK(close(d1) == 0);
    T_CHECK(write(d1, "x", 1) == -1 && errno == EBADF);
    T_CHECK(close(d1) == -1 && errno == EBADF);
    T_CHECK(write(d2, "e", 1) == 1 && recv(s, buf, 1, 0) == 1 && buf[0] == 'e');
    T_CHECK(close_range(150, 151, CLOSE_RANGE_CLOEXEC) == 0);
    T_CHECK(fcntl(150, F_GETFD) == FD_CLOEXEC);
    T_CHECK(close_range(150, 200, 0) == 0);
    T_CHECK(fcntl(150, F_GETFD) == -1 && errno == EBADF);
    T_CHECK(fcntl(d4, F_GETFD) == -1 && errno == EBADF);
    T_CHECK(write(c, "f", 1) == 1 && recv(s, buf, 1, 0) == 1 && buf[0] == 'f');
    T_CHECK(fcntl(-1, F_GETFL) == -1 && errno == EBADF);
    T_CHECK(ioctl(-1, FIONREAD, &n) == -1 && errno == EBADF);
    close(c);
    close(s);
    T_CALLED(dup); T_CALLED(dup2); T_CALLED(dup3); T_CALLED(close); T_CALLED(close_range);
    T_CALLED(ioctl);
    T_CHECK(!t_preloaded() || t_stat("calls.fcntl") + t_stat("calls.fcntl64") > fcntls);
    return T_PASS;
}
