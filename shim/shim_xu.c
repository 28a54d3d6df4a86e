/* Page exchange, the lending side: the pin-down cache over exchange units.
 *
 * A send of whole 2 MiB units of a placed huge block will lend each unit by
 * identity instead of copying it (ARCHITECTURE.md "Page exchange").  This
 * file is the registration behind that: a pdc_t of its own ("pdc.xu."
 * statistics) whose backend makes, for a unit of the application's memory,
 * the unit file a peer may map, and which the memory events invalidate like
 * the wire path's cache.
 *
 *   reg(unit)   the unit must be one of a placed huge block that this
 *               process owns (not a received unit: those are not lent on).
 *               Its bytes are copied into a new 2 MiB memfd (it holds
 *               nothing but them: a peer given it sees no neighbour), which
 *               is sealed (F_SEAL_WRITE | SHRINK | GROW | SEAL: nobody, us
 *               included, changes it again) and kept as the library's
 *               descriptor, above the internal floor.  The unit itself is
 *               left alone: the application writes on into its own pages.
 *   get (hit)   is the registration still the application's bytes?
 *               - a unit not frozen: compared with the file (memcmp; a
 *                 refilled buffer differs in its first bytes, so this costs
 *                 little).  Equal means the buffer is sent again unchanged:
 *                 the unit is frozen now (mh_unit_freeze: its view becomes
 *                 MAP_PRIVATE over the arena memfd's range, so later writes,
 *                 the kernel's too, copy on write and that range keeps its
 *                 bytes; a store racing with the remap lands in one or the
 *                 other and is never lost), compared again, and from then on
 *               - a frozen unit: checked against pagemap (2 us: no page of
 *                 the unit became private since it was frozen).
 *               Not the same: the unit was rewritten (xu.rewritten): a
 *               buffer the application refills.  The registration is
 *               invalidated and the next one refused (-EFAULT, a negative
 *               entry until the application frees the block), so it goes
 *               through the ring: a new unit file per send would cost a copy
 *               plus a 2 MiB page the kernel zeroes, all on the sender's CPU
 *               (and in a VM that hands freed pages back to its host, a
 *               fault-in from the host: up to 1 ms per unit measured here),
 *               where the ring splits its copies between both CPUs and reuses
 *               its memory.  Never frozen, the refilled unit paid no
 *               copy-on-write (freezing at the first lend made a refill copy
 *               each 4 KiB page on write: 48x a plain write of the unit;
 *               ARCHITECTURE.md, "Page exchange").  A buffer sent unchanged
 *               pays a compare once and then nothing; a fresh buffer each
 *               time pays the copy into its unit file.
 *   dereg       close the unit file (a peer that was given it keeps its own
 *               reference) and unmap our view of it.
 *
 * Descriptors: one per registration, in a slot table (handle.id = slot) so a
 * dup2 onto one can move it (shim_xu_fd_move).  A fork child closes its
 * copies (pdc's fork_child forgets the registrations) and reopens pagemap.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/memfd.h>

#include "mh.h"
#include "pdc.h"
#include "shim_mem.h"
#include "shim_int.h"
#include "shim_path.h"
#include "zc_config.h"
#include "zc_log.h"
#include "zc_pool.h"
#include "zc_real.h"
#include "zc_rent.h"
#include "zc_spin.h"
#include "zc_stats.h"
#include "zc_sys.h"

#define XU_UNIT      MH_UNIT_SIZE
#define XU_PM_PRESENT (1ull << 63)
#define XU_PM_SWAP    (1ull << 62)
#define XU_PM_FILE    (1ull << 61)

typedef struct xu_slot {
    int fd;                 /* -1 free, -2 being filled */
    int frozen;             /* the unit was frozen with these bytes: pagemap says */
    uint64_t ino;
    void *view;             /* the file read-only, for the compare (lazily), or NULL */
} xu_slot_t;

