/* The registry of data paths and the descriptor claims they make
 * (shim_path.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

#include "shim_int.h"
#include "shim_ready.h"
#include "zc_config.h"
#include "zc_fd.h"

/* Every path's SHIM_PATH_REGISTER entry lands in this section; the linker
 * provides its bounds (weak: a build may link no path at all). */
extern const shim_path_t *const __start_zcsock_paths[] __attribute__((weak));
extern const shim_path_t *const __stop_zcsock_paths[] __attribute__((weak));

#define SHIM_PATHS_MAX 8

const shim_path_t *shim_paths[SHIM_PATHS_MAX + 1];

void shim_paths_init(void)
{
    const shim_path_t *const *p;
    int n = 0, i, j;

    for (p = __start_zcsock_paths; p && p < __stop_zcsock_paths && n < SHIM_PATHS_MAX; p++)
        shim_paths[n++] = *p;
    for (i = 1; i < n; i++)         /* insertion sort by order */
        for (j = i; j > 0 && shim_paths[j]->order < shim_paths[j - 1]->order; j--) {
            const shim_path_t *t = shim_paths[j];

            shim_paths[j] = shim_paths[j - 1];
            shim_paths[j - 1] = t;
        }
    shim_paths[n] = NULL;
}

static void shim_fd_set_claim(shim_fd_t *f, int claim, const shim_path_t *p, void *ctx)
{
    shim_fd_seize(f);
    f->path = p;
    f->path_ctx = ctx;
    __atomic_store_n(&f->claim, (uint8_t)claim, __ATOMIC_RELEASE);
    shim_fd_unseize(f);
}

void shim_fd_claim(int fd, const shim_path_t *p, void *ctx)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!f)
        return;
    __atomic_store_n(&f->ep_plain, 0, __ATOMIC_RELEASE);
    shim_fd_set_claim(f, SHIM_CLAIM_DATA, p, ctx);
    shim_ep_claimed(fd);
}

void shim_fd_claim_plain(int fd, const shim_path_t *p, void *ctx)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!f)
        return;
    __atomic_store_n(&f->ep_plain, (uint8_t)(zc_config.epoll_plain != 0), __ATOMIC_RELEASE);
    shim_fd_set_claim(f, SHIM_CLAIM_DATA, p, ctx);
    shim_ep_claimed(fd);    /* (none taken over while ep_plain) */
}

void shim_fd_watch(int fd, const shim_path_t *p, void *ctx)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!f || f->claim == SHIM_CLAIM_DATA)
        return;
    shim_fd_set_claim(f, SHIM_CLAIM_WATCH, p, ctx);
}

/* The lowest number our descriptors take: high, out of the application's
 * way (zc_fd.h). */
int shim_fd_internal_floor(void)
{
    return zc_fd_floor();
}

int shim_fd_internal_raise(int fd)
{
    int floor = shim_fd_internal_floor(), hi = -1;

    if (fd >= 0 && floor > fd) {
        hi = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, floor);
        if (hi < 0 && errno == EINVAL && (floor = zc_fd_floor_refresh()) > fd)
            hi = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, floor);    /* the limit went down */
    }
    if (hi < 0)
        return fd;
    zc_real.close(fd);
    return hi;
}

int shim_fd_internal_keep(int fd, const shim_path_t *p, void *ctx)
{
    shim_fd_t *f;

    fd = shim_fd_internal_raise(fd);
    f = shim_fd_get(fd);
    if (f) {
        shim_fd_reset(f);
        shim_fd_set_claim(f, SHIM_CLAIM_NONE, p, ctx);
        __atomic_store_n(&f->kind, SHIM_FD_INTERNAL, __ATOMIC_RELEASE);
    }
    return fd;
}

void shim_fd_internal_close(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (fd < 0)
        return;
    if (f)
        shim_fd_reset(f);
    zc_real.close(fd);
}

void shim_fd_internal_drop(int fd)
{
    if (fd < 0)
        return;
    shim_ep_aux_gone(fd);
    shim_fd_internal_close(fd);
}

int shim_fd_dup_high(int fd)
{
    int to = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, shim_fd_internal_floor());

    if (to < 0 && errno == EINVAL)
        to = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, zc_fd_floor_refresh());
    if (to < 0)
        to = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return to < 0 ? -errno : to;
}

/* dup2/dup3 onto internal descriptor fd: move it away first.  0 or -errno. */
int shim_fd_internal_move(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    const shim_path_t *p = f ? f->path : NULL;
    void *ctx = f ? f->path_ctx : NULL;
    int to;

    if (!p)
        return 0;
    to = shim_fd_dup_high(fd);
    if (to < 0)
        return to;
    if (shim_fd_get(to)) {
        shim_fd_reset(shim_fd_get(to));
        shim_fd_set_claim(shim_fd_get(to), SHIM_CLAIM_NONE, p, ctx);
        __atomic_store_n(&shim_fd_get(to)->kind, f->kind, __ATOMIC_RELEASE);
    }
    shim_fd_reset(f);
    if (p->internal_moved)
        p->internal_moved(ctx, fd, to);
    shim_ep_aux_gone(fd);
    zc_real.close(fd);
    return 0;
}

