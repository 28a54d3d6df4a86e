/* Page exchange end to end: two processes of one program (fork), both under
 * the library with ZCSOCK_EXCHANGE=1, over TCP loopback (or AF_UNIX with
 * "unix" as second argument).  Every message's bytes are checked against
 * the pattern the sender wrote before it sent them.  tests/xchg/run.sh
 * checks from the statistics that units were lent and mapped.
 *
 *   mutate   each round the sender changes its buffer right after send()
 *            returns: overwrite, free + malloc (the same memory, new bytes),
 *            realloc, madvise(DONTNEED), a kernel write (read() from a pipe),
 *            nothing (a hit), and sends from an unaligned start; and a
 *            buffer of its own mmap unmapped, or moved by mremap (the ring:
 *            only placed memory is lent); the receiver
 *            alternates aligned receives (mapped in place), receives at an odd
 *            address and in odd pieces, and peeks (copied out);
 *   kill     the sender lends 128 MiB and is killed before the receiver reads
 *            a byte: everything arrives, and once the receiver freed its
 *            buffer no unit file is left in its descriptors or mappings;
 *   echo     the receiver sends back what it received (a received unit is
 *            not lent on: the ring), into the very buffer the sender lent
 *            (a receive into a lent page); then new bytes mapped over that
 *            buffer, which the sender sends on: the peer must get those, not
 *            the unit lent before;
 *   thread   a thread stores into the buffer while it is sent: no store is
 *            lost, the stream stays whole;
 *   fork     the sender forks while its buffer is lent; the child writes it;
 *   rkill    the receiver is killed while it holds 64 MiB of units mapped:
 *            the sender's sends fail as the kernel's would, and once it
 *            freed its buffers and closed it holds no unit file (the
 *            files of freed buffers close at the cache's next operation or
 *            the connection's close);
 *   exec     the sender lends 64 MiB and is killed; then the receiver execs
 *            and its next image reads everything (the transport's receiving
 *            end survives the exec);
 *   budget   a non-blocking sender lends fresh buffers to a receiver that
 *            reads nothing: it gets EAGAIN once ZCSOCK_PDC_SEND_BUDGET (run.sh:
 *            32 MiB) lent bytes and the ring are full, as the kernel's
 *            buffers would stop it; then every byte arrives;
 *   budget_wait  the same with a blocking sender of 96 MiB: it waits for the
 *            receiver (naps, counted) instead of copying through the ring.
 *
 * Exit 0 pass, 1 fail. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define U ((size_t)2 << 20)
#define SZ (8 * U)

#define T_CHECK(c)                                                                    \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "[%d] %s:%d: check failed: %s (errno %d)\n", getpid(),    \
                    __FILE__, __LINE__, #c, errno);                                   \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static int t_unix;

/* The pattern of message seed at stream offset i: one byte per 64 written
 * (cheap), the rest constant per 64-byte line, so a misplaced page or unit
 * shows. */
static void t_fill(char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 64) {
        uint64_t v = (i >> 6) * 0x9e3779b97f4a7c15ull + seed * 0x632be59bd9b4e019ull;

        memset(b + i, (int)(seed & 0x7f), n - i < 64 ? n - i : 64);
        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void t_verify(const char *b, size_t n, unsigned seed, const char *what)
{
    char line[64];

    for (size_t i = 0; i < n; i += 64) {
        size_t k = n - i < 64 ? n - i : 64;
        uint64_t v = (i >> 6) * 0x9e3779b97f4a7c15ull + seed * 0x632be59bd9b4e019ull;

        memset(line, (int)(seed & 0x7f), k);
        memcpy(line, &v, k < 8 ? k : 8);
        if (memcmp(b + i, line, k)) {
            fprintf(stderr, "[%d] %s: seed %u: bytes at %zu of %zu differ\n", getpid(), what,
                    seed, i, n);
            exit(1);
        }
    }
}

static void t_send_all(int s, const char *b, size_t n)
{
    while (n) {
        ssize_t k = send(s, b, n, MSG_NOSIGNAL);

        T_CHECK(k > 0);
        b += k;
        n -= (size_t)k;
    }
}

/* The same through sendmmsg (one message at a time): another call site. */
static void t_sendmmsg_all(int s, const char *b, size_t n)
{
    while (n) {
        struct iovec v = { (void *)b, n };
        struct mmsghdr mm = { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } };

        T_CHECK(sendmmsg(s, &mm, 1, MSG_NOSIGNAL) == 1 && mm.msg_len > 0);
        b += mm.msg_len;
        n -= mm.msg_len;
    }
}

