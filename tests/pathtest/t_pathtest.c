/* The test-only path (shim/paths/test/) serves every per-descriptor
 * operation through the same interface as the real paths, with no edit to a
 * hook: send and receive in every form, FIONREAD, poll/select/epoll level-
 * and edge-triggered, sendfile, splice, shutdown, dup, close and fork.
 *
 *   t_pathtest path     under libzcsock-test.so with ZCTEST_PATH=1: the test
 *                       path must claim both ends and carry every byte
 *   t_pathtest kernel   without that path (plain, or the normal library):
 *                       the same behaviour, bytes on the kernel stream
 *
 * The test path reads ahead (64 KiB per kernel read), so after a short read
 * the kernel socket is empty while the descriptor is readable: the checks
 * below pass only if the readiness engine asks the path, and the raw
 * FIONREAD (a system call no hook sees) proves where the bytes are.
 * Exit 0 pass, 1 fail. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/zc_test.h"

static int mode_path;

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c, errno); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static uint64_t stat_get(const char *name)
{
    int (*get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v = 0;

    if (!get || get(name, &v))
        return 0;
    return v;
}

static int raw_fionread(int fd)
{
    int n = -1;

    CHECK(syscall(SYS_ioctl, fd, FIONREAD, &n) == 0);
    return n;
}

static int app_fionread(int fd)
{
    int n = -1;

    CHECK(ioctl(fd, FIONREAD, &n) == 0);
    return n;
}

/* A connected TCP pair on 127.0.0.1: *c client, *s server. */
static void tcp_pair(int *c, int *s)
{
    CHECK(zt_tcp_pair(c, s) == 0);
}

/* Wait until the kernel has delivered n bytes to fd (raw FIONREAD), at most
 * 5 s: loopback delivers at once, but not in the same instant. */
static void settle(int fd, int n)
{
    for (int i = 0; i < 5000 && raw_fionread(fd) < n; i++)
        usleep(1000);
}

static void t_forms(int c, int s)
{
    char out[1000], in[1000];
    struct iovec iv[3] = { { out, 100 }, { out + 100, 200 }, { out + 300, 700 } };
    struct msghdr m = { .msg_iov = iv, .msg_iovlen = 3 };
    struct mmsghdr mm[2] = { { .msg_hdr = m }, { .msg_hdr = m } };
    struct iovec rv[2] = { { in, 10 }, { in + 10, 990 } };
    struct msghdr rm = { .msg_iov = rv, .msg_iovlen = 2 };

    zt_fill(out, sizeof(out), 1);
    CHECK(send(c, out, 1000, 0) == 1000);
    settle(s, 1000);
    CHECK(recv(s, in, 10, 0) == 10 && !memcmp(in, out, 10));
    /* the rest is in the path's buffer, not in the kernel socket */
    CHECK(app_fionread(s) == 990);
    CHECK(raw_fionread(s) == (mode_path ? 0 : 990));
    CHECK(recv(s, in, 5, MSG_PEEK) == 5 && !memcmp(in, out + 10, 5));
    CHECK(read(s, in, 90) == 90 && !memcmp(in, out + 10, 90));
    CHECK(readv(s, rv, 2) == 900 && !memcmp(in, out + 100, 900));

    CHECK(sendto(c, out, 300, 0, NULL, 0) == 300);
    CHECK(write(c, out + 300, 300) == 300);
    CHECK(writev(c, iv, 3) == 1000);
    CHECK(sendmsg(c, &m, 0) == 1000);
    CHECK(sendmmsg(c, mm, 2, 0) == 2);
    CHECK(recv(s, in, 600, MSG_WAITALL) == 600 && !memcmp(in, out, 600));
    CHECK(recvmsg(s, &rm, MSG_WAITALL) == 1000 && !memcmp(in, out, 1000));
    CHECK(recvfrom(s, in, 1000, MSG_WAITALL, NULL, NULL) == 1000 && !memcmp(in, out, 1000));
    struct mmsghdr rmm[2] = { { .msg_hdr = rm }, { .msg_hdr = rm } };
    int k = recvmmsg(s, rmm, 2, MSG_WAITALL, NULL);
    CHECK(k >= 1 && rmm[0].msg_len == 1000);
    if (k == 1)
        CHECK(recv(s, in, 1000, MSG_WAITALL) == 1000);
    CHECK(!memcmp(in, out, 1000));
    CHECK(recv(s, in, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
}

static void t_readiness(int c, int s)
{
    char out[2000], in[2100];
    struct pollfd p = { s, POLLIN, 0 };
    fd_set r;
    struct timeval tv = { 0, 0 };
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 }, got[4];
    int lt = epoll_create1(0), et = epoll_create1(0);

    zt_fill(out, sizeof(out), 2);
    CHECK(poll(&p, 1, 0) == 0);
    CHECK(epoll_ctl(lt, EPOLL_CTL_ADD, s, &ev) == 0);
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = 78;
    CHECK(epoll_ctl(et, EPOLL_CTL_ADD, s, &ev) == 0);
    CHECK(epoll_wait(lt, got, 4, 0) == 0);
    CHECK(send(c, out, 2000, 0) == 2000);
    settle(s, 2000);
    CHECK(epoll_wait(et, got, 4, 1000) == 1 && got[0].data.u64 == 78);
    CHECK(recv(s, in, 1, 0) == 1);          /* the rest waits in the path */
    CHECK(raw_fionread(s) == (mode_path ? 0 : 1999));
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
    FD_ZERO(&r);
    FD_SET(s, &r);
    CHECK(select(s + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(s, &r));
    CHECK(epoll_wait(lt, got, 4, 0) == 1 && got[0].data.u64 == 77 && (got[0].events & EPOLLIN));
    /* edge-triggered: nothing new arrived since the last report */
    CHECK(epoll_wait(et, got, 4, 0) == 0);
    CHECK(send(c, out, 10, 0) == 10);
    CHECK(epoll_wait(et, got, 4, 1000) == 1 && got[0].data.u64 == 78);
    CHECK(recv(s, in, 2009, MSG_WAITALL) == 2009 && !memcmp(in, out + 1, 1999));
    CHECK(poll(&p, 1, 0) == 0);
    CHECK(epoll_wait(lt, got, 4, 0) == 0);
    /* POLLOUT comes from the kernel */
    p = (struct pollfd){ c, POLLOUT, 0 };
    CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLOUT));
    close(lt);
    close(et);
}

