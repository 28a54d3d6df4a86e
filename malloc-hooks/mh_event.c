/* Memory event subscribers and dispatch.
 *
 * Subscribers live in a fixed array; subscribe/unsubscribe take a mutex and
 * publish with release stores, dispatch reads lock-free.  mh_event_mask is
 * the OR of every live subscriber's mask so hooks skip all work when nobody
 * listens for a kind.  Dispatch runs inside hooks: it never allocates, never
 * blocks, and drops a nested dispatch on the same thread (a callback that
 * unmaps memory) instead of recursing.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "mh_int.h"

typedef struct mh_sub {
    mh_event_func_t cb;    /* NULL: slot free (atomic) */
    void *arg;
    unsigned mask;
} mh_sub_t;

static mh_sub_t mh_subs[MH_SUBSCRIBERS_MAX];
static pthread_mutex_t mh_sub_lock = PTHREAD_MUTEX_INITIALIZER; /* protects slot allocation */
unsigned mh_event_mask;
static uint64_t mh_event_counts[MH_EV_KINDS];
static uint64_t mh_event_nested;

const char *const mh_event_names[MH_EV_KINDS] = {
    "unmap", "remap", "map_fixed", "madvise", "shmdt", "brk", "free", "block",
};

static __thread int mh_tls_dispatching;
__thread uintptr_t mh_tls_site;

static void mh_event_mask_recompute(void)
{
    unsigned m = 0;

    for (int i = 0; i < MH_SUBSCRIBERS_MAX; i++)
        if (mh_subs[i].cb)
            m |= mh_subs[i].mask;
    __atomic_store_n(&mh_event_mask, m, __ATOMIC_RELEASE);
}

/* See mh.h. */
int mh_event_subscribe(unsigned mask, mh_event_func_t cb, void *arg)
{
    int h = -ENOSPC;

    if (!cb || !(mask & MH_EV_ALL) || (mask & ~MH_EV_ALL))
        return -EINVAL;
    pthread_mutex_lock(&mh_sub_lock);
    for (int i = 0; i < MH_SUBSCRIBERS_MAX; i++) {
        if (mh_subs[i].cb)
            continue;
        mh_subs[i].arg = arg;
        mh_subs[i].mask = mask;
        __atomic_store_n(&mh_subs[i].cb, cb, __ATOMIC_RELEASE);
        h = i;
        break;
    }
    if (h >= 0)
        mh_event_mask_recompute();
    pthread_mutex_unlock(&mh_sub_lock);
    return h;
}

/* See mh.h. */
int mh_event_unsubscribe(int handle)
{
    if (handle < 0 || handle >= MH_SUBSCRIBERS_MAX)
        return -EINVAL;
    pthread_mutex_lock(&mh_sub_lock);
    if (!mh_subs[handle].cb) {
        pthread_mutex_unlock(&mh_sub_lock);
        return -ENOENT;
    }
    __atomic_store_n(&mh_subs[handle].cb, NULL, __ATOMIC_RELEASE);
    mh_event_mask_recompute();
    pthread_mutex_unlock(&mh_sub_lock);
    return 0;
}

static unsigned mh_event_index(unsigned kind)
{
    return (unsigned)__builtin_ctz(kind);
}

/* Count one event of kind (even when nobody subscribed).  Hook-safe. */
void mh_event_count_add(unsigned kind)
{
    __atomic_fetch_add(&mh_event_counts[mh_event_index(kind)], 1, __ATOMIC_RELAXED);
}