static void t_recv_all(int s, char *b, size_t n)
{
    while (n) {
        ssize_t k = recv(s, b, n, 0);

        T_CHECK(k > 0);
        b += k;
        n -= (size_t)k;
    }
}

/* A connected pair: *srv in the parent, *cli in the child (fork). */
static pid_t t_pair(int *srv, int *cli)
{
    int ls, one = 1;
    pid_t pid;

    if (t_unix) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };

        snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "zcsock-t-xchg-%d", getpid());
        ls = socket(AF_UNIX, SOCK_STREAM, 0);
        T_CHECK(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 1) == 0);
        pid = fork();
        T_CHECK(pid >= 0);
        if (pid == 0) {
            *cli = socket(AF_UNIX, SOCK_STREAM, 0);
            T_CHECK(connect(*cli, (struct sockaddr *)&a, sizeof(a)) == 0);
            close(ls);
            return 0;
        }
    } else {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);

        ls = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        T_CHECK(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 1) == 0);
        T_CHECK(getsockname(ls, (struct sockaddr *)&a, &al) == 0);
        pid = fork();
        T_CHECK(pid >= 0);
        if (pid == 0) {
            *cli = socket(AF_INET, SOCK_STREAM, 0);
            T_CHECK(connect(*cli, (struct sockaddr *)&a, sizeof(a)) == 0);
            close(ls);
            return 0;
        }
    }
    *srv = accept(ls, NULL, NULL);
    T_CHECK(*srv >= 0);
    close(ls);
    return pid;
}

/* A receive acknowledges the sender's unit transport, offered when the
 * sender's end attached to the channel (for a TCP client: at its first
 * receive) or at its first receive after that once it placed a block.  Two round trips make sure the receiver received after that, so
 * the first big send already lends (the kill case needs it: its receiver
 * reads nothing until the sender is dead). */
static void t_hello_sender(int s)
{
    /* a process offers its transport once it placed a block it could lend
     * (at its next receive): allocate like a program whose buffers exist */
    char *volatile placed = malloc(SZ);

    T_CHECK(placed);
    placed[0] = 1;
    free(placed);
    for (int i = 0; i < 2; i++) {
        char c = 'h';

        t_send_all(s, &c, 1);
        t_recv_all(s, &c, 1);
        T_CHECK(c == 'g');
    }
}

static void t_hello_receiver(int s)
{
    for (int i = 0; i < 2; i++) {
        char c;

        t_recv_all(s, &c, 1);
        T_CHECK(c == 'h');
        c = 'g';
        t_send_all(s, &c, 1);
    }
}

