/* Initialisation, status, self-test and fork handlers.
 *
 * mh_init runs once from the shim's constructor, outside any hook: it reads
 * the THP/hugetlb settings from sysfs, detects a foreign allocator, reserves
 * the arenas' address space (the first arena, and its memfd, comes with the
 * first placed allocation), switches the hooks on and proves that events
 * arrive.
 * Every optional part that fails degrades (placement off, events only) and
 * is reported through mh_status(); the library never logs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mh_int.h"
#include "zc_real.h"

mh_state_t mh_g = {
    .alloc_min = SIZE_MAX,
    .huge_min = SIZE_MAX,
    .reason = "",
};

__thread int mh_tls_guard;

static void mh_status_set(unsigned flags, const char *reason)
{
    __atomic_fetch_or(&mh_g.status, flags, __ATOMIC_RELAXED);
    if (reason)
        mh_g.reason = reason;
}

/* shmem_enabled lists the modes with the active one in brackets.  MADV_HUGEPAGE
 * on shmem takes effect under always, within_size, advise and force. */
static int mh_thp_shmem_usable(void)
{
    char buf[256];
    const char *sel;

    if (mh_sysfs_read("/sys/kernel/mm/transparent_hugepage/shmem_enabled", buf,
                      sizeof(buf)) <= 0)
        return 0;
    sel = strchr(buf, '[');
    if (!sel)
        return 0;
    return !strncmp(sel, "[always]", 8) || !strncmp(sel, "[within_size]", 13) ||
           !strncmp(sel, "[advise]", 8) || !strncmp(sel, "[force]", 7);
}

/* ---- self-test ---------------------------------------------------------------- */

static void *mh_probe_addr;
static unsigned mh_probe_hits;

static void mh_probe_cb(unsigned kind, void *addr, size_t len, void *arg)
{
    (void)kind;
    (void)arg;
    if ((char *)addr <= (char *)mh_probe_addr && (char *)addr + len > (char *)mh_probe_addr)
        __atomic_fetch_add(&mh_probe_hits, 1, __ATOMIC_RELAXED);
}

/* See mh.h.  The probe page is unmapped through the munmap the application
 * would call (dlsym(RTLD_DEFAULT)), so another interposer in front of us or
 * a missing export shows up as a missing event. */
int mh_selftest(void)
{
    int (*um)(void *, size_t) = (int (*)(void *, size_t))dlsym(RTLD_DEFAULT, "munmap");
    int h, ok;
    void *pg;

    if (!um || !zc_real.mmap)
        return -ENOSYS;
    h = mh_event_subscribe(MH_EV_UNMAP, mh_probe_cb, NULL);
    if (h < 0)
        return h;
    pg = zc_real.mmap(NULL, MH_PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) {
        mh_event_unsubscribe(h);
        return -ENOMEM;
    }
    __atomic_store_n(&mh_probe_hits, 0, __ATOMIC_RELAXED);
    mh_probe_addr = pg;
    um(pg, MH_PAGE);
    ok = __atomic_load_n(&mh_probe_hits, __ATOMIC_RELAXED) > 0;
    mh_event_unsubscribe(h);
    mh_probe_addr = NULL;
    return ok ? 0 : -ENOSYS;
}

/* ---- init ----------------------------------------------------------------------- */

