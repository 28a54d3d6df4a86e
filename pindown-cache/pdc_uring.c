/* pdc_uring: io_uring fixed buffers as a pdc backend.
 *
 * The backend owns one ring whose fixed-buffer table is registered sparse
 * (io_uring_register_buffers_sparse) at set-up, so registering a range is a
 * slot update (io_uring_register_buffers_update_tag), which pins its pages,
 * and deregistering clears the slot.  Slots come from a free stack.  The
 * ring is set up on the first registration, and again in a fork child
 * after pdc_fork_child() made it forget the parent's (shared) ring.
 *
 * lock protects the ring set-up and the slot stack; it is taken after the
 * cache lock (dereg runs under it) and never held across the pinning
 * system call, so a dereg never waits for a long registration.
 *
 * RLIMIT_MEMLOCK: the kernel charges fixed buffers to it unless the process
 * has CAP_IPC_LOCK; the cache keeps its byte limit under it
 * (PDC_MEMLOCK_AUTO), and an update the kernel refuses (-ENOMEM) is a
 * failed registration, never an error for the application. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pdc.h"
#include "zc_sys.h"

#define PDC_URING_SLOTS_DEFAULT 1024u
#define PDC_URING_SLOTS_MAX 16384u          /* IORING_MAX_REG_BUFFERS */
#define PDC_URING_BUF_MAX ((size_t)1 << 30) /* the kernel's per-buffer limit */
#define PDC_URING_SQ_DEFAULT 64u

struct pdc_uring {
    pthread_mutex_t lock;
    struct io_uring ring;
    int ready;               /* ring up, sparse table registered */
    int err;                 /* set-up failure (sticky until fork) */
    unsigned nr_slots;
    unsigned sq_entries;
    int fd_floor;            /* the ring's descriptor goes at or above it */
    unsigned nfree;
    unsigned *free_slots;    /* stack of free slot numbers */
    uint64_t serial;         /* registrations made (handle.aux) */
    pdc_alloc_func_t alloc;
    pdc_free_func_t free;
    void *alloc_arg;
};

static void pdc_uring_slots_reset(pdc_uring_t *u)
{
    unsigned i;

    for (i = 0; i < u->nr_slots; i++)
        u->free_slots[i] = u->nr_slots - 1 - i;
    u->nfree = u->nr_slots;
}

int pdc_uring_create(unsigned nr_slots, unsigned sq_entries, pdc_alloc_func_t alloc,
                     pdc_free_func_t free, void *alloc_arg, pdc_uring_t **uring_p)
{
    pdc_uring_t *u;

    if (!alloc || !free || !uring_p || nr_slots > PDC_URING_SLOTS_MAX)
        return -EINVAL;
    u = alloc(alloc_arg, sizeof(*u));
    if (!u)
        return -ENOMEM;
    memset(u, 0, sizeof(*u));
    u->nr_slots = nr_slots ? nr_slots : PDC_URING_SLOTS_DEFAULT;
    u->sq_entries = sq_entries ? sq_entries : PDC_URING_SQ_DEFAULT;
    u->alloc = alloc;
    u->free = free;
    u->alloc_arg = alloc_arg;
    u->free_slots = alloc(alloc_arg, u->nr_slots * sizeof(*u->free_slots));
    if (!u->free_slots) {
        free(alloc_arg, u, sizeof(*u));
        return -ENOMEM;
    }
    pdc_uring_slots_reset(u);
    pthread_mutex_init(&u->lock, NULL);
    *uring_p = u;
    return 0;
}

void pdc_uring_destroy(pdc_uring_t *u)
{
    if (!u)
        return;
    if (u->ready)
        io_uring_queue_exit(&u->ring);   /* drops every registration */
    pthread_mutex_destroy(&u->lock);
    u->free(u->alloc_arg, u->free_slots, u->nr_slots * sizeof(*u->free_slots));
    u->free(u->alloc_arg, u, sizeof(*u));
}

void pdc_uring_fd_floor_set(pdc_uring_t *u, int floor)
{
    u->fd_floor = floor > 0 ? floor : 0;
}

/* io_uring_queue_init, then the ring's descriptor moved to fd_floor or
 * above (io_uring descriptors are always close-on-exec): ring_fd and
 * enter_ring_fd are public fields of struct io_uring, and the ring's
 * mappings do not depend on the descriptor's number.  liburing makes its
 * system calls itself, not through syscall(3).  0 or -errno. */
