/* wake_floor: the cost of a blocking wake-up on this machine, which bounds
 * any blocking ping-pong (make bench prints it next to the round trips).
 *
 * Two processes pinned to CPUs 0 and 1 bounce a token N times, sleeping
 * between turns, once through a futex word in shared memory (what the local
 * path's blocking calls do, without the library) and once through an
 * AF_UNIX socketpair (the kernel's cheapest socket).  Rounds alternate the
 * two; the medians are printed.  Then the spinning floor: the same two
 * processes bounce 1 B, 4 KiB and 64 KiB messages through shared memory
 * with two copies each way (into the next slot of a shared area, out of it:
 * what a ring does) and no system call, spinning on a sequence word; this bounds any
 * copying ping-pong that spins (the epoll round trips with a free CPU).
 *
 * usage: wake_floor [rounds [round_trips]]   (default 5 rounds of 3000) */
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The spinning floor for size-byte messages: mean round trip in us, or -1.
 * Each message goes to the next slot of a 4 MiB area per direction (as
 * through the library's ring), not to one slot the two CPUs would keep
 * taking from each other's caches. */
static double wf_spin(int n, size_t size)
{
    const size_t area = 4u << 20;
    size_t slot = (size + 63) & ~(size_t)63, nslots = area / slot;
    volatile uint32_t *seq = mmap(NULL, 4096 + 2 * area, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *sh, *mine = malloc(size), *theirs = malloc(size);
    double t0, us;
    pid_t pid;

    if (seq == MAP_FAILED || !mine || !theirs)
        return -1;
    sh = (char *)seq + 4096;
    memset(sh, 0, 2 * area);
    memset(mine, 1, size);
    memset(theirs, 2, size);
    *seq = 0;
    pid = fork();
    if (pid == 0) {
        probe_pin(1);
        for (int i = 0; i < n; i++) {
            char *at = sh + (size_t)i % nslots * slot;

            while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != 2u * (uint32_t)i + 1)
                __builtin_ia32_pause();
            memcpy(theirs, at, size);
            memcpy(at + area, theirs, size);
            __atomic_store_n(seq, 2u * (uint32_t)i + 2, __ATOMIC_RELEASE);
        }
        _exit(0);
    }
    probe_pin(0);
    t0 = probe_now();
    for (int i = 0; i < n; i++) {
        char *at = sh + (size_t)i % nslots * slot;

        memcpy(at, mine, size);
        __atomic_store_n(seq, 2u * (uint32_t)i + 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != 2u * (uint32_t)i + 2)
            __builtin_ia32_pause();
        memcpy(mine, at + area, size);
    }
    us = (probe_now() - t0) / n * 1e6;
    waitpid(pid, NULL, 0);
    munmap((void *)seq, 4096 + 2 * area);
    free(mine);
    free(theirs);
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
    {
        static const size_t sizes[] = { 1, 4096, 65536 };
        double sp[3][64];

        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 3; k++)
                sp[k][r] = wf_spin(n, sizes[k]);
        for (int k = 0; k < 3; k++)
            qsort(sp[k], (size_t)rounds, sizeof(double), wf_cmp);
        printf("spinning floor (no library, no system call, two copies each way through "
               "shared memory): 1 B %.2f us, 4 KiB %.2f us, 64 KiB %.2f us\n",
               sp[0][rounds / 2], sp[1][rounds / 2], sp[2][rounds / 2]);
    }
    return 0;
}
