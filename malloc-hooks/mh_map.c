/* Hooks for the mapping family: mmap/mmap64, munmap, mremap, madvise,
 * brk/sbrk, shmat/shmdt.
 *
 * Each hook delivers its memory event (mh.h) for the range that is about to
 * lose its pages, then calls the real function; errno is that of the real
 * call.  Before mh_init the hooks only forward.
 *
 * shmdt needs the segment's length: shmat records it in a small lock-free
 * table; segments attached before the library loaded (or when the table is
 * full) are looked up in /proc/self/maps with raw syscalls.
 *
 * madvise(DONTNEED) on placed arena memory becomes MADV_REMOVE so the range
 * reads back as zeros as it would on the private anonymous memory the
 * application believes it has; madvise(FREE) there (EINVAL on a shared
 * mapping) succeeds without doing anything, which FREE allows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mh_int.h"
#include "zc_real.h"
#include "zc_sys.h"
#include <string.h>

#define MH_EXPORT __attribute__((visibility("default")))

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif


static inline int mh_map_active(void)
{
    return __atomic_load_n(&mh_g.active, __ATOMIC_RELAXED);
}

/* Deliver kind for [addr, addr+len) rounded out to pages; errno kept. */
static void mh_map_event(unsigned kind, const void *addr, size_t len)
{
    uintptr_t lo, hi;
    int saved;

    if (!mh_map_active() || len == 0)
        return;
    saved = errno;
    lo = (uintptr_t)addr & ~(MH_PAGE - 1);
    hi = MH_ALIGN_UP((uintptr_t)addr + len, MH_PAGE);
    if (hi < lo)
        hi = UINTPTR_MAX & ~(MH_PAGE - 1);
    mh_event_dispatch(kind, (void *)lo, hi - lo);
    errno = saved;
}

/* ---- address-space limits ------------------------------------------------ */

/* glibc declares the limit argument nonnull; the kernel answers EFAULT to
 * a NULL one, which we must not turn into a crash. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"

/* A finite RLIMIT_AS for this process: the arenas' unused reservation goes
 * first (vsftpd's session process limits itself to 200 MiB). */
static void mh_limit_as(pid_t pid, int res, rlim_t cur)
{
    if (res == (int)RLIMIT_AS && cur != RLIM_INFINITY && (pid == 0 || pid == getpid()))
        mh_arena_trim();
}

/* These run before anything else can: the sanitizer runtimes set limits
 * and protect pages while they start, before our constructor, before dlsym
 * may allocate and before AddressSanitizer's shadow memory exists.  Until
 * the real functions are known the kernel is asked directly, by code that
 * touches no memory the sanitizer would check. */
#define MH_EARLY __attribute__((no_sanitize("address", "undefined")))

static MH_EARLY long mh_prlimit_sys(pid_t pid, int res, const void *rl, void *old)
{
    return zc_sys6(SYS_prlimit64, pid, res, (long)rl, (long)old, 0, 0);
}

/* A raw result for the application: -errno into errno. */
static MH_EARLY int mh_sys_ret(long r)
{
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return (int)r;
}

MH_EXPORT MH_EARLY int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
    if (!zc_real.setrlimit)
        return mh_sys_ret(mh_prlimit_sys(0, (int)res, rl, NULL));
    if (rl)
        mh_limit_as(0, (int)res, rl->rlim_cur);
    return zc_real.setrlimit(res, rl);
}

MH_EXPORT MH_EARLY int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
    if (!zc_real.setrlimit64)
        return mh_sys_ret(mh_prlimit_sys(0, (int)res, rl, NULL));
    if (rl)
        mh_limit_as(0, (int)res, (rlim_t)rl->rlim_cur);
    return zc_real.setrlimit64(res, rl);
}

MH_EXPORT MH_EARLY int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *rl,
                               struct rlimit *old)
{
    if (!zc_real.prlimit)
        return mh_sys_ret(mh_prlimit_sys(pid, (int)res, rl, old));
    if (rl)
        mh_limit_as(pid, (int)res, rl->rlim_cur);
    return zc_real.prlimit(pid, res, rl, old);
}

