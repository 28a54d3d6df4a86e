/* Pairing of same-host connections (shim/paths/local/local_pair.c), one case per run:
 *   test_pair CASE [args]     exit 0 pass, 1 fail, 77 skip
 * Cases (see tests/pair/README.md): paired-tcp4 paired-tcp6 paired-unix
 * paired-mapped nonblock accept4 plain-client plain-server plain-acceptor foreign-server
 * foreign-client prefork self other-user crash late-offer closed-offer fork-requeue squatter
 * netns-unix timing.
 *
 * A "paired" exchange runs the switch-over of local_pair.h end to end: the
 * client writes app bytes on the kernel stream before it has the channel,
 * picks up the offer, publishes its switch point and continues through the
 * ring; the server switches once the client attached; each receiver splits
 * what the kernel gives it into data and doorbells with local_pair_rx_split
 * and reads the rest from the ring.  Both ends check every byte. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "local_pair.h"
#include "zc_key.h"

#include "pair_util.h"

static int case_paired(int fam, int nonblock, int use_accept4)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int mapped = fam == -AF_INET6;
    int lfd = listener(mapped ? AF_INET : fam, 0, &ss, &len, 1);
    end_t s, c;
    pid_t pid;

    if (mapped)
        len = addr_v4mapped(&ss);
    pid = fork();

    if (pid == 0) {
        client_connect(&c, &ss, len, nonblock, 1);
        client_paired_flow(&c);
        _exit(0);
    }
    server_accept(&s, lfd, use_accept4, 1);
    server_paired_flow(&s);
    close(s.fd);
    CHECK(wait_child(pid) == 0);
    printf("paired family=%d nonblock=%d accept4=%d: both ends paired, bytes checked\n", fam,
           nonblock, use_accept4);
    return 0;
}

/* zcsock server, plain client: the client reads exactly the app bytes. */
static int case_plain_client(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    int pfd[2];
    end_t s, c;
    pid_t pid;

    CHECK(pipe(pfd) == 0);
    pid = fork();
    if (pid == 0) {
        char buf[256];
        client_connect(&c, &ss, len, 0, 0);
        write_all(c.fd, "APPDATA", 7);
        shutdown(c.fd, SHUT_WR);
        size_t n = read_eof(c.fd, buf, sizeof(buf));
        _exit(n == 10 && memcmp(buf, "SERVERDATA", 10) == 0 ? 0 : 3);
    }
    server_accept(&s, lfd, 0, 1);
    CHECK(s.dec == LOCAL_PAIR_DECLINED && s.reason == LOCAL_PAIR_R_NOT_ZCSOCK);
    write_all(s.fd, "SERVERDATA", 10);
    char buf[64];
    CHECK(read_eof(s.fd, buf, sizeof(buf)) == 7 && memcmp(buf, "APPDATA", 7) == 0);
    close(s.fd);
    CHECK(wait_child(pid) == 0);
    printf("plain client: server declined (not_zcsock), client read exactly the app bytes\n");
    return 0;
}

/* Plain server (no beacon): the client declines before connecting. */
static int case_plain_server(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 0);
    end_t c;

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_DECLINED && c.reason == LOCAL_PAIR_R_NOT_ZCSOCK && c.ann < 0);
    int s = accept(lfd, NULL, NULL);
    write_all(c.fd, "X", 1);
    shutdown(c.fd, SHUT_WR);
    char buf[8];
    CHECK(read_eof(s, buf, sizeof(buf)) == 1 && buf[0] == 'X');
    printf("plain server: client declined (not_zcsock), server read exactly 1 byte\n");
    return 0;
}

/* Beacon present, but the accepting process never runs the pairing (a
 * listener handed to a program without zcsock): the client stays pending,
 * sees the server's bytes with no offer behind them (R3) and declines;
 * the acceptor reads exactly the app bytes. */
static int case_plain_acceptor(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    end_t c;
    pid_t pid = fork();

    if (pid == 0) {
        char buf[64];
        int s = accept(lfd, NULL, NULL);
        size_t n = read_eof(s, buf, sizeof(buf));
        write_all(s, "REPLY", 5);
        _exit(n == 3 && memcmp(buf, "APP", 3) == 0 ? 0 : 3);
    }
    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    write_all(c.fd, "APP", 3);
    c.tx = 3;
    shutdown(c.fd, SHUT_WR);
    char buf[8];
    stream_recv(&c, LOCAL_RING_AB, buf, 5);
    CHECK(memcmp(buf, "REPLY", 5) == 0 && c.dec == LOCAL_PAIR_PENDING && !c.ch.base);
    CHECK(c.ann < 0);                                   /* R3 closed it */
    CHECK(wait_child(pid) == 0);
    printf("plain acceptor behind a beacon: client pending -> declined by R3, bytes exact\n");
    return 0;
}

