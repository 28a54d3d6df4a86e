/* Unit tests for the shim's descriptor table and hook dispatch, linked into
 * this binary (so its own calls to send(), close() etc. run our hooks):
 * table tracking across socket/accept/dup/close, copy-path accounting, and a
 * fake path proving that every data hook hands a claimed descriptor to its
 * path in msghdr form and keeps errno conventions. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cmocka.h>

#include "shim_fd.h"
#include "shim_path.h"
#include "zc_stats.h"
#include "zcsock.h"

static uint64_t t_stat(const char *name)
{
    uint64_t v = 0;

    assert_int_equal(zcsock_stat_get(name, &v), 0);
    return v;
}

static void t_active(void **state)
{
    (void)state;
    assert_int_equal(zcsock_is_active(), 1);
    assert_string_equal(zcsock_version(), ZCSOCK_VERSION);
}

static void t_table_tracks_sockets(void **state)
{
    int sv[2], d, d2, d3, fd;
    shim_fd_t *f;

    (void)state;
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    f = shim_fd_get(fd);
    assert_non_null(f);
    assert_int_equal(f->kind, SHIM_FD_SOCKET);
    assert_int_equal(f->family, AF_INET);
    assert_int_equal(f->stream, 0);
    assert_int_equal(f->copy_why, ZC_STAT_WHY_NOT_STREAM);
    close(fd);
    assert_int_equal(f->kind, SHIM_FD_UNKNOWN);

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    /* made with the family's default protocol: the table answers for it */
    assert_int_equal(shim_fd_get(sv[1])->stream, SHIM_FD_STREAM_TCP);
    assert_int_equal(shim_fd_get(sv[1])->copy_why, ZC_STAT_WHY_NO_FAST_PATH);
    d = dup(sv[0]);
    d2 = fcntl(sv[0], F_DUPFD_CLOEXEC, 100);
    assert_true(d2 >= 100);
    d3 = 200;
    assert_int_equal(dup2(sv[0], d3), d3);
    assert_int_equal(shim_fd_get(d)->kind, SHIM_FD_SOCKET);
    assert_int_equal(shim_fd_get(d2)->family, AF_UNIX);
    assert_int_equal(shim_fd_get(d3)->stream, SHIM_FD_STREAM_TCP);
    /* dup2 over a tracked socket with a non-socket replaces the state */
    fd = open("/dev/null", O_RDONLY);
    assert_int_equal(dup2(fd, d3), d3);
    assert_int_equal(shim_fd_get(d3)->kind, SHIM_FD_UNKNOWN);
    assert_int_equal(close_range((unsigned)d2, (unsigned)d2, CLOSE_RANGE_CLOEXEC), 0);
    assert_int_equal(shim_fd_get(d2)->kind, SHIM_FD_SOCKET);
    assert_int_equal(close_range((unsigned)d2, ~0u, 0), 0);
    assert_int_equal(shim_fd_get(d2)->kind, SHIM_FD_UNKNOWN);
    assert_int_equal(shim_fd_is_app_socket(d), 1);
    close(d);
    close(fd);
    close(sv[0]);
    close(sv[1]);
    assert_null(shim_fd_get(-1));
    assert_null(shim_fd_get((int)SHIM_FD_TABLE_MAX + 5));
}

static void t_accept_inherits_listener(void **state)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int l, c, s;
    uint64_t before = t_stat("sockets.accepted");

    (void)state;
    l = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(shim_fd_get(l)->stream, SHIM_FD_STREAM_TCP);
    c = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
    assert_int_equal(shim_fd_get(c)->stream, SHIM_FD_STREAM_TCP);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    s = accept4(l, NULL, NULL, SOCK_CLOEXEC);  /* the listener's protocol too */
    assert_true(s >= 0);
    assert_int_equal(shim_fd_get(s)->stream, SHIM_FD_STREAM_TCP);
    close(s);
    close(c);
    c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    shim_fd_forget(l);  /* as if inherited: accept must ask the kernel */
    s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(s >= 0);
    assert_int_equal(shim_fd_get(s)->kind, SHIM_FD_SOCKET);
    assert_int_equal(shim_fd_get(s)->family, AF_INET);
    assert_int_equal(shim_fd_get(s)->stream, 1);  /* (its protocol not known) */
    assert_int_equal(t_stat("sockets.accepted"), before + 2);
    close(s);
    close(c);
    close(l);
}

static void t_copy_accounting(void **state)
{
    int sv[2];
    char buf[64];
    uint64_t sb = t_stat("path.copy.send_bytes"), rb = t_stat("path.copy.recv_bytes");
    uint64_t why = t_stat("copy_why.no_fast_path"), untracked = t_stat("copy_why.untracked_fd");
    uint64_t rcalls = t_stat("path.copy.recv_calls");

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(send(sv[0], "hello", 5, 0), 5);
    assert_int_equal(write(sv[0], "abc", 3), 3);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), 8);
    assert_int_equal(t_stat("path.copy.send_bytes"), sb + 8);
    assert_int_equal(t_stat("path.copy.recv_bytes"), rb + 8);
    assert_int_equal(t_stat("copy_why.no_fast_path"), why + 3);
    /* a failed receive counts a call, no bytes, and keeps errno */
    errno = 0;
    assert_int_equal(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(t_stat("path.copy.recv_calls"), rcalls + 2);
    /* send on a descriptor the library never saw being made */
    shim_fd_forget(sv[0]);
    assert_int_equal(send(sv[0], "x", 1, 0), 1);
    assert_int_equal(t_stat("copy_why.untracked_fd"), untracked + 1);
    /* read/write on a non-socket are not charged to any path */
    sb = t_stat("path.copy.send_bytes");
    {
        int fd = open("/dev/null", O_WRONLY);

        assert_int_equal(write(fd, "zz", 2), 2);
        close(fd);
    }
    assert_int_equal(t_stat("path.copy.send_bytes"), sb);
    close(sv[0]);
    close(sv[1]);
}