MH_EXPORT MH_EARLY int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *rl,
                                 struct rlimit64 *old)
{
    if (!zc_real.prlimit64)
        return mh_sys_ret(mh_prlimit_sys(pid, (int)res, rl, old));
    if (rl)
        mh_limit_as(pid, (int)res, (rlim_t)rl->rlim_cur);
    return zc_real.prlimit64(pid, res, rl, old);
}

/* ---- mmap / munmap / mremap ------------------------------------------- */

MH_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *p;

    MH_SITE_MARK();
    if (!MH_REAL_OK(mmap)) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    if (flags & MAP_FIXED) {
        mh_map_event(MH_EV_MAP_FIXED, addr, len);
        mh_arena_units_app(addr, len);      /* never frozen over again */
    }
    p = zc_real.mmap(addr, len, prot, flags, fd, off);
    /* Out of address space: what the arenas reserved and do not use goes
     * back, and the application's mapping is tried again (it must never
     * fail where it would have succeeded without the library). */
    if (p == MAP_FAILED && errno == ENOMEM && mh_arena_trim())
        p = zc_real.mmap(addr, len, prot, flags, fd, off);
    return p;
}

MH_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

MH_EXPORT int munmap(void *addr, size_t len)
{
    MH_SITE_MARK();
    if (!MH_REAL_OK(munmap)) {
        errno = ENOSYS;
        return -1;
    }
    mh_map_event(MH_EV_UNMAP, addr, len);
    mh_arena_units_app(addr, len);
    return zc_real.munmap(addr, len);
}

/* The application changes a range's protection: units of placed blocks in
 * it are the application's to protect (MH_UNIT_APP: a freeze or a unit
 * mapped in would make a read-only buffer writable again). */
MH_EXPORT MH_EARLY int mprotect(void *addr, size_t len, int prot)
{
    if (!zc_real.mprotect)      /* before we are resolved */
        return mh_sys_ret(zc_sys(SYS_mprotect, addr, len, prot));
    mh_arena_units_app(addr, len);
    return zc_real.mprotect(addr, len, prot);
}

MH_EXPORT MH_EARLY int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
    if (!zc_real.pkey_mprotect)
        return mh_sys_ret(zc_sys6(SYS_pkey_mprotect, (long)addr, (long)len, prot, pkey, 0, 0));
    mh_arena_units_app(addr, len);
    return zc_real.pkey_mprotect(addr, len, prot, pkey);
}

MH_EXPORT void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    MH_SITE_MARK();
    void *new_addr = NULL;

    if (flags & MREMAP_FIXED) {
        va_list ap;

        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    if (!MH_REAL_OK(mremap)) {
        errno = ENOSYS;
        return MAP_FAILED;
    }
    if (flags & MREMAP_FIXED) {
        mh_map_event(MH_EV_MAP_FIXED, new_addr, new_size);
        mh_arena_units_app(new_addr, new_size);
    }
    mh_arena_units_app(old, old_size);
    if (old_size && (flags & (MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP)))
        mh_map_event(MH_EV_REMAP, old, old_size);
    else if (new_size < old_size)
        mh_map_event(MH_EV_REMAP, (char *)old + MH_ALIGN_UP(new_size, MH_PAGE),
                     old_size > MH_ALIGN_UP(new_size, MH_PAGE) ?
                     old_size - MH_ALIGN_UP(new_size, MH_PAGE) : 0);
    return zc_real.mremap(old, old_size, new_size, flags, new_addr);
}

/* ---- madvise ------------------------------------------------------------- */

static int mh_map_advice_drops(int advice)
{
    return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
           advice == MADV_DONTNEED_LOCKED;
}