/* A foreign program (python3) as server or client. */
static int case_foreign(int as_server)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char cmd[1024], buf[64];

    if (system("python3 -c pass >/dev/null 2>&1") != 0) {
        printf("SKIP: no python3\n");
        return 77;
    }
    if (as_server) {
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(pfd[1], 1);
            execlp("python3", "python3", "-c",
                   "import socket,sys\n"
                   "l=socket.socket(); l.bind(('127.0.0.1',0)); l.listen(1)\n"
                   "print(l.getsockname()[1], flush=True)\n"
                   "s,_=l.accept(); d=b''\n"
                   "while True:\n"
                   "  x=s.recv(100)\n"
                   "  if not x: break\n"
                   "  d+=x\n"
                   "s.sendall(b'GOT:'+d); s.close()\n"
                   "sys.exit(0 if d==b'PING' else 3)\n", (char *)NULL);
            _exit(127);
        }
        close(pfd[1]);
        ssize_t n = read(pfd[0], cmd, sizeof(cmd) - 1);
        CHECK(n > 0);
        cmd[n] = 0;
        len = addr_make(AF_INET, &ss, NULL);
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)atoi(cmd));
        end_t c;
        client_connect(&c, &ss, len, 0, 1);
        CHECK(c.dec == LOCAL_PAIR_DECLINED && c.reason == LOCAL_PAIR_R_NOT_ZCSOCK);
        write_all(c.fd, "PING", 4);
        shutdown(c.fd, SHUT_WR);
        CHECK(read_eof(c.fd, buf, sizeof(buf)) == 8 && memcmp(buf, "GOT:PING", 8) == 0);
        CHECK(wait_child(pid) == 0);
        printf("python3 server: client declined, python read exactly PING\n");
        return 0;
    }
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    snprintf(cmd, sizeof(cmd),
             "python3 -c \"import socket,sys\n"
             "s=socket.create_connection(('127.0.0.1',%d)); s.sendall(b'HELLO'); "
             "s.shutdown(socket.SHUT_WR)\n"
             "d=b''\n"
             "while True:\n"
             "  x=s.recv(100)\n"
             "  if not x: break\n"
             "  d+=x\n"
             "sys.exit(0 if d==b'WORLD' else 3)\"",
             ntohs(((struct sockaddr_in *)&ss)->sin_port));
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    end_t s;
    server_accept(&s, lfd, 0, 1);
    CHECK(s.dec == LOCAL_PAIR_DECLINED && s.reason == LOCAL_PAIR_R_NOT_ZCSOCK);
    CHECK(read_eof(s.fd, buf, sizeof(buf)) == 5 && memcmp(buf, "HELLO", 5) == 0);
    write_all(s.fd, "WORLD", 5);
    close(s.fd);
    CHECK(wait_child(pid) == 0);
    printf("python3 client: server declined, python read exactly WORLD\n");
    return 0;
}

/* nginx-style prefork: the parent listens and announces, forks two workers
 * that accept, then drops its own beacon and listener; two clients pair. */
static int case_prefork(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 0), b;
    pid_t w[2], c[2];

    CHECK(local_pair_listen(lfd, &b) == 0 && b >= 0);
    for (int i = 0; i < 2; i++) {
        if ((w[i] = fork()) == 0) {
            int b2;
            end_t s;
            /* lazily re-announce: the name is held already (by the parent,
             * and after it drops it, by the inherited copies) */
            CHECK(local_pair_listen(lfd, &b2) == 0);
            server_accept(&s, lfd, i, 1);
            server_paired_flow(&s);
            _exit(0);
        }
    }
    local_pair_fd_close(b);             /* the announcing process "exits" */
    close(lfd);
    for (int i = 0; i < 2; i++) {
        if ((c[i] = fork()) == 0) {
            end_t e;
            client_connect(&e, &ss, len, i, 1);
            client_paired_flow(&e);
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++) {
        CHECK(wait_child(c[i]) == 0);
        CHECK(wait_child(w[i]) == 0);
    }
    printf("prefork: 2 workers accepted from one listener, both connections paired\n");
    return 0;
}

