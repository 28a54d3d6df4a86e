/* Helpers shared by the small probes make bench runs after zcbench
 * (wake_floor.c, epoll_pingpong.c). */
#ifndef PROBE_H
#define PROBE_H

#include <sched.h>
#include <time.h>

/* Monotonic seconds. */
static inline double probe_now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Run on CPU cpu (best effort: a one-CPU machine just shares it). */
static inline void probe_pin(int cpu)
{
    cpu_set_t s;

    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof(s), &s);
}

#endif
