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
 *   budget_conns  one sender process with four connections to a receiver
 *            that reads nothing until the sender is done: the send budget
 *            (run.sh: 32 MiB) bounds the lent bytes unread of the process's
 *            connections together, not of each (four of them once held four
 *            budgets), so the non-blocking sends stop (EAGAIN) after about
 *            one budget and four rings; then every byte arrives;
 *   budget_wait  the same with a blocking sender of 96 MiB: it waits for the
 *            receiver (naps, counted) instead of copying through the ring;
 *   uring    memory pinned by the kernel (issue 29): after a buffer was lent
 *            and frozen, the process loads liburing and registers the buffer
 *            as an io_uring fixed buffer; READ_FIXED rewrites it and the next
 *            sends must carry those bytes (a frozen view hid them); the
 *            receiver does the same with its receive buffer, which must not
 *            be mapped over once registered (the kernel's later reads would
 *            land in the pages the map replaced);
 *   mapfixed the sender maps over its lent buffer (mmap MAP_FIXED: anonymous
 *            over a frozen unit, a file over one lent once): the peer gets
 *            what the new mapping holds, and the buffer keeps it;
 *   mprotect a buffer made read-only and sent twice stays read-only (a
 *            write from a forked child faults);
 *   threads  two threads send one buffer on two connections while a third
 *            rewrites it: no message carries bytes older than the ones the
 *            buffer held when its send began (a unit file made by one
 *            thread's lend was sent by the other's without a compare).
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
#include <time.h>
#include <unistd.h>

#include "../lib/zc_test.h"

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
    int ls;
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
        struct sockaddr_in a;

        ls = zt_listen_lo(1, &a);
        T_CHECK(ls >= 0);
        pid = fork();
        T_CHECK(pid >= 0);
        if (pid == 0) {
            *cli = zt_connect_lo(&a);
            T_CHECK(*cli >= 0);
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

/* Like t_pair, n connections (TCP): the child holds their client ends. */
static pid_t t_pair_n(int n, int *srv, int *cli)
{
    struct sockaddr_in a;
    int ls = zt_listen_lo(n, &a);
    pid_t pid;

    T_CHECK(ls >= 0);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        close(ls);
        for (int i = 0; i < n; i++) {
            cli[i] = zt_connect_lo(&a);
            T_CHECK(cli[i] >= 0);
        }
        return 0;
    }
    for (int i = 0; i < n; i++) {
        srv[i] = accept(ls, NULL, NULL);
        T_CHECK(srv[i] >= 0);
    }
    close(ls);
    return pid;
}

/* The stream byte of connection k at offset o (budget_conns). */
static char t_conn_byte(int k, size_t o)
{
    return o % 64 ? (char)('a' + k) : (char)(o / 64 * 31 + (size_t)k);
}