/* One process is both ends (nonblocking connect, then accept). */
static int case_self(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    end_t c, s;
    char buf[64];

    memset(&c, 0, sizeof(c));
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    c.dec = local_pair_connect_prepare(c.fd, (struct sockaddr *)&ss, len, &c.cookie, &c.ann, &c.reason);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    CHECK(connect(c.fd, (struct sockaddr *)&ss, len) == 0 || errno == EINPROGRESS);
    server_accept(&s, lfd, 1, 1);
    CHECK(s.dec == LOCAL_PAIR_PAIRED);
    struct pollfd p = { c.fd, POLLOUT, 0 };
    CHECK(poll(&p, 1, 5000) == 1);
    fcntl(c.fd, F_SETFL, 0);
    CHECK(local_pair_connected(c.fd, c.ann, NULL, 0, &c.reason) == LOCAL_PAIR_PENDING);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == 0);
    CHECK(local_pair_peer_attached(&s.ch));
    ring_send(&c, LOCAL_RING_BA, C_RING, sizeof(C_RING));
    stream_recv(&s, LOCAL_RING_BA, buf, sizeof(C_RING));
    CHECK(memcmp(buf, C_RING, sizeof(C_RING)) == 0);
    ring_send(&s, LOCAL_RING_AB, S_RING, sizeof(S_RING));
    stream_recv(&c, LOCAL_RING_AB, buf, sizeof(S_RING));
    CHECK(memcmp(buf, S_RING, sizeof(S_RING)) == 0);
    struct stat a, b;
    CHECK(fstat(c.memfd, &a) == 0 && fstat(s.memfd, &b) == 0 && a.st_ino == b.st_ino);
    printf("self: one process, both ends paired on the same memfd (ino %lu)\n",
           (unsigned long)a.st_ino);
    return 0;
}

/* Another uid never pairs: client-side check (TCP listener of another user)
 * and server-side check (AF_UNIX client of another user announces). */
static int case_other_user(void)
{
    struct sockaddr_storage ss, su;
    socklen_t len, lu;
    int lfd, ufd;
    pid_t pid;
    end_t s;

    if (geteuid() != 0) {
        printf("SKIP: needs root to switch uid\n");
        return 77;
    }
    lfd = listener(AF_INET, 0, &ss, &len, 1);
    ufd = listener(AF_UNIX, 0, &su, &lu, 0);
    pid = fork();
    if (pid == 0) {
        end_t c, u;
        CHECK(setgid(65534) == 0 && setuid(65534) == 0);
        client_connect(&c, &ss, len, 0, 1);
        if (c.dec != LOCAL_PAIR_DECLINED || c.reason != LOCAL_PAIR_R_OTHER_USER)
            FAIL("tcp client: dec %d reason %s", c.dec, local_pair_reason_name(c.reason));
        client_connect(&u, &su, lu, 0, 1);
        CHECK(u.dec == LOCAL_PAIR_PENDING);             /* unix: always announces */
        write_all(u.fd, "U", 1);
        char x;
        CHECK(read(u.fd, &x, 1) == 1 && x == 'V');
        CHECK(local_pair_channel_recv(u.fd, u.ann, 0, &u.cookie, &u.ch, &u.memfd) == -EAGAIN);
        _exit(0);
    }
    server_accept(&s, lfd, 0, 1);
    if (s.dec != LOCAL_PAIR_DECLINED || s.reason != LOCAL_PAIR_R_OTHER_USER)
        FAIL("tcp server: dec %d reason %s", s.dec, local_pair_reason_name(s.reason));
    server_accept(&s, ufd, 0, 1);
    if (s.dec != LOCAL_PAIR_DECLINED || s.reason != LOCAL_PAIR_R_OTHER_USER)
        FAIL("unix server: dec %d reason %s", s.dec, local_pair_reason_name(s.reason));
    char x;
    CHECK(read(s.fd, &x, 1) == 1 && x == 'U');
    write_all(s.fd, "V", 1);
    CHECK(wait_child(pid) == 0);
    printf("other user: declined on both sides (other_user)\n");
    return 0;
}

static int proc_net_unix_has(const char *needle)
{
    char line[512];
    int hit = 0;
    FILE *f = fopen("/proc/net/unix", "r");

    CHECK(f);
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            hit = 1;
    fclose(f);
    return hit;
}

/* The rendezvous name of cookie c, as local_pair.c makes it: keyed by the
 * user's key (zcsock/v2) where public is 0 and there is one, else public
 * (zcsock/v1, the cookie: all another user can know).  Into *u (abstract);
 * returns the address length. */
static socklen_t rv_name(char kind, uint64_t c, int public, struct sockaddr_un *u)
{
    uint8_t key[ZC_KEY_LEN], in[9];
    int keyed = !public && zc_key_get(key);
    int n;

    if (keyed) {
        in[0] = (uint8_t)kind;
        for (int i = 0; i < 8; i++)
            in[1 + i] = (uint8_t)(c >> (8 * i));
        c = zc_siphash(key, in, sizeof(in));
    }
    memset(u, 0, sizeof(*u));
    u->sun_family = AF_UNIX;
    n = snprintf(u->sun_path + 1, sizeof(u->sun_path) - 1, "zcsock/v%d/%c/%016llx",
                 keyed ? 2 : 1, kind, (unsigned long long)c);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static uint64_t cookie_of(int fd)
{
    uint64_t c;
    socklen_t l = sizeof(c);

    CHECK(getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l) == 0);
    return c;
}

