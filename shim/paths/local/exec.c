/* The local path across exec: the connections that survive an exec are
 * described to the next image in ZCSOCK_INHERIT, or handed back to the
 * kernel when it will not load the library. */
#include "lp_int.h"
#include "exec.h"
#include "adopt.h"
#include "handback.h"
#include "pairing.h"
#include "xchg.h"
#include "zc_sys.h"

#define LP_INHERIT_VAR "ZCSOCK_INHERIT="


/* LD_PRELOAD in envp names this library by a path that exists (a bare
 * name is searched by the loader: not known, so no). */
static int lp_env_loads_us(char *const *envp)
{
    size_t i;

    for (i = 0; envp && envp[i]; i++) {
        const char *p;

        if (strncmp(envp[i], "LD_PRELOAD=", 11))
            continue;
        for (p = envp[i] + 11; *p;) {
            char path[512];
            size_t n = strcspn(p, " :");

            if (n && n < sizeof(path) && p[0] == '/') {
                memcpy(path, p, n);
                path[n] = 0;
                if (strstr(path, "libzcsock") &&
                    zc_syscall(SYS_faccessat, AT_FDCWD, path, R_OK) == 0)
                    return 1;
            }
            p += n;
            p += strspn(p, " :");
        }
    }
    return 0;
}

#define LP_EXEC_FDS 256
#define LP_INHERIT_FDS 8        /* descriptors per connection in ZCSOCK_INHERIT */

/* The socket descriptors that survive an exec (no FD_CLOEXEC), from the
 * kernel's table: a vfork child's is not the one the state table describes
 * (Python's subprocess dup2()s and closes descriptors there). */
typedef struct lp_exec_fds {
    int n;
    int fds[LP_EXEC_FDS];
    uint64_t cookies[LP_EXEC_FDS];
} lp_exec_fds_t;

static int lp_exec_scan_fn(int dirfd, long fd, void *arg)
{
    lp_exec_fds_t *x = arg;
    int fl = zc_real.fcntl((int)fd, F_GETFD, 0);

    (void)dirfd;
    if (fl >= 0 && !(fl & FD_CLOEXEC) &&
        !zc_real.getsockopt((int)fd, SOL_SOCKET, SO_COOKIE, &x->cookies[x->n],
                            &(socklen_t){ sizeof(uint64_t) }))
        x->fds[x->n++] = (int)fd;
    return x->n == LP_EXEC_FDS;
}

/* 1 when a descriptor of c survives the exec.  A cookie not noted yet
 * (COOKIES, conn.c) is asked of c's descriptors now and not kept: a vfork
 * child shares c with its parent, and may have moved numbers around. */
static int lp_exec_has(const lp_exec_fds_t *x, uint64_t cookie)
{
    int j;

    for (j = 0; j < x->n; j++)
        if (x->cookies[j] == cookie)
            return 1;
    return 0;
}

static int lp_exec_survives(const lp_conn_t *c, const lp_exec_fds_t *x)
{
    uint64_t k;
    int i;

    if (c->cookie)
        return lp_exec_has(x, c->cookie);
    for (i = 0; i < 4; i++)
        if (c->fds[i] >= 0 &&
            !zc_real.getsockopt(c->fds[i], SOL_SOCKET, SO_COOKIE, &k, &(socklen_t){ sizeof(k) }) &&
            lp_exec_has(x, k))
            return 1;
    return 0;
}

/* Describe connection c for the next image (its surviving descriptors in
 * x) after buf[0, len): the new length.  Hands it back to the kernel
 * instead when the next image will not load the library (loads == 0) or
 * the description does not fit. */
static size_t lp_exec_describe(lp_conn_t *c, const lp_exec_fds_t *x, int loads, int vforked,
                               char *buf, size_t len, size_t bufsz, int *handed)
{
    size_t start = len;
    int kept = 0, j, xfds[2];

    for (j = 0; j < x->n; j++) {        /* one entry, every surviving descriptor */
        int fd = x->fds[j];

        if (x->cookies[j] != c->cookie)
            continue;
        if (!loads || len + 200 > bufsz || kept == LP_INHERIT_FDS) {
            /* The next image reads the kernel socket itself: the
             * connection goes back to the kernel first (HAND-BACK). */
            lp_revert(c, fd, loads ? "exec, too many connections to describe"
                                   : "exec of a program that will not load libzcsock");
            break;
        }
        len += zc_fmt(buf + len, bufsz - len, "%s%d", kept ? "," : "", fd);
        kept++;
    }
    if (!kept || c->state != LP_PAIRED)
        return start;
    lp_xchg_exec(c, 1, xfds);
    len += zc_fmt(buf + len, bufsz - len, ":%d:%d:%x:%llx:%llx:%llx:%llx:%d:%d;", c->memfd,
                  c->ch.side, lp_flags(c), (unsigned long long)c->tx_kernel,
                  (unsigned long long)c->rx_kernel, (unsigned long long)c->bells_drained,
                  (unsigned long long)c->ch.bells_claimed, xfds[0], xfds[1]);
    zc_real.fcntl(c->memfd, F_SETFD, 0);
    if (vforked) {
        /* No fork hook counted this child: the next image is a holder. */
        lp_holders_add(c, 1);
        c->vfork_held = 1;
    }
    (*handed)++;
    return len;
}

