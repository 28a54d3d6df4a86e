/* The shim's view of the memory subsystem (malloc-hooks + pin-down cache). */
#ifndef SHIM_MEM_H
#define SHIM_MEM_H

#include <stddef.h>
#include <stdint.h>

struct pdc;
struct pdc_uring;


/* Start malloc-hooks with the configuration (the pin-down cache comes with
 * the first shim_mem_cache()).  Called once from initialisation, outside any
 * hook.  Returns 0, or -errno when memory events are unavailable (said once
 * under ZCSOCK_DEBUG; the copy path is unaffected). */
int shim_mem_init(void);

/* The registration cache for a wire path, made and subscribed to memory
 * events at the first call (outside hooks: it allocates and may log once),
 * or NULL when memory events are unavailable or it could not be made.  The
 * io_uring backend behind it (ring made on first registration). */
struct pdc *shim_mem_cache(void);
struct pdc_uring *shim_mem_uring(void);

/* Append the cache's top call sites to a report.  Report time only. */
size_t shim_mem_report(char *buf, size_t size);

/* 1 when fd belongs to the memory subsystem (arena memfds).  Hook-safe. */
int shim_mem_fd_is_internal(int fd);

/* The application takes number fd (dup2/dup3 target): move ours away first.
 * Returns 0 or -errno.  Hook-safe. */
int shim_mem_fd_move(int fd);

/* Page exchange, the lending side (shim_xu.c): the exchange-unit cache.
 * shim_xu_lend() returns in *x the sealed unit file (x->fd, the library's
 * descriptor, valid until shim_xu_release) holding the bytes of the 2 MiB
 * unit at unit, a 2 MiB-aligned unit of a placed huge block, registering it
 * on a miss (a unit sent again unchanged is frozen: the application's later
 * writes copy on write).  0, or -EINVAL (not such a unit, or no cache),
 * -EPERM (a received unit), -EFAULT (rewritten since it was lent: refused
 * until freed), -ECANCELED (not lent yet: through the ring this time, see
 * common/zc_rent.h), -EAGAIN (budget, limits or descriptors exhausted),
 * -ENOSPC, -ENOMEM.
 * Not from a memory hook. */
typedef struct shim_xu {
    int fd;
    unsigned long long ino;     /* the unit file's inode (st_ino) */
    void *region;               /* the cache's reference */
} shim_xu_t;
int shim_xu_lend(void *unit, shim_xu_t *x);
/* 1 when units can be lent at all (the cache exists: memory events work and
 * shared memory has 2 MiB pages); the first call says why not, once, under
 * ZCSOCK_DEBUG. */
int shim_xu_ready(void);
/* 1 once this process has placed a block (something it may lend). */
int shim_xu_placed_any(void);
void shim_xu_release(shim_xu_t *x);
/* A send of bytes (at least one unit) went through the ring alone, taking
 * ns: what renting a unit costs (common/zc_rent.h).  Hook-safe. */
void shim_xu_ring_paid(uint64_t bytes, uint64_t ns);
/* Close the unit files of registrations the memory events invalidated
 * (a free inside a hook only marks them).  Not from a memory hook. */
void shim_xu_reap(void);
/* 1 when no page of the 2 MiB unit at unit is private to this process
 * (pagemap): a frozen unit still holds its frozen bytes. */
int shim_xu_clean(const void *unit);
/* Receive a unit in place: map the first 2 MiB of unit file fd
 * copy-on-write over the 2 MiB-aligned unit of a placed huge block at dst.
 * 0, or -EINVAL (dst is not such a unit) or the mmap error (dst unchanged). */
int shim_xu_map(void *dst, int fd);
/* The 2 MiB unit at unit is about to be overwritten whole by a receive: a
 * received unit mapped there gets its own memory back first (no 4 KiB
 * copy-on-write of the received file).  1 done, 0 nothing to do, <0 not a
 * unit or the mmap error. */
int shim_xu_reclaim(void *unit);
/* Charge a unit that could not be lent (reason: one of SHIM_XU_WHY_*) to
 * the application's call site; the report lists the top ones.  Hook-safe:
 * a busy table drops the charge. */
enum { SHIM_XU_WHY_NOT_PLACED = 0, SHIM_XU_WHY_REWRITTEN = 1, SHIM_XU_WHY_BUDGET = 2,
       SHIM_XU_WHY_NO_TRANSPORT = 3, SHIM_XU_WHY_POOL = 4, SHIM_XU_WHY_TOO_SMALL = 5,
       SHIM_XU_WHY_UNALIGNED = 6, SHIM_XU_WHY_COST = 7, SHIM_XU_WHY_APP = 8,
       SHIM_XU_WHYS = 9 };
void shim_xu_refused(uintptr_t site, int why);
/* The name of a SHIM_XU_WHY_* ("not_placed", ...). */
const char *shim_xu_why_name(int why);
/* Append the top refusal sites to a report.  Report time only. */
size_t shim_xu_report(char *buf, size_t size);
/* Wiring for shim_mem.c. */
void shim_xu_fork_prepare(void);
void shim_xu_fork_parent(void);
void shim_xu_fork_child(void);
int shim_xu_fd_is_internal(int fd);
int shim_xu_fd_move(int fd);

/* What the rest of the shim calls of the memory subsystem, as one table
 * (issue 32: no weak symbols, no check at each call site).  The library
 * links shim_mem.c's table, whose entries are the functions above; the
 * shim's unit tests link the shim without malloc-hooks and the caches
 * (whose allocator hooks would fight the sanitizers) and a table whose
 * entries do nothing (tests/unit/mem_none.c): memory events unavailable,
 * nothing lent, no descriptor of the subsystem's. */
typedef struct shim_mem_ops {
    int (*init)(void);
    size_t (*report)(char *buf, size_t size);
    int (*fd_is_internal)(int fd);
    int (*fd_move)(int fd);
    int (*xu_ready)(void);
    int (*xu_placed_any)(void);
    int (*xu_lend)(void *unit, shim_xu_t *x);
    void (*xu_release)(shim_xu_t *x);
    void (*xu_ring_paid)(uint64_t bytes, uint64_t ns);
    void (*xu_reap)(void);
    int (*xu_map)(void *dst, int fd);
    int (*xu_reclaim)(void *unit);
    void (*xu_refused)(uintptr_t site, int why);
    const char *(*xu_why_name)(int why);
} shim_mem_ops_t;

extern const shim_mem_ops_t shim_mem_ops;

#endif