/* Socket fd's name as /proc/net/unix shows it (@ for the NUL). */
static void cookie_hex(int fd, char kind, char *out, size_t cap)
{
    struct sockaddr_un u;
    socklen_t n = rv_name(kind, cookie_of(fd), 0, &u);

    snprintf(out, cap, "@%.*s", (int)(n - offsetof(struct sockaddr_un, sun_path) - 1),
             u.sun_path + 1);
}

/* SIGKILLed ends leave no names behind; the same port later pairs with
 * nothing stale. */
static int case_crash(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int pfd[2];
    char names[2][64];
    pid_t pid;
    int port;

    CHECK(pipe(pfd) == 0);
    pid = fork();
    if (pid == 0) {                     /* zcsock server and client, then killed */
        int lfd = listener(AF_INET, 0, &ss, &len, 1);
        end_t c, s;
        char l[64];
        client_connect(&c, &ss, len, 0, 1);
        CHECK(c.dec == LOCAL_PAIR_PENDING);
        server_accept(&s, lfd, 0, 1);
        CHECK(s.dec == LOCAL_PAIR_PAIRED);
        cookie_hex(lfd, 'L', l, sizeof(l));
        cookie_hex(c.fd, 'C', names[1], sizeof(names[1]));
        CHECK(proc_net_unix_has(l) && proc_net_unix_has(names[1]));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        CHECK(write(pfd[1], &port, sizeof(port)) == sizeof(port));
        CHECK(write(pfd[1], l, sizeof(l)) == sizeof(l));
        CHECK(write(pfd[1], names[1], sizeof(names[1])) == sizeof(names[1]));
        pause();
        _exit(0);
    }
    CHECK(read(pfd[0], &port, sizeof(port)) == sizeof(port));
    CHECK(read(pfd[0], names[0], sizeof(names[0])) == sizeof(names[0]));
    CHECK(read(pfd[0], names[1], sizeof(names[1])) == sizeof(names[1]));
    kill(pid, SIGKILL);
    CHECK(wait_child(pid) == 128 + SIGKILL);
    for (int i = 0; i < 2; i++)
        if (proc_net_unix_has(names[i]))
            FAIL("stale name %s", names[i]);
    /* Same port, plain listener now: nothing may pair. */
    int lfd = listener(AF_INET, port, &ss, &len, 0);
    end_t c;
    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_DECLINED && c.reason == LOCAL_PAIR_R_NOT_ZCSOCK);
    int s = accept(lfd, NULL, NULL);
    CHECK(s >= 0);
    printf("crash: %s and %s gone after SIGKILL; port %d reused, declined\n", names[0],
           names[1], port);
    return 0;
}

/* Connect to the announcement of client socket fd as a server would. */
static int ann_dial(int fd)
{
    struct sockaddr_un u;
    socklen_t n = rv_name('C', cookie_of(fd), 0, &u);
    int s;

    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    if (connect(s, (struct sockaddr *)&u, n) < 0) {
        close(s);
        return -1;
    }
    return s;
}

static int is_listener(int fd)
{
    int acc = -1;
    socklen_t l = sizeof(acc);

    CHECK(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) == 0);
    return acc;
}

/* Send offer o with descriptors fds[0..n) on announcement connection d, as
 * a server (or an impostor) would. */
static ssize_t offer_send(int d, const local_pair_offer_t *o, const int *fds, int n)
{
    union { struct cmsghdr h; char b[CMSG_SPACE(4 * sizeof(int))]; } cm;
    struct iovec iov = { (void *)o, sizeof(*o) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);

    memset(&cm, 0, sizeof(cm));
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(h), fds, (size_t)n * sizeof(int));
    return sendmsg(d, &mh, 0);
}

/* A valid-looking channel for client c as an impostor would build it: every
 * cookie right (they are public through sock_diag). */
static int forged_channel(const end_t *c, int server_sock, local_pair_offer_t *o,
                          local_ring_t *ch)
{
    uint64_t ck;
    socklen_t l = sizeof(ck);
    int memfd = local_ring_create(1 << 14, ch);
    local_pair_ctl_t *ctl;

    CHECK(memfd >= 0);
    ctl = (local_pair_ctl_t *)(ch->base + LOCAL_PAIR_CTL_OFF);
    o->magic = LOCAL_PAIR_OFFER_MAGIC;
    CHECK(getsockopt(server_sock, SOL_SOCKET, SO_COOKIE, &ck, &l) == 0);
    o->server_cookie = ctl->server_cookie = ck;
    CHECK(getsockopt(c->fd, SOL_SOCKET, SO_COOKIE, &ck, &l) == 0);
    o->client_cookie = ctl->client_cookie = ck;
    ctl->switch_at[0] = ctl->switch_at[1] = LOCAL_PAIR_SWITCH_UNSET;
    ctl->magic = LOCAL_PAIR_CTL_MAGIC;
    return memfd;
}