static int pdc_uring_ring_init(pdc_uring_t *u)
{
    int rc = io_uring_queue_init(u->sq_entries, &u->ring, 0), fd, hi;

    if (rc < 0)
        return rc;
    fd = u->ring.ring_fd;
    if (u->fd_floor > fd) {
        hi = (int)zc_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, u->fd_floor);
        if (hi >= 0) {
            if (u->ring.enter_ring_fd == fd)     /* not a registered ring fd */
                u->ring.enter_ring_fd = hi;
            u->ring.ring_fd = hi;
            zc_syscall(SYS_close, fd);
        }
    }
    return 0;
}

/* Set the ring up once.  Lock held.  0 or -errno. */
static int pdc_uring_setup(pdc_uring_t *u)
{
    int rc;

    if (u->ready)
        return 0;
    if (u->err)
        return u->err;
    rc = pdc_uring_ring_init(u);
    if (rc < 0)
        goto err;
    rc = io_uring_register_buffers_sparse(&u->ring, u->nr_slots);
    if (rc < 0) {
        io_uring_queue_exit(&u->ring);
        goto err;
    }
    u->ready = 1;
    return 0;
err:
    u->err = rc;
    return rc;
}

void *pdc_uring_ring(pdc_uring_t *u, int *err_p)
{
    int rc;

    pthread_mutex_lock(&u->lock);
    rc = pdc_uring_setup(u);
    pthread_mutex_unlock(&u->lock);
    if (err_p)
        *err_p = rc;
    return rc ? NULL : &u->ring;
}

/* Fill or clear one slot of the sparse table.  0 or -errno. */
static int pdc_uring_slot_update(pdc_uring_t *u, unsigned slot, void *addr, size_t len)
{
    struct iovec iov = { addr, len };
    __u64 tag = 0;
    int rc;

    rc = io_uring_register_buffers_update_tag(&u->ring, slot, &iov, &tag, 1);
    if (rc < 0)
        return rc;
    return rc == 1 ? 0 : -EIO;
}

static int pdc_uring_reg(void *arg, void *addr, size_t len, pdc_handle_t *h_p)
{
    pdc_uring_t *u = arg;
    unsigned slot;
    uint64_t serial;
    int rc;

    if (len > PDC_URING_BUF_MAX)
        return -E2BIG;
    pthread_mutex_lock(&u->lock);
    rc = pdc_uring_setup(u);
    if (rc == 0 && u->nfree == 0)
        rc = -ENOSPC;
    if (rc) {
        pthread_mutex_unlock(&u->lock);
        return rc;
    }
    slot = u->free_slots[--u->nfree];
    serial = ++u->serial;
    pthread_mutex_unlock(&u->lock);

    rc = pdc_uring_slot_update(u, slot, addr, len);
    if (rc) {
        pthread_mutex_lock(&u->lock);
        u->free_slots[u->nfree++] = slot;
        pthread_mutex_unlock(&u->lock);
        return rc;
    }
    h_p->id = slot;
    h_p->aux = serial;
    h_p->ptr = addr;
    return 0;
}

static int pdc_uring_dereg(void *arg, pdc_handle_t h)
{
    pdc_uring_t *u = arg;
    int rc;

    pthread_mutex_lock(&u->lock);
    if (!u->ready || h.id >= u->nr_slots) {
        pthread_mutex_unlock(&u->lock);
        return -EINVAL;
    }
    /* A send still using the old buffer keeps its pages until it
     * completes: the kernel holds a reference per request. */
    rc = pdc_uring_slot_update(u, (unsigned)h.id, NULL, 0);
    if (rc == 0)
        u->free_slots[u->nfree++] = (unsigned)h.id;
    pthread_mutex_unlock(&u->lock);
    return rc;
}

/* In a fork child the ring's file and mappings are shared with the parent:
 * unmap and close the child's copies (the parent's registrations stay) and
 * start afresh on the next registration. */
static void pdc_uring_fork_child(void *arg)
{
    pdc_uring_t *u = arg;

    pthread_mutex_init(&u->lock, NULL);
    if (u->ready)
        io_uring_queue_exit(&u->ring);
    memset(&u->ring, 0, sizeof(u->ring));
    u->ready = 0;
    u->err = 0;
    pdc_uring_slots_reset(u);
}

const pdc_ops_t pdc_uring_ops = {
    .name = "io_uring",
    .reg = pdc_uring_reg,
    .dereg = pdc_uring_dereg,
    .fork_child = pdc_uring_fork_child,
    .max_region_len = PDC_URING_BUF_MAX,
    .max_regions = 0,
};

void pdc_uring_ops_init(const pdc_uring_t *u, pdc_ops_t *ops_p)
{
    *ops_p = pdc_uring_ops;
    ops_p->max_regions = u->nr_slots;
}
