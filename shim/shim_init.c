/* Library life cycle: constructor, destructor, fork, exec, and the small
 * public API of include/zcsock.h. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_int.h"
#include "shim_mem.h"
#include "shim_proc.h"
#include "zc_config.h"
#include "zc_spin.h"
#include "zc_log.h"
#include "zc_advise.h"
#include "zcsock.h"
#include "zc_sys.h"

#define SHIM_REPORT_MAX (32 * 1024)

enum { SHIM_INIT_NONE, SHIM_INIT_BUSY, SHIM_INIT_DONE };

int shim_ready;
static int shim_init_state;     /* SHIM_INIT_*, atomic */
ZC_FORK_DATA static int shim_finished;  /* the destructor ran (a forking server's
                                             * children all run it: FORK PAGES) */

extern char **environ;

static void shim_config_warn(const char *msg)
{
    zc_log(ZC_LOG_WARN, "%s", msg);
}

static void shim_config_print(void *arg, const char *name, const char *value,
                              int from_env, const char *doc)
{
    (void)arg;
    (void)doc;
    zc_log(ZC_LOG_WARN, "config %s=%s%s", name, value, from_env ? "" : " (default)");
}

typedef struct shim_advice_out {
    char *buf;
    size_t size, len;
} shim_advice_out_t;

static uint64_t shim_advice_get(void *ctx, const char *key)
{
    uint64_t v = 0;

    (void)ctx;
    return zc_stats_get(key, &v) ? 0 : v;
}

static void shim_advice_emit(void *ctx, const char *id, const char *text)
{
    shim_advice_out_t *o = ctx;

    if (o->len + 1 < o->size)
        o->len += zc_fmt(o->buf + o->len, o->size - o->len, "# advice [%s] %s\n", id, text);
}

static void shim_report(const char *when)
{
    static char buf[SHIM_REPORT_MAX];   /* one report at a time: see callers */
    shim_advice_out_t o;
    size_t n;

    if (!zc_config.stats || (zc_config.stats == 1 && !zc_stats_any_socket_activity()))
        return;
    n = zc_stats_format(buf, sizeof(buf), when, zc_config.stats >= 3);
    n += shim_mem_ops.report(buf + n, sizeof(buf) - n);
    /* what to change, as zcsock stat --advise says it: comment lines, so
     * that readers of `key: value` lines skip them */
    o = (shim_advice_out_t){ buf, sizeof(buf), n };
    zc_advise(shim_advice_get, NULL, shim_advice_emit, &o);
    zc_log_write_raw(buf, o.len);
}

/* The library's first atfork handlers (registered before the others, its
 * child handler runs first and its prepare handler last): the cached pid
 * is not believed from the last prepare until the child has set its own
 * (zc_getpid). */
static void shim_atfork_prepare(void)
{
    shim_ep_fork_prepare();
    __atomic_add_fetch(&zc_pid_forking, 1, __ATOMIC_SEQ_CST);
}

static void shim_atfork_parent(void)
{
    __atomic_sub_fetch(&zc_pid_forking, 1, __ATOMIC_SEQ_CST);
    shim_ep_fork_parent();
}

ZC_FORK_CODE static void shim_atfork_child(void)
{
    int live;

    __atomic_store_n(&zc_pid_cached, (int)zc_sys(SYS_getpid, 0, 0, 0), __ATOMIC_RELAXED);
    __atomic_store_n(&zc_pid_forking, 0, __ATOMIC_SEQ_CST);
    live = zc_live_fork_child();    /* before the counts are zeroed: the parent's */
    shim_ep_fork_child();
    zc_stats_reset();
    if (live)
        zc_live_publish_later();
}

/* The modules' counters, for the live report text (zc_live_answer). */
static size_t shim_live_extra(char *buf, size_t size)
{
    return shim_mem_ops.report(buf, size);
}

/* Everything initialisation does, in order.  Runs once, from the constructor
 * or from the first hook that finds us uninitialised. */
