/* Standalone preload library for testing malloc-hooks without the shim:
 * the hooks, the resolver and this constructor.  It publishes the module's
 * counters through zcsock_stat_get() under the names the shim uses
 * (mh.events.<kind>, mh.alloc.<field>, mh.status) so the same test
 * programs run against libzcsock.so and this library.
 * Knobs: ZCSOCK_ALLOC_PLACEMENT, ZCSOCK_ALLOC_MIN, ZCSOCK_ALLOC_HUGE_MIN. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mh.h"
#include "zcsock.h"
#include "zc_real.h"

#define API ZCSOCK_API

static int t_ready;
static unsigned long t_cb_calls;

static void t_noop_cb(unsigned kind, void *addr, size_t len, void *arg)
{
    (void)kind;
    (void)addr;
    (void)len;
    (void)arg;
}

/* Re-entrancy pass (MH_TEST_ALLOC_IN_CB=1): a subscriber that breaks the
 * rule and allocates, small and large, inside every event. */
static void t_alloc_cb(unsigned kind, void *addr, size_t len, void *arg)
{
    char *a = malloc(64), *b = malloc(512 * 1024);

    (void)kind;
    (void)addr;
    (void)len;
    (void)arg;
    if (a)
        a[0] = 1;
    if (b)
        b[0] = 1;
    free(b);
    free(a);
    __atomic_fetch_add(&t_cb_calls, 1, __ATOMIC_RELAXED);
}

static size_t t_env_size(const char *name, size_t def)
{
    const char *v = getenv(name);

    return v && *v ? (size_t)strtoull(v, NULL, 0) : def;
}

__attribute__((constructor)) static void t_mh_ctor(void)
{
    mh_params_t p = { 0 };

    if (zc_real_resolve(NULL))
        return;
    p.placement = (int)t_env_size("ZCSOCK_ALLOC_PLACEMENT", 1);
    p.alloc_min = t_env_size("ZCSOCK_ALLOC_MIN", 0);
    p.huge_min = t_env_size("ZCSOCK_ALLOC_HUGE_MIN", 0);
    t_ready = mh_init(&p) == 0;
    /* a listener for every kind, as pindown-cache will be, so dispatch
     * runs its full path in every test */
    mh_event_subscribe(MH_EV_ALL, t_noop_cb, NULL);
    if (t_env_size("MH_TEST_ALLOC_IN_CB", 0))
        mh_event_subscribe(MH_EV_ALL, t_alloc_cb, NULL);
}

API int zcsock_is_active(void)
{
    return t_ready;
}

API int zcsock_stat_get(const char *name, uint64_t *v)
{
    int rc;

    if (!name || !v) {
        errno = EINVAL;
        return -1;
    }
    if (!strcmp(name, "mh.test.cb_calls")) {
        *v = __atomic_load_n(&t_cb_calls, __ATOMIC_RELAXED);
        return 0;
    }
    rc = mh_stat_lookup(name, v);
    if (rc) {
        errno = -rc;
        return -1;
    }
    return 0;
}
