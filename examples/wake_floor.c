/* wake_floor: the cost of a blocking wake-up on this machine, which bounds
 * any blocking ping-pong (make bench prints it next to the round trips).
 *
 * Two processes pinned to CPUs 0 and 1 bounce a token N times, sleeping
 * between turns, once through a futex word in shared memory (what the local
 * path's blocking calls do, without the library) and once through an
 * AF_UNIX socketpair (the kernel's cheapest socket).  Rounds alternate the
 * two; the medians are printed.
 *
 * usage: wake_floor [rounds [round_trips]]   (default 5 rounds of 3000) */
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

/* Wait until *w == want, sleeping on the futex. */
static void wf_wait(volatile uint32_t *w, uint32_t want)
{
    uint32_t v;

    while ((v = *w) != want)
        syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void wf_set(volatile uint32_t *w, uint32_t v)
{
    *w = v;
    syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Mean round trip in microseconds, or -1. */
static double wf_futex(int n)
{
    volatile uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double t0, us;
    pid_t pid;

    if (w == MAP_FAILED)
        return -1;
    *w = 0;
    pid = fork();
    if (pid == 0) {
        probe_pin(1);
        for (int i = 0; i < n; i++) {
            wf_wait(w, 1);
            wf_set(w, 2);
        }
        _exit(0);
    }
    probe_pin(0);
    t0 = probe_now();
    for (int i = 0; i < n; i++) {
        wf_set(w, 1);
        wf_wait(w, 2);
    }
    us = (probe_now() - t0) / n * 1e6;
    waitpid(pid, NULL, 0);
    munmap((void *)w, 4096);
    return us;
}

static double wf_unix(int n)
{
    int sv[2];
    double t0, us;
    char c = 0;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    pid = fork();
    if (pid == 0) {
        probe_pin(1);
        for (int i = 0; i < n; i++)
            if (read(sv[1], &c, 1) != 1 || write(sv[1], &c, 1) != 1)
                _exit(1);
        _exit(0);
    }
    probe_pin(0);
    t0 = probe_now();
    for (int i = 0; i < n; i++)
        if (write(sv[0], &c, 1) != 1 || read(sv[0], &c, 1) != 1)
            break;
    us = (probe_now() - t0) / n * 1e6;
    waitpid(pid, NULL, 0);
    close(sv[0]);
    close(sv[1]);
    return us;
}

static int wf_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5, n = argc > 2 ? atoi(argv[2]) : 3000;
    double f[64], u[64];

    if (rounds < 1 || rounds > 64 || n < 1) {
        fprintf(stderr, "usage: wake_floor [rounds 1..64 [round_trips]]\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
        f[r] = wf_futex(n);
        u[r] = wf_unix(n);
    }
    qsort(f, (size_t)rounds, sizeof(double), wf_cmp);
    qsort(u, (size_t)rounds, sizeof(double), wf_cmp);
    printf("wake-up floor (no library, CPUs 0/1, median of %d x %d round trips): "
           "futex %.1f us, AF_UNIX socketpair %.1f us\n", rounds, n, f[rounds / 2], u[rounds / 2]);
    return 0;
}
