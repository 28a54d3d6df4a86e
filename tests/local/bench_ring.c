/* bench_ring: the local path's shared ring against kernel TCP loopback, two
 * processes, in one run.
 *
 *   streaming: the parent sends N bytes in messages of 4 KiB, 64 KiB and
 *   1 MiB; the child receives them with a buffer of the same size.  Variants:
 *     tcp         send/recv over a 127.0.0.1 TCP connection
 *     ring+unix   the ring, doorbells over an AF_UNIX socketpair
 *     ring+tcp    the ring, doorbells over the TCP connection (what the local
 *                 path will do: the app's socket carries the doorbells)
 *   ping-pong: 1 byte each way, median round trip, blocking doorbells
 *   (spin 0) and with a short spin before sleeping.
 *
 * Usage: bench_ring [--quick] [--ring-size BYTES] [--sizes a,b,c] [--spin N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t_ring.h"
#include "zc_real.h"

enum { V_TCP, V_RING_UNIX, V_RING_TCP, V_COUNT };
static const char *v_name[V_COUNT] = { "tcp", "ring+unix", "ring+tcp" };

static size_t opt_ring = 0;
static int opt_spin = 200;
static int opt_quick;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void tcp_pair(int *a, int *b)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof(sa);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&sa, &sl))
        die("listen");
    *b = socket(AF_INET, SOCK_STREAM, 0);
    if (*b < 0 || connect(*b, (struct sockaddr *)&sa, sizeof(sa)))
        die("connect");
    *a = accept(l, NULL, NULL);
    if (*a < 0)
        die("accept");
    close(l);
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int full_write(int fd, const void *p, size_t n)
{
    while (n) {
        ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p = (const char *)p + r;
        n -= (size_t)r;
    }
    return 0;
}

/* One connection of variant v between parent (sender) and child. */
typedef struct conn {
    int v;
    int fd[2];              /* data/doorbell kernel socket: [0] parent, [1] child */
    int memfd;
    local_ring_t ch;
    t_ring_end_t end;
} conn_t;

static void conn_open(conn_t *c, int v)
{
    memset(c, 0, sizeof(*c));
    c->v = v;
    c->memfd = -1;
    if (v == V_RING_UNIX) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, c->fd))
            die("socketpair");
    } else {
        tcp_pair(&c->fd[0], &c->fd[1]);
    }
    if (v != V_TCP) {
        c->memfd = local_ring_create(opt_ring, &c->ch);
        if (c->memfd < 0) {
            errno = -c->memfd;
            die("local_ring_create");
        }
    }
}

/* In the child: attach through the inherited memfd. */
static void conn_child(conn_t *c)
{
    close(c->fd[0]);
    if (c->v != V_TCP) {
        local_ring_close(&c->ch, 0);
        if (local_ring_attach(c->memfd, &c->ch))
            die("attach");
        c->end = (t_ring_end_t){ &c->ch, c->fd[1], opt_spin, 0, 0 };
    }
}

static void conn_parent(conn_t *c)
{
    close(c->fd[1]);
    if (c->v != V_TCP)
        c->end = (t_ring_end_t){ &c->ch, c->fd[0], opt_spin, 0, 0 };
}

static void conn_close(conn_t *c, int side)
{
    close(c->fd[side]);
    if (c->memfd >= 0)
        close(c->memfd);
    if (c->v != V_TCP)
        local_ring_close(&c->ch, 1);
}

static int c_send(conn_t *c, int dir, const void *p, size_t n)
{
    int rc;

    if (c->v == V_TCP)
        return full_write(c->fd[dir == LOCAL_RING_AB ? 0 : 1], p, n);
    rc = t_ring_send(&c->end, dir, p, n);
    if (rc)
        fprintf(stderr, "bench_ring: ring send: %s\n", strerror(-rc));
    return rc;
}

static ssize_t c_recv(conn_t *c, int dir, void *p, size_t n)
{
    if (c->v == V_TCP) {
        ssize_t r;

        do
            r = recv(c->fd[dir == LOCAL_RING_AB ? 1 : 0], p, n, 0);
        while (r < 0 && errno == EINTR);
        return r;
    }
    return t_ring_recv(&c->end, dir, p, n);
}