static struct {
    pthread_mutex_t lock;   /* set-up only */
    int state;              /* 0 not tried, 1 ready, -1 unavailable (atomic) */
    pdc_t *pdc;
    pdc_ops_t ops;
    xu_slot_t *slots;
    unsigned nslots;
    int pagemap;            /* /proc/self/pagemap, -1 */
    int minfd;              /* lowest descriptor number kept (a quick "not ours") */
    uint64_t rewritten;     /* units found rewritten since they were lent */
    uint64_t frozen;        /* units frozen: sent again unchanged */
    uint64_t lends;         /* units handed out by shim_xu_lend */
} xu = { .lock = PTHREAD_MUTEX_INITIALIZER, .pagemap = -1, .minfd = INT32_MAX };

/* When a unit's first lend pays (common/zc_rent.h). */
static zc_rent_t xu_rent;

static void xu_kept(int fd)
{
    int m = __atomic_load_n(&xu.minfd, __ATOMIC_RELAXED);

    while (fd >= 0 && fd < m &&
           !__atomic_compare_exchange_n(&xu.minfd, &m, fd, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void xu_close(int fd)
{
    if (fd >= 0)
        zc_real.close(fd);
}

/* A new sealed 2 MiB memfd holding the bytes at unit: a hugetlb one for a
 * unit of the hugetlb arena (tlb), whose page is taken first (fallocate:
 * ENOSPC with the pool dry, where a fault would SIGBUS).  fd or -errno. */
static int xu_unit_file(const void *unit, int tlb, uint64_t *ino_p, uint64_t *copy_ns_p)
{
    int fd = memfd_create("zcsock-xu", MFD_CLOEXEC | MFD_ALLOW_SEALING |
                                           (tlb ? MFD_HUGETLB | MFD_HUGE_2MB : 0)), err;
    struct stat st;
    void *m;

    if (fd < 0)
        return -errno;
    if (fchmod(fd, 0) < 0 || ftruncate(fd, (off_t)XU_UNIT) < 0 ||
        (tlb && fallocate(fd, 0, 0, (off_t)XU_UNIT) < 0))
        goto fail;
    m = zc_real.mmap(NULL, XU_UNIT, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        goto fail;
    if (!tlb)
        zc_real.madvise(m, XU_UNIT, MADV_HUGEPAGE);
    /* the page first, then the copy, each timed (common/zc_rent.h) */
    if (zc_real.madvise(m, XU_UNIT, MADV_POPULATE_WRITE) == 0) {
        int64_t t0 = zc_now_us();

        memcpy(m, unit, XU_UNIT);
        *copy_ns_p = (uint64_t)(zc_now_us() - t0) * 1000;
    } else {
        memcpy(m, unit, XU_UNIT);
    }
    zc_real.munmap(m, XU_UNIT);
    if (zc_syscall(SYS_fcntl, fd, F_ADD_SEALS,
                   F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
        fstat(fd, &st) < 0)
        goto fail;
    *ino_p = st.st_ino;
    fd = shim_fd_internal_raise(fd);
    xu_kept(fd);
    return fd;
fail:
    err = -errno;
    xu_close(fd);
    return err;
}

static int xu_pagemap(void)
{
    int fd = __atomic_load_n(&xu.pagemap, __ATOMIC_ACQUIRE), nfd;

    if (fd >= 0)
        return fd;
    nfd = shim_fd_internal_raise(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
    if (nfd < 0)
        return -1;
    xu_kept(nfd);
    if (!__atomic_compare_exchange_n(&xu.pagemap, &fd, nfd, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        xu_close(nfd);
        return fd;
    }
    return nfd;
}

/* 1 when no page of the unit at unit is private to this process (each
 * present page is the file's, none is swapped out): the unit still holds
 * what it held when it was frozen.  0 otherwise or when pagemap cannot be
 * read. */
int shim_xu_clean(const void *unit)
{
    uint64_t e[XU_UNIT / 4096];
    int fd = xu_pagemap();

    if (fd < 0 || pread(fd, e, sizeof(e), (off_t)((uintptr_t)unit / 4096 * 8)) !=
                      (ssize_t)sizeof(e))
        return 0;
    for (size_t i = 0; i < XU_UNIT / 4096; i++)
        if ((e[i] & XU_PM_SWAP) || ((e[i] & XU_PM_PRESENT) && !(e[i] & XU_PM_FILE)))
            return 0;
    return 1;
}

/* The unit shim_xu_lend found rewritten, for the registration it asks for
 * next: refused, so the cache keeps a negative entry. */
static __thread void *xu_refuse __attribute__((tls_model("initial-exec")));
/* The slot + 1 whose unit file this thread's registration just made (the
 * fresh file holds the bytes of this very send: no compare).  Another
 * thread's lend of the same unit, which finds the registration made, may
 * send bytes written since: it compares. */
static __thread unsigned xu_made __attribute__((tls_model("initial-exec")));

static int xu_reg(void *arg, void *addr, size_t len, pdc_handle_t *h)
{
    uint64_t ino = 0, copy_ns = 0;
    int64_t t0;
    int st, fd;

    (void)arg;
    if (len != XU_UNIT || ((uintptr_t)addr & (XU_UNIT - 1)))
        return -EINVAL;
    if (addr == xu_refuse) {
        xu_refuse = NULL;
        return -EFAULT;     /* rewritten since lent: remembered until freed */
    }
    st = mh_unit_state(addr);
    if (st < 0)
        return -EINVAL;
    if (st == MH_UNIT_FOREIGN)
        return -EPERM;
    if (st == MH_UNIT_APP)
        return -EACCES;     /* the application's own mapping or protection there */
    for (unsigned i = 0; i < xu.nslots; i++) {
        int fr = -1;

        if (!__atomic_compare_exchange_n(&xu.slots[i].fd, &fr, -2, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        t0 = zc_now_us();
        fd = xu_unit_file(addr, mh_unit_hugetlb(addr), &ino, &copy_ns);
        if (fd >= 0)
            zc_rent_bought(&xu_rent, (uint64_t)(zc_now_us() - t0) * 1000, copy_ns);
        if (fd < 0) {
            __atomic_store_n(&xu.slots[i].fd, -1, __ATOMIC_RELEASE);
            /* out of descriptors or memory: later, maybe (-ENOSPC, the
             * hugetlb pool dry, is passed on: counted as its own reason) */
            return fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM ? -EAGAIN : fd;
        }
        xu.slots[i].ino = ino;
        xu.slots[i].view = NULL;
        xu.slots[i].frozen = 0;
        xu_made = i + 1;
        __atomic_store_n(&xu.slots[i].fd, fd, __ATOMIC_RELEASE);
        h->id = i;
        h->aux = ino;
        h->ptr = addr;
        return 0;
    }
    return -EAGAIN;
}

static int xu_dereg(void *arg, pdc_handle_t h)
{
    int fd;

    (void)arg;
    if (h.id >= xu.nslots)
        return -EINVAL;
    fd = __atomic_exchange_n(&xu.slots[h.id].fd, -2, __ATOMIC_ACQ_REL);
    xu_close(fd);
    if (xu.slots[h.id].view)
        zc_real.munmap(xu.slots[h.id].view, XU_UNIT);
    xu.slots[h.id].view = NULL;
    __atomic_store_n(&xu.slots[h.id].fd, -1, __ATOMIC_RELEASE);
    return 0;
}

/* Fork child: the registrations are the parent's; close our copies of their
 * files, and pagemap (it describes the parent). */
static void xu_fork_child(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < xu.nslots; i++) {
        xu_close(xu.slots[i].fd);
        xu.slots[i].fd = -1;
        if (xu.slots[i].view)
            zc_real.munmap(xu.slots[i].view, XU_UNIT);
        xu.slots[i].view = NULL;
    }
    xu_close(xu.pagemap);
    xu.pagemap = -1;
}

static void xu_on_event(unsigned kind, void *addr, size_t len, void *arg)
{
    (void)kind;
    pdc_range_invalidate(arg, addr, len);
}

#define XU_STAT_NAME(id, suffix) [PDC_STAT_##id] = "pdc.xu." suffix,
static const char *const xu_stat_names[PDC_STAT_COUNT] = { PDC_STAT_LIST(XU_STAT_NAME) };

static void xu_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    (void)arg;
    for (unsigned i = 0; i < PDC_STAT_COUNT; i++)
        emit(ctx, xu_stat_names[i], pdc_stats_get(xu.pdc, i));
    emit(ctx, "xu.lends", __atomic_load_n(&xu.lends, __ATOMIC_RELAXED));
    emit(ctx, "xu.rewritten", __atomic_load_n(&xu.rewritten, __ATOMIC_RELAXED));
    emit(ctx, "xu.frozen", __atomic_load_n(&xu.frozen, __ATOMIC_RELAXED));
    /* what a unit's first lend and a ring pass of its bytes cost, as
     * measured (common/zc_rent.h) */
    emit(ctx, "xu.buy_us", __atomic_load_n(&xu_rent.buy_ns, __ATOMIC_RELAXED) / 1000);
    emit(ctx, "xu.rent_us", __atomic_load_n(&xu_rent.rent_ns, __ATOMIC_RELAXED) / 1000);
}

static const zc_stats_source_t xu_source = { xu_visit, NULL };

/* Make the cache once.  1 ready, 0 unavailable. */
static int xu_start(void)
{
    int st = __atomic_load_n(&xu.state, __ATOMIC_ACQUIRE);
    pdc_params_t pp;

    if (st)
        return st > 0;
    pthread_mutex_lock(&xu.lock);
    if (!xu.state && !(mh_status(NULL) & (MH_ST_HUGE_THP | MH_ST_HUGE_TLB)) &&
        !zc_config.exchange_4k) {
        /* on 4 KiB pages mapping a unit costs more than copying it
         * (ARCHITECTURE.md, "Page exchange"): the ring stays */
        xu.state = -1;
        zc_log(ZC_LOG_NOTICE, "page exchange off: shared memory has no 2 MiB pages here "
               "(/sys/kernel/mm/transparent_hugepage/shmem_enabled is never or deny, and "
               "no free hugetlb pages; advise turns the first on; ZCSOCK_EXCHANGE_4K=1 "
               "lends on 4 KiB pages): copying through the ring");
    }
    if (!xu.state) {
        xu.state = -1;
        pdc_params_default(&pp);
        pp.max_bytes = zc_config.pdc_max_bytes;
        pp.max_entries = (unsigned)zc_config.pdc_max_entries;
        pp.budget[PDC_SEND] = zc_config.pdc_send_budget;
        pp.budget[PDC_RECV] = zc_config.pdc_recv_budget;
        pp.memlock_bytes = PDC_MEMLOCK_NONE;   /* nothing is pinned: unit files */
        pp.alloc = zc_pool_alloc_cb;
        pp.free = zc_pool_free_cb;
        xu.nslots = pp.max_entries;
        xu.slots = zc_pool_alloc_cb(NULL, xu.nslots * sizeof(xu_slot_t));
        memset(&xu.ops, 0, sizeof(xu.ops));
        xu.ops.name = "xu";
        xu.ops.reg = xu_reg;
        xu.ops.dereg = xu_dereg;
        xu.ops.fork_child = xu_fork_child;
        xu.ops.max_region_len = XU_UNIT;
        xu.ops.max_regions = xu.nslots;
        if (xu.slots) {
            for (unsigned i = 0; i < xu.nslots; i++)
                xu.slots[i].fd = -1;
            if (pdc_create(&pp, &xu.ops, NULL, &xu.pdc) == 0) {
                if (mh_event_subscribe(MH_EV_ALL, xu_on_event, xu.pdc) >= 0) {
                    zc_stats_source_add(&xu_source);
                    xu.state = 1;
                } else {
                    pdc_destroy(xu.pdc);
                    xu.pdc = NULL;
                }
            }
        }
    }
    st = xu.state;
    pthread_mutex_unlock(&xu.lock);
    return st > 0;
}

int shim_xu_ready(void)
{
    return xu_start();
}

int shim_xu_placed_any(void)
{
    return mh_placed_allocs() != 0;
}

/* The unit file of slot s, read-only, 2 MiB-aligned (one PMD maps it).  Set
 * once: the caller holds the registration. */
static const void *xu_view(xu_slot_t *s)
{
    void *v = __atomic_load_n(&s->view, __ATOMIC_ACQUIRE), *r, *want = NULL;
    int fd = __atomic_load_n(&s->fd, __ATOMIC_ACQUIRE);

    if (v || fd < 0)
        return v;
    r = zc_real.mmap(NULL, 2 * XU_UNIT, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    v = (void *)(((uintptr_t)r + XU_UNIT - 1) & ~(uintptr_t)(XU_UNIT - 1));
    if ((char *)v > (char *)r)
        zc_real.munmap(r, (size_t)((char *)v - (char *)r));
    zc_real.munmap((char *)v + XU_UNIT, (size_t)((char *)r + XU_UNIT - (char *)v));
    if (zc_real.mmap(v, XU_UNIT, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        zc_real.munmap(v, XU_UNIT);
        return NULL;
    }
    if (!__atomic_compare_exchange_n(&s->view, &want, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        zc_real.munmap(v, XU_UNIT);
        return want;
    }
    return v;
}

/* Does the registration in slot s still hold the bytes at unit?  (The
 * caller holds it, and the get that made it does not ask.)  A frozen
 * unit: pagemap.  Otherwise a compare, and a unit found unchanged is frozen
 * (then compared again: a store may have raced with the first compare). */
static int xu_still(xu_slot_t *s, void *unit)
{
    const void *v;

    if (__atomic_load_n(&s->frozen, __ATOMIC_ACQUIRE))
        return shim_xu_clean(unit);
    v = xu_view(s);
    if (!v || memcmp(v, unit, XU_UNIT))
        return 0;
    if (shim_pinners()) {
        /* a page pinned for the kernel or a device (an io_uring fixed
         * buffer, an RDMA registration) is written there behind any remap:
         * a frozen view would hide those writes, so the unit is compared at
         * every send instead */
        zc_stat_add(ZC_STAT_LOCAL_XCHG_PINNED, 1);
        return 1;
    }
    if (mh_unit_freeze(unit) == 0 && shim_xu_clean(unit) && !memcmp(v, unit, XU_UNIT) &&
        shim_xu_clean(unit)) {
        if (!__atomic_exchange_n(&s->frozen, 1, __ATOMIC_ACQ_REL))
            __atomic_fetch_add(&xu.frozen, 1, __ATOMIC_RELAXED);
        return 1;
    }
    /* equal, but the unit was already frozen once and rewritten (some
     * pages are private): it cannot be told by pagemap; compared each time */
    return !memcmp(v, unit, XU_UNIT);
}

int shim_xu_lend(void *unit, shim_xu_t *x)
{
    pdc_region_t *r;
    xu_slot_t *s;
    int rc, made;

    x->region = NULL;
    if (((uintptr_t)unit & (XU_UNIT - 1)) || !xu_start())
        return -EINVAL;
    /* a registration found is a hit only if the unit still holds its bytes */
    rc = pdc_region_get(xu.pdc, unit, XU_UNIT, PDC_SEND,
                        PDC_F_NOWAIT | PDC_F_NOMERGE | PDC_F_NOHIT | PDC_F_NOREG, &r);
    if (rc == -ENOENT) {
        /* none: lend it the first time now, or rent the ring once more */
        if (!zc_rent_cheap(&xu_rent) &&
            !zc_rent_decide(&xu_rent, (uintptr_t)unit, zc_rent_fp(unit, XU_UNIT)))
            return -ECANCELED;
        rc = pdc_region_get(xu.pdc, unit, XU_UNIT, PDC_SEND,
                            PDC_F_NOWAIT | PDC_F_NOMERGE | PDC_F_NOHIT, &r);
    }
    if (rc)
        return rc;
    s = &xu.slots[r->handle.id];
    made = xu_made == (unsigned)r->handle.id + 1;
    xu_made = 0;
    if (made || xu_still(s, unit)) {
        if (!made)
            pdc_region_hit(xu.pdc);
        x->fd = __atomic_load_n(&s->fd, __ATOMIC_ACQUIRE);
        x->ino = (unsigned long long)r->handle.aux;
        x->region = r;
        __atomic_fetch_add(&xu.lends, 1, __ATOMIC_RELAXED);
        return 0;
    }
    /* Rewritten since it was lent: a buffer the application refills.  A new
     * unit file per send would cost a copy plus a new 2 MiB page the kernel
     * zeroes (and, in a VM that reports free pages to its host, faults in
     * from the host: 1 ms per unit seen here), all on the sender's CPU; the
     * ring splits its two copies between both CPUs and reuses its memory.
     * So the unit goes through the ring until the application frees it: a
     * negative entry (the next registration is refused). */
    __atomic_fetch_add(&xu.rewritten, 1, __ATOMIC_RELAXED);
    pdc_range_invalidate(xu.pdc, unit, XU_UNIT);
    pdc_region_put(xu.pdc, r, PDC_SEND);
    xu_refuse = unit;
    rc = pdc_region_get(xu.pdc, unit, XU_UNIT, PDC_SEND, PDC_F_NOWAIT | PDC_F_NOMERGE, &r);
    xu_refuse = NULL;
    if (rc == 0)
        pdc_region_put(xu.pdc, r, PDC_SEND);   /* another thread registered it meanwhile */
    return -EFAULT;
}

void shim_xu_ring_paid(uint64_t bytes, uint64_t ns)
{
    zc_rent_ring(&xu_rent, bytes, ns, XU_UNIT);
}

void shim_xu_reap(void)
{
    if (__atomic_load_n(&xu.state, __ATOMIC_ACQUIRE) > 0)
        pdc_cache_reap(xu.pdc);
}

void shim_xu_release(shim_xu_t *x)
{
    if (x->region)
        pdc_region_put(xu.pdc, x->region, PDC_SEND);
    x->region = NULL;
}

int shim_xu_map(void *dst, int fd)
{
    if (shim_pinners()) {
        /* the destination may be pinned (an io_uring fixed buffer): the
         * kernel's later writes would go to the pages a map replaced */
        zc_stat_add(ZC_STAT_LOCAL_XCHG_PINNED, 1);
        return -EPERM;
    }
    return mh_unit_map(dst, fd);
}

int shim_xu_reclaim(void *unit)
{
    return mh_unit_reclaim(unit);
}

/* --- refusals by call site ------------------------------------------------- */

#define XU_SITES 8          /* per reason, space-saving: a new site replaces the least */

static struct {
    int busy;
    struct {
        uintptr_t pc;
        uint64_t n;
    } v[SHIM_XU_WHYS][XU_SITES];
} xu_sites;

static const char *const xu_why_names[SHIM_XU_WHYS] = { "not_placed", "rewritten", "budget",
                                                          "no_transport", "pool", "too_small",
                                                          "unaligned", "cost", "app" };

const char *shim_xu_why_name(int why)
{
    return why >= 0 && why < SHIM_XU_WHYS ? xu_why_names[why] : "?";
}

void shim_xu_refused(uintptr_t site, int why)
{
    unsigned min = 0;

    if (why < 0 || why >= SHIM_XU_WHYS || !site ||
        __atomic_exchange_n(&xu_sites.busy, 1, __ATOMIC_ACQUIRE))
        return;
    for (unsigned i = 0; i < XU_SITES; i++) {
        if (xu_sites.v[why][i].pc == site) {
            xu_sites.v[why][i].n++;
            goto out;
        }
        if (xu_sites.v[why][i].n < xu_sites.v[why][min].n)
            min = i;
    }
    xu_sites.v[why][min].pc = site;
    xu_sites.v[why][min].n++;
out:
    __atomic_store_n(&xu_sites.busy, 0, __ATOMIC_RELEASE);
}

size_t shim_xu_report(char *buf, size_t size)
{
    size_t n = 0;

    for (int w = 0; w < SHIM_XU_WHYS; w++) {
        unsigned used[XU_SITES] = { 0 };

        for (unsigned rank = 1; rank <= 3; rank++) {
            unsigned best = XU_SITES;
            char where[256];
            int k;

            for (unsigned i = 0; i < XU_SITES; i++)
                if (!used[i] && xu_sites.v[w][i].n &&
                    (best == XU_SITES || xu_sites.v[w][i].n > xu_sites.v[w][best].n))
                    best = i;
            if (best == XU_SITES || n + 1 >= size)
                break;
            used[best] = 1;
            k = snprintf(buf + n, size - n, "xchg.refused.%s.%u: %llu %s\n", xu_why_names[w],
                         rank, (unsigned long long)xu_sites.v[w][best].n,
                         pdc_site_format(xu_sites.v[w][best].pc, where, sizeof(where)));
            if (k < 0)
                break;
            n += (size_t)k < size - n ? (size_t)k : size - n - 1;
        }
    }
    return n;
}

void shim_xu_fork_prepare(void)
{
    if (__atomic_load_n(&xu.state, __ATOMIC_ACQUIRE) > 0)
        pdc_fork_prepare(xu.pdc);
}

void shim_xu_fork_parent(void)
{
    if (__atomic_load_n(&xu.state, __ATOMIC_ACQUIRE) > 0)
        pdc_fork_parent(xu.pdc);
}

ZC_FORK_CODE void shim_xu_fork_child(void)
{
    if (__atomic_load_n(&xu.state, __ATOMIC_ACQUIRE) > 0)
        pdc_fork_child(xu.pdc);
}

int shim_xu_fd_is_internal(int fd)
{
    if (fd < __atomic_load_n(&xu.minfd, __ATOMIC_RELAXED) ||
        __atomic_load_n(&xu.state, __ATOMIC_ACQUIRE) <= 0)
        return 0;
    if (fd == __atomic_load_n(&xu.pagemap, __ATOMIC_RELAXED))
        return 1;
    for (unsigned i = 0; i < xu.nslots; i++)
        if (__atomic_load_n(&xu.slots[i].fd, __ATOMIC_RELAXED) == fd)
            return 1;
    return 0;
}

int shim_xu_fd_move(int fd)
{
    int *where = NULL, to;

    if (!shim_xu_fd_is_internal(fd))
        return 0;
    if (fd == xu.pagemap)
        where = &xu.pagemap;
    for (unsigned i = 0; !where && i < xu.nslots; i++)
        if (xu.slots[i].fd == fd)
            where = &xu.slots[i].fd;
    if (!where)
        return 0;
    to = shim_fd_dup_high(fd);
    if (to < 0)
        return to;
    xu_kept(to);
    if (!__atomic_compare_exchange_n(where, &fd, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        xu_close(to);       /* it closed meanwhile */
        return 0;
    }
    xu_close(fd);
    return 0;
}