static int shim_init_once(void)
{
    const char *missing = NULL;
    int rc;

    __atomic_store_n(&zc_pid_cached, (int)zc_sys(SYS_getpid, 0, 0, 0), __ATOMIC_RELAXED);
    zc_config_load(environ, shim_config_warn);
    zc_log_target_set(zc_config.log_file);
    zc_log_level_set((int)zc_config.debug);
    zc_log_stderr_guard_set(shim_fd_is_app_socket);
    rc = zc_real_resolve(&missing);
    if (rc) {
        if (rc != -EAGAIN)
            zc_log(ZC_LOG_WARN, "cannot find the real %s in the C library; "
                   "calls to it fail with ENOSYS", missing);
        return rc;
    }
    rc = shim_fd_table_init();
    if (rc)
        zc_log(ZC_LOG_NOTICE, "no descriptor table (%s): every socket counts as untracked",
               strerrordesc_np(-rc));
    pthread_atfork(shim_atfork_prepare, shim_atfork_parent, shim_atfork_child);
    zc_spin_init();
    shim_paths_init();
    shim_paths_start();
    if (zc_config.verbose)
        zc_config_visit(shim_config_print, NULL);
    shim_mem_ops.init();
    zc_live_extra = shim_live_extra;
    zc_live_conns_fn = shim_fd_describe_all;
    zc_live_seccomp_mode = shim_proc_seccomp_mode;
    return 0;
}

int shim_init_slow(void)
{
    int expected = SHIM_INIT_NONE, saved = errno, rc = 0;

    if (__atomic_compare_exchange_n(&shim_init_state, &expected, SHIM_INIT_BUSY, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        rc = shim_init_once();
        if (rc == -EAGAIN) {
            /* Re-entered from dlsym: let a later call finish the work. */
            __atomic_store_n(&shim_init_state, SHIM_INIT_NONE, __ATOMIC_RELEASE);
        } else {
            __atomic_store_n(&shim_init_state, SHIM_INIT_DONE, __ATOMIC_RELEASE);
            __atomic_store_n(&shim_ready, 1, __ATOMIC_RELEASE);
        }
    } else if (expected == SHIM_INIT_BUSY) {
        /* Another thread initialises, or this thread re-entered from within
         * initialisation: the real functions are what callers need. */
        rc = zc_real_resolve(NULL);
    }
    errno = saved;
    return rc;
}

__attribute__((constructor(101))) static void shim_constructor(void)
{
    shim_init_slow();
}

ZC_FORK_CODE __attribute__((destructor(101))) static void shim_destructor(void)
{
    if (__atomic_exchange_n(&shim_finished, 1, __ATOMIC_ACQ_REL))
        return;
    if (!shim_vfork_child()) {
        shim_process_exit();
        zc_live_exit();
    }
    shim_report("exit");
}

/* A vfork child shares our memory, and finds zc_pid_unsure set by the vfork
 * that made it (zc_getpid): while nothing made a child behind the atfork
 * handlers' back, no system call. */
int shim_vfork_child(void)
{
    int me = __atomic_load_n(&zc_pid_cached, __ATOMIC_RELAXED);

    if (__builtin_expect(!zc_pid_stale(), 1))
        return 0;
    return (int)zc_sys(SYS_getpid, 0, 0, 0) != me;
}

void shim_exec_prepare(void)
{
    if (shim_vfork_child())
        return;     /* a vfork child: it shares our memory, touch nothing */
    zc_stat_add(ZC_STAT_PROC_EXECS, 1);
    shim_report("exec");
    zc_live_exit();         /* the next image publishes its own */
}

/* --- public API (include/zcsock.h) -------------------------------------- */

ZCSOCK_API int zcsock_is_active(void)
{
    return __atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE) && zc_real_ready();
}

ZCSOCK_API const char *zcsock_version(void)
{
    return ZCSOCK_VERSION;
}

ZCSOCK_API int zcsock_stat_get(const char *name, uint64_t *value_p)
{
    if (!name || !value_p) {
        errno = EINVAL;
        return -1;
    }
    if (zc_stats_get(name, value_p)) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

ZCSOCK_API int zcsock_stats_write(int fd)
{
    char buf[SHIM_REPORT_MAX];
    size_t n = zc_stats_format(buf, sizeof(buf), "request", zc_config.stats >= 3), off = 0;

    while (off < n) {
        ssize_t w = zc_real.write ? zc_real.write(fd, buf + off, n - off) : -1;

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}