/* Stream total bytes in messages of msg bytes; returns MB/s (1e6 B/s). */
static double run_stream(int v, size_t msg, size_t total)
{
    size_t warm = 64u << 20;
    int sync[2], st;
    conn_t c;
    char *buf;
    double t0, t1;
    char b;
    pid_t pid;

    buf = mmap(NULL, msg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        die("mmap");
    memset(buf, 0x5a, msg);
    conn_open(&c, v);
    if (pipe(sync))
        die("pipe");
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        size_t got = 0, want = warm + total;

        conn_child(&c);
        while (got < want) {
            ssize_t r = c_recv(&c, LOCAL_RING_AB, buf, msg);

            if (r <= 0) {
                fprintf(stderr, "bench_ring: %s child: recv at %zu: %s\n", v_name[v], got,
                        r ? strerror((int)-r) : "EOF");
                _exit(2);
            }
            got += (size_t)r;
            if (got == warm && write(sync[1], "r", 1) != 1)
                _exit(3);
        }
        if (write(sync[1], "d", 1) != 1)
            _exit(3);
        conn_close(&c, 1);
        _exit(0);
    }
    conn_parent(&c);
    for (size_t s = 0; s < warm; s += msg)
        if (c_send(&c, LOCAL_RING_AB, buf, msg))
            die("send");
    if (read(sync[0], &b, 1) != 1)
        die("sync");
    t0 = now();
    for (size_t s = 0; s < total; s += msg)
        if (c_send(&c, LOCAL_RING_AB, buf, msg))
            die("send");
    if (read(sync[0], &b, 1) != 1)
        die("sync");
    t1 = now();
    waitpid(pid, &st, 0);
    conn_close(&c, 0);
    close(sync[0]);
    close(sync[1]);
    munmap(buf, msg);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        fprintf(stderr, "bench_ring: %s child failed (%d)\n", v_name[v], st);
    return total / (t1 - t0) / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Median 1-byte round trip in microseconds. */
static double run_pingpong(int v, int spin, int iters)
{
    double *rtt = calloc((size_t)iters, sizeof(double)), med;
    int saved = opt_spin, st;
    conn_t c;
    char b = 1;
    pid_t pid;

    opt_spin = spin;
    conn_open(&c, v);
    pid = fork();
    if (pid == 0) {
        conn_child(&c);
        for (int i = 0; i < iters + 100; i++)
            if (c_recv(&c, LOCAL_RING_AB, &b, 1) != 1 || c_send(&c, LOCAL_RING_BA, &b, 1))
                _exit(2);
        conn_close(&c, 1);
        _exit(0);
    }
    conn_parent(&c);
    for (int i = 0; i < iters + 100; i++) {
        double t0 = now();

        if (c_send(&c, LOCAL_RING_AB, &b, 1) || c_recv(&c, LOCAL_RING_BA, &b, 1) != 1)
            die("pingpong");
        if (i >= 100)
            rtt[i - 100] = (now() - t0) * 1e6;
    }
    waitpid(pid, &st, 0);
    conn_close(&c, 0);
    opt_spin = saved;
    qsort(rtt, (size_t)iters, sizeof(double), cmp_d);
    med = rtt[iters / 2];
    free(rtt);
    return med;
}

static double median3(double *x, int n)
{
    qsort(x, (size_t)n, sizeof(double), cmp_d);
    return x[n / 2];
}

int main(int argc, char **argv)
{
    size_t sizes[8] = { 4096, 65536, 1 << 20 };
    int nsizes = 3, reps;
    const char *ev = getenv("QUICK");

    opt_quick = ev && *ev && strcmp(ev, "0");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            opt_quick = 1;
        } else if (!strcmp(argv[i], "--ring-size") && i + 1 < argc) {
            opt_ring = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(argv[i], "--spin") && i + 1 < argc) {
            opt_spin = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            char *p = argv[++i];

            for (nsizes = 0; nsizes < 8 && *p; nsizes++) {
                sizes[nsizes] = strtoull(p, &p, 0);
                if (*p == ',')
                    p++;
            }
        } else {
            fprintf(stderr, "usage: bench_ring [--quick] [--ring-size B] [--sizes a,b] [--spin N]\n");
            return 2;
        }
    }
    {
        const char *missing;

        zc_real_resolve(&missing);
    }
    signal(SIGPIPE, SIG_IGN);
    reps = opt_quick ? 1 : 3;
    printf("# bench_ring: ring %zu KiB per direction, spin %d, %s\n",
           (opt_ring ? opt_ring : LOCAL_RING_SIZE_DEFAULT) >> 10, opt_spin,
           opt_quick ? "quick" : "full");
    printf("%-10s %12s %12s %12s %9s %9s\n", "msg", "tcp MB/s", "ring+unix", "ring+tcp",
           "x(unix)", "x(tcp)");
    for (int s = 0; s < nsizes; s++) {
        size_t total = (opt_quick ? 512u : 2048u) << 20;
        double r[V_COUNT][3], m[V_COUNT];

        if (sizes[s] < 16384)
            total /= 4;
        for (int k = 0; k < reps; k++)
            for (int v = 0; v < V_COUNT; v++)
                r[v][k] = run_stream(v, sizes[s], total - total % sizes[s]);
        for (int v = 0; v < V_COUNT; v++)
            m[v] = median3(r[v], reps);
        printf("%-10zu %12.0f %12.0f %12.0f %8.2fx %8.2fx\n", sizes[s], m[V_TCP],
               m[V_RING_UNIX], m[V_RING_TCP], m[V_RING_UNIX] / m[V_TCP],
               m[V_RING_TCP] / m[V_TCP]);
        fflush(stdout);
    }
    {
        int it = opt_quick ? 3000 : 20000;
        double t = run_pingpong(V_TCP, 0, it);
        double u0 = run_pingpong(V_RING_UNIX, 0, it), t0 = run_pingpong(V_RING_TCP, 0, it);
        double us = run_pingpong(V_RING_UNIX, 2000, it), ts = run_pingpong(V_RING_TCP, 2000, it);

        printf("pingpong 1 B median us: tcp %.1f | ring+unix %.1f, ring+tcp %.1f (blocking) | "
               "ring+unix %.1f, ring+tcp %.1f (spin 2000)\n", t, u0, t0, us, ts);
    }
    return 0;
}