static void t_budget_conns(void)
{
    enum { N = 4 };
    int srv[N], cli[N];
    pid_t pid = t_pair_n(N, srv, cli);

    if (pid == 0) {
        size_t sent[N] = { 0 }, total = 0;

        for (int k = 0; k < N; k++) {
            t_hello_sender(cli[k]);
            T_CHECK(fcntl(cli[k], F_SETFL, O_NONBLOCK) == 0);
        }
        for (int k = 0; k < N; k++) {
            for (int i = 0; i < 8; i++) {           /* up to 128 MiB a connection */
                char *b = malloc(SZ);               /* fresh: lent, never a hit */
                size_t off = 0;
                ssize_t r = 0;

                T_CHECK(b);
                for (size_t j = 0; j < SZ; j++)
                    b[j] = t_conn_byte(k, sent[k] + j);
                while (off < SZ && (r = send(cli[k], b + off, SZ - off, MSG_NOSIGNAL)) > 0)
                    off += (size_t)r;
                T_CHECK(off == SZ || (r < 0 && errno == EAGAIN));
                sent[k] += off;
                free(b);
                if (off < SZ)
                    break;                          /* full: the next connection */
            }
            total += sent[k];
        }
        fprintf(stderr, "budget_conns: sent %zu + %zu + %zu + %zu = %zu MiB before EAGAIN\n",
                sent[0] >> 20, sent[1] >> 20, sent[2] >> 20, sent[3] >> 20, total >> 20);
        /* one budget lent, and the rings and what a send took before it
         * met EAGAIN (four budgets when each connection had its own) */
        T_CHECK(total <= ((size_t)32 << 20) + N * (((size_t)8 << 20) + SZ));
        for (int k = 0; k < N; k++) {
            T_CHECK(fcntl(cli[k], F_SETFL, 0) == 0);
            T_CHECK(send(cli[k], &sent[k], sizeof(sent[k]), MSG_NOSIGNAL) == sizeof(sent[k]));
            shutdown(cli[k], SHUT_WR);
        }
        exit(0);
    }
    for (int k = 0; k < N; k++)
        t_hello_receiver(srv[k]);
    usleep(500000);                                 /* let the sender fill up */
    for (int k = 0; k < N; k++) {
        size_t cap = 8 * SZ + 64, got = 0, want;
        char *b = malloc(cap);
        ssize_t r;

        T_CHECK(b);
        while ((r = recv(srv[k], b + got, cap - got, 0)) > 0)
            got += (size_t)r;
        T_CHECK(r == 0 && got >= sizeof(want));
        /* the stream, then the sender's count of it */
        memcpy(&want, b + got - sizeof(want), sizeof(want));
        T_CHECK(want == got - sizeof(want));
        for (size_t o = 0; o < want; o++)
            if (b[o] != t_conn_byte(k, o)) {
                fprintf(stderr, "budget_conns: connection %d byte %zu is %d, want %d\n", k, o,
                        b[o], t_conn_byte(k, o));
                exit(1);
            }
        free(b);
    }
    T_CHECK(t_wait(pid) == 0);
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

/* --- stale bytes: kernel pins, MAP_FIXED, mprotect, threads ------------------ */

#if defined(__x86_64__)
#include <linux/io_uring.h>

/* System calls made as liburing makes them, past the C library (no hook
 * sees them), with the number loaded from memory: the library's search for
 * inline io_uring_setup calls must not find this program (only the dlopen
 * of liburing tells the library that something may pin memory). */
static volatile long t_nr_setup = 425, t_nr_enter = 426, t_nr_register = 427;

static long t_raw(long nr, long a1, long a2, long a3, long a4, long a5)
{
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;

    __asm__ volatile("syscall" : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

typedef struct t_ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
} t_ring_t;

/* Load liburing (as a program that links it late would), set up a ring and
 * register buf as fixed buffer 0. */
static void t_ring_init(t_ring_t *r, void *buf, size_t len)
{
    struct io_uring_params p = { 0 };
    struct iovec v = { buf, len };
    char *sq, *cq;

    T_CHECK(dlopen("liburing.so.2", RTLD_NOW | RTLD_GLOBAL) != NULL);
    r->fd = (int)t_raw(t_nr_setup, 4, (long)&p, 0, 0, 0);
    T_CHECK(r->fd >= 0);
    sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
              PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    T_CHECK(sq != MAP_FAILED && cq != MAP_FAILED && r->sqes != MAP_FAILED);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    T_CHECK(t_raw(t_nr_register, r->fd, IORING_REGISTER_BUFFERS, (long)&v, 1, 0) == 0);
}

/* READ_FIXED of file fd (len bytes from offset 0) into the registered
 * buffer buf, in pieces until done. */
static void t_ring_read_fixed(t_ring_t *r, int fd, char *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
        struct io_uring_sqe *e = &r->sqes[idx];
        int res;

        memset(e, 0, sizeof(*e));
        e->opcode = IORING_OP_READ_FIXED;
        e->fd = fd;
        e->addr = (uint64_t)(uintptr_t)(buf + done);
        e->len = (unsigned)(len - done);
        e->off = done;
        e->buf_index = 0;
        r->sq_array[idx] = idx;
        __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
        T_CHECK(t_raw(t_nr_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, 0) == 1);
        head = *r->cq_head;
        T_CHECK(__atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE) != head);
        res = r->cqes[head & *r->cq_mask].res;
        __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
        T_CHECK(res > 0);
        done += (size_t)res;
    }
}

