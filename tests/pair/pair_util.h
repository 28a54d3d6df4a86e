/* Helpers of tests/pair/test_pair.c: the two ends of a connection driven
 * through the pairing protocol by hand (connect/accept decisions, offers,
 * ring and kernel streams, checks).  Included once, by test_pair.c. */
#ifndef PAIR_UTIL_H
#define PAIR_UTIL_H

#define FAIL(...) do { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CHECK(c) do { if (!(c)) FAIL("%s", #c); } while (0)

static const char C_TCP[] = "client-bytes-before-the-channel";
static const char C_RING[] = "client-bytes-through-the-ring";
static const char S_RING[] = "server-bytes-through-the-ring";
static const char S_TCP[] = "server-bytes-before-the-switch";

typedef struct end {
    int fd, ann, memfd, dec, reason;
    uint64_t cookie;            /* its socket cookie once a pairing step asked (0: not yet) */
    local_ring_t ch;
    uint64_t tx, rx;            /* app bytes sent / consumed on the kernel stream */
} end_t;

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* --- addresses --- */

static socklen_t addr_make(int fam, struct sockaddr_storage *ss, const char *unix_name)
{
    memset(ss, 0, sizeof(*ss));
    if (fam == AF_INET) {
        struct sockaddr_in *a = (void *)ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof(*a);
    }
    if (fam == AF_INET6) {
        struct sockaddr_in6 *a = (void *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        return sizeof(*a);
    }
    struct sockaddr_un *u = (void *)ss;
    u->sun_family = AF_UNIX;
    u->sun_path[0] = 0;
    snprintf(u->sun_path + 1, sizeof(u->sun_path) - 1, "%s", unix_name);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(unix_name));
}

/* Listener on an ephemeral port (or port); ss and len: where to connect. */
static int listener(int fam, int port, struct sockaddr_storage *ss, socklen_t *len, int beacon)
{
    char name[64];
    int one = 1, fd, b;

    snprintf(name, sizeof(name), "zcsock-test-pair/%d/%ld", getpid(), (long)now_us());
    *len = addr_make(fam, ss, name);
    if (fam != AF_UNIX)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)ss, *len) < 0) {
        if (fam == AF_INET6) {
            printf("SKIP: no ::1 (%s)\n", strerror(errno));
            exit(77);
        }
        FAIL("bind: %s", strerror(errno));
    }
    CHECK(listen(fd, 16) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)ss, len) == 0);
    if (beacon) {
        CHECK(local_pair_listen(fd, &b) == (fam == AF_UNIX ? -ENOTSUP : 0));
        CHECK(fam == AF_UNIX || b >= 0);
        if (b >= 0)
            CHECK(fcntl(b, F_SETFD, 0) == 0);   /* kept by forked children */
    }
    return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
    CHECK(write(fd, p, n) == (ssize_t)n);
}

/* Read until EOF into buf; returns the count. */
static size_t read_eof(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    ssize_t n;

    while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
        got += (size_t)n;
    return got;
}

/* --- client and server ends --- */

static void client_connect(end_t *e, const struct sockaddr_storage *ss, socklen_t len,
                           int nonblock, int zcsock)
{
    int rc;

    memset(e, 0, sizeof(*e));
    e->ann = e->memfd = -1;
    e->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    CHECK(e->fd >= 0);
    if (zcsock)
        e->dec = local_pair_connect_prepare(e->fd, (const struct sockaddr *)ss, len, &e->cookie, &e->ann,
                                            &e->reason);
    rc = connect(e->fd, (const struct sockaddr *)ss, len);
    if (rc < 0 && nonblock && errno == EINPROGRESS) {
        struct pollfd p = { e->fd, POLLOUT, 0 };
        CHECK(poll(&p, 1, 5000) == 1);
        rc = 0;
    }
    if (rc < 0)
        FAIL("connect: %s", strerror(errno));
    if (nonblock)
        CHECK(fcntl(e->fd, F_SETFL, 0) == 0);
    if (zcsock && e->dec == LOCAL_PAIR_PENDING) {
        e->dec = local_pair_connected(e->fd, e->ann, NULL, 0, &e->reason);
        if (e->dec != LOCAL_PAIR_PENDING) {
            local_pair_fd_close(e->ann);
            e->ann = -1;
        }
    }
}

static void server_accept(end_t *e, int lfd, int use_accept4, int zcsock)
{
    memset(e, 0, sizeof(*e));
    e->ann = e->memfd = -1;
    e->fd = use_accept4 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : accept(lfd, NULL, NULL);
    CHECK(e->fd >= 0);
    if (zcsock)
        e->dec = local_pair_accepted(lfd, e->fd, &e->cookie, 1 << 16, &e->ch, &e->memfd, &e->reason);
}