/* From a child that holds neither end of connection c (s: the server
 * end), send offer o + memfd with fd_hint hint, and n descriptors. */
static void forge_from_child(const end_t *c, int s, local_pair_offer_t o, int memfd,
                             uint64_t hint, int n)
{
    pid_t pid = fork();

    CHECK(pid >= 0);
    if (pid == 0) {
        int d = ann_dial(c->fd);

        close(s);
        close(c->fd);
        o.fd_hint = hint;
        _exit(d >= 0 && offer_send(d, &o, (int[]){ memfd, memfd }, n) == sizeof(o) ? 0 : 1);
    }
    CHECK(wait_child(pid) == 0);
}

/* A same-user process that holds neither end forges offers (every cookie
 * right, a channel of its own, the number of the server's descriptor as
 * its hint): refused (-EPERM; -EPROTO with two descriptors) and the client
 * stays on the kernel stream; the real server's offer then pairs. */
static int case_forged_offer(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    end_t c, srv;
    local_pair_offer_t o;
    local_ring_t ch;

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    int s = accept(lfd, NULL, NULL);
    int memfd = forged_channel(&c, s, &o, &ch);
    forge_from_child(&c, s, o, memfd, (uint64_t)s, 1);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EPERM);
    forge_from_child(&c, s, o, memfd, (uint64_t)c.fd, 1);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EPERM);
    forge_from_child(&c, s, o, memfd, (uint64_t)s, 2);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EPROTO);
    /* a forged re-queue: its second descriptor is not our socket */
    forge_from_child(&c, s, o, memfd, LOCAL_PAIR_HINT_REQUEUE, 2);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EPERM);
    CHECK(!local_pair_peer_attached(&ch));
    local_ring_close(&ch, 1);
    close(memfd);
    close(s);
    /* the real server's offer still pairs */
    client_connect(&c, &ss, len, 0, 1);
    server_accept(&srv, lfd, 0, 1);
    CHECK(srv.dec == LOCAL_PAIR_PAIRED);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == 0);
    printf("forged offer from a process holding neither end: -EPERM (server's or client's "
           "descriptor number as hint), -EPROTO (two descriptors); the real server's offer "
           "pairs\n");
    return 0;
}

/* The server connected to the announcement but has not sent its offer yet
 * when the client looks: the client keeps that connection (-EAGAIN), then
 * takes the offer from it; and a server that gives up closes it (EOF:
 * -ECONNRESET, no offer). */
static int case_late_offer(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    end_t c, c2;
    local_pair_offer_t o = { .magic = LOCAL_PAIR_OFFER_MAGIC };
    local_ring_t ch;
    uint64_t ck;
    socklen_t l = sizeof(ck);

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    int s = accept(lfd, NULL, NULL);
    int d = ann_dial(c.fd);
    CHECK(d >= 0);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EAGAIN);
    CHECK(!is_listener(c.ann));                 /* the connection took its place */
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -EAGAIN);
    /* a valid offer, built by hand from the documented format */
    int memfd = local_ring_create(1 << 14, &ch);
    CHECK(memfd >= 0);
    local_pair_ctl_t *ctl = (local_pair_ctl_t *)(ch.base + LOCAL_PAIR_CTL_OFF);
    CHECK(getsockopt(s, SOL_SOCKET, SO_COOKIE, &ck, &l) == 0);
    o.server_cookie = ctl->server_cookie = ck;
    CHECK(getsockopt(c.fd, SOL_SOCKET, SO_COOKIE, &ck, &l) == 0);
    o.client_cookie = ctl->client_cookie = ck;
    ctl->switch_at[0] = ctl->switch_at[1] = LOCAL_PAIR_SWITCH_UNSET;
    ctl->magic = LOCAL_PAIR_CTL_MAGIC;
    o.fd_hint = (uint64_t)s;
    CHECK(offer_send(d, &o, &memfd, 1) == sizeof(o));
    close(d);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == 0);
    CHECK(local_pair_peer_attached(&ch));
    struct stat a, b;
    CHECK(fstat(c.memfd, &a) == 0 && fstat(memfd, &b) == 0 && a.st_ino == b.st_ino);

    client_connect(&c2, &ss, len, 0, 1);
    CHECK(c2.dec == LOCAL_PAIR_PENDING);
    d = ann_dial(c2.fd);
    CHECK(d >= 0);
    CHECK(local_pair_channel_recv(c2.fd, c2.ann, 0, &c2.cookie, &c2.ch, &c2.memfd) == -EAGAIN);
    close(d);
    CHECK(local_pair_channel_recv(c2.fd, c2.ann, 0, &c2.cookie, &c2.ch, &c2.memfd) == -ECONNRESET);
    printf("late offer: connection kept in place of the listener, offer taken later; "
           "closed without offer -> ECONNRESET\n");
    return 0;
}

