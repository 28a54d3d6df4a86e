/* The per-descriptor state table: see shim_fd.h. */
#include "shim_fd.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "shim_int.h"
#include "shim_path.h"
#include "zc_real.h"
#include "zc_log.h"
#include "zc_stats.h"

#include <sys/single_threaded.h>

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
    f->unconnected = f->stream;
    f->left_key = 0;
    shim_fd_claim_clear(f);
    __atomic_store_n(&f->kind, SHIM_FD_SOCKET, __ATOMIC_RELEASE);
    if (shim_unlikely(!zc_live))
        zc_live_publish();      /* the process's first socket: zcsock stat lists it */
}

void shim_fd_socket_track_proto(int fd, int family, int type, int protocol)
{
    shim_fd_t *f = shim_fd_get(fd);

    shim_fd_socket_track(fd, family, type);
    if (f && f->stream &&
        (family == AF_UNIX ||
         ((family == AF_INET || family == AF_INET6) && (!protocol || protocol == IPPROTO_TCP))))
        f->stream = SHIM_FD_STREAM_TCP;
}

void shim_fd_seize(shim_fd_t *f)
{
    shim_crit_enter();
    while (__atomic_exchange_n(&f->seize, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

void shim_fd_unseize(shim_fd_t *f)
{
    __atomic_store_n(&f->seize, 0, __ATOMIC_RELEASE);
    shim_crit_leave();
}

void shim_fd_connected(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (f && f->unconnected) {
        f->unconnected = 0;
        if (f->claim != SHIM_CLAIM_DATA)
            shim_ep_fd_closed(fd);      /* its plain records: never claimed now */
    }
}

void shim_fd_claim_clear(shim_fd_t *f)
{
    int plain;

    shim_fd_seize(f);
    __atomic_store_n(&f->claim, SHIM_CLAIM_NONE, __ATOMIC_RELEASE);
    f->path = NULL;
    f->path_ctx = NULL;
    plain = __atomic_exchange_n(&f->ep_plain, 0, __ATOMIC_ACQ_REL);
    shim_fd_unseize(f);
    if (plain)
        shim_ep_fd_closed((int)(f - shim_fd_table));   /* its plain records: no claim to adopt them */
}

static void shim_fd_clear_locked(shim_fd_t *f)
{
    __atomic_store_n(&f->claim, SHIM_CLAIM_NONE, __ATOMIC_RELEASE);
    f->kind = SHIM_FD_UNKNOWN;
    f->family = f->stream = f->copy_why = f->unconnected = 0;
    f->left_key = 0;
    __atomic_store_n(&f->ep_plain, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&f->ep_nested, 0, __ATOMIC_RELAXED);
    f->path = NULL;
    f->path_ctx = NULL;
}

void shim_fd_reset(shim_fd_t *f)
{
    shim_fd_seize(f);
    shim_fd_clear_locked(f);
    shim_fd_unseize(f);
}

void shim_fd_take(shim_fd_t *f, shim_fd_t *was)
{
    shim_fd_seize(f);
    *was = *f;
    shim_fd_clear_locked(f);
    shim_fd_unseize(f);
    was->seize = 0;
}

void shim_fd_forget(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (f && (f->kind != SHIM_FD_UNKNOWN || __atomic_load_n(&f->ep_nested, __ATOMIC_RELAXED)))
        shim_fd_reset(f);
}

void shim_fd_copy(int oldfd, int newfd)
{
    shim_fd_t *from = shim_fd_get(oldfd), *to = shim_fd_get(newfd);
    shim_pin_t pin = { .obj = NULL };

    if (!to || oldfd == newfd)
        return;
    if (!from || from->kind != SHIM_FD_SOCKET) {
        shim_fd_reset(to);
        return;
    }
    /* both numbers' registrations are the engine's from now on: the path
     * ends plain registrations through one number only (PLAIN UNTIL PAIRED) */
    shim_ep_plain_end(oldfd);
    /* pinned: a close of oldfd in another thread cannot free the state
     * before the path counted the new descriptor */
    if (!shim_fd_pin_slow(from, &pin)) {
        /* what a path watches stays with the original number */
        pin.f.claim = SHIM_CLAIM_NONE;
        pin.f.path = NULL;
        pin.f.path_ctx = NULL;
    }
    shim_fd_seize(to);
    to->kind = pin.f.kind;
    to->family = pin.f.family;
    to->stream = pin.f.stream;
    to->copy_why = pin.f.copy_why;
    to->unconnected = 0;            /* one number is enough to follow a connect */
    to->left_key = pin.f.left_key;
    __atomic_store_n(&to->ep_plain, 0, __ATOMIC_RELEASE);
    to->path = pin.f.path;
    to->path_ctx = pin.f.path_ctx;
    __atomic_store_n(&to->claim, pin.f.claim, __ATOMIC_RELEASE);
    shim_fd_unseize(to);
    if (pin.f.claim == SHIM_CLAIM_DATA && pin.f.path->ops->dup)
        pin.f.path->ops->dup(&pin.f, newfd);
    shim_fd_unpin(&pin);
}

/* --- pins (shim_path.h, PINS) ---------------------------------------------- */

int shim_fd_pin_slow(shim_fd_t *f, shim_pin_t *p)
{
    p->obj = NULL;
    if (__libc_single_threaded) {
        p->f = *f;
        return p->f.claim == SHIM_CLAIM_DATA;
    }
    shim_fd_seize(f);
    p->f = *f;
    if (p->f.claim == SHIM_CLAIM_DATA && p->f.path_ctx) {
        p->obj = p->f.path_ctx;
        __atomic_add_fetch(&p->obj->pins, 1, __ATOMIC_ACQUIRE);
    }
    shim_fd_unseize(f);
    p->f.seize = 0;
    return p->f.claim == SHIM_CLAIM_DATA;
}

static void shim_obj_free(shim_obj_t *o)
{
    int saved = errno;

    o->free_fn(o);
    errno = saved;
}

void shim_obj_unpin_slow(shim_obj_t *o)
{
    if (__atomic_sub_fetch(&o->pins, 1, __ATOMIC_ACQ_REL) == SHIM_OBJ_DEAD)
        shim_obj_free(o);
}

void shim_obj_retire(shim_obj_t *o)
{
    if (__atomic_fetch_or(&o->pins, SHIM_OBJ_DEAD, __ATOMIC_ACQ_REL) == 0)
        shim_obj_free(o);
}

int shim_fd_is_app_socket(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    return f && __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE) == SHIM_FD_SOCKET;
}

/* `zcsock stat --conns` (zc_live_conns_fn): every socket the table tracks,
 * one line each (`fd=N family=... type=... path=... ...`), written to out.
 * A claimed one is pinned while its path describes it. */
static const char *shim_fd_family_name(int family)
{
    return family == AF_INET ? "inet" : family == AF_INET6 ? "inet6" : family == AF_UNIX ? "unix"
                                                                                      : "other";
}

void shim_fd_describe_all(int out)
{
    static char buf[65536];
    size_t len = 0;
    unsigned fd;

    for (fd = 0; fd < shim_fd_table_size; fd++) {
        shim_fd_t *f = &shim_fd_table[fd];
        shim_pin_t pin;
        char line[512];
        size_t n;

        if (__atomic_load_n(&f->kind, __ATOMIC_ACQUIRE) != SHIM_FD_SOCKET)
            continue;
        n = zc_fmt(line, sizeof(line), "fd=%u family=%s type=%s", fd,
                   shim_fd_family_name(f->family), f->stream ? "stream" : "other");
        if (shim_fd_pin((int)fd, &pin)) {
            if (pin.f.path && pin.f.path->ops->describe)
                n += pin.f.path->ops->describe(&pin.f, (int)fd, line + n, sizeof(line) - n);
            shim_fd_unpin(&pin);
        } else if (f->claim == SHIM_CLAIM_WATCH) {
            n += zc_fmt(line + n, sizeof(line) - n, " path=kernel state=listening");
        } else {
            n += zc_fmt(line + n, sizeof(line) - n, " path=kernel why=%s",
                        f->copy_why == ZC_STAT_WHY_DECLINED ? "declined"
                                                            : zc_stat_name(f->copy_why));
        }
        if (n >= sizeof(line) - 1)
            n = sizeof(line) - 2;
        line[n++] = '\n';
        if (len + n > sizeof(buf)) {
            zc_live_write_fd(out, buf, len);
            len = 0;
        }
        memcpy(buf + len, line, n);
        len += n;
    }
    zc_live_write_fd(out, buf, len);
}
