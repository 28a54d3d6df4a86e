/* The per-descriptor state table: see shim_fd.h. */
#include "shim_fd.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "shim_path.h"
#include "zc_real.h"
#include "zc_stats.h"

shim_fd_t *shim_fd_table;
unsigned shim_fd_table_size;

int shim_fd_table_init(void)
{
    struct rlimit rl;
    size_t n = 1024, bytes;
    void *p;

    if (shim_fd_table)
        return 0;
    if (!getrlimit(RLIMIT_NOFILE, &rl))
        n = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > SHIM_FD_TABLE_MAX
                ? SHIM_FD_TABLE_MAX : (size_t)rl.rlim_max;
    if (n < 1024)
        n = 1024;
    bytes = n * sizeof(shim_fd_t);
    p = zc_real.mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    shim_fd_table = p;
    __atomic_store_n(&shim_fd_table_size, (unsigned)n, __ATOMIC_RELEASE);
    return 0;
}

void shim_fd_socket_track(int fd, int family, int type)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!f)
        return;
    type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
    f->family = (uint8_t)family;
    f->stream = type == SOCK_STREAM;
    f->copy_why = f->stream ? ZC_STAT_WHY_NO_FAST_PATH : ZC_STAT_WHY_NOT_STREAM;
    f->claim = SHIM_CLAIM_NONE;
    f->path = NULL;
    f->path_ctx = NULL;
    __atomic_store_n(&f->kind, SHIM_FD_SOCKET, __ATOMIC_RELEASE);
}

void shim_fd_forget(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (f && f->kind != SHIM_FD_UNKNOWN)
        memset(f, 0, sizeof(*f));
}

void shim_fd_copy(int oldfd, int newfd)
{
    shim_fd_t *from = shim_fd_get(oldfd), *to = shim_fd_get(newfd);

    if (!to || oldfd == newfd)
        return;
    if (from && from->kind == SHIM_FD_SOCKET) {
        *to = *from;
        if (to->claim == SHIM_CLAIM_DATA && to->path->ops->dup) {
            to->path->ops->dup(to, newfd);
        } else if (to->claim != SHIM_CLAIM_DATA) {
            /* what a path watches stays with the original number */
            to->claim = SHIM_CLAIM_NONE;
            to->path = NULL;
            to->path_ctx = NULL;
        }
    } else {
        memset(to, 0, sizeof(*to));
    }
}

int shim_fd_is_app_socket(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    return f && __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE) == SHIM_FD_SOCKET;
}
