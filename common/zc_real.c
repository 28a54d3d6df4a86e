/* The resolver: fills zc_real from the next object in the lookup order.
 * The only file of the library that calls dlsym. */
#include "zc_real.h"
#include "zc_sys.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <errno.h>
#include <sched.h>

zc_real_t zc_real;

/* zc_sys.h: zc_getpid */
ZC_FORK_DATA int zc_pid_cached;
#if defined(__x86_64__)
ZC_FORK_DATA int zc_pid_unsure;
#else
ZC_FORK_DATA int zc_pid_unsure = 1;  /* vfork is interposed on x86_64 only (shim/hooks_proc.c) */
#endif
ZC_FORK_DATA int zc_pid_forking;

enum { RESOLVE_NONE, RESOLVE_BUSY, RESOLVE_DONE };
static int resolve_state;          /* RESOLVE_*, accessed atomically */
static const char *resolve_missing;
static int resolve_rc;
static __thread int resolve_in_this_thread;

/* Is p defined inside libzcsock.so itself?  Compares p with the address
 * ranges of our own PT_LOAD segments (found once with dl_iterate_phdr):
 * dladdr scans whole symbol tables and cost ~1 ms per process start. */
static uintptr_t zc_real_self_lo, zc_real_self_hi;

static int zc_real_self_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    uintptr_t me = (uintptr_t)zc_real_resolve, lo = UINTPTR_MAX, hi = 0;
    int mine = 0;

    (void)size;
    (void)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type != PT_LOAD)
            continue;
        if (me - a < ph->p_memsz)
            mine = 1;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (!mine)
        return 0;
    zc_real_self_lo = lo;
    zc_real_self_hi = hi;
    return 1;
}

static int zc_real_is_ours(void *p)
{
    if (!zc_real_self_hi)
        dl_iterate_phdr(zc_real_self_visit, NULL);
    return (uintptr_t)p >= zc_real_self_lo && (uintptr_t)p < zc_real_self_hi;
}

static int zc_real_resolve_all(const char **missing_p)
{
    void *p;

#define ZC_REAL_RESOLVE(ret, name, params, mandatory)                \
    p = dlsym(RTLD_NEXT, #name);                                     \
    if (p && zc_real_is_ours(p))                                     \
        p = NULL;                                                    \
    if (!p && (mandatory)) {                                         \
        *missing_p = #name;                                          \
        return -ENOENT;                                              \
    }                                                                \
    __atomic_store_n(&zc_real.name, (ret(*) params)p, __ATOMIC_RELEASE);
    ZC_REAL_LIST(ZC_REAL_RESOLVE)
#undef ZC_REAL_RESOLVE
    return 0;
}

int zc_real_resolve(const char **missing_p)
{
    int expected = RESOLVE_NONE;

    if (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) == RESOLVE_DONE)
        goto out;
    if (resolve_in_this_thread)
        return -EAGAIN;     /* dlsym re-entered us: callers use their fallback */
    if (__atomic_compare_exchange_n(&resolve_state, &expected, RESOLVE_BUSY, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int saved = errno;

        resolve_in_this_thread = 1;
        resolve_rc = zc_real_resolve_all(&resolve_missing);
        resolve_in_this_thread = 0;
        errno = saved;
        __atomic_store_n(&resolve_state, RESOLVE_DONE, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) != RESOLVE_DONE)
        sched_yield();
out:
    if (resolve_rc && missing_p)
        *missing_p = resolve_missing;
    return resolve_rc;
}

int zc_real_ready(void)
{
    return __atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) == RESOLVE_DONE;
}