size_t lp_exec_prepare(const shim_exec_t *e, char *buf, size_t bufsz)
{
    int loads, handed = 0, saved = errno, vforked;
    lp_exec_fds_t x = { 0 };
    lp_conn_t *c;
    size_t len;

    lp_shared_again();      /* (a vfork or spawn child's image holds what it inherits) */
    if (!__atomic_load_n(&lp.head, __ATOMIC_ACQUIRE))
        return 0;
    shim_proc_each_num("/proc/self/fd", lp_exec_scan_fn, &x);
    /* an image we cannot be sure loads us gets the connection back */
    loads = x.n && lp_env_loads_us(e->envp) &&
            shim_exec_image_preloads(e->image, e->search, e->image_fd) == 1;
    vforked = shim_vfork_child();
    for (c = lp.head; c; c = c->next)
        c->vfork_held = 0;
    len = (size_t)zc_fmt(buf, bufsz, "%s", LP_INHERIT_VAR);
    lp_execing = 1;     /* pumps made now outlive this image (lp_pump_spawn) */
    for (c = lp.head; c; c = c->next) {
        if ((c->state == LP_OFFER || c->state == LP_DEFER) && lp_exec_survives(c, &x))
            lp_offer_cancel(c, "exec");     /* the next image has it before we offered */
        if (c->state == LP_PAIRED && c->memfd >= 0)
            len = lp_exec_describe(c, &x, loads, vforked, buf, len, bufsz, &handed);
    }
    lp_execing = 0;
    errno = saved;
    return handed ? len : 0;
}

void path_local_exec_failed(void)
{
    lp_conn_t *c;
    int saved = errno, xfds[2];

    for (c = lp.head; c; c = c->next) {
        if (c->memfd >= 0)
            zc_real.fcntl(c->memfd, F_SETFD, FD_CLOEXEC);
        lp_xchg_exec(c, 0, xfds);
        if (c->vfork_held && c->ch.base)
            lp_holders_add(c, -1);
        c->vfork_held = 0;
    }
    errno = saved;
}

static uint64_t lp_hex(const char **p)
{
    uint64_t v = 0;

    for (; **p && **p != ':' && **p != ';'; (*p)++) {
        char ch = **p;

        v = v * 16 + (uint64_t)(ch >= 'a' ? ch - 'a' + 10 : ch >= 'A' ? ch - 'A' + 10 : ch - '0');
    }
    if (**p == ':')
        (*p)++;
    return v;
}

static int64_t lp_dec(const char **p)
{
    int64_t v = 0;
    int neg = **p == '-';

    for (*p += neg; **p >= '0' && **p <= '9'; (*p)++)
        v = v * 10 + (**p - '0');
    if (**p == ':')
        (*p)++;
    return neg ? -v : v;
}

void path_local_inherit(void)
{
    extern char **environ;
    const char *p = NULL;
    size_t i;

    for (i = 0; environ && environ[i]; i++)
        if (!strncmp(environ[i], LP_INHERIT_VAR, sizeof(LP_INHERIT_VAR) - 1)) {
            p = environ[i] + sizeof(LP_INHERIT_VAR) - 1;
            break;
        }
    if (!p)
        return;
    while (*p) {
        int fds[LP_INHERIT_FDS], nfds = 0, memfd, side, k, ok = 1, xfds[2];
        unsigned flags;
        uint64_t v[4];

        do {
            int fd = (int)lp_dec(&p);

            if (nfds < LP_INHERIT_FDS)
                fds[nfds++] = fd;
        } while (*p == ',' && p++);
        if (*p == ':')
            p++;
        memfd = (int)lp_dec(&p);
        side = (int)lp_dec(&p);
        flags = (unsigned)lp_hex(&p);
        for (k = 0; k < 4; k++)
            v[k] = lp_hex(&p);
        xfds[0] = (int)lp_dec(&p);      /* the page exchange receiving ends */
        xfds[1] = (int)lp_dec(&p);
        if (*p != ';')
            break;
        p++;
        /* the entries were written by our previous image: still check them */
        for (k = 0; k < nfds; k++)
            ok &= fds[k] >= 0 && fds[k] != memfd;
        if (ok && memfd >= 0 && lp.enabled) {
            if (lp_inherit_one(fds, nfds, memfd, side, flags, v, xfds) == 0)
                zc_stat_add(ZC_STAT_LOCAL_INHERITED, 1);
        }
        else if (memfd >= 0)
            local_pair_fd_close(memfd);
    }
    /* The application's environment is its own again. */
    for (; environ[i]; i++)
        environ[i] = environ[i + 1];
}
