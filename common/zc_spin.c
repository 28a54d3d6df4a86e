/* The spin-before-sleep policy (zc_spin.h). */
#include "zc_spin.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zc_config.h"
#include "zc_real.h"
#include "zc_sys.h"

int64_t zc_now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* CPUs this process may run on, counted at start-up (before a program pins
 * its processes one per CPU, as benchmarks do: what matters is whether the
 * peer has a CPU of its own), or at first use. */
static int zc_spin_ncpu_v;

void zc_spin_init(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;

    __atomic_store_n(&zc_spin_ncpu_v, n > 0 ? n : 1, __ATOMIC_RELAXED);
}

static int zc_spin_ncpu(void)
{
    if (!__atomic_load_n(&zc_spin_ncpu_v, __ATOMIC_RELAXED))
        zc_spin_init();
    return __atomic_load_n(&zc_spin_ncpu_v, __ATOMIC_RELAXED);
}

/* No CPU of this process has a task waiting for it: runnable tasks (from
 * /proc/loadavg, "0.10 0.20 0.30 R/T N") at most the CPUs we may use.
 * Unknown (no /proc) counts as busy. */
static int zc_spin_cpus_free(void)
{
    static int64_t next_us;
    static int free_;
    int64_t now = zc_now_us();
    char b[128], *p;
    ssize_t n;
    int fd, running = 0;

    if (now < __atomic_load_n(&next_us, __ATOMIC_RELAXED))
        return __atomic_load_n(&free_, __ATOMIC_RELAXED);
    __atomic_store_n(&next_us, now + ZC_SPIN_LOAD_MS * 1000, __ATOMIC_RELAXED);
    fd = (int)zc_syscall(SYS_openat, AT_FDCWD, "/proc/loadavg", O_RDONLY | O_CLOEXEC);
    n = fd < 0 ? -1 : zc_real.read(fd, b, sizeof(b) - 1);
    if (fd >= 0)
        zc_real.close(fd);
    b[n > 0 ? n : 0] = 0;
    p = strchr(b, '/');
    while (p && p > b && p[-1] != ' ')
        p--;
    for (; p && *p >= '0' && *p <= '9' && running < 1000000; p++)
        running = running * 10 + (*p - '0');
    __atomic_store_n(&free_, p && running <= zc_spin_ncpu(), __ATOMIC_RELAXED);
    return __atomic_load_n(&free_, __ATOMIC_RELAXED);
}

unsigned zc_spin_for(const zc_spin_t *s)
{
    if (zc_config.spin_us)
        return (unsigned)zc_config.spin_us;
    if (!zc_config.spin || !s->budget_us || zc_spin_ncpu() < 2 || !zc_spin_cpus_free())
        return 0;
    return s->budget_us;
}

void zc_spin_learn(zc_spin_t *s, int64_t t0_us)
{
    if (zc_now_us() - t0_us <= ZC_SPIN_LEARN_US)
        s->budget_us = ZC_SPIN_MAX_US;
    else
        s->budget_us /= 2;
}
