/* The library's epoll tags never reach the application (issue 29, item 1:
 * Apache httpd's event MPM, the Erlang VM, slapd and Varnish dereferenced
 * a tag as their epoll_data).  Claimed descriptors (accepted TCP
 * connections with their offer due, which the library claims even when the
 * peer runs without it) are added, modified and deleted by some threads
 * while others wait in epoll_wait / epoll_pwait / epoll_pwait2 on the same
 * set, and a forked child waits on a set its parent keeps changing.  Every
 * data word an epoll call returns must be one the application registered.
 *
 *   t_epoll_race fresh SECS    new sets, a claimed descriptor added while
 *                              two threads already wait (the race that
 *                              crashed Apache and Erlang)
 *   t_epoll_race churn SECS    one set: ADD/MOD/DEL of claimed and plain
 *                              descriptors against three waiting threads
 *   t_epoll_race fork SECS     a child waits on the parent's set while the
 *                              parent adds and deletes claimed descriptors
 *
 * Exit 0 pass, 1 fail (an unknown data word, or no event at all).  Prints
 * the number of events checked. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/zc_test.h"

#define NCONN 48
#define DATA_MAGIC 0x00ab0000u    /* every data word we register: MAGIC | index */

static int srv[NCONN], cli[NCONN], plain[8];
static volatile int stop, bad;
static volatile uint64_t events, badword;
static int cur_ep = -1;

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* NCONN loopback connections whose server ends hold one unread byte. */
static void conns(void)
{
    struct sockaddr_in a;
    int l = zt_listen_lo(NCONN, &a), i;

    if (l < 0)
        die("listener");
    for (i = 0; i < NCONN; i++) {
        if (zt_accept_pair(l, &a, &cli[i], &srv[i]))
            die("connect");
        /* the client's byte: a kernel byte (the server never offered) */
        if (send(cli[i], "x", 1, 0) != 1)
            die("send");
    }
    close(l);
    for (i = 0; i < 8; i++) {
        plain[i] = eventfd(1, EFD_NONBLOCK);     /* always readable */
        if (plain[i] < 0)
            die("eventfd");
    }
}

static void check(const struct epoll_event *ev, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        uint64_t d = ev[i].data.u64;

        if ((d & ~0xffffULL) != DATA_MAGIC || (d & 0xffff) >= NCONN + 8) {
            if (!bad)
                badword = d;
            bad = 1;
        }
    }
    __atomic_add_fetch(&events, (uint64_t)n, __ATOMIC_RELAXED);
}

static int wait_any(int ep, struct epoll_event *ev, int max, int ms, int how)
{
    struct timespec ts = { 0, (long)ms * 1000000 };

    switch (how % 3) {
    case 0: return epoll_wait(ep, ev, max, ms);
    case 1: return epoll_pwait(ep, ev, max, ms, NULL);
    default: return epoll_pwait2(ep, ev, max, &ts, NULL);
    }
}

/* --- fresh: a set that had no claimed registration when the waits began -- */

static pthread_barrier_t bar;