/* The server offers, answers and closes before the client looks (a
 * one-request connection): the offer names a descriptor the server no
 * longer holds, and the client's socket has the FIN: declined as the
 * connection's end (-ECONNABORTED, "closed"), not as a doubt about who
 * sent it.  And the server's accept of a client that closed before its
 * first data call: "closed" too. */
static int case_closed_offer(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    end_t c;
    local_ring_t ch;
    char b[8];
    int memfd = -1, reason = -1;

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    int s = accept(lfd, NULL, NULL);
    CHECK(s >= 0);
    CHECK(local_pair_accepted(lfd, s, &(uint64_t){ 0 }, 1 << 16, &ch, &memfd, &reason) == LOCAL_PAIR_PAIRED);
    CHECK(write(s, "answer", 6) == 6);
    close(s);
    local_ring_close(&ch, 1);
    close(memfd);
    CHECK(read(c.fd, b, sizeof(b)) == 6);
    CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == -ECONNABORTED);
    close(c.fd);

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    s = accept(lfd, NULL, NULL);
    CHECK(s >= 0);
    close(c.fd);
    CHECK(local_pair_accepted(lfd, s, &(uint64_t){ 0 }, 1 << 16, &ch, &memfd, &reason) == LOCAL_PAIR_DECLINED);
    CHECK(reason == LOCAL_PAIR_R_CLOSED);
    printf("closed offer: the client declines -ECONNABORTED (closed), the server of a client "
           "that closed first declines closed\n");
    return 0;
}

/* A pending client forks; the parent picks the offer up with
 * LOCAL_PAIR_F_REQUEUE, and the child, holding the same announcement,
 * still finds it, even after the parent closed its descriptor of the
 * connection and the server closed its socket (the re-queue's proof is the
 * socket it carries). */
static int case_fork_requeue(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1), pfd[2];
    end_t c, s;
    struct stat a;

    client_connect(&c, &ss, len, 0, 1);
    CHECK(c.dec == LOCAL_PAIR_PENDING);
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char x;
        end_t k = c;
        CHECK(read(pfd[0], &x, 1) == 1);        /* parent picked up */
        CHECK(local_pair_channel_recv(k.fd, k.ann, LOCAL_PAIR_F_REQUEUE, &k.cookie, &k.ch, &k.memfd) == 0);
        CHECK(fstat(k.memfd, &a) == 0);
        ino_t ino = a.st_ino;
        CHECK(write(pfd[1], &ino, sizeof(ino)) == sizeof(ino));
        _exit(0);
    }
    server_accept(&s, lfd, 0, 1);
    CHECK(s.dec == LOCAL_PAIR_PAIRED);
    CHECK(local_pair_channel_recv(c.fd, c.ann, LOCAL_PAIR_F_REQUEUE, &c.cookie, &c.ch, &c.memfd) == 0);
    local_pair_fd_close(c.ann);
    close(c.fd);
    close(s.fd);
    CHECK(write(pfd[1], "x", 1) == 1);
    CHECK(wait_child(pid) == 0);
    ino_t ino;
    CHECK(read(pfd[0], &ino, sizeof(ino)) == sizeof(ino));
    CHECK(fstat(s.memfd, &a) == 0 && a.st_ino == ino);
    printf("fork while pending: both holders attached to the same channel (ino %lu)\n",
           (unsigned long)ino);
    return 0;
}

/* A squatter binds the client's announcement name first, as well as it can
 * know it.  A same-user process reads the user's key and binds the keyed
 * name: the client cannot announce (declines), the server finds an owner
 * that does not hold the client's socket (unverified) and sends it nothing.
 * Another user cannot read the key: it binds the public name of the
 * cookie, which the library no longer uses where the user has a key, and
 * the connection pairs (issue 30, item 7). */