static int t_wait(pid_t pid)
{
    int st;

    T_CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --- mutate ----------------------------------------------------------------- */

#define T_KINDS 10
#define T_ROUNDS (6 * T_KINDS)

/* Round r: how much the sender sends from where, and its seed.  Kinds (the
 * change after the send): 0 overwrite, 1 a kernel write, 2 realloc, 3 madvise,
 * 4 free + malloc, 5 none (a new registration: the block was freed), 6 none
 * and the same bytes as round 5 (a hit: the unit is frozen),
 * 7 none, sent from an unaligned start, 8 a buffer of the application's own
 * mmap (not placed: the ring), unmapped, 9 the same moved by mremap and its
 * old range mapped again with other bytes. */
static void t_round(unsigned r, size_t *off_p, size_t *len_p, unsigned *seed_p)
{
    *off_p = r % T_KINDS == 7 ? 100 : 0;
    *len_p = r % T_KINDS == 7 ? SZ - 300 : SZ;
    *seed_p = r % T_KINDS == 6 ? r - 1 : r;
}

static void t_mutate_sender(int s)
{
    char *b = malloc(SZ);
    int pp[2];

    T_CHECK(b && pipe(pp) == 0);
    t_hello_sender(s);
    for (unsigned r = 0; r < T_ROUNDS; r++) {
        size_t off, len;
        unsigned seed;

        t_round(r, &off, &len, &seed);
        if (r % T_KINDS >= 8) {
            /* 2 MiB-aligned, so its units are refused as not placed, charged
             * to the send call site (kind 9: sendmmsg's, another one) */
            char *r0 = mmap(NULL, SZ + U, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0), *m, *m2;

            T_CHECK(r0 != MAP_FAILED);
            m = (char *)(((uintptr_t)r0 + U - 1) & ~(uintptr_t)(U - 1));
            if (m > r0)
                T_CHECK(munmap(r0, (size_t)(m - r0)) == 0);
            T_CHECK(munmap(m + SZ, (size_t)(r0 + U - m)) == 0);
            t_fill(m, len, seed);
            if (r % T_KINDS == 8) {
                t_send_all(s, m, len);
                T_CHECK(munmap(m, SZ) == 0);
                continue;
            }
            t_sendmmsg_all(s, m, len);
            m2 = mremap(m, SZ, 2 * SZ, MREMAP_MAYMOVE);
            T_CHECK(m2 != MAP_FAILED);
            if (m2 != m) {
                T_CHECK(mmap(m, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                             -1, 0) == m);
                memset(m, 0xbb, SZ);
                T_CHECK(munmap(m, SZ) == 0);
            }
            memset(m2, 0xaa, 2 * SZ);
            T_CHECK(munmap(m2, 2 * SZ) == 0);
            continue;
        }
        if (r % T_KINDS != 6)
            t_fill(b + off, len, seed);
        t_send_all(s, b + off, len);
        switch (r % T_KINDS) {
        case 0:
            memset(b, 0xee, SZ);
            break;
        case 4: {
            char *old = b;

            free(b);
            b = malloc(SZ);
            T_CHECK(b);
            memset(b, 0xdd, SZ);
            if (b != old)
                fprintf(stderr, "note: malloc did not hand the same block back\n");
            break;
        }
        case 2:
            b = realloc(b, 2 * SZ);
            T_CHECK(b);
            memset(b, 0xcc, 2 * SZ);
            b = realloc(b, SZ);
            T_CHECK(b);
            break;
        case 3: {                                   /* the whole pages inside */
            char *pa = (char *)(((uintptr_t)b + 4095) & ~(uintptr_t)4095);

            T_CHECK(madvise(pa, (size_t)(b + SZ - pa) & ~(size_t)4095, MADV_DONTNEED) == 0);
            break;
        }
        case 1: {
            static char junk[65536];

            memset(junk, 'p', sizeof(junk));
            T_CHECK(write(pp[1], junk, sizeof(junk)) == (ssize_t)sizeof(junk));
            T_CHECK(read(pp[0], b + U, sizeof(junk)) == (ssize_t)sizeof(junk));
            break;
        }
        default:
            break;
        }
    }
    free(b);
}

static void t_mutate_receiver(int s)
{
    char *b = malloc(SZ + U), *q;

    T_CHECK(b);
    t_hello_receiver(s);
    for (unsigned r = 0; r < T_ROUNDS; r++) {
        size_t off, len, got = 0;
        unsigned seed;

        t_round(r, &off, &len, &seed);
        switch (r % 3) {
        case 0:                                     /* aligned: units mapped */
            t_recv_all(s, b, len);
            t_verify(b, len, seed, "aligned");
            break;
        case 1:                                     /* odd address, odd pieces */
            q = b + 4096 + 13;
            while (got < len) {
                size_t want = len - got < (1u << 20) + 13 ? len - got : (1u << 20) + 13;
                ssize_t k = recv(s, q + got, want, 0);

                T_CHECK(k > 0);
                got += (size_t)k;
            }
            t_verify(q, len, seed, "odd");
            break;
        default: {                                  /* a peek first */
            ssize_t k = 0;

            for (int i = 0; i < 5000 && k < (ssize_t)(U / 2 + 5); i++) {
                k = recv(s, b, U / 2 + 5, MSG_PEEK);
                T_CHECK(k > 0);
                if (k < (ssize_t)(U / 2 + 5))
                    usleep(1000);
            }
            T_CHECK(k == (ssize_t)(U / 2 + 5));
            t_verify(b, (size_t)k, seed, "peek");
            memset(b, 0, (size_t)k);
            t_recv_all(s, b, len);
            t_verify(b, len, seed, "after peek");
        }
        }
    }
    free(b);
}

/* --- kill ------------------------------------------------------------------- */

static int t_count_units(void)
{
    char path[300], link[256];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    FILE *m;
    char line[512];

    T_CHECK(d);
    while ((e = readdir(d))) {
        ssize_t k;

        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        k = readlink(path, link, sizeof(link) - 1);
        if (k > 0) {
            link[k] = 0;
            n += strstr(link, "zcsock-xu") != NULL;
        }
    }
    closedir(d);
    m = fopen("/proc/self/maps", "r");
    T_CHECK(m);
    while (fgets(line, sizeof(line), m))
        n += strstr(line, "zcsock-xu") != NULL;
    fclose(m);
    return n;
}

/* The sender of kill and exec: n fresh buffers (all lent: never a hit, never
 * rewritten), seeds seed0.., then killed before its peer reads a byte. */
static void t_lend_and_die(int s, unsigned n, unsigned seed0)
{
    t_hello_sender(s);
    for (unsigned r = 0; r < n; r++) {
        char *b = malloc(SZ);

        t_fill(b, SZ, seed0 + r);
        t_send_all(s, b, SZ);
    }
    raise(SIGKILL);
}

/* --- main ------------------------------------------------------------------- */

static char *t_target;
static volatile int t_stop, t_started;

static void *t_storer(void *arg)
{
    unsigned n = 0;

    (void)arg;
    while (!t_stop && n < 100000000u) {
        t_target[(n % 4096) * 4096 + 1] = (char)n;
        if (++n == 8192)
            t_started = 1;      /* every page stored to, twice */
    }
    for (unsigned i = 0; i < 4096; i++)
        t_target[i * 4096 + 1] = 'L';
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "mutate";
    int srv = -1, cli = -1;
    pid_t pid;

    if (!strcmp(mode, "exec-reader")) {             /* the exec'd image of "exec" */
        char *b = malloc(SZ), c;
        int s = atoi(argv[2]);

        for (unsigned r = 0; r < 4; r++) {
            t_recv_all(s, b, SZ);
            t_verify(b, SZ, 2000 + r, "after exec, the sender dead");
        }
        T_CHECK(recv(s, &c, 1, 0) <= 0);
        printf("exec: ok\n");
        return 0;
    }

    t_unix = argc > 2 && !strcmp(argv[2], "unix");
    if (!strcmp(mode, "placement")) {
        /* a block of 2 MiB and more allocated before any socket exists is
         * placed (lendable) with page exchange on, from start-up: programs
         * allocate their buffers before they connect; the count of placed
         * blocks is checked from the report by run.sh */
        int (*get)(const char *, uint64_t *) =
            (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
        uint64_t placed = 0;
        char *volatile a = malloc(SZ);
        int ls;

        T_CHECK(get && a);
        a[0] = 1;
        T_CHECK(get("mh.alloc.placed_allocs", &placed) == 0);
        printf("placement: blocks placed before any socket %llu\n", (unsigned long long)placed);
        if (placed) {
            /* only blocks it can lend well: a 2.25 MiB block (its second
             * unit 7/8 unused) stays glibc's, a 17 MiB one is placed */
            uint64_t n1 = 0, n2 = 0;
            char *volatile odd = malloc((2u << 20) + (256u << 10)), *volatile big;

            T_CHECK(odd && get("mh.alloc.placed_allocs", &n1) == 0 && n1 == placed);
            big = malloc(17u << 20);
            T_CHECK(big && get("mh.alloc.placed_allocs", &n2) == 0 && n2 == placed + 1);
            printf("placement: a 2.25 MiB block not placed, a 17 MiB block placed\n");
            free(big);
            free(odd);
        }
        ls = socket(AF_INET, SOCK_STREAM, 0);       /* a report needs a socket */
        T_CHECK(ls >= 0);
        close(ls);
        free(a);
        return 0;
    }
    pid = t_pair(&srv, &cli);
    if (!strcmp(mode, "mutate")) {
        if (pid == 0) {
            t_mutate_sender(cli);
            close(cli);
            exit(0);
        }
        t_mutate_receiver(srv);
        T_CHECK(t_wait(pid) == 0);
    } else if (!strcmp(mode, "reasons")) {
        /* sends that cannot lend, each refused with its reason: 1 MiB (too
         * small) and 2.5 MiB from 1 MiB into a placed block (no whole
         * aligned unit: unaligned); the bytes arrive all the same */
        size_t small = 1u << 20, odd = (5u << 20) / 2;

        if (pid == 0) {
            char *b = malloc(SZ);

            t_hello_sender(cli);
            t_fill(b, small, 41);
            t_send_all(cli, b, small);
            t_fill(b + (1u << 20), odd, 42);
            t_send_all(cli, b + (1u << 20), odd);
            exit(0);
        }
        {
            char *b = malloc(SZ);

            t_hello_receiver(srv);
            t_recv_all(srv, b, small);
            t_verify(b, small, 41, "too small");
            t_recv_all(srv, b, odd);
            t_verify(b, odd, 42, "unaligned");
            T_CHECK(t_wait(pid) == 0);
        }
    } else if (!strcmp(mode, "rent")) {
        /* Rent or buy (run.sh fixes ZCSOCK_EXCHANGE_UNIT_US at 10 ms): one
         * unit lent at once (nothing measured yet), then a buffer refilled
         * before every send, never lent (its bytes differ each time, so no
         * ring pass counts towards another), then one sent again unchanged,
         * lent once its ring passes add up to the cost.  Every byte is
         * checked. */
        enum { R = 400 };

        if (pid == 0) {
            char *a = malloc(SZ), *b = malloc(SZ);

            T_CHECK(a && b);
            t_hello_sender(cli);
            t_fill(a, U, 1);
            t_send_all(cli, a, U);
            for (unsigned r = 0; r < R; r++) {
                t_fill(b, 2 * U, 100 + r);
                t_send_all(cli, b, 2 * U);
            }
            t_fill(a + 2 * U, 2 * U, 7);
            for (unsigned r = 0; r < R; r++)
                t_send_all(cli, a + 2 * U, 2 * U);
            exit(0);
        }
        {
            char *b = malloc(SZ);

            T_CHECK(b);
            t_hello_receiver(srv);
            t_recv_all(srv, b, U);
            t_verify(b, U, 1, "first unit");
            for (unsigned r = 0; r < R; r++) {
                t_recv_all(srv, b, 2 * U);
                t_verify(b, 2 * U, 100 + r, "refilled");
            }
            for (unsigned r = 0; r < R; r++) {
                t_recv_all(srv, b, 2 * U);
                t_verify(b, 2 * U, 7, "sent again unchanged");
            }
            T_CHECK(t_wait(pid) == 0);
        }
    } else if (!strcmp(mode, "kill")) {
        if (pid == 0)
            t_lend_and_die(cli, 8, 1000);
        t_hello_receiver(srv);
        T_CHECK(t_wait(pid) == 128 + SIGKILL);      /* dead before we read a byte */
        {
            char *b = malloc(SZ), c;

            for (unsigned r = 0; r < 8; r++) {
                t_recv_all(srv, b, SZ);
                t_verify(b, SZ, 1000 + r, "after the sender died");
            }
            T_CHECK(recv(srv, &c, 1, 0) <= 0);      /* then the end */
            close(srv);
            free(b);
            T_CHECK(t_count_units() == 0);
        }
    } else if (!strcmp(mode, "echo")) {
        if (pid == 0) {
            char *b = malloc(SZ);

            t_hello_sender(cli);
            t_fill(b, SZ, 7);
            t_send_all(cli, b, SZ);                 /* lent */
            t_recv_all(cli, b, SZ);                 /* the echo, into the lent buffer */
            t_verify(b, SZ, 7, "echo");
            t_recv_all(cli, b, SZ);                 /* new bytes, mapped over it */
            t_verify(b, SZ, 8, "second");
            t_send_all(cli, b, SZ);                 /* what it holds now, not what it lent */
            exit(0);
        }
        {
            char *b = malloc(SZ), *n = malloc(SZ);

            t_hello_receiver(srv);
            t_recv_all(srv, b, SZ);
            t_verify(b, SZ, 7, "received");
            t_send_all(srv, b, SZ);                 /* received units, sent on */
            t_fill(n, SZ, 8);
            t_send_all(srv, n, SZ);
            t_recv_all(srv, b, SZ);
            t_verify(b, SZ, 8, "sent back");
            T_CHECK(t_wait(pid) == 0);
        }
    } else if (!strcmp(mode, "thread")) {
        if (pid == 0) {
            char *b = malloc(SZ);
            pthread_t th;

            t_hello_sender(cli);
            t_fill(b, SZ, 3);
            t_target = b;
            t_send_all(cli, b, SZ);                 /* lent: frozen from now on */
            T_CHECK(pthread_create(&th, NULL, t_storer, NULL) == 0);
            while (!t_started)
                usleep(100);
            for (int r = 1; r < 20; r++)
                t_send_all(cli, b, SZ);
            t_stop = 1;
            T_CHECK(pthread_join(th, NULL) == 0);
            for (unsigned i = 0; i < 4096; i++)     /* no store lost */
                T_CHECK(b[i * 4096 + 1] == 'L');
            exit(0);
        }
        {
            char *b = malloc(SZ), *e = malloc(SZ);

            t_fill(e, SZ, 3);
            t_hello_receiver(srv);
            for (int r = 0; r < 20; r++) {
                t_recv_all(srv, b, SZ);
                /* every byte the thread does not store is the pattern's */
                for (size_t i = 0; i < SZ; i += 4096)
                    T_CHECK(b[i] == e[i] && !memcmp(b + i + 2, e + i + 2, 4094));
            }
            T_CHECK(t_wait(pid) == 0);
        }
    } else if (!strcmp(mode, "fork")) {
        if (pid == 0) {
            char *b = malloc(SZ);
            pid_t k;

            t_hello_sender(cli);
            t_fill(b, SZ, 11);
            t_send_all(cli, b, SZ);
            k = fork();
            T_CHECK(k >= 0);
            if (k == 0) {
                memset(b, 0x55, SZ);                /* the child's copy */
                _exit(0);
            }
            T_CHECK(t_wait(k) == 0);
            t_verify(b, SZ, 11, "parent after fork");
            t_send_all(cli, b, SZ);
            exit(0);
        }
        {
            char *b = malloc(SZ);

            t_hello_receiver(srv);
            t_recv_all(srv, b, SZ);
            t_verify(b, SZ, 11, "before fork");
            t_recv_all(srv, b, SZ);
            t_verify(b, SZ, 11, "after fork");
            T_CHECK(t_wait(pid) == 0);
        }
    } else if (!strcmp(mode, "exec")) {
        if (pid == 0)
            t_lend_and_die(cli, 4, 2000);
        {
            char fdstr[16];

            t_hello_receiver(srv);
            T_CHECK(t_wait(pid) == 128 + SIGKILL);
            snprintf(fdstr, sizeof(fdstr), "%d", srv);
            fflush(stdout);
            execl("/proc/self/exe", argv[0], "exec-reader", fdstr, (char *)NULL);
            T_CHECK(!"exec");
        }
    } else if (!strcmp(mode, "rkill")) {
        /* roles swapped: the child receives (units mapped) and is killed
         * holding them; the parent, the sender, must be left with nothing */
        if (pid == 0) {
            char *b = malloc(SZ), c = 'r';

            t_hello_receiver(cli);
            for (unsigned r = 0; r < 4; r++) {
                t_recv_all(cli, b, SZ);
                t_verify(b, SZ, 3000 + r, "before being killed");
            }
            t_send_all(cli, &c, 1);
            raise(SIGKILL);
        }
        {
            char *bufs[4], c;
            ssize_t k = 0;

            t_hello_sender(srv);
            for (unsigned r = 0; r < 4; r++) {
                bufs[r] = malloc(SZ);
                t_fill(bufs[r], SZ, 3000 + r);
                t_send_all(srv, bufs[r], SZ);
            }
            t_recv_all(srv, &c, 1);
            T_CHECK(c == 'r');
            T_CHECK(t_wait(pid) == 128 + SIGKILL);
            for (int i = 0; i < 100 && k >= 0; i++)     /* the peer is gone */
                k = send(srv, bufs[0], SZ, MSG_NOSIGNAL);
            T_CHECK(k < 0 && (errno == EPIPE || errno == ECONNRESET));
            for (unsigned r = 0; r < 4; r++)
                free(bufs[r]);
            close(srv);
            T_CHECK(t_count_units() == 0);          /* no unit file left */
        }
    } else if (!strcmp(mode, "budget") || !strcmp(mode, "budget_wait")) {
        /* the stream's byte at offset o is a function of o alone, so that
         * partial sends need no bookkeeping */
        if (pid == 0) {
            int nonblock = !strcmp(mode, "budget");
            size_t sent = 0;
            int stop = nonblock ? 0 : 6;            /* blocking: 6 buffers, 96 MiB */

            t_hello_sender(cli);
            if (nonblock)
                T_CHECK(fcntl(cli, F_SETFL, O_NONBLOCK) == 0);
            for (int i = 0; i < 64 + 4 && (!stop || i < stop); i++) {
                char *b = malloc(SZ);               /* fresh: lent, never a hit */
                size_t off = 0;

                for (size_t j = 0; j < SZ; j += 64)
                    memcpy(b + j, &(uint64_t){ (sent + j) / 64 }, 8), memset(b + j + 8, 'z', 56);
                while (off < SZ) {
                    ssize_t k = send(cli, b + off, SZ - off, MSG_NOSIGNAL);

                    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        stop = i + 1;
                        break;
                    }
                    T_CHECK(k > 0);
                    off += (size_t)k;
                }
                sent += off;
                if (off < SZ) {                     /* the rest, blocking */
                    T_CHECK(fcntl(cli, F_SETFL, 0) == 0);
                    fprintf(stderr, "EAGAIN after %zu bytes\n", sent);
                    T_CHECK(sent <= ((size_t)32 << 20) + ((size_t)8 << 20) + SZ);
                    t_send_all(cli, b + off, SZ - off);
                    sent += SZ - off;
                }
            }
            T_CHECK(stop);                          /* it did stop (EAGAIN) */
            shutdown(cli, SHUT_WR);
            exit(0);
        }
        {
            char *b = malloc(SZ);
            size_t got = 0;
            ssize_t k;

            t_hello_receiver(srv);
            usleep(300000);                         /* let the sender fill up */
            while ((k = recv(srv, b, SZ, 0)) > 0) {
                for (ssize_t j = 0; j < k; j++) {
                    size_t o = got + (size_t)j;
                    uint64_t v = o / 64;
                    char want = o % 64 < 8 ? ((char *)&v)[o % 64] : 'z';

                    if (b[j] != want) {
                        fprintf(stderr, "budget: byte %zu is %d, want %d\n", o, b[j], want);
                        exit(1);
                    }
                }
                got += (size_t)k;
            }
            T_CHECK(k == 0 && got > SZ);
            T_CHECK(t_wait(pid) == 0);
        }
    } else {
        fprintf(stderr, "usage: t_xchg mutate|kill|rkill|echo|thread|fork|exec|budget|budget_wait|placement [unix]\n");
        return 2;
    }
    printf("%s: ok\n", mode);
    return 0;
}
