/* Named statistics counters: see zc_stats.h. */
#include "zc_stats.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "zc_log.h"

#define ZC_STATS_SOURCES_MAX 8

zc_stats_store_pages_t zc_stats_store;
__thread zc_stats_block_t *zc_stats_tls;
#define zc_stats_blocks (zc_stats_store.s.blocks)

zc_stats_block_t *zc_stats_block_claim(void)
{
    unsigned i = __atomic_fetch_add(&zc_stats_store.s.blocks_used, 1, __ATOMIC_RELAXED);

    zc_stats_tls = i < ZC_STATS_BLOCKS ? &zc_stats_blocks[i] : ZC_STATS_SHARED;
    return zc_stats_tls;
}

static unsigned zc_stats_blocks_count(void)
{
    unsigned n = __atomic_load_n(&zc_stats_store.s.blocks_used, __ATOMIC_RELAXED);

    return n < ZC_STATS_BLOCKS ? n : ZC_STATS_BLOCKS;
}

uint64_t zc_stat_read(unsigned id)
{
    uint64_t sum = __atomic_load_n(&zc_stats[id], __ATOMIC_RELAXED);
    unsigned i, n = zc_stats_blocks_count();

    for (i = 0; i < n; i++)
        sum += __atomic_load_n(&zc_stats_blocks[i].v[id], __ATOMIC_RELAXED);
    return sum;
}

static const char *const zc_stat_names[ZC_STAT_COUNT] = {
#define ZC_STAT_NAME(id, name, doc) name,
    ZC_STAT_LIST(ZC_STAT_NAME)
#undef ZC_STAT_NAME
#define ZC_STAT_CALLS_NAME(ret, name, params, mandatory) "calls." #name,
    ZC_REAL_SOCKET_LIST(ZC_STAT_CALLS_NAME)
#undef ZC_STAT_CALLS_NAME
};

const char *zc_stat_name(unsigned id)
{
    return id < ZC_STAT_COUNT ? zc_stat_names[id] : "";
}

static const char *zc_stats_aux_names[ZC_STATS_AUX];
static unsigned zc_stats_aux_n;     /* ours; the store's naux is a copy for readers */
static int zc_stats_aux_lock;
static uint64_t zc_stats_aux_sink;
void (*zc_stats_aux_named)(unsigned i, const char *name);  /* zc_live: a name added */

uint64_t *zc_stats_aux(const char *name)
{
    unsigned i, n;

    while (__atomic_exchange_n(&zc_stats_aux_lock, 1, __ATOMIC_ACQUIRE))
        ;
    n = zc_stats_aux_n;
    for (i = 0; i < n && strcmp(zc_stats_aux_names[i], name); i++)
        ;
    if (i == n && n < ZC_STATS_AUX) {
        zc_stats_aux_names[n] = name;
        __atomic_store_n(&zc_stats_aux_n, n + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&zc_stats_store.s.naux, n + 1, __ATOMIC_RELEASE);
        if (zc_stats_aux_named)
            zc_stats_aux_named(n, name);
    }
    __atomic_store_n(&zc_stats_aux_lock, 0, __ATOMIC_RELEASE);
    return i < ZC_STATS_AUX ? &zc_stats_store.s.aux[i] : &zc_stats_aux_sink;
}

const char *zc_stats_aux_name(unsigned i)
{
    return i < __atomic_load_n(&zc_stats_aux_n, __ATOMIC_ACQUIRE) ? zc_stats_aux_names[i] : NULL;
}

static const zc_stats_source_t *zc_stats_sources[ZC_STATS_SOURCES_MAX];
static unsigned zc_stats_nsources;

int zc_stats_source_add(const zc_stats_source_t *src)
{
    unsigned i = __atomic_fetch_add(&zc_stats_nsources, 1, __ATOMIC_ACQ_REL);

    if (i >= ZC_STATS_SOURCES_MAX) {
        __atomic_fetch_sub(&zc_stats_nsources, 1, __ATOMIC_ACQ_REL);
        return -ENOSPC;
    }
    __atomic_store_n(&zc_stats_sources[i], src, __ATOMIC_RELEASE);
    return 0;
}

ZC_FORK_CODE void zc_stats_reset(void)
{
    unsigned i, b, n = zc_stats_blocks_count();

    /* (only the counts that are not zero: a page with none is not
     * copied for a fork child, FORK PAGES in zc_real.h) */
    for (i = 0; i < ZC_STAT_COUNT; i++) {
        if (__atomic_load_n(&zc_stats[i], __ATOMIC_RELAXED))
            __atomic_store_n(&zc_stats[i], 0, __ATOMIC_RELAXED);
        for (b = 0; b < n; b++)
            if (__atomic_load_n(&zc_stats_blocks[b].v[i], __ATOMIC_RELAXED))
                __atomic_store_n(&zc_stats_blocks[b].v[i], 0, __ATOMIC_RELAXED);
    }
}

static unsigned zc_stats_nsources_get(void)
{
    unsigned n = __atomic_load_n(&zc_stats_nsources, __ATOMIC_ACQUIRE);

    return n < ZC_STATS_SOURCES_MAX ? n : ZC_STATS_SOURCES_MAX;
}