/* A file of len bytes of pattern seed (unlinked: only the descriptor). */
static int t_pattern_file(size_t len, unsigned seed)
{
    char path[] = "/tmp/zcsock-t-xchg-XXXXXX", *b = malloc(len);
    int fd = mkstemp(path);

    T_CHECK(fd >= 0 && b);
    unlink(path);
    t_fill(b, len, seed);
    T_CHECK(write(fd, b, len) == (ssize_t)len);
    free(b);
    return fd;
}

static void t_uring_sender(int s)
{
    char *b = malloc(SZ);
    t_ring_t r;
    int f;

    t_hello_sender(s);
    t_fill(b, SZ, 21);
    t_send_all(s, b, SZ);                   /* lent */
    t_send_all(s, b, SZ);                   /* sent again unchanged: frozen */
    t_ring_init(&r, b, SZ);                 /* liburing loaded, b registered */
    for (unsigned seed = 22; seed <= 23; seed++) {
        f = t_pattern_file(SZ, seed);
        t_ring_read_fixed(&r, f, b, SZ);    /* the kernel rewrites b */
        close(f);
        t_verify(b, SZ, seed, "after READ_FIXED (sender)");
        t_send_all(s, b, SZ);
    }
    t_send_all(s, b, SZ);
}

static void t_uring_receiver(int s)
{
    char *b = malloc(SZ);
    t_ring_t r;
    int f;

    t_hello_receiver(s);
    t_recv_all(s, b, SZ);                   /* mapped in place */
    t_verify(b, SZ, 21, "first");
    t_ring_init(&r, b, SZ);
    f = t_pattern_file(SZ, 31);
    t_ring_read_fixed(&r, f, b, SZ);
    close(f);
    t_verify(b, SZ, 31, "after READ_FIXED (receiver)");
    t_recv_all(s, b, SZ);                   /* into registered pages: copied */
    t_verify(b, SZ, 21, "second");
    f = t_pattern_file(SZ, 32);
    t_ring_read_fixed(&r, f, b, SZ);        /* the kernel's write must show */
    close(f);
    t_verify(b, SZ, 32, "after READ_FIXED into received bytes");
    for (unsigned seed = 22; seed <= 23; seed++) {
        t_recv_all(s, b, SZ);
        t_verify(b, SZ, seed, "after the sender's READ_FIXED");
    }
    t_recv_all(s, b, SZ);
    t_verify(b, SZ, 23, "last");
}
#else
static void t_uring_sender(int s)
{
    (void)s;
    printf("skip: the io_uring case is written for x86_64\n");
    exit(77);
}
static void t_uring_receiver(int s)
{
    (void)s;
    exit(77);
}
#endif

static void t_mapfixed_sender(int s)
{
    char *b = malloc(SZ), *c;
    int f;

    t_hello_sender(s);
    t_fill(b, SZ, 51);
    t_send_all(s, b, SZ);
    t_send_all(s, b, SZ);                   /* frozen */
    T_CHECK(mmap(b, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) == b);
    t_fill(b, SZ, 52);
    t_send_all(s, b, SZ);                   /* what the new mapping holds */
    free(b);
    c = malloc(SZ);
    t_fill(c, SZ, 53);
    t_send_all(s, c, SZ);                   /* lent once, not frozen */
    f = t_pattern_file(SZ, 54);
    T_CHECK(mmap(c, SZ, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, f, 0) == c);
    t_send_all(s, c, SZ);
    t_send_all(s, c, SZ);                   /* unchanged: a freeze would map the arena back */
    t_verify(c, SZ, 54, "the file mapping kept");
    t_fill(c, SZ, 55);                      /* stores through the file mapping */
    t_send_all(s, c, SZ);
    close(f);
}

static void t_mapfixed_receiver(int s)
{
    static const unsigned seeds[] = { 51, 51, 52, 53, 54, 54, 55 };
    char *b = malloc(SZ);

    t_hello_receiver(s);
    for (unsigned i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        t_recv_all(s, b, SZ);
        t_verify(b, SZ, seeds[i], "mapfixed");
    }
}