static void t_sendfile_splice(int c, int s)
{
    char path[] = "/tmp/zc-pathtest-XXXXXX", buf[3000], in[3000];
    int f = mkstemp(path), pp[2];
    off_t off = 0;

    zt_fill(buf, sizeof(buf), 3);
    CHECK(f >= 0 && write(f, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
    unlink(path);
    size_t done = 0;
    while (done < sizeof(buf)) {
        ssize_t n = sendfile(c, f, &off, sizeof(buf) - done);
        CHECK(n > 0);
        done += (size_t)n;
    }
    CHECK(recv(s, in, sizeof(in), MSG_WAITALL) == (ssize_t)sizeof(in) && !memcmp(in, buf, sizeof(in)));
    close(f);
    /* pipe -> socket, socket -> pipe */
    CHECK(pipe(pp) == 0);
    CHECK(write(pp[1], buf, 500) == 500);
    CHECK(splice(pp[0], NULL, c, NULL, 500, 0) == 500);
    settle(s, 500);
    CHECK(recv(s, in, 100, 0) == 100 && !memcmp(in, buf, 100));
    ssize_t n = splice(s, NULL, pp[1], NULL, 400, 0);
    CHECK(n > 0 && n <= 400);
    CHECK(read(pp[0], in, (size_t)n) == n && !memcmp(in, buf + 100, (size_t)n));
    if (n < 400)
        CHECK(recv(s, in, 400 - n, MSG_WAITALL) == 400 - n);
    close(pp[0]);
    close(pp[1]);
}

static void t_dup_fork_shutdown(int c, int s)
{
    char out[100], in[100];
    int d, st;
    pid_t pid;

    zt_fill(out, sizeof(out), 4);
    CHECK(send(c, out, 100, 0) == 100);
    settle(s, 100);
    d = dup(s);
    CHECK(d >= 0);
    CHECK(recv(d, in, 5, 0) == 5 && !memcmp(in, out, 5));
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {         /* the child reads what the parent's read left */
        if (recv(s, in, 95, MSG_WAITALL) != 95 || memcmp(in, out + 5, 95))
            _exit(1);
        _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(recv(d, in, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    close(d);
    /* half-close: the reader gets the rest, then EOF, and poll says so */
    CHECK(send(c, out, 20, 0) == 20);
    CHECK(shutdown(c, SHUT_WR) == 0);
    CHECK(recv(s, in, 20, MSG_WAITALL) == 20 && !memcmp(in, out, 20));
    struct pollfd p = { s, POLLIN, 0 };
    CHECK(poll(&p, 1, 1000) == 1 && (p.revents & POLLIN));
    CHECK(recv(s, in, 1, 0) == 0);
    CHECK(send(s, out, 3, 0) == 3);     /* the other direction still works */
    CHECK(recv(c, in, 3, MSG_WAITALL) == 3);
}

int main(int argc, char **argv)
{
    uint64_t copy_recv0, claimed;
    int c, s;

    if (argc != 2 || (strcmp(argv[1], "path") && strcmp(argv[1], "kernel"))) {
        fprintf(stderr, "usage: t_pathtest path|kernel\n");
        return 2;
    }
    mode_path = !strcmp(argv[1], "path");
    copy_recv0 = stat_get("path.copy.recv_bytes");
    tcp_pair(&c, &s);
    claimed = stat_get("path.test.claimed");
    CHECK(mode_path ? claimed == 2 : claimed == 0);
    t_forms(c, s);
    t_readiness(c, s);
    t_sendfile_splice(c, s);
    t_dup_fork_shutdown(c, s);
    close(c);
    close(s);
    if (mode_path) {
        /* every byte went through the test path, none through the copy path */
        CHECK(stat_get("path.test.recv_bytes") >= 9000);
        CHECK(stat_get("path.test.send_bytes") >= 9000);
        CHECK(stat_get("path.copy.recv_bytes") == copy_recv0);
    }
    printf("pathtest %s: ok (test path claimed %llu, received %llu bytes)\n", argv[1],
           (unsigned long long)claimed, (unsigned long long)stat_get("path.test.recv_bytes"));
    return 0;
}