static void mh_init_placement(const mh_params_t *p, int foreign)
{
    mh_arena_cfg_t cfg = { 0 };
    size_t amin = p->alloc_min ? p->alloc_min : MH_ALLOC_MIN_DEFAULT;
    size_t hmin = p->huge_min ? p->huge_min : MH_HUGE_MIN_DEFAULT;

    if (!p->placement || foreign)
        return;
    if (mh_space_limited()) {
        mh_status_set(0, "placement off: the address space is limited (RLIMIT_AS, or "
                         "vm.overcommit_memory 2)");
        return;
    }
    cfg.thp = mh_thp_shmem_usable();
    cfg.hugetlb_free = cfg.thp ? 0 : mh_hugetlb_free();
    cfg.huge_paged_only = p->huge_paged_only;
    cfg.units_4k = p->units_4k;
    if (mh_arena_setup(&cfg) < 0) {
        mh_status_set(0, "placement off: cannot reserve address space for arenas");
        return;
    }
    if (amin < MH_PAGE)
        amin = MH_PAGE;
    mh_g.huge_min = hmin < amin ? amin : hmin;
    mh_g.huge_slack = p->huge_slack < 32 ? p->huge_slack : 0;
    __atomic_store_n(&mh_g.alloc_min, amin, __ATOMIC_RELEASE);
    mh_status_set((cfg.thp ? MH_ST_HUGE_THP : 0) | (cfg.hugetlb_free > 0 ? MH_ST_HUGE_TLB : 0) |
                  (cfg.huge_paged_only ? MH_ST_PLACEMENT_NARROW : 0), NULL);
    __atomic_store_n(&mh_g.placement_ready, 1, __ATOMIC_RELEASE);
    if (p->placement == 1)
        mh_placement_set(1);
}

/* See mh.h. */
int mh_placement_set(int on)
{
    if (!__atomic_load_n(&mh_g.placement_ready, __ATOMIC_ACQUIRE))
        return -ENOTSUP;
    __atomic_store_n(&mh_g.placement, on ? 1 : 0, __ATOMIC_RELEASE);
    if (on)
        __atomic_fetch_or(&mh_g.status, MH_ST_PLACEMENT_ACTIVE, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&mh_g.status, ~MH_ST_PLACEMENT_ACTIVE, __ATOMIC_RELAXED);
    return 0;
}

/* See mh.h. */
int mh_init(const mh_params_t *p)
{
    static int once;
    const char *why = NULL;
    int foreign;

    if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
        return 0;
    if (!zc_real.malloc || !zc_real.mmap || !zc_real.munmap) {
        mh_status_set(MH_ST_INIT | MH_ST_SELFTEST_FAILED, "real functions missing");
        return -ENOENT;
    }
    foreign = mh_alloc_detect_foreign(&why);
    if (foreign)
        mh_status_set(MH_ST_FOREIGN_ALLOCATOR, why);
    __atomic_store_n(&mh_g.glibc_chunks, !foreign, __ATOMIC_RELAXED);
    __atomic_store_n(&mh_g.active, 1, __ATOMIC_RELEASE);
    mh_status_set(MH_ST_INIT, NULL);
    if (mh_selftest() < 0) {
        mh_status_set(MH_ST_SELFTEST_FAILED, "munmap event missing: zero-copy off");
        return 0;
    }
    mh_status_set(MH_ST_EVENTS_OK, NULL);
    mh_init_placement(p, foreign);
    if (!p->no_atfork)
        pthread_atfork(mh_fork_prepare, mh_fork_parent, mh_fork_child);
    return 0;
}

/* ---- fork ----------------------------------------------------------------------- */

/* See mh.h. */
void mh_fork_prepare(void)
{
    int saved = errno;

    mh_arena_fork_events();
    mh_tls_guard++;
    mh_arena_fork_prepare();
    mh_tls_guard--;
    errno = saved;
}

void mh_fork_parent(void)
{
    int saved = errno;

    mh_arena_fork_parent();
    if (errno != saved)     /* (a write that changes nothing copies a page: FORK PAGES) */
        errno = saved;
}

ZC_FORK_CODE void mh_fork_child(void)
{
    int saved = errno;

    if (mh_tls_guard)
        mh_tls_guard = 0;
    mh_arena_fork_child();
    if (errno != saved)
        errno = saved;
}

/* See mh_int.h. */
int mh_real_resolve(void)
{
    int saved = errno;

    if (mh_tls_guard)
        return 0;
    mh_tls_guard = 1;
    zc_real_resolve(NULL);
    mh_tls_guard = 0;
    errno = saved;
    return 1;
}
