/* The memory subsystem's table for the shim's unit tests, which link the
 * shim without malloc-hooks and the caches (shim_mem.h): memory events
 * unavailable, nothing lent or mapped, no descriptor of the subsystem's. */
#include <errno.h>

#include "shim_mem.h"

static int none_init(void)
{
    return -ENOSYS;
}

static size_t none_report(char *buf, size_t size)
{
    (void)buf;
    (void)size;
    return 0;
}

static int none_fd(int fd)
{
    (void)fd;
    return 0;
}

static int none_no(void)
{
    return 0;
}

static int none_lend(void *unit, shim_xu_t *x)
{
    (void)unit;
    (void)x;
    return -EINVAL;
}

static void none_release(shim_xu_t *x)
{
    (void)x;
}

static void none_ring_paid(uint64_t bytes, uint64_t ns)
{
    (void)bytes;
    (void)ns;
}

static void none_reap(void)
{
}

static int none_map(void *dst, int fd)
{
    (void)dst;
    (void)fd;
    return -EINVAL;
}

static int none_reclaim(void *unit)
{
    (void)unit;
    return 0;
}

static void none_refused(uintptr_t site, int why)
{
    (void)site;
    (void)why;
}

static const char *none_why_name(int why)
{
    (void)why;
    return "unavailable";
}

const shim_mem_ops_t shim_mem_ops = {
    .init = none_init,
    .report = none_report,
    .fd_is_internal = none_fd,
    .fd_move = none_fd,
    .xu_ready = none_no,
    .xu_placed_any = none_no,
    .xu_lend = none_lend,
    .xu_release = none_release,
    .xu_ring_paid = none_ring_paid,
    .xu_reap = none_reap,
    .xu_map = none_map,
    .xu_reclaim = none_reclaim,
    .xu_refused = none_refused,
    .xu_why_name = none_why_name,
};
