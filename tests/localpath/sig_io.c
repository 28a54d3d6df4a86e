/* SIGDEFER end to end: a SIGALRM handler sends on a paired connection while
 * the thread it interrupts is in the middle of large blocking sends on the
 * same connection (so, often, holding the connection's lock).  One process
 * connected to itself over 127.0.0.1 (it pairs under the library); a reader
 * thread (SIGALRM blocked) counts the main thread's 'A' bytes, the
 * handler's 'B' bytes and checks the trailer.  Exit 0 when every byte came;
 * prints the counts and, under the library, the statistics that show the
 * connection paired and handlers were deferred.
 *
 * usage: sig_io [MiB] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../lib/zc_test.h"

static int cfd;
static volatile sig_atomic_t nb, nfail;
static uint64_t got_a, got_b, got_other;
static char trailer[64];
static size_t trailer_len;

static void on_alarm(int sig)
{
    int saved = errno;

    (void)sig;
    if (send(cfd, "B", 1, MSG_DONTWAIT) == 1)
        nb++;
    else if (errno != EAGAIN)
        nfail++;
    errno = saved;
}

static void *reader(void *arg)
{
    int fd = *(int *)arg;
    static char buf[1 << 16];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
        for (ssize_t i = 0; i < n; i++) {
            if (trailer_len || buf[i] == 'E') {
                if (trailer_len < sizeof(trailer) - 1)
                    trailer[trailer_len++] = buf[i];
            } else if (buf[i] == 'A') {
                got_a++;
            } else if (buf[i] == 'B') {
                got_b++;
            } else {
                got_other++;
            }
        }
    if (n < 0)
        perror("sig_io: recv");
    return NULL;
}

static volatile sig_atomic_t usr1;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    usr1 += sig == SIGUSR1 && si && si->si_pid == getpid() ? 1 : 100;
}

/* What the application sees of its own dispositions is what it set, with
 * or without the library (the library registers its trampoline instead). */
static int dispositions_kept(void)
{
    struct sigaction sa, q, ref;
    sighandler_t prev;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaddset(&sa.sa_mask, SIGUSR2);
    /* the reference: a disposition the library never wraps (SIG_IGN), set
     * with the same flags, read back as glibc reports it (its SA_RESTORER
     * and sa_restorer included) */
    memset(&ref, 0, sizeof(ref));
    ref.sa_handler = SIG_IGN;
    ref.sa_flags = sa.sa_flags;
    if (sigaction(SIGUSR2, &ref, NULL) || sigaction(SIGUSR2, NULL, &ref) ||
        sigaction(SIGUSR2, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL))
        return fprintf(stderr, "sig_io: reference disposition failed\n"), 0;
    if (sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGUSR1, NULL, &q) ||
        q.sa_sigaction != on_usr1 || q.sa_flags != ref.sa_flags ||
        q.sa_restorer != ref.sa_restorer || !sigismember(&q.sa_mask, SIGUSR2))
        return fprintf(stderr, "sig_io: sigaction reports flags %#x restorer %p, glibc's "
                       "would be %#x %p\n", q.sa_flags, (void *)q.sa_restorer,
                       ref.sa_flags, (void *)ref.sa_restorer), 0;
    kill(getpid(), SIGUSR1);            /* once, with our pid in si_pid, then SIG_DFL */
    if (usr1 != 1 || sigaction(SIGUSR1, NULL, &q) || q.sa_handler != SIG_DFL)
        return fprintf(stderr, "sig_io: SA_RESETHAND handler ran %d, then %p\n", (int)usr1,
                       (void *)q.sa_handler), 0;
    prev = signal(SIGUSR2, SIG_IGN);
    if (prev != SIG_DFL || signal(SIGUSR2, prev) != SIG_IGN)
        return fprintf(stderr, "sig_io: signal() returned the wrong previous handler\n"), 0;
    return 1;
}

static uint64_t stat_of(const char *name)
{
    int (*get)(const char *, uint64_t *) = (int (*)(const char *, uint64_t *))
        dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v = 0;

    return get && get(name, &v) == 0 ? v : 0;
}

int main(int argc, char **argv)
{
    uint64_t total = (uint64_t)(argc > 1 ? atoi(argv[1]) : 64) << 20, sent = 0;
    struct sockaddr_in a;
    struct itimerval it = { { 0, 50 }, { 0, 50 } }, off = { { 0, 0 }, { 0, 0 } };
    struct sigaction sa;
    sigset_t alrm;
    pthread_t t;
    static char chunk[1 << 16];
    int lfd, sfd, ok;
    char want[64];
    time_t t0 = time(NULL);

    if (!dispositions_kept())
        return 1;
    lfd = zt_listen_lo(1, &a);
    if (lfd < 0)
        return perror("sig_io: listen"), 2;
    if (zt_accept_pair(lfd, &a, &cfd, &sfd))
        return perror("sig_io: connect"), 2;
    /* a first exchange pairs the connection before the signals start */
    if (send(cfd, "E", 1, 0) != 1 || recv(sfd, chunk, 1, 0) != 1)
        return perror("sig_io: hello"), 2;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    pthread_create(&t, NULL, reader, &sfd);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    memset(chunk, 'A', sizeof(chunk));
    setitimer(ITIMER_REAL, &it, NULL);
    while (sent < total) {
        ssize_t n = send(cfd, chunk, total - sent < sizeof(chunk) ? total - sent : sizeof(chunk), 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            perror("sig_io: send");
            break;
        }
        sent += (uint64_t)n;
    }
    setitimer(ITIMER_REAL, &off, NULL);
    snprintf(want, sizeof(want), "END %d", (int)nb);
    send(cfd, want, strlen(want), 0);
    shutdown(cfd, SHUT_WR);
    pthread_join(t, NULL);
    ok = sent == total && got_a == total && got_b == (uint64_t)nb && !got_other && !nfail &&
         !strcmp(trailer, want);
    printf("sig_io: sent %llu A, %d B (%d failed); got %llu A, %llu B, %llu other, trailer "
           "'%s'; %ld s; paired %llu, deferred %llu\n", (unsigned long long)sent, (int)nb,
           (int)nfail, (unsigned long long)got_a, (unsigned long long)got_b,
           (unsigned long long)got_other, trailer, (long)(time(NULL) - t0),
           (unsigned long long)stat_of("local.paired.accepted"),
           (unsigned long long)stat_of("proc.signals_deferred"));
    if (dlsym(RTLD_DEFAULT, "zcsock_stat_get") &&
        (!stat_of("local.paired.accepted") || !stat_of("proc.signals_deferred"))) {
        fprintf(stderr, "sig_io: under the library the connection must pair and some "
                "handler must have been deferred\n");
        ok = 0;
    }
    return ok ? 0 : 1;
}