/* Is [addr, addr+len) entirely inside placed arena memory? */
static int mh_map_in_arena(void *addr, size_t len)
{
    int fd;
    uint64_t off;

    return mh_arena_find(addr) && mh_region_lookup(addr, len, &fd, &off, NULL);
}

/* DONTNEED on a private (forked) generation would bring back the memfd's
 * old contents: map fresh zero pages over the range instead. */
static int mh_map_zero_private(void *addr, size_t len)
{
    if (zc_real.mmap(addr, MH_ALIGN_UP(len, MH_PAGE), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
        MAP_FAILED)
        return -1;
    return 0;
}

MH_EXPORT int madvise(void *addr, size_t len, int advice)
{
    MH_SITE_MARK();
    if (!MH_REAL_OK(madvise)) {
        errno = ENOSYS;
        return -1;
    }
    if (!mh_map_advice_drops(advice))
        return zc_real.madvise(addr, len, advice);
    mh_map_event(MH_EV_MADVISE, addr, len);
    if (MH_UNLIKELY(mh_arena_span_has(addr))) {
        mh_arena_t *a = mh_arena_find(addr);

        if (a && __atomic_load_n(&a->priv, __ATOMIC_ACQUIRE) &&
            advice != MADV_FREE && !((uintptr_t)addr & (MH_PAGE - 1)) &&
            (size_t)((char *)addr - a->base) + len <= a->size)
            return mh_map_zero_private(addr, len);
        if (mh_map_in_arena(addr, len)) {
            if (advice == MADV_FREE)
                return 0;
            if (a->hugetlb) {
                /* zeroed in place: punching a hugetlb page gives up its
                 * reservation, and the next fault SIGBUSes if another
                 * process took the page meanwhile */
                size_t n = MH_ALIGN_UP(len, MH_PAGE);

                memset(addr, 0, (size_t)((char *)addr - a->base) + n <= a->size ? n : len);
                return 0;
            }
            if (advice != MADV_REMOVE && mh_arena_units_zero(a, addr, len))
                return 0;
            if (advice == MADV_DONTNEED || advice == MADV_DONTNEED_LOCKED)
                advice = MADV_REMOVE;
        }
    }
    return zc_real.madvise(addr, len, advice);
}

/* ---- brk / sbrk ------------------------------------------------------------ */

MH_EXPORT int brk(void *addr)
{
    MH_SITE_MARK();
    if (!MH_REAL_OK(brk)) {
        errno = ENOSYS;
        return -1;
    }
    if (mh_map_active()) {
        char *cur = zc_real.sbrk(0);

        if (cur != (char *)-1 && (char *)addr < cur)
            mh_map_event(MH_EV_BRK, addr, (size_t)(cur - (char *)addr));
    }
    return zc_real.brk(addr);
}

MH_EXPORT void *sbrk(intptr_t incr)
{
    MH_SITE_MARK();
    if (!MH_REAL_OK(sbrk)) {
        errno = ENOSYS;
        return (void *)-1;
    }
    if (incr < 0 && mh_map_active()) {
        char *cur = zc_real.sbrk(0);

        if (cur != (char *)-1)
            mh_map_event(MH_EV_BRK, cur + incr, (size_t)-incr);
    }
    return zc_real.sbrk(incr);
}

/* ---- shmat / shmdt ----------------------------------------------------------- */

#define MH_SHM_MAX 128

typedef struct mh_shm {
    void *addr;     /* NULL: free slot (claimed by CAS) */
    size_t len;
} mh_shm_t;

static mh_shm_t mh_shm_tab[MH_SHM_MAX];

static void mh_shm_remember(void *addr, size_t len)
{
    for (int i = 0; i < MH_SHM_MAX; i++) {
        void *expected = NULL;

        if (__atomic_compare_exchange_n(&mh_shm_tab[i].addr, &expected, (void *)1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            mh_shm_tab[i].len = len;
            __atomic_store_n(&mh_shm_tab[i].addr, addr, __ATOMIC_RELEASE);
            return;
        }
    }
}

/* Length recorded for addr, and forget it (0: unknown). */
static size_t mh_shm_forget(const void *addr)
{
    for (int i = 0; i < MH_SHM_MAX; i++) {
        void *a = __atomic_load_n(&mh_shm_tab[i].addr, __ATOMIC_ACQUIRE);

        if (a == addr) {
            size_t len = mh_shm_tab[i].len;

            if (__atomic_compare_exchange_n(&mh_shm_tab[i].addr, &a, NULL, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                return len;
        }
    }
    return 0;
}

void mh_map_shm_forget_all(void)
{
    for (int i = 0; i < MH_SHM_MAX; i++)
        __atomic_store_n(&mh_shm_tab[i].addr, NULL, __ATOMIC_RELEASE);
}

MH_EXPORT void *shmat(int id, const void *addr, int flg)
{
    void *r;
    struct shmid_ds ds;
    int saved;

    if (!MH_REAL_OK(shmat)) {
        errno = ENOSYS;
        return (void *)-1;
    }
    r = zc_real.shmat(id, addr, flg);
    if (r == (void *)-1 || !mh_map_active())
        return r;
    saved = errno;
    if (shmctl(id, IPC_STAT, &ds) == 0) {
        mh_shm_remember(r, ds.shm_segsz);
        if (addr)       /* SHM_REMAP may have put it over a placed block */
            mh_arena_units_app(r, ds.shm_segsz);
    }
    errno = saved;
    return r;
}

MH_EXPORT int shmdt(const void *addr)
{
    MH_SITE_MARK();
    size_t len;

    if (!MH_REAL_OK(shmdt)) {
        errno = ENOSYS;
        return -1;
    }
    if (mh_map_active()) {
        len = mh_shm_forget(addr);
        if (!len) {
            int saved = errno;

            len = mh_map_len_from_proc(addr);
            errno = saved;
        }
        mh_map_event(MH_EV_SHMDT, addr, len);
    }
    return zc_real.shmdt(addr);
}

/* ---- /proc/self/maps without stdio ----------------------------------------- */

static int mh_hex(const char **s, uintptr_t *v)
{
    uintptr_t x = 0;
    const char *p = *s;
    int n = 0;

    for (;; p++, n++) {
        char c = *p;

        if (c >= '0' && c <= '9')
            x = x * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x = x * 16 + (uintptr_t)(c - 'a' + 10);
        else
            break;
    }
    *s = p;
    *v = x;
    return n > 0;
}

/* Parse one maps line "start-end ..."; 1 and the length when start == addr. */
static int mh_maps_line(const char *line, uintptr_t addr, size_t *len_p)
{
    uintptr_t lo, hi;

    if (!mh_hex(&line, &lo) || *line++ != '-' || !mh_hex(&line, &hi))
        return 0;
    if (lo != addr)
        return 0;
    *len_p = hi - lo;
    return 1;
}

/* See mh_int.h.  Reads /proc/self/maps in 4 KiB pieces with raw syscalls
 * (the shim interposes read). */
size_t mh_map_len_from_proc(const void *addr)
{
    char buf[4096];
    size_t have = 0, len = 0;
    int fd = (int)zc_syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    for (int rounds = 0; rounds < 65536 && !len; rounds++) {
        ssize_t r = zc_syscall(SYS_read, fd, buf + have, sizeof(buf) - 1 - have);
        size_t start = 0;

        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = 0;
        for (size_t i = 0; i < have && !len; i++) {
            if (buf[i] != '\n')
                continue;
            buf[i] = 0;
            mh_maps_line(buf + start, (uintptr_t)addr, &len);
            start = i + 1;
        }
        if (start == 0 && have == sizeof(buf) - 1)
            start = have;   /* absurdly long line: drop it */
        have -= start;
        for (size_t i = 0; i < have; i++)
            buf[i] = buf[start + i];
    }
    zc_syscall(SYS_close, fd);
    return len;
}