static void *fresh_waiter(void *arg)
{
    struct epoll_event ev[16];
    int how = (int)(intptr_t)arg, n;

    for (;;) {
        pthread_barrier_wait(&bar);
        if (stop)
            break;
        n = wait_any(__atomic_load_n(&cur_ep, __ATOMIC_ACQUIRE), ev, 16, 20, how++);
        if (n > 0)
            check(ev, n);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static int fresh(double secs)
{
    pthread_t t[2];
    double end = now() + secs;
    int round = 0, i;

    pthread_barrier_init(&bar, NULL, 3);
    for (i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fresh_waiter, (void *)(intptr_t)i);
    for (;;) {
        int ep = epoll_create1(EPOLL_CLOEXEC), k = round % NCONN;
        struct epoll_event e = { EPOLLIN, { .u64 = DATA_MAGIC | (uint64_t)k } };

        if (ep < 0)
            die("epoll_create1");
        __atomic_store_n(&cur_ep, ep, __ATOMIC_RELEASE);
        if (now() > end || bad)
            stop = 1;
        pthread_barrier_wait(&bar);
        if (stop)
            break;
        /* let the waiters get into the kernel (or not: both orders count) */
        if (round & 1)
            usleep(50 + (round % 7) * 30);
        if (epoll_ctl(ep, EPOLL_CTL_ADD, srv[k], &e))
            die("epoll_ctl ADD");
        pthread_barrier_wait(&bar);
        close(ep);
        round++;
    }
    for (i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("fresh: %d rounds, %llu events\n", round, (unsigned long long)events);
    return round;
}

/* --- churn: ADD/MOD/DEL against waiting threads -------------------------- */

static void *churn_waiter(void *arg)
{
    struct epoll_event ev[32];
    int how = (int)(intptr_t)arg, n;

    while (!stop) {
        n = wait_any(cur_ep, ev, 32, 5, how++);
        if (n > 0)
            check(ev, n);
    }
    return NULL;
}

static void *churn_ctl(void *arg)
{
    unsigned seed = (unsigned)(intptr_t)arg;

    while (!stop) {
        int k = (int)(rand_r(&seed) % (NCONN + 8));
        int fd = k < NCONN ? srv[k] : plain[k - NCONN];
        struct epoll_event e = { EPOLLIN, { .u64 = DATA_MAGIC | (uint64_t)k } };

        switch (rand_r(&seed) % 4) {
        case 0:
            e.events |= rand_r(&seed) & 1 ? EPOLLET : 0;
            epoll_ctl(cur_ep, EPOLL_CTL_ADD, fd, &e);
            break;
        case 1:
            e.events |= rand_r(&seed) & 1 ? EPOLLONESHOT : 0;
            epoll_ctl(cur_ep, EPOLL_CTL_MOD, fd, &e);
            break;
        default:
            epoll_ctl(cur_ep, EPOLL_CTL_DEL, fd, NULL);
            break;
        }
    }
    return NULL;
}

static void churn(double secs)
{
    pthread_t w[3], c[2];
    int i;

    cur_ep = epoll_create1(EPOLL_CLOEXEC);
    for (i = 0; i < 3; i++)
        pthread_create(&w[i], NULL, churn_waiter, (void *)(intptr_t)i);
    for (i = 0; i < 2; i++)
        pthread_create(&c[i], NULL, churn_ctl, (void *)(intptr_t)(i + 7));
    for (double end = now() + secs; now() < end && !bad;)
        usleep(20000);
    stop = 1;
    for (i = 0; i < 3; i++)
        pthread_join(w[i], NULL);
    for (i = 0; i < 2; i++)
        pthread_join(c[i], NULL);
    printf("churn: %llu events\n", (unsigned long long)events);
}

/* --- fork: a child waits on the parent's set ------------------------------ */

static int forked(double secs)
{
    int ep = epoll_create1(0), p[2], i, st;
    struct epoll_event e = { EPOLLIN, { .u64 = DATA_MAGIC | 0 } };
    pid_t pid;
    double end = now() + secs;

    if (pipe(p))
        die("pipe");
    if (epoll_ctl(ep, EPOLL_CTL_ADD, srv[0], &e))
        die("ADD");
    pid = fork();
    if (pid == 0) {
        struct epoll_event ev[16];
        char c;

        close(p[1]);
        while (!bad && now() < end + 1) {
            int n = epoll_wait(ep, ev, 16, 5);

            if (n > 0)
                check(ev, n);
            if (read(p[0], &c, 0) < 0)
                break;
        }
        printf("fork child: %llu events%s\n", (unsigned long long)events,
               bad ? " (unknown data word)" : "");
        if (bad)
            printf("unknown data word 0x%llx\n", (unsigned long long)badword);
        _exit(bad ? 1 : 0);
    }
    close(p[0]);
    for (i = 1; now() < end; i = i % (NCONN - 1) + 1) {
        struct epoll_event a = { EPOLLIN, { .u64 = DATA_MAGIC | (uint64_t)i } };

        epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &a);
        usleep(200);
        epoll_ctl(ep, EPOLL_CTL_DEL, srv[i], NULL);
    }
    close(p[1]);
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    double secs = argc > 2 ? atof(argv[2]) : 3;
    const char *mode = argc > 1 ? argv[1] : "fresh";
    int rc = 0;

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IONBF, 0);
    conns();
    if (!strcmp(mode, "fresh"))
        fresh(secs);
    else if (!strcmp(mode, "churn"))
        churn(secs);
    else if (!strcmp(mode, "fork"))
        rc = forked(secs);
    else
        return 2;
    if (bad) {
        printf("FAIL: epoll returned a data word the application never registered: 0x%llx\n",
               (unsigned long long)badword);
        return 1;
    }
    if (rc)
        return 1;
    if (!events && strcmp(mode, "fork")) {
        printf("FAIL: no event at all\n");
        return 1;
    }
    return 0;
}