static int case_squatter(int same_user)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd, pfd[2];
    end_t c, s;
    uint64_t ck;
    uint8_t key[ZC_KEY_LEN];

    if (!same_user && geteuid() != 0) {
        printf("SKIP: needs root to switch uid\n");
        return 77;
    }
    if (!zc_key_get(key)) {
        printf("SKIP: no private directory (the names are public)\n");
        return 77;
    }
    lfd = listener(AF_INET, 0, &ss, &len, 1);
    memset(&c, 0, sizeof(c));
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck = cookie_of(c.fd);
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct sockaddr_un u;
        socklen_t n;

        close(c.fd);        /* a squatter does not hold the client's socket */
        if (!same_user)
            CHECK(setgid(65534) == 0 && setuid(65534) == 0);
        n = rv_name('C', ck, !same_user, &u);   /* (another user: no key to read) */
        int q = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        CHECK(bind(q, (struct sockaddr *)&u, n) == 0);
        CHECK(listen(q, 4) == 0);
        CHECK(write(pfd[1], "x", 1) == 1);
        struct pollfd p = { q, POLLIN, 0 };
        if (poll(&p, 1, same_user ? 10000 : 500) != 1)
            _exit(same_user ? 4 : 0);           /* nobody dialled */
        int a = accept(q, NULL, NULL);          /* the server's dial */
        char buf[64];
        union { struct cmsghdr h; char b[CMSG_SPACE(4 * sizeof(int))]; } cm;
        struct iovec iov = { buf, sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
                             .msg_controllen = sizeof(cm.b) };
        ssize_t r = recvmsg(a, &mh, 0);
        _exit(r == 0 && mh.msg_controllen == 0 && same_user ? 0 : 3);   /* nothing, EOF */
    }
    char x;
    CHECK(read(pfd[0], &x, 1) == 1);
    c.dec = local_pair_connect_prepare(c.fd, (struct sockaddr *)&ss, len, &c.cookie, &c.ann, &c.reason);
    if (same_user)
        CHECK(c.dec == LOCAL_PAIR_DECLINED && c.ann < 0);
    else
        CHECK(c.dec == LOCAL_PAIR_PENDING && c.ann >= 0);
    CHECK(connect(c.fd, (struct sockaddr *)&ss, len) == 0);
    server_accept(&s, lfd, 0, 1);
    if (same_user && (s.dec != LOCAL_PAIR_DECLINED || s.reason != LOCAL_PAIR_R_UNVERIFIED))
        FAIL("server: dec %d reason %s", s.dec, local_pair_reason_name(s.reason));
    if (!same_user && s.dec != LOCAL_PAIR_PAIRED)
        FAIL("server: dec %d reason %s: another user's squat of the public name kept it "
             "from pairing", s.dec, local_pair_reason_name(s.reason));
    CHECK(wait_child(pid) == 0);
    printf("squatter (%s user): client %s (%s), server %s (%s), squatter got nothing\n",
           same_user ? "same" : "other", same_user ? "declined" : "announced",
           local_pair_reason_name(c.reason), same_user ? "declined" : "paired",
           local_pair_reason_name(s.reason));
    return 0;
}

/* AF_UNIX pathname sockets cross network namespaces; abstract names and
 * sock_diag do not: a client in another namespace never pairs (the server
 * cannot see its socket: not_local; the client's R3 ends its pending
 * state). */
static int case_netns_unix(void)
{
    struct sockaddr_un u = { .sun_family = AF_UNIX };
    int lfd;
    end_t s;
    pid_t pid;

    if (geteuid() != 0) {
        printf("SKIP: needs root for unshare(CLONE_NEWNET)\n");
        return 77;
    }
    snprintf(u.sun_path, sizeof(u.sun_path), "/tmp/zcsock-test-pair-%d.sock", getpid());
    unlink(u.sun_path);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(bind(lfd, (struct sockaddr *)&u, sizeof(u)) == 0 && listen(lfd, 4) == 0);
    pid = fork();
    if (pid == 0) {
        end_t c;
        char buf[8];
        if (unshare(CLONE_NEWNET) < 0) {
            printf("SKIP: unshare: %s\n", strerror(errno));
            _exit(77);
        }
        client_connect(&c, (struct sockaddr_storage *)&u, sizeof(u), 0, 1);
        CHECK(c.dec == LOCAL_PAIR_PENDING);
        write_all(c.fd, "N", 1);
        stream_recv(&c, LOCAL_RING_AB, buf, 1);
        CHECK(buf[0] == 'M' && !c.ch.base && c.ann < 0);
        _exit(0);
    }
    server_accept(&s, lfd, 0, 1);
    int rc = 0;
    char x;
    if (s.dec != LOCAL_PAIR_DECLINED || s.reason != LOCAL_PAIR_R_NOT_LOCAL) {
        fprintf(stderr, "server: dec %d reason %s\n", s.dec, local_pair_reason_name(s.reason));
        rc = 1;
    }
    CHECK(read(s.fd, &x, 1) == 1 && x == 'N');
    write_all(s.fd, "M", 1);
    int st = wait_child(pid);
    unlink(u.sun_path);
    if (st == 77)
        return 77;
    CHECK(st == 0 && rc == 0);
    printf("netns: AF_UNIX client in another network namespace: server not_local, "
           "client R3\n");
    return 0;
}

