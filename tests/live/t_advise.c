/* t_advise: a program built to trigger one page-exchange advice rule of
 * `zcsock stat --advise` (common/zc_advise.c), or none, for the live tier
 * (tests/live/t_live.py, cases xchg and advise_pages).
 *
 *   t_advise MODE     MODE: static     large sends from static memory the
 *                                      allocator hooks never placed
 *                                      (rule not_placed)
 *                           unaligned  2.5 MiB sends from 1 MiB into a
 *                                      placed block: no whole 2 MiB unit
 *                                      (rule unaligned)
 *                           placed     2 MiB-aligned sends of whole units
 *                                      from posix_memalign'ed memory, a
 *                                      fresh unit each round (a unit
 *                                      rewritten after a lend is not lent
 *                                      again: xchg.refused.rewritten): lent where
 *                                      2 MiB shared pages exist (no rule),
 *                                      else rule exchange_unavailable
 *
 * One process, a TCP loopback pair (the tier pairs at once): a reader
 * thread receives and checks every byte of every send while the main
 * thread sends ROUNDS buffers, each refilled with its own pattern just
 * before it is sent and overwritten right after send() returns.  Then it
 * prints its pid and waits for one line on stdin; at "go" it sends the
 * same again and prints "done"; at end of input (or after 60 s) it exits.
 * Exit 0 when every byte arrived as sent. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/zc_test.h"

#define UNIT (2u << 20)
#define ROUNDS 24

static char static_mem[4 * UNIT];       /* not placed: the program's own memory */
static size_t len;                      /* bytes per send */
static volatile int bad;

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static unsigned char pat(size_t i, unsigned r)
{
    return (unsigned char)(i * 131u + r * 17u + (i >> 12));
}

static void fill(unsigned char *b, unsigned r)
{
    for (size_t i = 0; i < len; i++)
        b[i] = pat(i, r);
}

static void *reader(void *arg)
{
    int fd = *(int *)arg;
    unsigned char *b = malloc(len);

    if (!b)
        die("malloc");
    for (unsigned r = 0; r < 2 * ROUNDS; r++) {
        size_t got = 0;

        while (got < len) {
            ssize_t n = recv(fd, b + got, len - got, 0);

            if (n == 0 && got == 0 && r == ROUNDS)
                goto out;               /* no "go": the first batch only */
            if (n <= 0) {
                fprintf(stderr, "t_advise: recv: %zd at round %u\n", n, r);
                bad = 1;
                return NULL;
            }
            got += (size_t)n;
        }
        for (size_t i = 0; i < len; i++)
            if (b[i] != pat(i, r)) {
                fprintf(stderr, "t_advise: round %u byte %zu: %u, want %u\n", r, i, b[i],
                        pat(i, r));
                bad = 1;
                return NULL;
            }
    }
out:
    free(b);
    return NULL;
}

static void send_rounds(int fd, unsigned char *base, size_t step, unsigned from)
{
    for (unsigned r = from; r < from + ROUNDS; r++) {
        unsigned char *buf = base + step * r;
        size_t off = 0;

        fill(buf, r);
        while (off < len) {
            ssize_t n = send(fd, buf + off, len - off, 0);

            if (n <= 0)
                die("send");
            off += (size_t)n;
        }
        memset(buf, 0xee, len);         /* reusable the moment send() returned */
    }
}

/* One line from stdin, waiting at most 60 s in 50 ms polls (each a call
 * into the library, which answers `zcsock stat` requests at its calls). */
static int wait_line(char *line, int size)
{
    struct pollfd p = { .fd = 0, .events = POLLIN };

    for (int i = 0; i < 1200; i++)
        if (poll(&p, 1, 50) == 1)
            return fgets(line, size, stdin) != NULL;
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    unsigned char *buf;
    size_t step = 0;                    /* placed: a fresh unit each round */

    if (!strcmp(mode, "static")) {
        uintptr_t a = ((uintptr_t)static_mem + UNIT - 1) & ~(uintptr_t)(UNIT - 1);

        buf = (unsigned char *)a;
        len = UNIT;
    } else if (!strcmp(mode, "unaligned") || !strcmp(mode, "placed")) {
        unsigned char *b = NULL;

        if (posix_memalign((void **)&b, UNIT, 2 * ROUNDS * UNIT))
            die("posix_memalign");
        buf = mode[0] == 'u' ? b + (1u << 20) : b;
        len = mode[0] == 'u' ? 5u * (1u << 20) / 2 : UNIT;
        step = mode[0] == 'u' ? 0 : UNIT;
    } else {
        fprintf(stderr, "usage: t_advise static|unaligned|placed\n");
        return 2;
    }

    int c, s;
    pthread_t th;

    if (zt_tcp_pair(&c, &s))
        die("loopback pair");
    if (pthread_create(&th, NULL, reader, &s))
        die("pthread_create");
    send_rounds(c, buf, step, 0);
    printf("%d\n", (int)getpid());
    fflush(stdout);

    char line[16] = "";
    int go = wait_line(line, sizeof line) && !strncmp(line, "go", 2);

    if (go) {
        send_rounds(c, buf, step, ROUNDS);
        pthread_join(th, NULL);
        printf("done\n");
        fflush(stdout);
        wait_line(line, sizeof line);
    } else {
        shutdown(c, SHUT_WR);
        pthread_join(th, NULL);
    }
    return bad;
}