/* --- a fake path ---------------------------------------------------------- */

static struct {
    int sends, recvs, forgets, last_flags;
    size_t last_iovlen, last_len;
    int fail_with;
    char data[64];
} t_fake;

static ssize_t t_fake_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags)
{
    size_t i, n = 0;

    (void)f;
    (void)fd;
    t_fake.sends++;
    t_fake.last_flags = flags;
    t_fake.last_iovlen = msg->msg_iovlen;
    if (t_fake.fail_with)
        return -t_fake.fail_with;
    for (i = 0; i < msg->msg_iovlen; i++)
        n += msg->msg_iov[i].iov_len;
    t_fake.last_len = n;
    return (ssize_t)n;
}

static ssize_t t_fake_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags)
{
    (void)f;
    (void)fd;
    t_fake.recvs++;
    t_fake.last_flags = flags;
    t_fake.last_iovlen = msg->msg_iovlen;
    if (t_fake.fail_with)
        return -t_fake.fail_with;
    memcpy(msg->msg_iov[0].iov_base, "fake", 4);
    msg->msg_namelen = 0;
    return 4;
}

static void t_fake_forget(shim_fd_t *f, int fd)
{
    (void)f;
    (void)fd;
    t_fake.forgets++;
}

static const shim_path_ops_t t_fake_ops = {
    .sendmsg = t_fake_sendmsg, .recvmsg = t_fake_recvmsg, .forget = t_fake_forget,
};

static const shim_path_t t_fake_path = { .name = "fake", .ops = &t_fake_ops };

static void t_path_dispatch(void **state)
{
    int sv[2];
    char buf[16];
    struct iovec iov[3] = { { buf, 1 }, { buf, 2 }, { buf, 3 } };
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
    struct mmsghdr mm[2] = { { .msg_hdr = m }, { .msg_hdr = m } };
    struct sockaddr_in from;
    socklen_t fromlen = sizeof(from);
    uint64_t copy_calls = t_stat("path.copy.send_calls");

    (void)state;
    memset(&t_fake, 0, sizeof(t_fake));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    shim_fd_claim(sv[0], &t_fake_path, NULL);

    assert_int_equal(send(sv[0], buf, 7, MSG_NOSIGNAL), 7);
    assert_int_equal(t_fake.last_flags, MSG_NOSIGNAL);
    assert_int_equal(sendto(sv[0], buf, 5, 0, NULL, 0), 5);
    assert_int_equal(write(sv[0], buf, 9), 9);
    assert_int_equal(t_fake.last_flags, 0);
    assert_int_equal(writev(sv[0], iov, 3), 6);
    assert_int_equal(t_fake.last_iovlen, 3);
    assert_int_equal(sendmsg(sv[0], &m, 0), 6);
    assert_int_equal(sendmmsg(sv[0], mm, 2, 0), 2);
    assert_int_equal(mm[1].msg_len, 6);
    assert_int_equal(t_fake.sends, 7);
    assert_int_equal(t_stat("path.copy.send_calls"), copy_calls);

    assert_int_equal(recv(sv[0], buf, sizeof(buf), MSG_PEEK), 4);
    assert_int_equal(t_fake.last_flags, MSG_PEEK);
    assert_memory_equal(buf, "fake", 4);
    assert_int_equal(read(sv[0], buf, sizeof(buf)), 4);
    assert_int_equal(readv(sv[0], iov, 3), 4);
    assert_int_equal(recvmsg(sv[0], &m, 0), 4);
    assert_int_equal(recvfrom(sv[0], buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen), 4);
    assert_int_equal(fromlen, 0);
    assert_int_equal(t_fake.recvs, 5);

    /* errors come back as -1 and errno */
    t_fake.fail_with = EPIPE;
    errno = 0;
    assert_int_equal(send(sv[0], buf, 1, 0), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(sendmmsg(sv[0], mm, 2, 0), -1);
    assert_int_equal(errno, EPIPE);
    t_fake.fail_with = ECONNRESET;
    assert_int_equal(read(sv[0], buf, 1), -1);
    assert_int_equal(errno, ECONNRESET);

    /* close tells the path, then clears the entry */
    close(sv[0]);
    assert_int_equal(t_fake.forgets, 1);
    assert_null(shim_fd_get(sv[0])->path);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_active),
        cmocka_unit_test(t_table_tracks_sockets),
        cmocka_unit_test(t_accept_inherits_listener),
        cmocka_unit_test(t_copy_accounting),
        cmocka_unit_test(t_path_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