/* Added cost of pairing on connect+accept (+ pickup), one process, with
 * the pairing steps timed one by one. */
static int case_timing(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(AF_INET, 0, &ss, &len, 1);
    int n = getenv("QUICK") && *getenv("QUICK") ? 100 : 400;
    double t[2] = { 0, 0 }, ph[4] = { 0, 0, 0, 0 }, a;
    static const char *const names[4] = { "prepare", "connected", "accepted", "pickup" };

    for (int mode = 0; mode < 2; mode++) {
        for (int i = 0; i < n; i++) {
            double t0 = now_us();
            end_t c, s;
            memset(&c, 0, sizeof(c));
            memset(&s, 0, sizeof(s));
            c.ann = -1;
            c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            a = now_us();
            if (mode)
                c.dec = local_pair_connect_prepare(c.fd, (struct sockaddr *)&ss, len, &c.cookie, &c.ann,
                                                   &c.reason);
            ph[0] += now_us() - a;
            CHECK(connect(c.fd, (struct sockaddr *)&ss, len) == 0);
            a = now_us();
            if (mode)
                c.dec = local_pair_connected(c.fd, c.ann, NULL, 0, &c.reason);
            ph[1] += now_us() - a;
            s.fd = accept(lfd, NULL, NULL);
            a = now_us();
            if (mode)
                s.dec = local_pair_accepted(lfd, s.fd, &s.cookie, 1 << 16, &s.ch, &s.memfd, &s.reason);
            ph[2] += now_us() - a;
            a = now_us();
            if (mode) {
                CHECK(c.dec == LOCAL_PAIR_PENDING && s.dec == LOCAL_PAIR_PAIRED);
                CHECK(local_pair_channel_recv(c.fd, c.ann, 0, &c.cookie, &c.ch, &c.memfd) == 0);
            }
            ph[3] += now_us() - a;
            t[mode] += now_us() - t0;
            if (mode) {
                local_ring_close(&c.ch, 1);
                local_ring_close(&s.ch, 1);
                local_pair_fd_close(c.ann);
                local_pair_fd_close(c.memfd);
                local_pair_fd_close(s.memfd);
            }
            close(c.fd);
            close(s.fd);
        }
    }
    printf("timing: connect+accept plain %.1f us, with pairing (announce, offer, pickup, "
           "64 KiB ring) %.1f us, added %.1f us per connection (n=%d)\n",
           t[0] / n, t[1] / n, (t[1] - t[0]) / n, n);
    printf("timing: steps");
    for (int i = 0; i < 4; i++)
        printf(" %s %.1f us", names[i], ph[i] / n);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";

    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(c, "paired-tcp4"))
        return case_paired(AF_INET, 0, 0);
    if (!strcmp(c, "paired-tcp6"))
        return case_paired(AF_INET6, 0, 0);
    if (!strcmp(c, "paired-mapped"))
        return case_paired(-AF_INET6, 0, 0);
    if (!strcmp(c, "paired-unix"))
        return case_paired(AF_UNIX, 0, 0);
    if (!strcmp(c, "nonblock"))
        return case_paired(AF_INET6, 1, 0);
    if (!strcmp(c, "accept4"))
        return case_paired(AF_INET, 1, 1);
    if (!strcmp(c, "plain-client"))
        return case_plain_client();
    if (!strcmp(c, "plain-server"))
        return case_plain_server();
    if (!strcmp(c, "plain-acceptor"))
        return case_plain_acceptor();
    if (!strcmp(c, "foreign-server"))
        return case_foreign(1);
    if (!strcmp(c, "foreign-client"))
        return case_foreign(0);
    if (!strcmp(c, "prefork"))
        return case_prefork();
    if (!strcmp(c, "self"))
        return case_self();
    if (!strcmp(c, "other-user"))
        return case_other_user();
    if (!strcmp(c, "crash"))
        return case_crash();
    if (!strcmp(c, "late-offer"))
        return case_late_offer();
    if (!strcmp(c, "fork-requeue"))
        return case_fork_requeue();
    if (!strcmp(c, "squatter"))
        return case_squatter(0);
    if (!strcmp(c, "squatter-same"))
        return case_squatter(1);
    if (!strcmp(c, "closed-offer"))
        return case_closed_offer();
    if (!strcmp(c, "forged-offer"))
        return case_forged_offer();
    if (!strcmp(c, "netns-unix"))
        return case_netns_unix();
    if (!strcmp(c, "timing"))
        return case_timing();
    fprintf(stderr, "unknown case '%s'\n", c);
    return 2;
}
