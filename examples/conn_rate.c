/* conn_rate: what a connection costs at scale (issue 31).  A client and an
 * epoll echo server (two processes, pinned to CPUs 0 and 1) over TCP
 * loopback:
 *   1. the client opens IDLE connections and makes one round trip on each
 *      (so that they are paired where the library pairs), then keeps them
 *      open and idle;
 *   2. for SECS seconds it opens short connections (connect, one byte each
 *      way, close) one after the other and counts them;
 *   3. it bounces one byte ROUNDS times over one long connection while the
 *      idle ones stay open.
 * Every byte is checked.  make bench runs it with and without the library,
 * side by side, and prints the ratios.
 *
 * usage: conn_rate [idle [secs [rounds]]]     (default 0, 2, 2000)
 * prints: "idle <n> setup_s <s> short_per_s <r> rt_us <us> fds <client fds>
 *          paired <client connections the library paired, -1 without it>
 *          rss_kib <resident KiB of both processes with the idle ones open>" */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>

#include "probe.h"

static int die(const char *what)
{
    perror(what);
    exit(1);
}

/* Echo every byte back; close on EOF or error. */
static void cr_serve(int lfd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = { EPOLLIN, { .fd = lfd } }, ev[256];
    char buf[4096];

    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e))
        die("server epoll");
    for (;;) {
        int n = epoll_wait(ep, ev, 256, 30000);

        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            exit(n == 0 ? 2 : 1);
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;

            if (fd == lfd) {
                int c;

                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct epoll_event ce = { EPOLLIN, { .fd = c } };

                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce))
                        die("server add");
                }
                if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                    die("server accept");
                continue;
            }
            ssize_t k = read(fd, buf, sizeof(buf));

            if (k > 0) {
                if (write(fd, buf, (size_t)k) != k)
                    die("server write");
            } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
            }
        }
    }
}

/* One round trip of one byte on fd, checked.  0 or -1. */
static int cr_round(int fd, char c)
{
    char r;

    if (write(fd, &c, 1) != 1 || read(fd, &r, 1) != 1 || r != c)
        return -1;
    return 0;
}

static int cr_connect(const struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        die("socket");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)a, sizeof(*a)))
        die("connect");
    return fd;
}

static int cr_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own descriptor */
}

/* Resident KiB of process pid (0: this one), -1 if unknown. */
static long cr_rss_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* A counter of the library (found at run time), -1 without it. */
static long long cr_stat(const char *name)
{
    int (*get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v;

    return get && get(name, &v) == 0 ? (long long)v : -1;
}

int main(int argc, char **argv)
{
    int idle = argc > 1 ? atoi(argv[1]) : 0;
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    int rounds = argc > 3 ? atoi(argv[3]) : 2000;
    struct rlimit rl;
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t al = sizeof(a);
    int lfd, one = 1;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4096) ||
        getsockname(lfd, (struct sockaddr *)&a, &al))
        die("listen");
    pid_t srv = fork();

    if (srv < 0)
        die("fork");
    if (srv == 0) {
        probe_pin(1);
        cr_serve(lfd);
    }
    close(lfd);
    probe_pin(0);

    int *fds = calloc((size_t)idle + 1, sizeof(int));
    double t0 = probe_now();

    for (int i = 0; i < idle; i++) {
        fds[i] = cr_connect(&a);
        if (cr_round(fds[i], (char)i))
            die("idle round trip");
    }
    double setup = probe_now() - t0;
    long rss = cr_rss_kib(0) + cr_rss_kib(srv);
    long shorts = 0;

    t0 = probe_now();
    do {
        for (int j = 0; j < 16; j++, shorts++) {
            int fd = cr_connect(&a);

            if (cr_round(fd, (char)shorts))
                die("short round trip");
            close(fd);
        }
    } while (probe_now() - t0 < secs);
    double rate = (double)shorts / (probe_now() - t0);

    int fd = cr_connect(&a);

    for (int i = 0; i < 100; i++)
        if (cr_round(fd, (char)i)) /* warm up: pairing, spin policy */
            die("busy round trip");
    t0 = probe_now();
    for (int i = 0; i < rounds; i++)
        if (cr_round(fd, (char)i))
            die("busy round trip");
    double rt = (probe_now() - t0) / rounds * 1e6;

    printf("idle %d setup_s %.3f short_per_s %.0f rt_us %.2f fds %d paired %lld rss_kib %ld\n",
           idle, setup, rate, rt, cr_count_fds(), cr_stat("local.paired.connected"), rss);
    fflush(stdout);
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    return 0;
}