static void t_mprotect_sender(int s)
{
    char *b = malloc(SZ);
    pid_t k;

    t_hello_sender(s);
    t_fill(b, SZ, 61);
    T_CHECK(mprotect(b, SZ, PROT_READ) == 0);
    t_send_all(s, b, SZ);
    t_send_all(s, b, SZ);                   /* a freeze would map it read-write */
    k = fork();
    T_CHECK(k >= 0);
    if (k == 0) {
        signal(SIGSEGV, SIG_DFL);
        ((volatile char *)b)[U + 5] = 1;    /* must fault */
        _exit(0);
    }
    T_CHECK(t_wait(k) == 128 + SIGSEGV);
    T_CHECK(mprotect(b, SZ, PROT_READ | PROT_WRITE) == 0);
    t_fill(b, SZ, 62);
    t_send_all(s, b, SZ);
    t_send_all(s, b, SZ);
}

static void t_mprotect_receiver(int s)
{
    static const unsigned seeds[] = { 61, 61, 62, 62 };
    char *b = malloc(SZ);

    t_hello_receiver(s);
    for (unsigned i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        t_recv_all(s, b, SZ);
        t_verify(b, SZ, seeds[i], "mprotect");
    }
}

/* threads: lines of 64 bytes [u32 seed][u32 line][56 x seed byte].  Each
 * round a new buffer (a new registration: the race is at a unit file's
 * first lend), two sender threads and a writer released at once, each
 * after its own random delay of up to 3 ms; a sender sends the seed the
 * buffer held when its send began, then the buffer. */
#define T_TSZ (2 * U)
#define T_TSECS 5
#define T_TROUNDS 400
static char *volatile t_tbuf;
static volatile unsigned t_tseed;
static volatile int t_tstop;
static pthread_barrier_t t_tbar;

static void t_tfill(char *b, unsigned seed)
{
    for (size_t i = 0; i < T_TSZ; i += 64) {
        uint32_t h[2] = { seed, (uint32_t)(i / 64) };

        memcpy(b + i, h, 8);
        memset(b + i + 8, (int)(seed & 0xff), 56);
    }
}

static void *t_tw(void *arg)
{
    unsigned rs = 7;

    (void)arg;
    for (;;) {
        pthread_barrier_wait(&t_tbar);
        if (t_tstop)
            break;
        usleep(rand_r(&rs) % 3000);
        t_tfill(t_tbuf, t_tseed + 1);
        __atomic_store_n(&t_tseed, t_tseed + 1, __ATOMIC_RELEASE);
        pthread_barrier_wait(&t_tbar);
    }
    return NULL;
}

static void *t_ts(void *arg)
{
    int s = (int)(intptr_t)arg;
    unsigned rs = (unsigned)s;
    long n = 0;

    for (;;) {
        uint64_t seed;

        pthread_barrier_wait(&t_tbar);
        if (t_tstop)
            break;
        usleep(rand_r(&rs) % 3000);
        seed = __atomic_load_n(&t_tseed, __ATOMIC_ACQUIRE);
        t_send_all(s, (char *)&seed, 8);
        t_send_all(s, t_tbuf, T_TSZ);
        n++;
        pthread_barrier_wait(&t_tbar);
    }
    t_send_all(s, (char *)&(uint64_t){ 0 }, 8);     /* the end */
    return (void *)n;
}

static void *t_tr(void *arg)
{
    int s = (int)(intptr_t)arg;
    char *b = malloc(T_TSZ);
    long n = 0;

    for (;;) {
        uint64_t seed;

        t_recv_all(s, (char *)&seed, 8);
        if (!seed)
            break;
        t_recv_all(s, b, T_TSZ);
        for (size_t i = 0; i < T_TSZ; i += 64) {
            uint32_t h[2];

            memcpy(h, b + i, 8);
            if (h[1] != i / 64 || h[0] < seed) {
                fprintf(stderr, "threads: message %ld line %zu holds seed %u (line %u), the "
                        "buffer held %llu when its send began\n", n, i / 64, h[0], h[1],
                        (unsigned long long)seed);
                exit(1);
            }
        }
        n++;
    }
    free(b);
    return (void *)n;
}