/* See mh_int.h. */
void mh_event_dispatch(unsigned kind, const void *addr, size_t len)
{
    int saved_guard;

    mh_event_count_add(kind);
    if (!mh_event_wanted(kind) || len == 0)
        return;
    if (mh_tls_dispatching) {
        __atomic_fetch_add(&mh_event_nested, 1, __ATOMIC_RELAXED);
        return;
    }
    mh_tls_dispatching = 1;
    saved_guard = mh_tls_guard;
    mh_tls_guard = 1;
    for (int i = 0; i < MH_SUBSCRIBERS_MAX; i++) {
        mh_event_func_t cb = __atomic_load_n(&mh_subs[i].cb, __ATOMIC_ACQUIRE);

        if (cb && (mh_subs[i].mask & kind))
            cb(kind, (void *)addr, len, mh_subs[i].arg);
    }
    mh_tls_guard = saved_guard;
    mh_tls_dispatching = 0;
}

/* See mh.h. */
uintptr_t mh_event_site(void)
{
    return mh_tls_site;
}

/* See mh.h. */
void mh_stats_get(mh_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < MH_EV_KINDS; i++)
        st->events[i] = __atomic_load_n(&mh_event_counts[i], __ATOMIC_RELAXED);
    mh_arena_stats(st);
    st->boot_bytes = __atomic_load_n(&mh_boot_used, __ATOMIC_RELAXED);
}

/* See mh.h. */
unsigned mh_status(const char **reason_p)
{
    if (reason_p)
        *reason_p = mh_g.reason;
    return __atomic_load_n(&mh_g.status, __ATOMIC_RELAXED);
}

static const char *const mh_alloc_stat_names[] = {
    "placed_allocs", "placed_bytes", "pool_hits", "pool_bytes", "arena_fallbacks", "boot_bytes",
};
#define MH_ALLOC_STATS (sizeof(mh_alloc_stat_names) / sizeof(mh_alloc_stat_names[0]))
static const char *const mh_unit_stat_names[] = { "frozen", "mapped_in", "released", "thawed",
                                                  "app" };

/* Visit every counter as (full name, value); names are built in a stack
 * buffer.  See mh.h. */
void mh_stat_visit(mh_stat_visit_func_t fn, void *arg)
{
    char name[48];
    mh_stats_t st;
    const uint64_t *alloc = &st.placed_allocs;

    mh_stats_get(&st);
    fn(arg, "mh.status", mh_status(NULL));
    for (int i = 0; i < MH_EV_KINDS; i++) {
        memcpy(name, "mh.events.", 10);
        strcpy(name + 10, mh_event_names[i]);
        fn(arg, name, st.events[i]);
    }
    for (size_t i = 0; i < MH_ALLOC_STATS; i++) {
        memcpy(name, "mh.alloc.", 9);
        strcpy(name + 9, mh_alloc_stat_names[i]);
        fn(arg, name, alloc[i]);
    }
    for (size_t i = 0; i < sizeof(mh_unit_stat_names) / sizeof(mh_unit_stat_names[0]); i++) {
        memcpy(name, "mh.units.", 9);
        strcpy(name + 9, mh_unit_stat_names[i]);
        fn(arg, name, st.units[i]);
    }
}

typedef struct mh_stat_find {
    const char *name;
    uint64_t value;
    int found;
} mh_stat_find_t;

static void mh_stat_match(void *arg, const char *name, uint64_t value)
{
    mh_stat_find_t *f = arg;

    if (!f->found && !strcmp(name, f->name)) {
        f->value = value;
        f->found = 1;
    }
}

/* See mh.h. */
int mh_stat_lookup(const char *name, uint64_t *value_p)
{
    mh_stat_find_t f = { name, 0, 0 };

    if (!name || strncmp(name, "mh.", 3))
        return -ENOENT;
    mh_stat_visit(mh_stat_match, &f);
    if (!f.found)
        return -ENOENT;
    *value_p = f.value;
    return 0;
}

/* Unit tests only: drop every subscriber and counter. */
void mh_event_reset_for_test(void)
{
    pthread_mutex_lock(&mh_sub_lock);
    memset(mh_subs, 0, sizeof(mh_subs));
    memset(mh_event_counts, 0, sizeof(mh_event_counts));
    mh_event_nested = 0;
    mh_event_mask_recompute();
    pthread_mutex_unlock(&mh_sub_lock);
}
