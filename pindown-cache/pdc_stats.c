/* pdc_stats: counters, gauges and call-site attribution.
 *
 * Counters live in the cache as relaxed atomics: writers under the cache
 * lock use a plain load+store (no locked instruction on the hit path), the
 * hook path uses fetch_add; readers never lock.
 *
 * Sites: misses and invalidations are charged to a code address, kept in a
 * fixed table per kind with the space-saving rule (an unseen site replaces
 * the least counted entry and inherits its count, so heavy hitters stay).
 * Nothing here allocates; symbol names are resolved only by
 * pdc_site_format(), at report time. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unwind.h>

#include "pdc_int.h"

const char *const pdc_stat_names[PDC_STAT_COUNT] = {
#define PDC_STAT_NAME(id, suffix) [PDC_STAT_##id] = "pdc." suffix,
    PDC_STAT_LIST(PDC_STAT_NAME)
#undef PDC_STAT_NAME
};

uint64_t pdc_stats_get(const pdc_t *cache, unsigned idx)
{
    if (!cache || idx >= PDC_STAT_COUNT)
        return 0;
    return atomic_load_explicit(&((pdc_t *)cache)->stats[idx], memory_order_relaxed);
}

uint64_t pdc_stats_read(void *cache, unsigned idx)
{
    return pdc_stats_get(cache, idx);
}

/* Unwinding is libgcc's _Unwind_Backtrace, the unwinder C++ exceptions
 * use: it follows only what each frame's CFI describes (a frame without
 * any ends the walk) and never probes memory.  libunwind was used before:
 * on x86_64 it opens a pipe at the lowest free descriptors when it
 * initialises (fds 3 and 4 in every process) to validate addresses with
 * write(2), and reopens it, again at the lowest free numbers, when a read
 * of it fails (the application closed the number: it would then read from
 * and write into whatever the application opened there). */
typedef struct pdc_bt {
    void **frames;
    int n, max;
} pdc_bt_t;

static _Unwind_Reason_Code pdc_bt_step(struct _Unwind_Context *ctx, void *arg)
{
    pdc_bt_t *bt = arg;

    if (bt->n >= bt->max)
        return _URC_END_OF_STACK;
    bt->frames[bt->n++] = (void *)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

/* Return addresses of the innermost frames, at most max (the walk is
 * bounded by max).  Returns how many. */
static int pdc_backtrace(void **frames, int max)
{
    pdc_bt_t bt = { frames, 0, max };

    _Unwind_Backtrace(pdc_bt_step, &bt);
    return bt.n;
}

/* Unwind once outside any hook so that the unwinder's lazy set-up (its
 * once-initialised object list, the loader's frame-header lookup) is done
 * before a miss needs it.  Opens no descriptor. */
void pdc_sites_warmup(void)
{
    void *frames[4];

    pdc_backtrace(frames, 4);
}

#define PDC_UNWIND_DEPTH 32

/* The site to charge (see pdc.h): ra is the return address into pdc's
 * caller.  Lock held.  For invalidations (inside hooks) no unwinding. */
uintptr_t pdc_site_capture(pdc_t *cache, pdc_site_kind_t kind, uintptr_t ra)
{
    void *frames[PDC_UNWIND_DEPTH];
    int n, i;

    if (cache->params.site_func) {
        uintptr_t pc = cache->params.site_func(cache->params.site_arg, kind);

        if (pc)
            return pc;
    }
    if (kind != PDC_SITE_MISS || !(cache->params.flags & PDC_P_UNWIND_SITES) ||
        cache->params.site_skip == 0)
        return ra;
    n = pdc_backtrace(frames, PDC_UNWIND_DEPTH);
    for (i = 0; i < n; i++) {
        if ((uintptr_t)frames[i] != ra)
            continue;
        if (i + (int)cache->params.site_skip < n)
            return (uintptr_t)frames[i + cache->params.site_skip];
        break;
    }
    return ra;
}

/* Charge one event of kind to pc.  Lock held. */
void pdc_site_count(pdc_t *cache, pdc_site_kind_t kind, uintptr_t pc)
{
    pdc_site_t *v = cache->sites[kind].v;
    unsigned i, min = 0;

    for (i = 0; i < PDC_SITES; i++) {
        if (v[i].pc == pc && v[i].count) {
            v[i].count++;
            return;
        }
        if (v[i].count < v[min].count)
            min = i;
    }
    v[min].pc = pc;
    v[min].count++;
}

unsigned pdc_stats_sites(pdc_t *cache, pdc_site_kind_t kind, pdc_site_t *out,
                         unsigned n)
{
    pdc_site_t tmp[PDC_SITES];
    unsigned i, j, count = 0;

    if ((unsigned)kind >= PDC_SITE_KINDS || !out)
        return 0;
    pthread_mutex_lock(&cache->lock);
    memcpy(tmp, cache->sites[kind].v, sizeof(tmp));
    pthread_mutex_unlock(&cache->lock);
    /* Insertion sort by count, descending; empty entries dropped. */
    for (i = 0; i < PDC_SITES; i++) {
        pdc_site_t s = tmp[i];

        if (!s.count)
            continue;
        for (j = count; j > 0 && tmp[j - 1].count < s.count; j--)
            tmp[j] = tmp[j - 1];
        tmp[j] = s;
        count++;
    }
    if (count > n)
        count = n;
    memcpy(out, tmp, count * sizeof(*out));
    return count;
}

char *pdc_site_format(uintptr_t pc, char *buf, size_t size)
{
    Dl_info info;

    if (!buf || size == 0)
        return buf;
    memset(&info, 0, sizeof(info));
    if (dladdr((void *)pc, &info) && info.dli_sname) {
        const char *obj = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;

        snprintf(buf, size, "%s+0x%lx (%s)", info.dli_sname,
                 (unsigned long)(pc - (uintptr_t)info.dli_saddr),
                 obj ? obj + 1 : (info.dli_fname ? info.dli_fname : "?"));
    } else if (info.dli_fname) {
        const char *obj = strrchr(info.dli_fname, '/');

        snprintf(buf, size, "0x%lx (%s+0x%lx)", (unsigned long)pc,
                 obj ? obj + 1 : info.dli_fname,
                 (unsigned long)(pc - (uintptr_t)info.dli_fbase));
    } else {
        snprintf(buf, size, "0x%lx", (unsigned long)pc);
    }
    return buf;
}

size_t pdc_stats_sites_format(pdc_t *cache, const char *prefix, unsigned top,
                              char *buf, size_t size)
{
    static const char *const kinds[PDC_SITE_KINDS] = { "top_miss", "top_invalidate" };
    pdc_site_t sites[PDC_SITES];
    size_t len = 0;
    unsigned k, i, n;

    if (!buf || size == 0)
        return 0;
    buf[0] = '\0';
    if (!cache)
        return 0;
    for (k = 0; k < PDC_SITE_KINDS; k++) {
        n = pdc_stats_sites(cache, (pdc_site_kind_t)k, sites,
                            top < PDC_SITES ? top : PDC_SITES);
        for (i = 0; i < n && len < size - 1; i++) {
            char name[256];
            int w;

            pdc_site_format(sites[i].pc, name, sizeof(name));
            w = snprintf(buf + len, size - len, "%s.%s.%u: %llu %s\n",
                         prefix ? prefix : "pdc", kinds[k], i + 1,
                         (unsigned long long)sites[i].count, name);
            if (w < 0)
                break;
            len += (size_t)w < size - len ? (size_t)w : size - len - 1;
        }
    }
    return len;
}