static void t_threads(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof(a);
    int ls = socket(AF_INET, SOCK_STREAM, 0), s[2];
    pthread_t th[3];
    void *n[2];
    pid_t pid;

    T_CHECK(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 2) == 0 &&
            getsockname(ls, (struct sockaddr *)&a, &al) == 0);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        close(ls);
        for (int i = 0; i < 2; i++) {
            s[i] = socket(AF_INET, SOCK_STREAM, 0);
            T_CHECK(connect(s[i], (struct sockaddr *)&a, sizeof(a)) == 0);
            t_hello_sender(s[i]);
        }
        struct timespec t0, t;

        pthread_barrier_init(&t_tbar, NULL, 4);
        T_CHECK(pthread_create(&th[2], NULL, t_tw, NULL) == 0);
        for (int i = 0; i < 2; i++)
            T_CHECK(pthread_create(&th[i], NULL, t_ts, (void *)(intptr_t)s[i]) == 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (unsigned r = 0; r < T_TROUNDS; r++) {
            char *b = malloc(T_TSZ);        /* a new registration each round */

            T_CHECK(b);
            t_tseed += 10;
            t_tfill(b, t_tseed);
            t_tbuf = b;
            pthread_barrier_wait(&t_tbar);  /* go */
            pthread_barrier_wait(&t_tbar);  /* all done */
            t_tbuf = NULL;
            free(b);
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec >= T_TSECS)
                break;
        }
        t_tstop = 1;
        pthread_barrier_wait(&t_tbar);
        for (int i = 0; i < 2; i++)
            T_CHECK(pthread_join(th[i], &n[i]) == 0);
        T_CHECK(pthread_join(th[2], NULL) == 0);
        printf("threads: sent %ld + %ld messages\n", (long)n[0], (long)n[1]);
        exit(0);
    }
    for (int i = 0; i < 2; i++) {
        s[i] = accept(ls, NULL, NULL);
        T_CHECK(s[i] >= 0);
        t_hello_receiver(s[i]);
    }
    for (int i = 0; i < 2; i++)
        T_CHECK(pthread_create(&th[i], NULL, t_tr, (void *)(intptr_t)s[i]) == 0);
    for (int i = 0; i < 2; i++)
        T_CHECK(pthread_join(th[i], &n[i]) == 0);
    printf("threads: %ld + %ld messages checked\n", (long)n[0], (long)n[1]);
    T_CHECK(t_wait(pid) == 0);
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
    if (!strcmp(mode, "threads")) {
        t_threads();
        printf("%s: ok\n", mode);
        return 0;
    }
    if (!strcmp(mode, "budget_conns")) {
        if (t_unix) {
            printf("budget_conns: TCP only\n");
            return 77;
        }
        t_budget_conns();
        printf("%s: ok\n", mode);
        return 0;
    }
    pid = t_pair(&srv, &cli);
    if (!strcmp(mode, "uring") || !strcmp(mode, "mapfixed") || !strcmp(mode, "mprotect")) {
        void (*snd)(int) = !strcmp(mode, "uring") ? t_uring_sender
                           : !strcmp(mode, "mapfixed") ? t_mapfixed_sender : t_mprotect_sender;
        void (*rcv)(int) = !strcmp(mode, "uring") ? t_uring_receiver
                           : !strcmp(mode, "mapfixed") ? t_mapfixed_receiver : t_mprotect_receiver;

        if (pid == 0) {
            snd(cli);
            exit(0);
        }
        rcv(srv);
        T_CHECK(t_wait(pid) == 0);
    } else if (!strcmp(mode, "mutate")) {
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
        fprintf(stderr, "usage: t_xchg mutate|kill|rkill|echo|thread|fork|exec|budget|budget_conns|budget_wait|"
                "placement|uring|mapfixed|mprotect|threads [unix]\n");
        return 2;
    }
    printf("%s: ok\n", mode);
    return 0;
}