/* Call emit for every counter of every registered source. */
static void zc_stats_sources_visit(zc_stats_emit_func_t emit, void *ctx)
{
    unsigned s, n = zc_stats_nsources_get();

    for (s = 0; s < n; s++) {
        const zc_stats_source_t *src = __atomic_load_n(&zc_stats_sources[s], __ATOMIC_ACQUIRE);

        if (src)
            src->visit(src->arg, emit, ctx);
    }
}

typedef struct zc_stats_find {
    const char *name;
    uint64_t value;
    int found;
} zc_stats_find_t;

static void zc_stats_find_emit(void *ctx, const char *name, uint64_t value)
{
    zc_stats_find_t *f = ctx;

    if (!f->found && !strcmp(name, f->name)) {
        f->value = value;
        f->found = 1;
    }
}

int zc_stats_get(const char *name, uint64_t *value_p)
{
    zc_stats_find_t f = { name, 0, 0 };
    unsigned i;

    for (i = 0; i < ZC_STAT_COUNT; i++) {
        if (!strcmp(name, zc_stat_names[i])) {
            *value_p = zc_stat_read(i);
            return 0;
        }
    }
    for (i = 0; zc_stats_aux_name(i); i++) {
        if (!strcmp(name, zc_stats_aux_name(i))) {
            *value_p = __atomic_load_n(&zc_stats_store.s.aux[i], __ATOMIC_RELAXED);
            return 0;
        }
    }
    zc_stats_sources_visit(zc_stats_find_emit, &f);
    if (!f.found)
        return -ENOENT;
    *value_p = f.value;
    return 0;
}

int zc_stats_any_socket_activity(void)
{
    return zc_stat_read(ZC_STAT_SOCKETS_CREATED) || zc_stat_read(ZC_STAT_SOCKETS_ACCEPTED) ||
           zc_stat_read(ZC_STAT_COPY_SEND_CALLS) || zc_stat_read(ZC_STAT_COPY_RECV_CALLS) ||
           zc_stat_read(ZC_STAT_LOCAL_SEND_CALLS) || zc_stat_read(ZC_STAT_LOCAL_RECV_CALLS) ||
           zc_stat_read(ZC_STAT_LOCAL_INHERITED);
}

static size_t zc_stats_line(char *buf, size_t size, const char *key, uint64_t v)
{
    return zc_fmt(buf, size, "%s: %llu\n", key, (unsigned long long)v);
}

typedef struct zc_stats_out {
    char *buf;
    size_t size, len;
} zc_stats_out_t;

/* Module counters appear in the report only once they moved. */
static void zc_stats_format_emit(void *ctx, const char *name, uint64_t value)
{
    zc_stats_out_t *o = ctx;

    if (value && o->len + 1 < o->size)
        o->len += zc_stats_line(o->buf + o->len, o->size - o->len, name, value);
}

/* Key i of the shim's (i < ZC_STAT_COUNT) and aux counters, NULL past them;
 * its value into *v when v. */
static const char *zc_stats_key(unsigned i, uint64_t *v)
{
    const char *k;

    if (i < ZC_STAT_COUNT) {
        if (v)
            *v = zc_stat_read(i);
        return zc_stat_names[i];
    }
    k = zc_stats_aux_name(i - ZC_STAT_COUNT);
    if (k && v)
        *v = __atomic_load_n(&zc_stats_store.s.aux[i - ZC_STAT_COUNT], __ATOMIC_RELAXED);
    return k;
}

/* Length of the group of key k (its first component: "local", "calls"). */
static size_t zc_stats_group_len(const char *k)
{
    const char *dot = strchr(k, '.');

    return dot ? (size_t)(dot - k) : strlen(k);
}

static int zc_stats_same_group(const char *a, const char *b)
{
    size_t n = zc_stats_group_len(a);

    return n == zc_stats_group_len(b) && !strncmp(a, b, n);
}

size_t zc_stats_format(char *buf, size_t size, const char *when, int zeros)
{
    zc_stats_out_t o;
    unsigned i, j, n = ZC_STAT_COUNT + ZC_STATS_AUX;
    const char *k;
    size_t len;
    uint64_t v;

    len = zc_fmt(buf, size, "# zcsock %s stats pid=%d at=%s\n", ZCSOCK_VERSION,
                 (int)getpid(), when);
    /* grouped by first component, groups in the order they first come; a
     * group's heading is a comment line, so `key: value` readers skip it */
    for (i = 0; i < n && (k = zc_stats_key(i, NULL)) && len + 1 < size; i++) {
        int seen = 0, head = 0;

        for (j = 0; j < i && !seen; j++)
            seen = zc_stats_same_group(zc_stats_key(j, NULL), k);
        if (seen)
            continue;
        for (j = i; j < n && len + 1 < size; j++) {
            const char *kj = zc_stats_key(j, &v);

            if (!kj)
                break;
            if (!zc_stats_same_group(kj, k) || (!v && !zeros))
                continue;
            if (!head++) {
                char g[48];
                size_t gl = zc_stats_group_len(k);

                if (gl >= sizeof(g))
                    gl = sizeof(g) - 1;
                memcpy(g, k, gl);
                g[gl] = 0;
                len += zc_fmt(buf + len, size - len, "# %s\n", g);
            }
            len += zc_stats_line(buf + len, size - len, kj, v);
        }
    }
    o = (zc_stats_out_t){ buf, size, len };
    zc_stats_sources_visit(zc_stats_format_emit, &o);
    return o.len;
}