/* Receive exactly n stream bytes in direction dir (R1/R2 of local_pair.h). */
static void stream_recv(end_t *e, int dir, char *buf, size_t n)
{
    size_t got = 0, done;
    char tmp[256];

    while (got < n) {
        uint64_t sw = e->ch.base ? local_pair_switch_get(&e->ch, dir) : LOCAL_PAIR_SWITCH_UNSET;
        if (sw != LOCAL_PAIR_SWITCH_UNSET && e->rx == sw) {
            struct iovec iov = { buf + got, n - got };
            int rc = local_ring_read(&e->ch, dir, &iov, 1, 0, &done);
            CHECK(rc >= 0);
            got += done;
            if (done)
                continue;
            rc = local_ring_rx_wait_prepare(&e->ch, dir);
            CHECK(rc >= 0);
            if (rc == 0)
                continue;
            CHECK(read(e->fd, tmp, sizeof(tmp)) > 0);   /* doorbells only */
            local_ring_rx_wait_cancel(&e->ch, dir);
            continue;
        }
        size_t want = n - got;
        if (sw != LOCAL_PAIR_SWITCH_UNSET && sw - e->rx < want)
            want = (size_t)(sw - e->rx);
        if (want > sizeof(tmp))
            want = sizeof(tmp);
        ssize_t r = read(e->fd, tmp, want);
        if (r <= 0)
            FAIL("read: %zd %s", r, strerror(errno));
        if (e->ann >= 0 && !e->ch.base) {          /* R3: pending client */
            int rc = local_pair_channel_recv(e->fd, e->ann, 0, &e->cookie, &e->ch, &e->memfd);
            local_pair_fd_close(e->ann);
            e->ann = -1;
            if (rc == 0)
                e->dec = LOCAL_PAIR_PAIRED;
        }
        size_t data = local_pair_rx_split(e->ch.base ? &e->ch : NULL, dir, e->rx, (size_t)r);
        memcpy(buf + got, tmp, data);
        got += data;
        e->rx += data;
    }
}

/* Send through the ring after publishing the switch point (S2), doorbell
 * when the ring says so (S3). */
static void ring_send(end_t *e, int dir, const void *p, size_t n)
{
    struct iovec iov = { (void *)p, n };
    size_t done;
    int rc = local_pair_switch_publish(&e->ch, dir, e->tx);

    CHECK(rc == 0 || rc == -EALREADY);
    rc = local_ring_write(&e->ch, dir, &iov, 1, &done);
    CHECK(rc >= 0 && done == n);
    if (rc & LOCAL_RING_F_DOORBELL)
        write_all(e->fd, "", 1);
}

/* Orderly end: shut down our direction, then drain (leftover doorbells)
 * until the peer's FIN, so neither side's close turns into a reset. */
static void finish(end_t *e)
{
    char buf[64];

    CHECK(shutdown(e->fd, SHUT_WR) == 0);
    for (int i = 0; i < 100 && read(e->fd, buf, sizeof(buf)) > 0; i++)
        ;
}

static void client_paired_flow(end_t *e)
{
    char buf[64];
    double t0 = now_us();

    CHECK(e->dec == LOCAL_PAIR_PENDING && e->ann >= 0);
    write_all(e->fd, C_TCP, sizeof(C_TCP));             /* before the channel */
    e->tx += sizeof(C_TCP);
    for (;;) {                                          /* test only: wait */
        int rc = local_pair_channel_recv(e->fd, e->ann, 0, &e->cookie, &e->ch, &e->memfd);
        if (rc == 0)
            break;
        CHECK(rc == -EAGAIN);
        if (now_us() - t0 > 5e6)
            FAIL("no offer");
        usleep(200);
    }
    local_pair_fd_close(e->ann);
    e->ann = -1;
    e->dec = LOCAL_PAIR_PAIRED;
    ring_send(e, LOCAL_RING_BA, C_RING, sizeof(C_RING));
    stream_recv(e, LOCAL_RING_AB, buf, sizeof(S_TCP));
    CHECK(memcmp(buf, S_TCP, sizeof(S_TCP)) == 0);
    stream_recv(e, LOCAL_RING_AB, buf, sizeof(S_RING));
    CHECK(memcmp(buf, S_RING, sizeof(S_RING)) == 0);
    CHECK(local_pair_switch_get(&e->ch, LOCAL_RING_AB) == sizeof(S_TCP));
    finish(e);
}

static void server_paired_flow(end_t *e)
{
    char buf[64];
    double t0 = now_us();

    if (e->dec != LOCAL_PAIR_PAIRED)
        FAIL("server decision %d reason %s", e->dec, local_pair_reason_name(e->reason));
    write_all(e->fd, S_TCP, sizeof(S_TCP));             /* before it switches */
    e->tx += sizeof(S_TCP);
    stream_recv(e, LOCAL_RING_BA, buf, sizeof(C_TCP));
    CHECK(memcmp(buf, C_TCP, sizeof(C_TCP)) == 0);
    while (!local_pair_peer_attached(&e->ch)) {         /* S1 (test: wait) */
        if (now_us() - t0 > 5e6)
            FAIL("client never attached");
        usleep(200);
    }
    ring_send(e, LOCAL_RING_AB, S_RING, sizeof(S_RING));
    stream_recv(e, LOCAL_RING_BA, buf, sizeof(C_RING));
    CHECK(memcmp(buf, C_RING, sizeof(C_RING)) == 0);
    CHECK(local_pair_switch_get(&e->ch, LOCAL_RING_BA) == sizeof(C_TCP));
    finish(e);
}

static int wait_child(pid_t pid)
{
    int st;

    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --- cases --- */

/* An AF_INET listener reached from an AF_INET6 socket (::ffff:127.0.0.1). */
static socklen_t addr_v4mapped(struct sockaddr_storage *ss)
{
    struct sockaddr_in a4 = *(struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (void *)ss;

    memset(ss, 0, sizeof(*ss));
    a6->sin6_family = AF_INET6;
    a6->sin6_port = a4.sin_port;
    a6->sin6_addr.s6_addr[10] = a6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&a6->sin6_addr.s6_addr[12], &a4.sin_addr, 4);
    return sizeof(*a6);
}

#endif