void shim_socket_made(int fd, int domain, int type)
{
    int saved = errno;

    SHIM_PATHS_EACH(socket_made, fd, domain, type);
    errno = saved;
}

void shim_fds_passing(int fd, const struct msghdr *msg)
{
    int saved = errno;

    if (shim_unlikely(shim_ep_priv_some())) {
        /* an epoll set passed on is shared (QUIET SETS) */
        struct cmsghdr *cm;

        for (cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm;
             cm = CMSG_NXTHDR((struct msghdr *)msg, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                const unsigned char *p = CMSG_DATA(cm);
                size_t k, n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

                for (k = 0; k < n; k++) {
                    int one;

                    memcpy(&one, p + k * sizeof(int), sizeof(int));
                    shim_ep_exposed(one);
                }
            }
    }
    SHIM_PATHS_EACH(fds_passing, fd, msg);
    errno = saved;
}

void shim_fds_received(int fd, struct msghdr *msg)
{
    int saved = errno;

    SHIM_PATHS_EACH(fds_received, fd, msg);
    errno = saved;
}

static void shim_paths_fork_prepare(void)
{
    SHIM_PATHS_EACH(fork_prepare);
}

static void shim_paths_fork_parent(void)
{
    /* in reverse order of prepare */
    const shim_path_t *const *pp = shim_paths;

    while (*pp)
        pp++;
    while (pp-- > shim_paths)
        if ((*pp)->fork_parent)
            (*pp)->fork_parent();
}

ZC_FORK_CODE static void shim_paths_fork_child(void)
{
    const shim_path_t *const *pp = shim_paths;

    while (*pp)
        pp++;
    while (pp-- > shim_paths)
        if ((*pp)->fork_child)
            (*pp)->fork_child();
}

void shim_paths_start(void)
{
    SHIM_PATHS_EACH(init);
    SHIM_PATHS_EACH(inherit);
    pthread_atfork(shim_paths_fork_prepare, shim_paths_fork_parent, shim_paths_fork_child);
}

size_t shim_paths_exec_env(const shim_exec_t *x, char **vec, size_t vec_n, char *buf,
                           size_t size, char *const **env_p)
{
    const shim_path_t *const *pp;
    size_t used = 0, nvars = 0, n = 0, i, k;
    char *vars[SHIM_PATHS_MAX];

    shim_ep_all_public();       /* the child may hold every set (QUIET SETS) */
    for (pp = shim_paths; *pp; pp++) {
        size_t len;

        if (!(*pp)->exec_prepare || used + 2 >= size)
            continue;
        len = (*pp)->exec_prepare(x, buf + used, size - used - 1);
        if (!len)
            continue;
        buf[used + len] = '\0';
        vars[nvars++] = buf + used;
        used += len + 1;
    }
    *env_p = x->envp;
    if (!nvars)
        return 0;
    /* the application's environment, less any NAME= a path sets */
    for (i = 0; x->envp && x->envp[i] && n + nvars + 1 < vec_n; i++) {
        for (k = 0; k < nvars; k++) {
            size_t nl = (size_t)(strchr(vars[k], '=') - vars[k]) + 1;

            if (!strncmp(x->envp[i], vars[k], nl))
                break;
        }
        if (k == nvars)
            vec[n++] = x->envp[i];
    }
    for (k = 0; k < nvars; k++)
        vec[n++] = vars[k];
    vec[n] = NULL;
    *env_p = vec;
    return nvars;
}

size_t shim_msg_fill(struct msghdr *msg, size_t skip, const void *src, size_t n)
{
    size_t done = 0, i;

    for (i = 0; i < msg->msg_iovlen && done < n; i++) {
        size_t l = msg->msg_iov[i].iov_len, k;

        if (skip >= l) {
            skip -= l;
            continue;
        }
        k = l - skip < n - done ? l - skip : n - done;
        memcpy((char *)msg->msg_iov[i].iov_base + skip, (const char *)src + done, k);
        done += k;
        skip = 0;
    }
    return done;
}

void shim_fd_exposed(int fd, const char *why)
{
    int saved = errno;

    SHIM_PATHS_EACH(fd_exposed, fd, why);
    errno = saved;
}

ZC_FORK_CODE void shim_process_exit(void)
{
    int saved = errno;

    SHIM_PATHS_EACH(process_exit, "exit");
    errno = saved;
}

void shim_process_exposed(const char *why)
{
    static int done;
    int saved = errno;

    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL))
        return;
    SHIM_PATHS_EACH(process_exposed, why);
    errno = saved;
}
