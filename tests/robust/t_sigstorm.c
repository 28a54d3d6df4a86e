/* Blocking sends and receives under a storm of signals return exactly what
 * the kernel's would (issue 29, item 5: ncat lost bytes when a blocking
 * send returned short on SIGCHLD).  A sender and a receiver (two processes,
 * both under the library when preloaded) stream messages while a third
 * process sends both of them SIGUSR1 every few microseconds; both handle it
 * with SA_RESTART.  The application's own flow control keeps at most a
 * small window in flight, so the socket (or the ring) always has room: a
 * blocking send of a message then completes, whatever the signals, and a
 * blocking receive is restarted, never EINTR.  Every byte is checked.
 *
 *   t_sigstorm MSG WINDOW SECS [aligned]
 *     MSG     bytes per message (8192; 4 MiB with page exchange)
 *     WINDOW  messages in flight before the sender waits for an ack
 *     aligned the sender's buffer is 2 MiB-aligned malloc memory sent
 *             unchanged (page exchange lends it: a hit every time)
 * Exit 0 pass, 1 fail (a short send, an EINTR, a wrong byte); prints the
 * signals handled and the messages moved. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/zc_test.h"

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); exit(1); } while (0)

static void fill(unsigned char *b, size_t n, uint64_t seq)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = (seq << 32) ^ (i * 0x9e3779b97f4a7c15ull);

        memcpy(b + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* One blocking send: must take the whole message at once. */
static void send_one(int s, const unsigned char *b, size_t n, long *calls)
{
    ssize_t k = send(s, b, n, MSG_NOSIGNAL);

    (*calls)++;
    if (k < 0)
        FAIL("send: %s (a blocking send with room returned an error)\n", strerror(errno));
    if ((size_t)k != n)
        FAIL("send: short count %zd of %zu (a blocking send with room in the buffer)\n", k, n);
}

/* Blocking receives of exactly n bytes: EINTR never (SA_RESTART). */
static void recv_all(int s, unsigned char *b, size_t n, long *calls)
{
    while (n) {
        ssize_t k = recv(s, b, n, 0);

        (*calls)++;
        if (k < 0)
            FAIL("recv: %s (SA_RESTART: the kernel restarts)\n", strerror(errno));
        if (k == 0)
            FAIL("recv: early end of stream\n");
        b += k;
        n -= (size_t)k;
    }
}

int main(int argc, char **argv)
{
    size_t msg = argc > 1 ? strtoul(argv[1], NULL, 0) : 8192;
    int window = argc > 2 ? atoi(argv[2]) : 4;
    double secs = argc > 3 ? atof(argv[3]) : 3;
    int aligned = argc > 4 && !strcmp(argv[4], "aligned");
    struct sockaddr_in a;
    struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
    int ls = zt_listen_lo(1, &a), big = 4 << 20, st;
    pid_t rpid, kpid, me = getpid();

    setvbuf(stdout, NULL, _IONBF, 0);
    sigaction(SIGUSR1, &sa, NULL);
    if (ls < 0)
        FAIL("listener: %s\n", strerror(errno));
    rpid = fork();
    if (rpid == 0) {                                /* the receiver */
        unsigned char *b = malloc(msg), *e = malloc(msg);
        long calls = 0, n = 0;
        int s = accept(ls, NULL, NULL);

        if (s < 0 || !b || !e)
            FAIL("accept: %s\n", strerror(errno));
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        for (;;) {
            uint64_t seq;

            recv_all(s, (unsigned char *)&seq, 8, &calls);
            if (seq == UINT64_MAX)
                break;
            recv_all(s, b, msg, &calls);
            fill(e, msg, aligned ? 0 : seq);
            if (memcmp(b, e, msg))
                FAIL("message %llu: bytes differ\n", (unsigned long long)seq);
            n++;
            if ((seq + 1) % (uint64_t)window == 0 && send(s, "a", 1, MSG_NOSIGNAL) != 1)
                FAIL("ack: %s\n", strerror(errno));
        }
        printf("receiver: %ld messages, %ld recv calls, %d signals handled\n", n, calls,
               (int)handled);
        _exit(0);
    }
    close(ls);
    kpid = fork();
    if (kpid == 0) {                                /* the storm */
        double end = now() + secs + 1;

        while (now() < end) {
            kill(me, SIGUSR1);
            kill(rpid, SIGUSR1);
            usleep(20);
        }
        _exit(0);
    }
    {                                               /* the sender */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        unsigned char *b, c;
        long calls = 0, rcalls = 0;
        uint64_t seq = 0, end = UINT64_MAX;
        double stop = now() + secs;

        if (aligned) {
            if (posix_memalign((void **)&b, 2u << 20, msg))
                b = NULL;
        } else {
            b = malloc(msg);
        }
        if (s < 0 || !b || connect(s, (struct sockaddr *)&a, sizeof(a)))
            FAIL("connect: %s\n", strerror(errno));
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        if (aligned)
            fill(b, msg, 0);
        for (; now() < stop; seq++) {
            if (!aligned)
                fill(b, msg, seq);
            send_one(s, (unsigned char *)&seq, 8, &calls);
            send_one(s, b, msg, &calls);
            if ((seq + 1) % (uint64_t)window == 0)
                recv_all(s, &c, 1, &rcalls);
        }
        send_one(s, (unsigned char *)&end, 8, &calls);
        printf("sender: %llu messages of %zu bytes, %ld send calls, %d signals handled\n",
               (unsigned long long)seq, msg, calls, (int)handled);
        kill(kpid, SIGKILL);
        waitpid(kpid, NULL, 0);
        if (waitpid(rpid, &st, 0) != rpid || !WIFEXITED(st) || WEXITSTATUS(st))
            FAIL("the receiver failed\n");
        if (handled < 100)
            FAIL("only %d signals reached the sender: no storm\n", (int)handled);
    }
    return 0;
}
