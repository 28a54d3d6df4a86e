/* The readiness engine's epoll (shim_ready.c has the principles).
 *
 * Registrations of claimed descriptors are kept in a table: the kernel
 * holds each under a tag naming its slot, and what the kernel reports under
 * a tag is translated back to the application's data after the path had its
 * say (revents).  Edge-triggered registrations report when the path's
 * change counter moved since the last report; EPOLLONESHOT ones once until
 * the application re-arms them.
 *
 * TAGS NEVER LEAK.  A tag can reach an epoll_wait that started before the
 * set held any claimed registration (another thread adds one while it
 * sleeps in the kernel: Apache httpd's event MPM, the Erlang VM, slapd), or
 * one on a set whose registration this process no longer knows (a forked
 * process sharing the set added it).  So every epoll_wait, epoll_pwait and
 * epoll_pwait2 that returns events in a process that ever tagged a
 * registration passes them through shim_ep_translate: a tag of ours becomes
 * the application's data (or is dropped: a wake fd's, or one no registration
 * of ours holds any more), and only then does the application see them.
 * Tags carry a check byte, so an application data word that happens to
 * start like one is left alone unless it matches slot, generation and
 * check.  Sets are marked (shim_ep_has) before their first claimed
 * registration reaches the kernel.
 *
 * KICK.  epoll_ctl ADD or MOD of a descriptor makes the kernel report it
 * as soon as it is ready, also to a thread already sleeping in epoll_wait
 * on the set (an EPOLLONESHOT registration re-armed by another thread: the
 * Erlang VM's schedulers re-arm what its poll thread waits on).  A claimed
 * descriptor's bytes may be where the kernel does not look (a ring), and
 * the sleeping wait's own arming look may have skipped the registration
 * (a one-shot that had fired).  So the ADD or MOD arms the path's wake-up
 * itself, and when the path says the descriptor is ready already, the
 * set's kick eventfd (registered in the set under the wake tag, made at
 * the first kick) is written, so the sleeping wait wakes and looks.
 *
 * REGISTERED BEFORE CLAIMED.  A socket the application registers before it
 * connects (nginx registers its upstream sockets edge-triggered before
 * connect) may be claimed at the connect: its registrations are recorded
 * while it is unconnected (plain: the kernel holds the application's data)
 * and taken over with a tag when a path claims it (shim_ep_claimed), so the
 * wake-ups its path arms reach the set.
 *
 * PLAIN UNTIL PAIRED (issue 31).  A claimed connection that has not paired
 * (a server's before its offer, a client's before its announcement: with
 * pair when it pays, every short connection; see lp_claim_fresh) is ready
 * exactly when the kernel says so: a look at it reports nothing and arms
 * nothing.  Tagging it anyway
 * cost an event loop's epoll_ctl and epoll_wait several microseconds per
 * connection (the server of conn_rate's short connections: 6,700
 * instructions of the library's per connection, the kernel's own rate
 * 0.85-0.9x).  So its path claims it with ep_plain (shim_fd_claim_plain):
 * its registrations go to the kernel as the application makes them (the
 * kernel holds the application's data; a wait over a set of only such
 * passes straight through) and are only recorded, under the table's lock,
 * which the flag is read under too; the path calls shim_ep_plain_end the
 * moment it has paired (lp_offer_make: the state is PAIRED; a client
 * that found the offer may write into the ring from then on), or, on a
 * client's side, has announced (lp_ann_make), and the
 * records take our tag as at a claim, with sets a wait
 * sleeps on (or not private) kicked so that the wait looks and arms (the
 * kernel bytes up to the switch point also wake such a wait: case
 * epoll_plain passes without the kick).  One-shot and exclusive
 * registrations (whose fired state only the engine follows) and a dup end
 * it at once.  ready.ep_plain, ZCSOCK_EPOLL_PLAIN.
 *
 * LOCKING.  One spinlock guards the table; it is never held while a path's
 * operation runs (those take the path's own locks) nor while the kernel
 * waits.  A wait takes a snapshot of the set's registrations (pointer and
 * id), asks each one's path with the descriptor pinned, then applies the
 * answers under the lock to the registrations still there with the same id
 * (registration objects are never returned to the allocator, so a stale
 * pointer reads an object with another id).  Fork: the lock is taken
 * around it (shim_ep_fork_*).
 *
 * PARKED WAKE FDS.  A path's wake fd joins a set with the first
 * registration listening to it, under a wake tag naming that
 * registration's slot.  When the last one leaves (a DEL, a close), the
 * wake fd stays in the kernel's set, parked, and a registration of the
 * same descriptor added later takes the same slot when it is free, so
 * redis-benchmark's DEL and ADD per request (its event loop drops a
 * descriptor whose mask empties) cost no wake fd DEL and ADD; with
 * another slot one MOD retags it.  A wake-up on a parked wake fd dirties
 * whatever holds its slot: one extra look.  Parked registrations go when
 * their wake fd is closed or moved (shim_ep_aux_gone, with a DEL where no
 * other process shares the set) and with their set.
 *
 * READY LIST (issue 31).  A wait over a set with more than
 * ZCSOCK_EPOLL_SCAN_MAX claimed registrations does not ask every one of
 * them: only those on the set's ready list.  A registration leaves the list
 * only when an arming look found it not ready and the path asked for no
 * look again (recheck_ms): from then on its path's wake-up (a doorbell on
 * the socket, which the kernel reports under its tag, or its wake fd,
 * under the wake tag that names its slot) is what brings it back, exactly
 * what a wait that sleeps in the kernel relies on.  It joins the list when
 * it is added or modified, adopted at a claim, reported by the kernel under
 * either tag, and stays while a look finds it ready (reported or not) or
 * asked to look again.  So a wait costs what the active registrations cost,
 * whatever the number of idle ones; below the bound every wait asks them
 * all, as the engine always did, and spins over them.  A safety net: every
 * sleep over a listed set lasts at most SHIM_EP_FULL_MS, and when it ends
 * with nothing the next look asks the whole set, so a wake-up the list missed costs 100 ms, not
 * a hang.  No miss is known since the kick slot was taken out (an MPICH
 * stall first blamed on the list happens with the library from before the
 * list too); the net bounds what is not known. */
/* KEPT DELETES (issue 31).  redis-benchmark's event loop makes five
 * epoll_ctl calls a request (DEL, ADD, MOD, DEL, ADD: a descriptor whose
 * mask empties leaves the set), each a kernel call of 0.5-1 us that a
 * paired connection does not need: its kernel registration only carries
 * wake-ups (doorbells, EOF, resets; path op kernel_quiet), and what the
 * application asks for is answered by the path's look.  So on a PRIVATE
 * set (below) a DEL of such a registration (not EPOLLONESHOT or
 * EPOLLEXCLUSIVE) is not passed on: the registration leaves its set's
 * lists (no wait asks or reports it, ready.ep_kept) and keeps its slot,
 * tag and kernel registration; the next ADD of the descriptor takes it
 * back (ready.ep_revived; a MOD when the kernel events differ), and a MOD
 * or DEL of it meanwhile fails with ENOENT, as the kernel's would.  A
 * level-triggered MOD that asks the kernel for what it has already is not
 * passed on either (ready.ep_mod_same).  A kept registration goes for
 * real (ready.ep_kept_gone) when the kernel reports it (one wake-up for
 * nothing, then no more), when its set stops being private (a fork, exec
 * or spawn, a dup, a poll or nesting of the set: shim_ep_went_public,
 * after the set left the private table, so a DEL, which checks privacy
 * under the table's lock, either kept before the flush or sees the set
 * public; not in a vfork child, whose descriptor table is not the one the
 * table describes), when its descriptor closes or its path lets it go, and at an
 * ADD with EPOLLONESHOT or EPOLLEXCLUSIVE.  ZCSOCK_EPOLL_KEEP=0 passes
 * every call on (case epoll_keep). */
/* QUIET SETS (issue 31).  The arming and the kick at an ADD or MOD (KICK)
 * serve a wait that already sleeps in the kernel on the set, and whoever
 * watches the set from outside (a poll or select over the epoll
 * descriptor, a set it is nested in, another process holding it).  A wait
 * that starts later arms the registration itself: the ADD or MOD put it on
 * the ready list, and a wait's arming look asks the list (or, below
 * ZCSOCK_EPOLL_SCAN_MAX, every registration) before it sleeps.  So an ADD
 * or MOD on a set that is PRIVATE (made by epoll_create in this process
 * since its last fork, never watched from outside, never copied) while no
 * wait of ours SLEEPS on it neither arms nor kicks (ready.ep_quiet):
 * redis-benchmark re-arms each connection per request, and each such arm
 * made the peer write a wake-up eventfd per reply, and each kick one more
 * write, where the kernel's socket costs nothing extra.
 *  - SLEEPS: shim_ep_sleep[], counted per epoll descriptor (hashed: a
 *    collision only costs a skip), from before a wait's first look until it
 *    is back from the kernel, for every wait that may sleep, through the
 *    engine or straight to the kernel.  An ADD or MOD reads it after its
 *    registration joined the set under the table's lock, and a wait counts
 *    itself before its looks take that lock, so either the ADD sees the
 *    wait or the wait's look sees the registration.
 *  - PRIVATE: shim_ep_priv[], the sets made here (epoll_create hooks).  A
 *    set leaves it for good when its descriptor is polled or selected, is
 *    added to another epoll set, is duplicated, travels in SCM_RIGHTS, at
 *    any fork, exec or spawn (the child may hold it), and at its close.
 *    The set's registrations are then armed, and the set kicked when one is
 *    ready, as their ADD would have done (shim_ep_exposed), before the
 *    outsider's call runs. */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/single_threaded.h>
#include <sys/mman.h>
#include <time.h>

#include "shim_int.h"
#include "shim_ready.h"
#include "zc_config.h"
#include "zc_pool.h"

#define uthash_malloc(sz) zc_pool_alloc(sz)
#define uthash_free(ptr, sz) zc_pool_free((ptr), (sz))
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#define SHIM_EP_SLOTS   (1u << 16)
#define SHIM_EP_TAG     0x5a43000000000000ULL   /* "ZC" in the top bits */
#define SHIM_EP_TAGMASK 0xffff000000000000ULL
#define SHIM_EP_AUXTAG  0x5a44000000000000ULL   /* a path's wake fd ("ZD"): never reported */
#define SHIM_EP_KERNEL_KEEP (EPOLLET | EPOLLONESHOT | EPOLLRDHUP | EPOLLWAKEUP | EPOLLEXCLUSIVE)
#define SHIM_EP_NOSLOT  UINT32_MAX
#define SHIM_EP_KICKSLOT 0xffffu        /* never a registration's: the wake tag
                                         * that names it is the set's kick eventfd */
#define SHIM_EP_SNAP    64      /* registrations asked per round of a wait */
#define SHIM_EP_FULL_MS 100     /* a listed set is asked in full this often (READY LIST) */

/* A registration's two lists (its set's, linked through snext/sprev, and
 * the ready list, through dnext/dprev): g in at head, g out. */
#define SHIM_EP_LINK(head, g, next, prev)                                     \
    do {                                                                      \
        (g)->prev = NULL;                                                     \
        (g)->next = (head);                                                   \
        if ((head))                                                           \
            (head)->prev = (g);                                               \
        (head) = (g);                                                         \
    } while (0)
#define SHIM_EP_UNLINK(head, g, next, prev)                                   \
    do {                                                                      \
        if ((g)->prev)                                                        \
            (g)->prev->next = (g)->next;                                      \
        else                                                                  \
            (head) = (g)->next;                                               \
        if ((g)->next)                                                        \
            (g)->next->prev = (g)->prev;                                      \
        (g)->next = (g)->prev = NULL;                                         \
    } while (0)

typedef struct shim_ep_set shim_ep_set_t;

typedef struct shim_ep_reg {
    struct shim_ep_reg *snext, *sprev;  /* its set's tagged registrations */
    struct shim_ep_reg *fnext;          /* every registration of its descriptor */
    struct shim_ep_reg *free_next;
    shim_ep_set_t *set;
    uint64_t id;                /* never reused (a wait's snapshot checks it) */
    int epfd, fd;
    uint32_t events;            /* the application's */
    uint32_t kevents;           /* what the kernel registration asks for */
    uint32_t slot;              /* SHIM_EP_NOSLOT: plain (the kernel holds data) */
    uint64_t data;              /* the application's */
    uint64_t tag;               /* what the kernel holds instead */
    uint64_t change;            /* edge-triggered: the path's change counter at the
                                 * last report */
    uint64_t seen;              /* the wait (shim_ep.waits) that last reported it */
    int seen_idx;               /* ... at this index of that wait's events */
    int disabled;               /* EPOLLONESHOT fired */
    int aux;                    /* the path's wake fd registered beside it, -1 */
    int dirty;                  /* on its set's ready list (READY LIST) */
    int net;                    /* put there by the safety net, not by an event */
    int kept;                   /* deleted by the application, still in the kernel:
                                 * off its set's lists, keeps slot and tag (KEPT
                                 * DELETES) */
    struct shim_ep_reg *dnext, *dprev;
} shim_ep_reg_t;

typedef struct shim_ep_auxref {   /* registrations of a set listening to one wake fd */
    int aux;
    int n;                      /* 0: parked (PARKED WAKE FDS) */
    uint32_t slot;              /* the slot its kernel registration's tag names, or
                                 * SHIM_EP_NOSLOT when not known */
    UT_hash_handle hh;
} shim_ep_auxref_t;

struct shim_ep_set {
    int epfd;
    int ntagged;                /* registrations in the list */
    int kick1;                  /* the set's kick eventfd + 1, 0: none yet (KICK) */
    int inherited;              /* held at a fork: a process of the other side may
                                 * hold its parked wake fds (PARKED WAKE FDS) */
    int nested;                 /* put in another set, or polled (NESTED SETS) */
    int nested_due;             /* reported since: arm before a sleep (NESTED SETS) */
    shim_ep_reg_t *head;
    shim_ep_reg_t *dhead;       /* the ready list (READY LIST) */
    int64_t full_ns;            /* when a look last asked every registration */
    shim_ep_auxref_t *auxrefs;  /* wake fd -> registrations listening (shim_ep_aux_del) */
    UT_hash_handle hh;
};

typedef struct shim_ep_fdl {    /* the registrations of one descriptor */
    int fd;
    shim_ep_reg_t *head;
    UT_hash_handle hh;
} shim_ep_fdl_t;

static struct {
    int lock;
    uint32_t next_slot;
    uint64_t gen, next_id, waits;
    shim_ep_reg_t **slots;      /* SHIM_EP_SLOTS entries, from zc_pool */
    shim_ep_set_t *sets;        /* by epfd */
    shim_ep_set_t *last_set;    /* the set shim_ep_set found last (an event
                                 * loop asks for its one set ten times a
                                 * connection) */
    shim_ep_fdl_t *fds;         /* by descriptor */
    shim_ep_reg_t *free_regs;
    int ever_tagged;            /* a tag was ever given to the kernel (atomic) */
    int nplain;                 /* plain records (atomic) */
    int nparked;                /* parked wake fd registrations (PARKED WAKE FDS) */
    int nkept;                  /* kept registrations (KEPT DELETES) */
} shim_ep ZC_FORK_DATA;

static void shim_ep_lock(void)
{
    while (__atomic_exchange_n(&shim_ep.lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

static void shim_ep_unlock(void);
static void shim_ep_kept_flush(int epfd, int forking);

/* QUIET SETS: waits that may sleep, per epoll descriptor (hashed), and the
 * private sets (epfd + 1; 0: free). */
#define SHIM_EP_SLEEP_SLOTS 64
#define SHIM_EP_PRIV_MAX 16
static struct {
    uint32_t n;
    char pad[60];
} shim_ep_sleep[SHIM_EP_SLEEP_SLOTS] __attribute__((aligned(64)));
static int shim_ep_priv[SHIM_EP_PRIV_MAX];
uint64_t shim_ep_priv_bits;             /* shim_int.h: sets ever made private */

static int shim_ep_nested_any;          /* a set is due (nested_due): NESTED SETS */

/* A registration of nested set s was reported: due for arming before the
 * next sleep outside it (NESTED SETS).  Lock held. */
static void shim_ep_nested_due(shim_ep_set_t *s)
{
    if (s && s->nested && !s->nested_due) {
        s->nested_due = 1;
        __atomic_store_n(&shim_ep_nested_any, 1, __ATOMIC_SEQ_CST);
    }
}

static uint32_t *shim_ep_sleepers(int epfd)
{
    return &shim_ep_sleep[(unsigned)epfd % SHIM_EP_SLEEP_SLOTS].n;
}

void shim_ep_sleep_enter(int epfd)
{
    __atomic_add_fetch(shim_ep_sleepers(epfd), 1, __ATOMIC_SEQ_CST);
    shim_ep_outer_sleep();
}

void shim_ep_sleep_leave(int epfd)
{
    __atomic_sub_fetch(shim_ep_sleepers(epfd), 1, __ATOMIC_RELEASE);
}

void shim_ep_created(int epfd)
{
    int i;

    if (epfd < 0)
        return;
    __atomic_fetch_or(&shim_ep_priv_bits, 1ull << (epfd & 63), __ATOMIC_SEQ_CST);
    for (i = 0; i < SHIM_EP_PRIV_MAX; i++) {
        int zero = 0;

        if (__atomic_compare_exchange_n(&shim_ep_priv[i], &zero, epfd + 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            return;
    }
}

static int shim_ep_private(int epfd)
{
    int i;

    for (i = 0; i < SHIM_EP_PRIV_MAX; i++)
        if (__atomic_load_n(&shim_ep_priv[i], __ATOMIC_SEQ_CST) == epfd + 1)
            return 1;
    return 0;
}

/* epfd is no longer private: 1 when it was. */
static int shim_ep_unprivate(int epfd)
{
    int i, was = 0;

    if (!shim_ep_priv_maybe(epfd))
        return 0;
    for (i = 0; i < SHIM_EP_PRIV_MAX; i++) {
        int cur = epfd + 1;

        /* (looked at first: every close of an event-loop process comes
         * here, and a locked compare-exchange per slot is not free) */
        if (__atomic_load_n(&shim_ep_priv[i], __ATOMIC_RELAXED) == cur)
            was |= __atomic_compare_exchange_n(&shim_ep_priv[i], &cur, 0, 0, __ATOMIC_SEQ_CST,
                                               __ATOMIC_RELAXED);
    }
    return was;
}

/* Set epfd was private: its kept registrations go (KEPT DELETES).  Made
 * public first, then flushed under the lock, so a DEL that keeps (which
 * checks privacy under the lock) either came before the flush or sees
 * the set public. */
static void shim_ep_went_public(int epfd)
{
    if (!__atomic_load_n(&shim_ep.nkept, __ATOMIC_RELAXED) || shim_vfork_child())
        return;
    shim_ep_lock();
    shim_ep_kept_flush(epfd, 0);
    shim_ep_unlock();
}

void shim_ep_priv_gone(int fd)
{
    if (shim_ep_unprivate(fd))
        shim_ep_went_public(fd);
}

static void shim_ep_unlock(void)
{
    __atomic_store_n(&shim_ep.lock, 0, __ATOMIC_RELEASE);
}

/* No set is private any more (a fork, exec or spawn; also in a vfork
 * child, which shares this memory and makes it so for its parent): then
 * their kept registrations go (KEPT DELETES; with the table's lock held
 * when locked). */
static void shim_ep_all_public_(int locked)
{
    int i;

    if (!shim_ep_priv_some())
        return;
    for (i = 0; i < SHIM_EP_PRIV_MAX; i++)
        __atomic_store_n(&shim_ep_priv[i], 0, __ATOMIC_SEQ_CST);
    /* (not in a vfork child: its descriptor table is its own, and a DEL
     * there of a number it closed already would fail while the table we
     * share forgot the registration, which then stays in the kernel under
     * a tag nobody holds: the parent's next ADD would meet EEXIST) */
    if (!__atomic_load_n(&shim_ep.nkept, __ATOMIC_RELAXED) || (!locked && shim_vfork_child()))
        return;
    if (!locked)
        shim_ep_lock();
    shim_ep_kept_flush(-1, locked);
    if (!locked)
        shim_ep_unlock();
}

void shim_ep_all_public(void)
{
    shim_ep_all_public_(0);
}

void shim_ep_fork_prepare(void)
{
    shim_ep_set_t *s, *sn;

    shim_ep_lock();
    HASH_ITER(hh, shim_ep.sets, s, sn)
        s->inherited = 1;
    shim_ep_all_public_(1);     /* the child holds every set too (QUIET SETS) */
}

void shim_ep_fork_parent(void)
{
    shim_ep_unlock();
}

ZC_FORK_CODE void shim_ep_fork_child(void)
{
    shim_ep_unlock();
}

/* The check byte of a tag: so that a data word of the application's that
 * starts with our magic is not taken for one. */
static uint64_t shim_ep_check(uint64_t gen, uint32_t slot)
{
    uint64_t h = (gen * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)slot * 0xc2b2ae3d27d4eb4fULL);

    return ((h >> 56) & 0xff) << 16;
}

/* --- the table (lock held) -------------------------------------------------- */

static void shim_ep_dirty(shim_ep_reg_t *g);

/* The registrations of descriptor fd (create: a new empty list when it has
 * none).  Found through shim_ep_fdv, a table indexed by descriptor beside
 * the descriptor table (mapped at the first registration, pages touched
 * only where descriptors are), not the hash: each receive on a connection
 * whose registration left the ready list looks its list up
 * (shim_ep_touched), and with 1,000 connections the hash lookup was 3 % of
 * redis-server's time.  The hash stays for walking every list.  Lock held. */
static shim_ep_fdl_t **shim_ep_fdv;
static unsigned shim_ep_fdv_n;
/* Beside the vector, one byte per descriptor: 1 while its list is not
 * empty (shim_ep_fd_may_have reads a dense array of bytes instead of each
 * list, whose cache miss was 1.8 % of redis-benchmark's time with 1,000
 * connections none of which paired). */
static uint8_t *shim_ep_fdv_has;

static __attribute__((noinline)) void shim_ep_fdv_map(void)
{
    size_t n = shim_fd_table_size ? shim_fd_table_size : 1024;
    void *p = zc_real.mmap(NULL, n * (sizeof(*shim_ep_fdv) + 1), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    shim_ep_fdv_n = (unsigned)n;
    if (p != MAP_FAILED) {
        shim_ep_fdv_has = (uint8_t *)p + n * sizeof(*shim_ep_fdv);
        __atomic_store_n(&shim_ep_fdv, (shim_ep_fdl_t **)p, __ATOMIC_RELEASE);
    }
}

/* (inline: every epoll_ctl and look asks it several times) */
static inline shim_ep_fdl_t **shim_ep_fdv_at(int fd)
{
    if (shim_unlikely(!shim_ep_fdv && !shim_ep_fdv_n))
        shim_ep_fdv_map();
    return shim_ep_fdv && (unsigned)fd < shim_ep_fdv_n ? &shim_ep_fdv[fd] : NULL;
}

static shim_ep_fdl_t *shim_ep_fdl_new(int fd, shim_ep_fdl_t **at);

static inline shim_ep_fdl_t *shim_ep_fdl(int fd, int create)
{
    shim_ep_fdl_t **at = shim_ep_fdv_at(fd), *l;

    if (at)
        l = *at;
    else
        HASH_FIND_INT(shim_ep.fds, &fd, l);
    if (l || !create)
        return l;
    return shim_ep_fdl_new(fd, at);
}

/* A new empty list for fd (at: its place in the vector, or NULL). */
static __attribute__((noinline)) shim_ep_fdl_t *shim_ep_fdl_new(int fd, shim_ep_fdl_t **at)
{
    shim_ep_fdl_t *l = zc_pool_alloc(sizeof(*l));

    if (!l)
        return NULL;
    l->fd = fd;
    HASH_ADD_INT(shim_ep.fds, fd, l);
    if (!l->hh.tbl && shim_ep.fds != l) {       /* out of memory inside uthash */
        zc_pool_free(l, sizeof(*l));
        return NULL;
    }
    if (at)
        __atomic_store_n(at, l, __ATOMIC_RELEASE);
    return l;
}

/* Without the lock: 0 when fd surely has no registration in the table
 * (its byte in shim_ep_fdv_has is 0), 1 when it may have. */
static int shim_ep_fd_may_have(int fd)
{
    shim_ep_fdl_t **v = __atomic_load_n(&shim_ep_fdv, __ATOMIC_ACQUIRE);

    if (!v || (unsigned)fd >= __atomic_load_n(&shim_ep_fdv_n, __ATOMIC_RELAXED))
        return 1;
    return __atomic_load_n(&shim_ep_fdv_has[fd], __ATOMIC_ACQUIRE);
}

/* l's list became empty or not (lock held). */
static void shim_ep_fdl_has(shim_ep_fdl_t *l)
{
    if (shim_ep_fdv && (unsigned)l->fd < shim_ep_fdv_n)
        __atomic_store_n(&shim_ep_fdv_has[l->fd], l->head != NULL, __ATOMIC_RELEASE);
}

static void shim_ep_fdl_free(shim_ep_fdl_t *l)
{
    shim_ep_fdl_t **at = shim_ep_fdv_at(l->fd);

    if (at && *at == l)
        __atomic_store_n(at, NULL, __ATOMIC_RELEASE);
    HASH_DEL(shim_ep.fds, l);
    zc_pool_free(l, sizeof(*l));
}

static shim_ep_set_t *shim_ep_set(int epfd, int create)
{
    shim_ep_set_t *s = shim_ep.last_set;

    if (s && s->epfd == epfd)
        return s;
    HASH_FIND_INT(shim_ep.sets, &epfd, s);
    if (s)
        shim_ep.last_set = s;
    if (s || !create)
        return s;
    s = zc_pool_alloc(sizeof(*s));
    if (!s)
        return NULL;
    s->epfd = epfd;
    HASH_ADD_INT(shim_ep.sets, epfd, s);
    return s;
}

static shim_ep_reg_t *shim_ep_find(int epfd, int fd)
{
    shim_ep_fdl_t *l = shim_ep_fdl(fd, 0);
    shim_ep_reg_t *g;

    for (g = l ? l->head : NULL; g; g = g->fnext)
        if (g->epfd == epfd)
            return g;
    return NULL;
}

/* A registration record of (epfd, fd), plain (no slot yet). */
static shim_ep_reg_t *shim_ep_new(int epfd, int fd)
{
    shim_ep_fdl_t *l = shim_ep_fdl(fd, 1);
    shim_ep_reg_t *g;

    if (!l)
        return NULL;
    g = shim_ep.free_regs;
    if (g)
        shim_ep.free_regs = g->free_next;
    else if (!(g = zc_pool_alloc(sizeof(*g))))
        return NULL;
    memset(g, 0, sizeof(*g));
    g->id = ++shim_ep.next_id;
    g->epfd = epfd;
    g->fd = fd;
    g->aux = -1;
    g->slot = SHIM_EP_NOSLOT;
    g->fnext = l->head;
    __atomic_store_n(&l->head, g, __ATOMIC_RELEASE);
    shim_ep_fdl_has(l);     /* (shim_ep_fd_may_have) */
    return g;
}

/* s's count of tagged registrations moves by d (lock held); the set's
 * descriptor says whether it has any, so a wait asks without the lock
 * (shim_ep_has). */
static void shim_ep_ntagged(shim_ep_set_t *s, int d)
{
    shim_fd_t *e = shim_fd_get(s->epfd);

    s->ntagged += d;
    if (e)      /* (read only while the number is an epoll set of ours) */
        __atomic_store_n(&e->ep_tagged, s->ntagged > 0, __ATOMIC_RELEASE);
}

/* Give g a slot (pref when it is one: a parked wake fd's, free) and a
 * tag, in epfd's set.  0 or -ENOMEM. */
static int shim_ep_tag(shim_ep_reg_t *g, uint32_t pref)
{
    shim_ep_set_t *s;
    uint32_t i, slot = pref;

    if (g->slot != SHIM_EP_NOSLOT)
        return 0;
    if (!shim_ep.slots) {
        shim_ep.slots = zc_pool_alloc(SHIM_EP_SLOTS * sizeof(*shim_ep.slots));
        if (!shim_ep.slots)
            return -ENOMEM;
    }
    if (pref == SHIM_EP_NOSLOT) {
        for (i = 0; i < SHIM_EP_SLOTS; i++) {
            slot = (shim_ep.next_slot + i) % SHIM_EP_SLOTS;
            /* (the kick slot is never given: a registration there had its
             * wake fd's events taken for a kick, and a ready list lost
             * them: redis-benchmark waited for ever for a reply whose
             * wake-up came) */
            if (slot != SHIM_EP_KICKSLOT && !shim_ep.slots[slot])
                break;
        }
        if (i == SHIM_EP_SLOTS)
            return -ENOMEM;
        shim_ep.next_slot = slot + 1;
    }
    s = shim_ep_set(g->epfd, 1);
    if (!s)
        return -ENOMEM;
    shim_ep.gen = (shim_ep.gen + 1) & 0xffffff;
    g->slot = slot;
    g->tag = SHIM_EP_TAG | (shim_ep.gen << 24) | shim_ep_check(shim_ep.gen, slot) | slot;
    g->set = s;
    SHIM_EP_LINK(s->head, g, snext, sprev);
    shim_ep_ntagged(s, 1);
    shim_ep.slots[slot] = g;
    shim_ep_dirty(g);
    __atomic_store_n(&shim_ep.ever_tagged, 1, __ATOMIC_RELEASE);
    return 0;
}

/* The count of set s for wake fd w, or NULL (lock held). */
static shim_ep_auxref_t *shim_ep_auxref_find(shim_ep_set_t *s, int w)
{
    shim_ep_auxref_t *r = NULL;

    if (s)
        HASH_FIND_INT(s->auxrefs, &w, r);
    return r;
}

/* g's set listens to wake fd w once more, whose kernel registration names
 * slot (SHIM_EP_NOSLOT: not known, another registration's).  One count per
 * set and wake fd, so that dropping a registration costs the same in a set
 * of 10,000 as of 10 (a walk of the set here made epoll_ctl(DEL) 33 % of
 * redis-benchmark's time with 1,000 connections).  Out of memory, it goes
 * uncounted: its drop deletes it at once (shim_ep_aux_del). */
static void shim_ep_auxref_add(shim_ep_reg_t *g, int w, uint32_t slot)
{
    shim_ep_auxref_t *r;

    if (!g->set)
        return;
    r = shim_ep_auxref_find(g->set, w);
    if (!r) {
        r = zc_pool_alloc(sizeof(*r));
        if (!r)
            return;
        r->aux = w;
        r->slot = slot;
        HASH_ADD_INT(g->set->auxrefs, aux, r);
        if (!r->hh.tbl && g->set->auxrefs != r) {
            zc_pool_free(r, sizeof(*r));
            return;
        }
    }
    r->n++;
}

/* g stops listening to its wake fd: the last registration of the set to
 * do so parks it (PARKED WAKE FDS); one the set does not count is taken
 * out of the kernel's set at once. */
static void shim_ep_aux_del(shim_ep_reg_t *g)
{
    shim_ep_auxref_t *r;
    int saved = errno;

    if (g->aux < 0)
        return;
    r = shim_ep_auxref_find(g->set, g->aux);
    if (!r)
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->aux, NULL);
    else if (r->n > 0 && --r->n == 0)
        shim_ep.nparked++;
    g->aux = -1;
    errno = saved;
}

/* The slot of the wake fd w parked in epfd's set when it is free, so a
 * registration taking it finds w's kernel registration tagged for it
 * (PARKED WAKE FDS); else SHIM_EP_NOSLOT. */
static uint32_t shim_ep_parked_slot(int epfd, int w)
{
    shim_ep_auxref_t *r =
        w >= 0 && shim_ep.nparked ? shim_ep_auxref_find(shim_ep_set(epfd, 0), w) : NULL;

    if (!r || r->n || r->slot == SHIM_EP_NOSLOT || r->slot == SHIM_EP_KICKSLOT ||
        !shim_ep.slots || shim_ep.slots[r->slot])
        return SHIM_EP_NOSLOT;
    return r->slot;
}

/* Forget r (lock held); a parked one's kernel registration is deleted
 * with del, where no other process may share the set. */
static void shim_ep_auxref_free(shim_ep_set_t *s, shim_ep_auxref_t *r, int del)
{
    if (!r->n) {
        shim_ep.nparked--;
        if (del && !s->inherited)
            zc_real.epoll_ctl(s->epfd, EPOLL_CTL_DEL, r->aux, NULL);
    }
    HASH_DEL(s->auxrefs, r);
    zc_pool_free(r, sizeof(*r));
}

void shim_ep_aux_gone(int w)
{
    shim_ep_set_t *s, *sn;
    shim_ep_auxref_t *r;
    int saved = errno;

    if (!__atomic_load_n(&shim_ep.nparked, __ATOMIC_RELAXED))
        return;
    shim_ep_lock();
    HASH_ITER(hh, shim_ep.sets, s, sn) {
        r = shim_ep_auxref_find(s, w);
        if (r && !r->n)
            shim_ep_auxref_free(s, r, 1);
    }
    shim_ep_unlock();
    errno = saved;
}

/* READY LIST (lock held). */
static void shim_ep_dirty(shim_ep_reg_t *g)
{
    if (g->dirty || g->kept || g->slot == SHIM_EP_NOSLOT || !g->set)
        return;
    g->dirty = 1;
    SHIM_EP_LINK(g->set->dhead, g, dnext, dprev);
}

static void shim_ep_clean(shim_ep_reg_t *g)
{
    if (!g->dirty)
        return;
    SHIM_EP_UNLINK(g->set->dhead, g, dnext, dprev);
    g->dirty = g->net = 0;
}

void shim_ep_touched(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    shim_ep_fdl_t *l;
    shim_ep_reg_t *g;

    if (!f || !__atomic_exchange_n(&f->ep_clean, 0, __ATOMIC_ACQ_REL))
        return;
    shim_ep_lock();
    l = shim_ep_fdl(fd, 0);
    for (g = l ? l->head : NULL; g; g = g->fnext)
        shim_ep_dirty(g);
    shim_ep_unlock();
}

static int shim_ep_listed(const shim_ep_set_t *s);

/* Does a sleep over epfd need the safety net: does a wait ask only its
 * ready list now, or does the set hold a path's registration at all (a
 * wake-up of a path's that never came would otherwise cost the whole
 * timeout: gRPC's bidirectional streams, both ends under the library,
 * stalled 10 s about once in 40 rounds)? */
static int shim_ep_netted(int epfd)
{
    shim_ep_set_t *s;
    int netted;

    shim_ep_lock();
    s = shim_ep_set(epfd, 0);
    netted = s && (s->ntagged > 0 || shim_ep_listed(s));
    shim_ep_unlock();
    return netted;
}

/* The next look at epfd's ready list asks every registration. */
static void shim_ep_full_next(int epfd)
{
    shim_ep_set_t *s;

    shim_ep_lock();
    s = shim_ep_set(epfd, 0);
    if (s)
        s->full_ns = 0;
    shim_ep_unlock();
}

/* Does a wait over s ask only its ready list? */
static int shim_ep_listed(const shim_ep_set_t *s)
{
    return s && (unsigned)s->ntagged > zc_config.epoll_scan_max;
}

/* g leaves its set's lists (lock held). */
static void shim_ep_unlink(shim_ep_reg_t *g)
{
    shim_ep_clean(g);
    SHIM_EP_UNLINK(g->set->head, g, snext, sprev);
    shim_ep_ntagged(g->set, -1);
}

/* forking: in a fork's prepare handler, where the allocator's lock is
 * held: a descriptor's emptied list stays (reused by its next
 * registration, freed at its close). */
static void shim_ep_drop_(shim_ep_reg_t *g, int forking)
{
    shim_ep_fdl_t *l = shim_ep_fdl(g->fd, 0);
    shim_ep_reg_t **pp;

    shim_ep_aux_del(g);
    if (g->kept) {
        g->kept = 0;
        __atomic_sub_fetch(&shim_ep.nkept, 1, __ATOMIC_RELAXED);
        shim_ep.slots[g->slot] = NULL;
    } else if (g->slot != SHIM_EP_NOSLOT) {
        shim_ep_unlink(g);
        shim_ep.slots[g->slot] = NULL;
    } else {
        __atomic_sub_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
    }
    for (pp = l ? &l->head : NULL; pp && *pp; pp = &(*pp)->fnext)
        if (*pp == g) {
            __atomic_store_n(pp, g->fnext, __ATOMIC_RELEASE);
            shim_ep_fdl_has(l);
            break;
        }
    /* an empty list stays where the vector finds it: the number's next
     * registration (an event loop's next connection) needs no allocation
     * and no hash insertion (the server of conn_rate: 700 instructions a
     * connection) */
    if (l && !l->head && !forking && !shim_ep_fdv_at(l->fd))
        shim_ep_fdl_free(l);
    g->id = 0;
    g->free_next = shim_ep.free_regs;
    shim_ep.free_regs = g;
}

static void shim_ep_drop(shim_ep_reg_t *g)
{
    shim_ep_drop_(g, 0);
}

/* KEPT DELETES (lock held).  g, deleted by the application, stays in the
 * kernel: off its set's lists (no wait asks or reports it), its slot, tag
 * and kernel registration kept for the next ADD.  A new id makes a wait's
 * snapshot of it stale. */
static void shim_ep_keep(shim_ep_reg_t *g)
{
    shim_ep_aux_del(g);
    shim_ep_unlink(g);
    g->id = ++shim_ep.next_id;
    g->kept = 1;
    __atomic_add_fetch(&shim_ep.nkept, 1, __ATOMIC_RELAXED);
}

/* The application added g back: it joins its set again. */
static void shim_ep_unkeep(shim_ep_reg_t *g)
{
    shim_ep_set_t *s = g->set;

    g->kept = 0;
    __atomic_sub_fetch(&shim_ep.nkept, 1, __ATOMIC_RELAXED);
    SHIM_EP_LINK(s->head, g, snext, sprev);
    shim_ep_ntagged(s, 1);
}

/* Kept g is deleted from the kernel after all, and forgotten. */
static void shim_ep_kept_gone_(shim_ep_reg_t *g, int forking)
{
    int saved = errno;

    zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
    errno = saved;
    shim_ep_drop_(g, forking);
    zc_stat_add(ZC_STAT_READY_EP_KEPT_GONE, 1);
}

static void shim_ep_kept_gone(shim_ep_reg_t *g)
{
    shim_ep_kept_gone_(g, 0);
}

/* Every kept registration of set epfd (-1: of every set) goes. */
static void shim_ep_kept_flush(int epfd, int forking)
{
    uint32_t i;

    for (i = 0; shim_ep.slots && shim_ep.nkept && i < SHIM_EP_SLOTS; i++) {
        shim_ep_reg_t *g = shim_ep.slots[i];

        if (g && g->kept && (epfd < 0 || g->epfd == epfd))
            shim_ep_kept_gone_(g, forking);
    }
}

/* The slot's registration if tag is one of ours, else NULL. */
static shim_ep_reg_t *shim_ep_by_tag(uint64_t tag)
{
    uint32_t slot = (uint32_t)(tag & 0xffff);
    shim_ep_reg_t *g;

    if ((tag & SHIM_EP_TAGMASK) != SHIM_EP_TAG || !shim_ep.slots)
        return NULL;
    g = shim_ep.slots[slot];
    return g && g->tag == tag ? g : NULL;
}

/* Is tag shaped like one of ours (magic and check byte)? */
static int shim_ep_tag_shaped(uint64_t tag)
{
    return (tag & SHIM_EP_TAGMASK) == SHIM_EP_TAG &&
           (tag & 0xff0000) == shim_ep_check((tag >> 24) & 0xffffff, (uint32_t)(tag & 0xffff));
}

/* The path let g's descriptor go (it is on the copy path now): the kernel
 * registration gets the application's own events and data back and g
 * leaves the table; what the kernel reports from now on passes through
 * untouched.  Returns what to report of kev (the kernel's events for it,
 * or -1), as the kernel said it. */
static uint32_t shim_ep_release(shim_ep_reg_t *g, int kev)
{
    struct epoll_event e = { g->events, { .u64 = g->data } };
    uint32_t events = g->events;
    int saved = errno;

    if (g->kept) {              /* the application had deleted it */
        shim_ep_kept_gone(g);
        return 0;
    }
    shim_ep_aux_del(g);
    if (g->events & EPOLLEXCLUSIVE) {
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &e);
    } else {
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &e);
    }
    errno = saved;
    shim_ep_drop(g);
    if (kev <= 0)
        return 0;
    return (uint32_t)kev & (events | EPOLLERR | EPOLLHUP);
}

/* Register g with the kernel again for kevents: always (a one-shot that
 * fired), or only when they changed. */
static void shim_ep_rearm(shim_ep_reg_t *g, uint32_t kevents, int always)
{
    struct epoll_event re = { kevents, { .u64 = g->tag } };
    int saved = errno;

    if (!always && re.events == g->kevents)
        return;
    if (g->events & EPOLLEXCLUSIVE) {
        /* the kernel refuses EPOLL_CTL_MOD of an exclusive registration:
         * register it again */
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
        if (!zc_real.epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &re))
            g->kevents = re.events;
    } else if (!zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &re)) {
        g->kevents = re.events;
    }
    errno = saved;
}

/* Put wake fd w in every set holding g's descriptor (edge-triggered, under
 * the wake tag): 1 when g's set listens to it, 0 when it could not. */
static int shim_ep_aux_add(shim_ep_reg_t *g, int w)
{
    shim_ep_fdl_t *l = shim_ep_fdl(g->fd, 0);
    struct epoll_event e = { EPOLLIN | EPOLLET, { .u64 = 0 } };
    shim_ep_reg_t *o;
    shim_ep_auxref_t *r;
    int saved = errno;

    if (g->aux == w)
        return 1;
    for (o = l ? l->head : NULL; o; o = o->fnext) {
        if (o->slot == SHIM_EP_NOSLOT || o->kept || o->aux == w)
            continue;
        shim_ep_aux_del(o);
        r = shim_ep_auxref_find(o->set, w);
        e.data.u64 = SHIM_EP_AUXTAG | o->slot;
        if (r && !r->n) {
            /* parked: ours again, retagged unless it names o's slot already
             * (ENOENT: the file at w is not the one parked; add it) */
            if (r->slot != o->slot &&
                zc_real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, w, &e) &&
                (errno != ENOENT ||
                 (zc_real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, w, &e) && errno != EEXIST))) {
                errno = saved;
                return 0;
            }
            r->slot = o->slot;
            r->n = 1;
            shim_ep.nparked--;
            zc_stat_add(ZC_STAT_READY_EP_WAKE_UNPARKED, 1);
        } else {
            uint32_t slot = o->slot;

            if (zc_real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, w, &e)) {
                if (errno != EEXIST) {
                    errno = saved;
                    return 0;
                }
                slot = SHIM_EP_NOSLOT;  /* (another registration's tag) */
            }
            shim_ep_auxref_add(o, w, slot);
        }
        o->aux = w;
    }
    errno = saved;
    return g->aux == w;
}

/* The set's kick eventfd (KICK), made and registered at the first kick.
 * -1 when none can be. */
static int shim_ep_kick_fd(shim_ep_set_t *s)
{
    struct epoll_event e = { EPOLLIN | EPOLLET, { .u64 = SHIM_EP_AUXTAG | SHIM_EP_KICKSLOT } };
    int fd, saved = errno;

    if (s->kick1)
        return s->kick1 - 1;
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd >= 0) {
        fd = shim_fd_internal_keep(fd, NULL, NULL);
        if (zc_real.epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e)) {
            shim_fd_internal_close(fd);
            fd = -1;
        }
    }
    s->kick1 = fd + 1;
    errno = saved;
    return fd;
}

/* Wake every wait on epfd (KICK).  Written whenever the registration is
 * ready, also with no thread of ours in a wait: the kick makes the set
 * itself readable to a poll or select over it, to an epoll set it is nested
 * in, or to io_uring, none of which look at its ready list. */
static void shim_ep_kick(int epfd)
{
    shim_ep_set_t *s;
    uint64_t one = 1;
    int fd, saved = errno;

    shim_ep_lock();
    s = shim_ep_set(epfd, 0);
    fd = s ? shim_ep_kick_fd(s) : -1;
    shim_ep_unlock();
    if (fd >= 0 && zc_real.write(fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
        zc_stat_add(ZC_STAT_READY_EP_KICKS, 1);
    errno = saved;
}

/* WAKE FDS AND NESTING.  A path's wake fd (the local path's is an epoll
 * instance, efd.c) sits in every set holding one of its connections, one
 * level of epoll nesting below it; the kernel allows five.  When the
 * application's own epoll_ctl meets ELOOP, every wake fd leaves every set
 * (the kernel registrations with them, parked ones too), each descriptor's
 * path is told it cannot be heard (its waiters take doorbell bytes), the
 * sets are kicked (a wake-up sent to a wake fd on its way out reaches
 * nobody: the waiters look again), and the caller tries once more, so an
 * application nesting its sets as deep as the kernel allows gets what the
 * kernel gives.  Returns 1 when any wake fd left a set. */
int shim_ep_wake_strip(void)
{
    shim_ep_set_t *s, *sn;
    shim_ep_reg_t *g;
    shim_ep_auxref_t *r, *rn;
    int fds[128], epfds[32], nfd, nep = 0, any = 0, full, i;

    do {
        nfd = 0;
        full = 0;
        shim_ep_lock();
        HASH_ITER(hh, shim_ep.sets, s, sn) {
            int hit = 0;

            for (g = s->head; g; g = g->snext) {
                if (g->aux < 0)
                    continue;
                if (nfd == (int)(sizeof(fds) / sizeof(fds[0]))) {
                    full = 1;   /* (the rest in the next round) */
                    break;
                }
                fds[nfd++] = g->fd;
                shim_ep_aux_del(g);
                hit = 1;
            }
            if (!full)
                HASH_ITER(hh, s->auxrefs, r, rn) {
                    int saved = errno;

                    if (!r->n)
                        shim_ep.nparked--;
                    zc_real.epoll_ctl(s->epfd, EPOLL_CTL_DEL, r->aux, NULL);
                    errno = saved;
                    HASH_DEL(s->auxrefs, r);
                    zc_pool_free(r, sizeof(*r));
                    hit = 1;
                }
            if (hit && nep < (int)(sizeof(epfds) / sizeof(epfds[0])))
                epfds[nep++] = s->epfd;
            any |= hit;
            if (full)
                break;
        }
        shim_ep_unlock();
        for (i = 0; i < nfd; i++) {
            shim_pin_t pin;

            if (!shim_fd_pin(fds[i], &pin))
                continue;
            if (pin.f.path->ops->wake_fd)
                pin.f.path->ops->wake_fd(&pin.f, fds[i], 1);
            shim_fd_unpin(&pin);
        }
    } while (full);
    for (i = 0; i < nep; i++)
        shim_ep_kick(epfds[i]);
    if (any)
        zc_stat_add(ZC_STAT_READY_EP_WAKE_STRIPPED, 1);
    return any;
}

/* --- asking the paths (no lock held) ------------------------------------------ */

/* What the kernel registration of a claimed descriptor asks for, for the
 * application's events. */
static uint32_t shim_ep_kernel_events(shim_fd_t *f, uint32_t events)
{
    return (uint32_t)(unsigned short)f->path->ops->kernel_events(f, (short)events) |
           (events & SHIM_EP_KERNEL_KEEP);
}

/* One registration's answer in a wait: its revents now (kev: the kernel's
 * events for it, or -1), its change counter, what the kernel registration
 * should ask for. */
typedef struct shim_ep_ans {
    shim_ep_reg_t *g;
    uint64_t id, change, data;
    uint32_t events, rev, kevents;
    int fd, claimed, aux, kev;
    int recheck;                /* the path asked for another look (READY LIST) */
    int withdrew;               /* a SPIN look withdrew its wake-up */
    int quiet;                  /* edge-triggered, ready, reported already (ARM_NEXT) */
    int arm;                    /* how its look asks it (shim_ep_look) */
} shim_ep_ans_t;

/* Ask a's path (a->fd pinned here) with arming arm; wake: the arming look
 * may make the set listen to the path's wake fd (set in a->aux). */
static void shim_ep_ask(shim_ep_ans_t *a, int arm, int wake, shim_ready_ask_t *ask)
{
    shim_pin_t pin;
    shim_fd_t *f;
    uint32_t want = a->events & ~(uint32_t)SHIM_EP_KERNEL_KEEP;

    a->claimed = shim_fd_pin(a->fd, &pin);
    a->aux = -1;
    a->withdrew = 0;
    if (!a->claimed)
        return;
    f = &pin.f;
    if (wake && f->path->ops->wake_fd)
        a->aux = f->path->ops->wake_fd(f, a->fd, 0);
    if (a->aux >= 0 && ask) {
        int heard = 1;

        /* the set must hear it before the path counts on it */
        shim_ep_lock();
        if (a->g->id == a->id)
            heard = shim_ep_aux_add(a->g, a->aux);
        else
            a->aux = -1;
        shim_ep_unlock();
        if (!heard) {
            a->aux = -1;
            f->path->ops->wake_fd(f, a->fd, 1);
        }
    }
    int recheck = ask ? ask->recheck_ms : 0;

    if (ask) {
        ask->wake_listening = a->aux >= 0;
        ask->recheck_ms = 0;
        ask->withdrew = 0;
    }
    a->rev = (uint16_t)f->path->ops->revents(f, a->fd, (short)(want | EPOLLRDHUP), a->kev, arm,
                                             ask);
    if (ask) {
        ask->wake_listening = 0;
        a->recheck = ask->recheck_ms != 0;
        a->withdrew = ask->withdrew;
        if (recheck && (!ask->recheck_ms || recheck < ask->recheck_ms))
            ask->recheck_ms = recheck;
    }
    /* EPOLLRDHUP is reported when the registration asked for it (nginx
     * learns from it that its upstream closed: without it, it waited for
     * the end of a response whose last bytes it had read) */
    a->rev &= want | (a->events & EPOLLRDHUP) | EPOLLERR | EPOLLHUP;
    a->kevents = shim_ep_kernel_events(f, a->events);
    if (a->rev && (a->events & EPOLLET))
        a->change = f->path->ops->change(f, a->fd);
    shim_fd_unpin(&pin);
}

/* An answer found ready and reported already (edge-triggered): the path
 * arms its wake-up for the next change (SHIM_READY_ARM_NEXT). */
static void shim_ep_arm_next(shim_ep_ans_t *a, shim_ready_ask_t *ask)
{
    uint32_t want = a->events & ~(uint32_t)SHIM_EP_KERNEL_KEEP;
    shim_pin_t pin;

    if (!shim_fd_pin(a->fd, &pin))
        return;
    if (ask)
        ask->wake_listening = a->aux >= 0;
    (void)pin.f.path->ops->revents(&pin.f, a->fd, (short)want, -1, SHIM_READY_ARM_NEXT, ask);
    if (ask)
        ask->wake_listening = 0;
    shim_fd_unpin(&pin);
}

/* Apply a's answer to its registration (lock held): the events to report
 * at index idx of the wait's events, 0 for none.  A registration this wait
 * reported already (its look found it ready, then the kernel reported it
 * too) is not reported twice: what the kernel adds goes into that event
 * (*merge_p: its index, else -1), as the kernel reports one event per
 * registration (a look that reported EPOLLOUT must not hide the EPOLLIN
 * the kernel then reports: gRPC's edge-triggered first read never came). */
static uint32_t shim_ep_apply(shim_ep_ans_t *a, uint64_t wait, int idx, int *merge_p)
{
    shim_ep_reg_t *g = a->g;

    *merge_p = -1;
    if (g->id != a->id || g->slot == SHIM_EP_NOSLOT)
        return 0;       /* deleted (or re-registered) meanwhile */
    a->data = g->data;  /* (a MOD may have changed it) */
    if (!a->claimed) {
        uint32_t seen = g->seen == wait, rev = shim_ep_release(g, a->kev);

        return seen ? 0 : rev;
    }
    shim_ep_rearm(g, a->kevents, 0);
    if (a->rev && g->seen == wait) {
        *merge_p = g->seen_idx;
        if (g->events & EPOLLET)
            g->change = a->change;
        return 0;
    }
    if (!a->rev || g->disabled) {
        if (a->kev > 0 && (g->events & EPOLLONESHOT) && !g->disabled)
            shim_ep_rearm(g, g->kevents, 1);    /* the kernel disabled it: nothing to say */
        return 0;
    }
    if (g->events & EPOLLET) {
        if (a->kev <= 0 && a->change == g->change) {
            a->quiet = 1;   /* nothing new since the last report */
            return 0;
        }
        g->change = a->change;
    }
    if (g->events & EPOLLONESHOT)
        g->disabled = 1;
    g->seen = wait;
    g->seen_idx = idx;
    return a->rev;
}

static void shim_ep_snap(shim_ep_ans_t *a, shim_ep_reg_t *g, int kev)
{
    a->g = g;
    a->id = g->id;
    a->data = g->data;
    a->fd = g->fd;
    a->events = g->events;
    a->kev = kev;
    a->change = 0;
    a->recheck = 1;
    a->quiet = 0;
    a->arm = g->net;    /* (shim_ep_look: asked with arming) */
}

/* --- translating what the kernel reported -------------------------------------- */

/* The kernel's events evs[0..n) of a wait on epfd (number wait): tags of
 * ours become the application's data, or go (a wake fd's; one whose path
 * has nothing to report; one no registration holds any more; one this wait
 * reported already, among base[0..nbase): merged into it).  Returns how
 * many are left, compacted. */
static int shim_ep_translate_n(struct epoll_event *evs, int n, uint64_t wait,
                               struct epoll_event *base, int nbase)
{
    int i, kept = 0;

    for (i = 0; i < n; i++) {
        struct epoll_event *e = &evs[i];
        shim_ep_ans_t a;
        shim_ep_reg_t *g;
        uint32_t rev;
        int merge;

        if ((e->data.u64 & SHIM_EP_TAGMASK) == SHIM_EP_AUXTAG) {
            uint32_t slot = (uint32_t)(e->data.u64 & 0xffff);

            /* a path's wake fd: the waiter looks again, at that one */
            shim_ep_lock();
            if (slot != SHIM_EP_KICKSLOT && shim_ep.slots && shim_ep.slots[slot])
                shim_ep_dirty(shim_ep.slots[slot]);
            shim_ep_unlock();
            continue;
        }
        if ((e->data.u64 & SHIM_EP_TAGMASK) != SHIM_EP_TAG) {
            evs[kept++] = *e;
            continue;
        }
        shim_ep_lock();
        g = shim_ep_by_tag(e->data.u64);
        if (!g) {
            shim_ep_unlock();
            if (shim_ep_tag_shaped(e->data.u64)) {
                zc_stat_add(ZC_STAT_READY_EP_STALE_TAGS, 1);
                continue;   /* a registration gone, or a forked sibling's */
            }
            evs[kept++] = *e;   /* the application's own data word */
            continue;
        }
        if (g->kept) {
            shim_ep_kept_gone(g);   /* an event on a deleted registration */
            shim_ep_unlock();
            continue;
        }
        shim_ep_snap(&a, g, (int)(e->events & 0xffff));
        shim_ep_dirty(g);   /* its wake-up was spent: the next look re-arms it */
        shim_ep_unlock();
        shim_ep_ask(&a, 0, 0, NULL);
        shim_ep_lock();
        rev = shim_ep_apply(&a, wait, nbase + kept, &merge);
        if (rev && a.g->id == a.id)
            shim_ep_nested_due(a.g->set);
        shim_ep_unlock();
        if (merge >= 0 && merge < nbase + kept)
            base[merge].events |= a.rev;
        if (!rev)
            continue;
        e->events = rev;
        e->data.u64 = a.data;
        evs[kept++] = *e;
    }
    return kept;
}

/* A pass-through epoll wait (no claimed registration in the set when it
 * began) returned n > 0 events: translate them when this process ever
 * tagged a registration.  Returns the events left. */
int shim_ep_translate(int epfd, struct epoll_event *evs, int n)
{
    (void)epfd;
    if (n <= 0 || !__atomic_load_n(&shim_ep.ever_tagged, __ATOMIC_ACQUIRE))
        return n;
    return shim_ep_translate_n(evs, n, __atomic_add_fetch(&shim_ep.waits, 1, __ATOMIC_RELAXED),
                               evs, 0);
}

/* --- the wait ------------------------------------------------------------------ */

/* A snapshot of the claimed registrations of epfd (those a look may
 * report: not one-shots that fired, unless all), in *a_p (a, or a bigger
 * array from zc_pool that shim_ep_snap_free gives back).  Returns how many. */
static int shim_ep_snap_set(int epfd, shim_ep_ans_t *a, int cap, shim_ep_ans_t **a_p,
                            size_t *size_p, int all)
{
    shim_ep_set_t *s;
    shim_ep_reg_t *g;
    int n = 0, want;

    *a_p = a;
    *size_p = 0;
    for (;;) {
        shim_ep_lock();
        s = shim_ep_set(epfd, 0);
        want = s ? s->ntagged : 0;
        if (shim_ep_listed(s) && !all) {
            int64_t now = shim_now_ns();

            /* after a sleep the SHIM_EP_FULL_MS cap cut short (the set was
             * idle that long), a look asks them all, as a small set's every
             * look does: a wake-up the list missed costs at most that
             * long, never a hang (READY LIST).  Not on a timer while the set
             * is busy: a look that finds one ready returns before arming,
             * so the idle ones it made dirty stayed dirty, asked at every
             * wait (tier localpath, case epoll_idle, under load) */
            if (!s->full_ns) {
                s->full_ns = now;
                for (g = s->head; g; g = g->snext)
                    if (!g->dirty) {
                        shim_ep_dirty(g);
                        g->net = g->dirty;
                    }
            }
        }
        if (shim_ep_listed(s)) {
            shim_ep_reg_t *next;

            /* the ready list; a fired one-shot leaves it (its MOD brings
             * it back) */
            want = 0;
            for (g = s->dhead; g; g = next) {
                next = g->dnext;
                if (g->disabled && !all)
                    shim_ep_clean(g);
                else
                    want++;
            }
        }
        if (want <= cap) {
            int listed = shim_ep_listed(s);

            for (g = !s ? NULL : listed ? s->dhead : s->head; g;
                 g = listed ? g->dnext : g->snext)
                if (all || !g->disabled)
                    shim_ep_snap(&(*a_p)[n++], g, -1);
            shim_ep_unlock();
            return n;
        }
        shim_ep_unlock();
        if (*size_p)
            zc_pool_free(*a_p, *size_p);
        cap = want + 16;
        *size_p = (size_t)cap * sizeof(*a);
        *a_p = zc_pool_alloc(*size_p);
        if (!*a_p) {
            /* no memory for the whole set: the first cap of it */
            *a_p = a;
            *size_p = 0;
            cap = SHIM_EP_SNAP;
            shim_ep_lock();
            s = shim_ep_set(epfd, 0);
            for (g = !s ? NULL : shim_ep_listed(s) ? s->dhead : s->head; g && n < cap;
                 g = shim_ep_listed(s) ? g->dnext : g->snext)
                if (all || !g->disabled)
                    shim_ep_snap(&a[n++], g, -1);
            shim_ep_unlock();
            return n;
        }
    }
}

static void shim_ep_snap_free(shim_ep_ans_t *a, size_t size)
{
    if (size)
        zc_pool_free(a, size);
}

/* The spin of this wait is over: the registrations whose wake-up it
 * withdrew (ws->withdrew, noted by the SPIN looks) get it back
 * (SHIM_READY_SPUN); every claimed registration of epfd when more were
 * withdrawn than the list holds.  A wait over a set of thousands asks the
 * few it withdrew, not the set. */
static void shim_ep_spun_one(int fd, uint32_t events)
{
    shim_pin_t pin;

    if (shim_fd_pin(fd, &pin)) {
        pin.f.path->ops->revents(&pin.f, fd, (short)(events & 0xffff), -1, SHIM_READY_SPUN,
                                 NULL);
        shim_fd_unpin(&pin);
    }
}

static void shim_ep_spun(int epfd, const shim_wait_t *ws)
{
    shim_ep_ans_t stack[SHIM_EP_SNAP], *a;
    size_t size;
    int n, i;

    if (ws->nwithdrew <= SHIM_WAIT_WITHDREW) {
        zc_stat_add(ZC_STAT_READY_EP_SPUN, (uint64_t)ws->nwithdrew);
        for (i = 0; i < ws->nwithdrew; i++)
            shim_ep_spun_one(ws->withdrew[i].fd, ws->withdrew[i].events);
        return;
    }
    n = shim_ep_snap_set(epfd, stack, SHIM_EP_SNAP, &a, &size, 1);
    zc_stat_add(ZC_STAT_READY_EP_SPUN, (uint64_t)n);
    for (i = 0; i < n; i++)
        shim_ep_spun_one(a[i].fd, a[i].events);
    shim_ep_snap_free(a, size);
}

/* fd is (or may be) an epoll descriptor that someone outside this
 * process's waits may watch from now on (QUIET SETS): when it was a
 * private set, every registration on its ready list is armed, and the set
 * kicked when one is ready, as their ADD or MOD would have done. */
/* NESTED SETS.  A set put in another set (or polled) is waited on by the
 * kernel too, where no look of ours arms its registrations: the kernel
 * sees a paired connection's next bytes only if they come with a doorbell
 * byte.  A registration of such a set that a look or a kernel event
 * reported is armed for the next bytes (SHIM_READY_ARM_NEXT), whether or
 * not the application then reads to EAGAIN (an outer wait after a read
 * that stopped short of EAGAIN used to sleep through the next bytes), when
 * a thread next goes to sleep in a wait that is not the engine's look at
 * that set (an outer epoll set's, a poll's over it: shim_ep_outer_sleep).
 * Not at the report itself: MPICH over UCX nests its sets, and a thread of
 * its sleeps in the outer set all along while another busy-polls the inner
 * one and reads everything; armed at every report, each message cost a
 * doorbell and woke the sleeper (130,925 doorbells in 0.3 s, the 1-byte
 * round trip from 1.6 to 8.9 us).  A sleeper in the outer set while
 * another thread busy-polls the inner one therefore hears only what its
 * own entry into the sleep armed, and the busy poller reads the rest. */

/* Arm a for its next bytes, by the wake fd when its set listens to one
 * (the outer waiter hears it through the set: no doorbell byte). */
static void shim_ep_nested_arm(shim_ep_ans_t *a)
{
    shim_ready_ask_t ask = { 0 };

    shim_ep_lock();
    a->aux = a->g && a->g->id == a->id ? a->g->aux : -1;
    shim_ep_unlock();
    shim_ep_arm_next(a, &ask);
}

void shim_ep_outer_sleep(void)
{
    int epfds[32], n = 0, i, k;
    shim_ep_set_t *s, *sn;

    if (!__atomic_load_n(&shim_ep_nested_any, __ATOMIC_SEQ_CST) ||
        !__atomic_exchange_n(&shim_ep_nested_any, 0, __ATOMIC_SEQ_CST))
        return;
    shim_ep_lock();
    HASH_ITER(hh, shim_ep.sets, s, sn)
        if (s->nested_due && n < (int)(sizeof(epfds) / sizeof(epfds[0]))) {
            s->nested_due = 0;
            epfds[n++] = s->epfd;
        }
    shim_ep_unlock();
    for (k = 0; k < n; k++) {
        shim_ep_ans_t stack[SHIM_EP_SNAP], *a;
        size_t size;
        int m = shim_ep_snap_set(epfds[k], stack, SHIM_EP_SNAP, &a, &size, 0), ready = 0;

        /* armed, then looked at: bytes that came before the arming are
         * not announced, so the set is kicked for the sleeper to see them */
        for (i = 0; i < m; i++) {
            shim_ep_nested_arm(&a[i]);
            shim_ep_ask(&a[i], 0, 0, NULL);
            ready |= a[i].claimed && a[i].rev != 0;
        }
        shim_ep_snap_free(a, size);
        if (ready)
            shim_ep_kick(epfds[k]);
    }
}

void shim_ep_nested(int epfd)
{
    shim_fd_t *f = shim_fd_get(epfd);
    shim_ep_set_t *s;

    if (f && __atomic_load_n(&f->ep_nested, __ATOMIC_RELAXED))
        return;         /* (marked already: a poll loop over the set) */
    if (f)
        __atomic_store_n(&f->ep_nested, 1, __ATOMIC_RELAXED);
    shim_ep_lock();
    s = shim_ep_set(epfd, 1);
    if (s)
        s->nested = 1;
    shim_ep_unlock();
}

void shim_ep_exposed(int fd)
{
    shim_ep_ans_t stack[SHIM_EP_SNAP], *a;
    size_t size;
    int n, i, kick = 0, saved = errno;

    if (!shim_ep_unprivate(fd))
        return;
    shim_ep_nested(fd);
    shim_ep_went_public(fd);
    n = shim_ep_snap_set(fd, stack, SHIM_EP_SNAP, &a, &size, 1);
    for (i = 0; i < n; i++) {
        shim_ready_ask_t ask = { 0 };

        shim_ep_ask(&a[i], SHIM_READY_ARM, 1, &ask);
        kick |= a[i].rev || ask.recheck_ms;
    }
    shim_ep_snap_free(a, size);
    if (kick)
        shim_ep_kick(fd);
    errno = saved;
}

void shim_ep_exposed_poll(const struct pollfd *fds, nfds_t n)
{
    nfds_t i;
    int k;

    for (i = 0; i < n && !shim_ep_priv_maybe(fds[i].fd); i++)
        ;
    if (i == n)
        return;     /* (an MPI progress loop polls its sockets, not its set) */
    for (k = 0; k < SHIM_EP_PRIV_MAX; k++) {
        int e = __atomic_load_n(&shim_ep_priv[k], __ATOMIC_RELAXED) - 1;

        for (i = 0; e >= 0 && i < n; i++)
            if (fds[i].fd == e) {
                shim_ep_exposed(e);
                break;
            }
    }
}

void shim_ep_exposed_select(int nfds, const fd_set *r, const fd_set *w, const fd_set *e)
{
    int k;

    for (k = 0; k < SHIM_EP_PRIV_MAX; k++) {
        int fd = __atomic_load_n(&shim_ep_priv[k], __ATOMIC_RELAXED) - 1;

        if (fd >= 0 && fd < nfds && fd < FD_SETSIZE &&
            ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))))
            shim_ep_exposed(fd);
    }
}

/* Look at every claimed registration of epfd (arm: SHIM_READY_*), filling
 * evs up to max from out on. */
static int shim_ep_look(int epfd, struct epoll_event *evs, int out, int max, int arm,
                        shim_ready_ask_t *ask, uint64_t wait, shim_wait_t *ws)
{
    shim_ep_ans_t stack[SHIM_EP_SNAP], *a;
    shim_ep_set_t *s;
    size_t size;
    int n = shim_ep_snap_set(epfd, stack, SHIM_EP_SNAP, &a, &size, 0), i;

    zc_stat_add(ZC_STAT_READY_EP_LOOKS, (uint64_t)n);
    /* A registration the safety net listed (READY LIST) was armed and
     * quiet before: a look of a wait that may sleep asks it with arming,
     * so it leaves the list at once unless it is ready.  Asked without,
     * it stayed listed until a look found nothing ready at all, and a busy
     * loop's every look found something: after one idle spell of
     * SHIM_EP_FULL_MS, each wait asked its thousands of idle ones again
     * (case scale/both, on a loaded machine: 520 asks a wait). */
    for (i = 0; i < n; i++)
        a[i].arm = a[i].arm && arm == SHIM_READY_LOOK && ws->may_sleep ? SHIM_READY_ARM : arm;
    /* an arming look may take a registration off the ready list: an
     * operation on its descriptor from now on (another thread's) puts it
     * back, and one that came meanwhile keeps it there (READY LIST) */
    for (i = 0; i < n; i++) {
        shim_fd_t *f = a[i].arm == SHIM_READY_ARM ? shim_fd_get(a[i].fd) : NULL;

        if (f)
            __atomic_store_n(&f->ep_clean, 1, __ATOMIC_RELEASE);
    }
    for (i = 0; i < n; i++) {
        shim_ep_ask(&a[i], a[i].arm, a[i].arm == SHIM_READY_ARM, ask);
        if (a[i].withdrew && ws->nwithdrew <= SHIM_WAIT_WITHDREW) {
            int k;

            for (k = 0; k < ws->nwithdrew && ws->withdrew[k].fd != a[i].fd; k++)
                ;
            if (k == ws->nwithdrew && k < SHIM_WAIT_WITHDREW) {
                ws->withdrew[k].fd = a[i].fd;
                ws->withdrew[k].events = a[i].events;
            }
            if (k == ws->nwithdrew)
                ws->nwithdrew++;    /* (past the list: the whole set at the end) */
        }
    }
    shim_ep_lock();
    s = shim_ep_set(epfd, 0);
    for (i = 0; i < n && out < max; i++) {
        int merge;
        uint32_t rev = shim_ep_apply(&a[i], wait, out, &merge);

        /* armed and not ready, and nothing done to it since: its wake-up
         * brings it back (READY LIST) */
        if (a[i].arm == SHIM_READY_ARM && a[i].claimed && !a[i].rev && !a[i].recheck &&
            a[i].g->id == a[i].id && shim_fd_get(a[i].fd) &&
            __atomic_load_n(&shim_fd_get(a[i].fd)->ep_clean, __ATOMIC_ACQUIRE))
            shim_ep_clean(a[i].g);
        if (merge >= 0 && merge < out)
            evs[merge].events |= a[i].rev;
        if (a[i].claimed && (rev || (merge >= 0 && merge < out && a[i].rev)))
            shim_ep_nested_due(s);
        if (rev) {
            evs[out].events = rev;
            evs[out].data.u64 = a[i].data;
            out++;
        }
    }
    shim_ep_unlock();
    /* Edge-triggered registrations ready but reported already: the wait
     * may sleep, and their next change must wake it (the kernel's edge
     * comes with every new packet) */
    for (i = 0; arm == SHIM_READY_ARM && !out && i < n; i++)
        if (a[i].quiet)
            shim_ep_arm_next(&a[i], ask);
    shim_ep_snap_free(a, size);
    return out;
}

static int shim_ep_wait(int epfd, struct epoll_event *evs, int max, int timeout,
                        const sigset_t *mask, shim_wait_t *ws)
{
    int64_t deadline = timeout < 0 ? -1 : timeout == 0 ? 0 :
                       shim_now_ns() + (int64_t)timeout * 1000000;
    uint64_t wait = __atomic_add_fetch(&shim_ep.waits, 1, __ATOMIC_RELAXED);
    int netted = 0;     /* the last sleep ended at the net with nothing */

    for (;;) {
        struct timespec left;
        shim_ready_ask_t ask = { 0 };
        int out = 0, pass, r, kept, tmo, capped, spin = shim_wait_spinning(ws);

        /* look, then look and arm; spinning: one look that may withdraw;
         * a zero timeout only looks (nobody would wait for the wake-up) */
        for (pass = 0; pass < (ws->may_sleep ? 2 - spin : 1) && !out; pass++)
            out = shim_ep_look(epfd, evs, out, max, spin ? SHIM_READY_SPIN : pass, &ask, wait, ws);
        if (netted && out)
            zc_stat_add(ZC_STAT_READY_NET_RESCUES, 1);     /* a wake-up that never came */
        netted = 0;
        shim_wait_looked(ws, ask.ring);
        if (out == max) {
            if (timeout == 0 && !mask)
                shim_nowait_passed();   /* a zero-timeout wait: the chain holds (KERNEL SKIP) */
            return out;
        }
        if (!out)
            shim_wait_idle(ws);
        if (spin && !out && shim_wait_kernel_skip(ws))
            continue;       /* the paths' memory only, this time */
        if (out || spin || timeout == 0)
            tmo = 0;
        else if (deadline < 0)
            tmo = -1;
        else {
            shim_left(deadline, &left);
            tmo = (int)(left.tv_sec * 1000 + (left.tv_nsec + 999999) / 1000000);
        }
        if (!out && ask.recheck_ms && (tmo < 0 || tmo > ask.recheck_ms))
            tmo = ask.recheck_ms;
        capped = 0;
        if (!out && tmo != 0 && (tmo < 0 || tmo > SHIM_EP_FULL_MS) && shim_ep_netted(epfd)) {
            tmo = SHIM_EP_FULL_MS;  /* (the loop comes back: the deadline holds) */
            capped = 1;
        }
        if (!out && shim_wait_signalled(ws)) {
            errno = EINTR;
            return -1;
        }
        if (timeout == 0 && !mask && shim_nowait_skip(SHIM_EP_NOWAIT_SIG(epfd)))
            return out;         /* the paths' memory only (KERNEL SKIP) */
        r = zc_real.epoll_pwait(epfd, evs + out, max - out, tmo, mask);
        if (r < 0) {
            if (timeout == 0)
                shim_nowait_asked(SHIM_EP_NOWAIT_SIG(epfd), 0);
            return out ? out : -1;
        }
        if (r == 0 && capped) {
            shim_ep_full_next(epfd);    /* the next look asks them all */
            netted = 1;
        }
        kept = shim_ep_translate_n(evs + out, r, wait, evs, out);
        if (timeout == 0)
            shim_nowait_asked(SHIM_EP_NOWAIT_SIG(epfd), kept == 0);
        if (out + kept || timeout == 0 || (deadline >= 0 && shim_expired(deadline)))
            return out + kept;
    }
}

int shim_ready_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *mask)
{
    shim_wait_t ws;
    int n, saved;

    shim_wait_begin(&ws, timeout != 0);
    if (timeout != 0)
        shim_ep_sleep_enter(epfd);      /* before its first look (QUIET SETS) */
    n = shim_ep_wait(epfd, evs, max, timeout, mask, &ws);
    saved = errno;
    if (timeout != 0)
        shim_ep_sleep_leave(epfd);
    if (ws.spun)
        shim_ep_spun(epfd, &ws);
    if (n >= 0)
        shim_wait_end(&ws, n);
    errno = saved;
    return n;
}

/* A pass-through wait whose translation left nothing while time is left:
 * wait on through the engine (the set holds a claimed registration, or
 * held one) for what remains of timeout_ms since t0_ns. */
int shim_ep_wait_rest(int epfd, struct epoll_event *evs, int max, int timeout_ms,
                      int64_t t0_ns, const sigset_t *mask)
{
    int64_t left;

    if (timeout_ms == 0)
        return 0;
    if (timeout_ms > 0) {
        left = (t0_ns + (int64_t)timeout_ms * 1000000 - shim_now_ns()) / 1000000;
        if (left <= 0)
            return 0;
        timeout_ms = (int)left;
    }
    return shim_ready_epoll_wait(epfd, evs, max, timeout_ms, mask);
}

/* 1 when a wait on epfd must go through the engine (a claimed registration
 * is in the set). */
int shim_ep_has(int epfd)
{
    shim_fd_t *e = shim_fd_get(epfd);

    /* (the count read under the lock could change the moment after as
     * well: a wait that races an epoll_ctl of another thread gets either) */
    return e && e->kind == SHIM_FD_EPOLL && __atomic_load_n(&e->ep_tagged, __ATOMIC_ACQUIRE);
}

/* --- epoll_ctl ------------------------------------------------------------------- */

/* The set is ours to translate from now on (before its first claimed
 * registration reaches the kernel). */
int shim_ep_marked_any;                 /* a set was ever marked SHIM_FD_EPOLL */

static void shim_ep_mark(int epfd)
{
    shim_fd_t *e = shim_fd_get(epfd);

    if (e && e->kind == SHIM_FD_UNKNOWN) {
        __atomic_store_n(&shim_ep_marked_any, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&e->kind, SHIM_FD_EPOLL, __ATOMIC_RELEASE);
    }
}

static int shim_ep_arm_one(int fd, shim_fd_t *f, uint32_t events, int wake);

/* PLAIN UNTIL PAIRED: epoll_ctl of a claimed fd while its registrations
 * are plain: to the kernel as made, recorded.  0 when they are not plain
 * (any more), or no record could be made: the engine's way then. */
static int shim_ep_plain_ctl_(int epfd, int op, int fd, struct epoll_event *ev, int *rc_p)
{
    shim_ep_reg_t *g;
    int created = 0, saved;

    shim_ep_lock();
    if (!__atomic_load_n(&shim_fd_get(fd)->ep_plain, __ATOMIC_ACQUIRE) ||
        ((g = shim_ep_find(epfd, fd)) && g->slot != SHIM_EP_NOSLOT)) {
        shim_ep_unlock();
        return 0;
    }
    if (!g && op != EPOLL_CTL_DEL) {
        if (!(g = shim_ep_new(epfd, fd))) {
            shim_ep_unlock();
            return 0;
        }
        __atomic_add_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
        created = 1;
    }
    *rc_p = zc_real.epoll_ctl(epfd, op, fd, ev);
    saved = errno;
    if (*rc_p == 0 && op == EPOLL_CTL_DEL) {
        if (g)
            shim_ep_drop(g);
    } else if (*rc_p == 0) {
        g->events = ev->events;
        g->data = ev->data.u64;
    } else if (created) {
        shim_ep_drop(g);
    }
    shim_ep_unlock();
    zc_stat_add(ZC_STAT_READY_EP_PLAIN, 1);
    errno = saved;
    return 1;
}

static int shim_ep_adopt_locked(int fd, shim_fd_t *f, int *epfds, int max);

void shim_ep_plain_end(int fd)
{
    shim_fd_t *e = shim_fd_get(fd);
    shim_pin_t pin;
    int epfds[8], n = 0, i, saved = errno;

    if (!e || !__atomic_load_n(&e->ep_plain, __ATOMIC_ACQUIRE))
        return;
    if (!shim_fd_pin(fd, &pin)) {
        __atomic_store_n(&e->ep_plain, 0, __ATOMIC_RELEASE);
        return;
    }
    shim_ep_lock();
    if (__atomic_exchange_n(&e->ep_plain, 0, __ATOMIC_ACQ_REL))
        n = shim_ep_adopt_locked(fd, &pin.f, epfds, 8);
    shim_ep_unlock();
    shim_fd_unpin(&pin);
    /* a wait already asleep on a set of them looks again (and arms) */
    for (i = 0; i < n; i++)
        if (epfds[i] < 0 || __atomic_load_n(shim_ep_sleepers(epfds[i]), __ATOMIC_SEQ_CST))
            shim_ep_kick(epfds[i] < 0 ? -epfds[i] - 1 : epfds[i]);
    errno = saved;
}

/* epoll_ctl on a claimed descriptor (pinned by the caller as *f): the
 * registration is kept in the table and registered with the kernel under
 * its tag.  Returns what epoll_ctl returns (-1 and errno on failure). */
int shim_ep_ctl(int epfd, int op, int fd, struct epoll_event *ev, shim_fd_t *f)
{
    shim_ep_reg_t *g;
    struct epoll_event kev;
    int rc, created = 0, w = -1, revive = 0, keep;

    if (shim_unlikely(__atomic_load_n(&shim_fd_get(fd)->ep_plain, __ATOMIC_ACQUIRE))) {
        if (op != EPOLL_CTL_DEL && (ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE)))
            shim_ep_plain_end(fd);      /* the engine follows a one-shot's state */
        else if (shim_ep_plain_ctl_(epfd, op, fd, ev, &rc))
            return rc;
    }
    /* (asked before the lock, as the wake fd is: the path takes its own) */
    keep = op == EPOLL_CTL_DEL && zc_config.epoll_keep && f->path->ops->kernel_quiet &&
           f->path->ops->kernel_quiet(f);
    if (op != EPOLL_CTL_DEL && f->path->ops->wake_fd)
        w = f->path->ops->wake_fd(f, fd, 0);    /* a wake fd the path has: heard here too */
    shim_ep_mark(epfd);
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (g && g->kept) {         /* KEPT DELETES: deleted, as far as anyone asks */
        if (op != EPOLL_CTL_ADD) {
            shim_ep_unlock();
            errno = ENOENT;
            return -1;
        }
        if (ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE)) {
            shim_ep_kept_gone(g);       /* (an ADD of those made afresh) */
            g = NULL;
        } else {
            revive = 1;
        }
    }
    if (op == EPOLL_CTL_DEL) {
        if (keep && g && g->slot != SHIM_EP_NOSLOT &&
            !(g->events & (EPOLLONESHOT | EPOLLEXCLUSIVE)) && shim_ep_private(epfd)) {
            shim_ep_keep(g);
            shim_ep_unlock();
            zc_stat_add(ZC_STAT_READY_EP_KEPT, 1);
            return 0;
        }
        rc = zc_real.epoll_ctl(epfd, op, fd, ev);
        if (rc == 0 && g)
            shim_ep_drop(g);
        shim_ep_unlock();
        return rc;
    }
    /* ADD of a known registration: the kernel's answer decides (EEXIST: it
     * is live and stays as it is; success: the kernel had forgotten it
     * with a closed descriptor of the same number).  MOD of an unknown one
     * (registered before the descriptor was claimed and not recorded): it
     * gets a slot and our tag too.  Either way the kernel never holds the
     * application's data for a claimed descriptor. */
    if (!g) {
        g = shim_ep_new(epfd, fd);
        created = 1;
        if (g)
            __atomic_add_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
    }
    if (!g || shim_ep_tag(g, shim_ep_parked_slot(epfd, w))) {
        if (g && created)
            shim_ep_drop(g);
        shim_ep_unlock();
        errno = ENOMEM;
        return -1;
    }
    if (created)
        __atomic_sub_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
    kev.events = shim_ep_kernel_events(f, ev->events);
    kev.data.u64 = g->tag;
    if (revive) {
        /* the kernel holds it still, under the same tag */
        if (kev.events != g->kevents && zc_real.epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &kev)) {
            shim_ep_kept_gone(g);       /* the kernel lost it: added afresh */
            shim_ep_unlock();
            return shim_ep_ctl(epfd, op, fd, ev, f);
        }
        shim_ep_unkeep(g);
        zc_stat_add(ZC_STAT_READY_EP_REVIVED, 1);
        rc = 0;
    } else if (op == EPOLL_CTL_MOD && !created && kev.events == g->kevents &&
               zc_config.epoll_keep &&
               !((g->events | ev->events) & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE))) {
        zc_stat_add(ZC_STAT_READY_EP_MOD_SAME, 1);  /* level-triggered, as it was */
        rc = 0;
    } else {
        rc = zc_real.epoll_ctl(epfd, op, fd, &kev);
    }
    if (rc == 0) {
        g->events = ev->events;
        g->kevents = kev.events;
        g->data = ev->data.u64;
        g->disabled = 0;
        shim_ep_dirty(g);
        g->change = UINT64_MAX;
        if (w >= 0 && !shim_ep_aux_add(g, w))
            w = -2;
    } else if (created) {
        int saved = errno;

        shim_ep_drop(g);
        errno = saved;
    }
    shim_ep_unlock();
    if (w == -2)
        f->path->ops->wake_fd(f, fd, 1);
    if (rc == 0 && shim_ep_private(epfd) &&
        !__atomic_load_n(shim_ep_sleepers(epfd), __ATOMIC_SEQ_CST)) {
        zc_stat_add(ZC_STAT_READY_EP_QUIET, 1);     /* QUIET SETS */
    } else if (rc == 0) {
        int saved = errno;

        if (shim_ep_arm_one(fd, f, ev->events, w >= 0))
            shim_ep_kick(epfd);
        errno = saved;
    }
    return rc;
}

/* Ready now where the kernel does not look, or only once the path's
 * wake-up is armed: arm it for this registration (events: the
 * application's; wake: the set listens to the path's wake fd).  1 when a
 * wait that already sleeps on the set must be woken (KICK): it is ready
 * (an EPOLLONESHOT re-armed by another thread while the wait's own arming
 * look skipped it as fired), or the path asked for another look. */
static int shim_ep_arm_one(int fd, shim_fd_t *f, uint32_t events, int wake)
{
    uint32_t want = events & ~(uint32_t)SHIM_EP_KERNEL_KEEP;
    shim_ready_ask_t ask = { .wake_listening = wake };

    return ((uint16_t)f->path->ops->revents(f, fd, (short)(want | EPOLLRDHUP), -1,
                                            SHIM_READY_ARM, &ask) &
            (want | (events & EPOLLRDHUP) | EPOLLERR | EPOLLHUP)) ||
           ask.recheck_ms;
}

/* epoll_ctl on a descriptor no path claims, before the real call: a
 * registration made while it was claimed first gets the application's
 * events and data back in the kernel (as a wait would do), then leaves the
 * table, so the application's call meets exactly the registration it made
 * and the kernel answers it.  Without this, a MOD made after the release
 * went to the kernel alone and a wait later restored the events of the
 * first registration (PostgreSQL's backend then spun on EPOLLOUT). */
void shim_ep_unclaimed(int epfd, int fd)
{
    shim_ep_reg_t *g;

    if (!__atomic_load_n(&shim_ep.fds, __ATOMIC_RELAXED) || !shim_ep_fd_may_have(fd))
        return;     /* (most calls: no lock, no table walk) */
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (g && g->slot != SHIM_EP_NOSLOT)
        shim_ep_release(g, -1);
    shim_ep_unlock();
}

/* The application's epoll_ctl on an unclaimed descriptor succeeded: while
 * the descriptor is an unconnected stream socket a path may claim at its
 * connect, keep a record of the registration (REGISTERED BEFORE CLAIMED). */
void shim_ep_plain_ctl(int epfd, int op, int fd, const struct epoll_event *ev)
{
    shim_fd_t *f = shim_fd_get(fd);
    shim_ep_reg_t *g;

    if (!f || !f->unconnected || f->kind != SHIM_FD_SOCKET)
        return;
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (op == EPOLL_CTL_DEL) {
        if (g)
            shim_ep_drop(g);
    } else if (ev) {
        if (!g && (g = shim_ep_new(epfd, fd)))
            __atomic_add_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
        if (g && g->slot == SHIM_EP_NOSLOT) {
            g->events = ev->events;
            g->data = ev->data.u64;
        }
    }
    shim_ep_unlock();
}

/* fd was just claimed (shim_fd_claim): its recorded registrations take our
 * tag, so the readiness engine asks its path from now on. */
void shim_ep_claimed(int fd)
{
    shim_pin_t pin;

    if (!__atomic_load_n(&shim_ep.nplain, __ATOMIC_RELAXED) ||
        __atomic_load_n(&shim_fd_get(fd)->ep_plain, __ATOMIC_ACQUIRE) || !shim_fd_pin(fd, &pin))
        return;
    shim_ep_lock();
    if (!__atomic_load_n(&shim_fd_get(fd)->ep_plain, __ATOMIC_ACQUIRE))
        shim_ep_adopt_locked(fd, &pin.f, NULL, 0);      /* (plain: shim_ep_plain_end) */
    shim_ep_unlock();
    shim_fd_unpin(&pin);
}

/* fd's recorded plain registrations take our tag (lock held; f: fd
 * pinned).  Up to max of their sets into epfds (-epfd - 1 for a set not
 * private: looked at from outside too); returns how many. */
static int shim_ep_adopt_locked(int fd, shim_fd_t *f, int *epfds, int max)
{
    shim_ep_fdl_t *l = shim_ep_fdl(fd, 0);
    shim_ep_reg_t *g, *next;
    int n = 0;

    for (g = l ? l->head : NULL; g; g = next) {
        struct epoll_event kev;

        next = g->fnext;
        if (g->slot != SHIM_EP_NOSLOT)
            continue;
        shim_ep_mark(g->epfd);
        if (shim_ep_tag(g, SHIM_EP_NOSLOT)) {
            shim_ep_drop(g);     /* stays plain in the kernel: the copy path's waits */
            continue;
        }
        __atomic_sub_fetch(&shim_ep.nplain, 1, __ATOMIC_RELAXED);
        kev.events = shim_ep_kernel_events(f, g->events);
        kev.data.u64 = g->tag;
        if (zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, fd, &kev)) {
            shim_ep_drop(g);    /* the set let it go meanwhile */
            continue;
        }
        g->kevents = kev.events;
        g->change = UINT64_MAX;
        zc_stat_add(ZC_STAT_READY_EP_ADOPTED, 1);
        if (n < max)
            epfds[n++] = shim_ep_private(g->epfd) ? g->epfd : -g->epfd - 1;
    }
    return n;
}

/* Socket fd is closing (still open): its registrations go.  The kernel
 * drops them with the file; but the library may keep the file open past
 * the application's close (a lingering socket posted to the peer, a
 * hand-over in flight), and a registration left in the kernel would then
 * report, under a tag nobody holds, for as long as the file lives (HAProxy
 * spun on millions of them): the tagged ones are deleted from the kernel
 * first, while the number still names the file. */
void shim_ep_fd_closed(int fd)
{
    shim_ep_fdl_t *l;
    int saved = errno;

    if (!__atomic_load_n(&shim_ep.fds, __ATOMIC_RELAXED) || !shim_ep_fd_may_have(fd))
        return;     /* (most closes: no lock) */
    shim_ep_lock();
    while ((l = shim_ep_fdl(fd, 0)) && l->head) {
        if (l->head->kept) {
            shim_ep_kept_gone(l->head);
            continue;
        }
        if (l->head->slot != SHIM_EP_NOSLOT)
            zc_real.epoll_ctl(l->head->epfd, EPOLL_CTL_DEL, fd, NULL);
        shim_ep_drop(l->head);
    }
    shim_ep_unlock();
    errno = saved;
}

/* An epoll descriptor is closing: forget its set. */
void shim_ep_forget_fd(int epfd)
{
    shim_ep_set_t *s;

    shim_ep_lock();
    s = shim_ep_set(epfd, 0);
    if (s) {
        shim_ep_fdl_t *l, *ln;
        shim_ep_reg_t *g, *gn;
        shim_ep_auxref_t *r, *rn;

        while (s->head)
            shim_ep_drop(s->head);
        if (s->kick1)
            shim_fd_internal_close(s->kick1 - 1);
        HASH_ITER(hh, s->auxrefs, r, rn)
            shim_ep_auxref_free(s, r, 0);   /* (the set goes with its descriptor) */
        /* plain records of the set too */
        HASH_ITER(hh, shim_ep.fds, l, ln)
            for (g = l->head; g; g = gn) {
                gn = g->fnext;
                if (g->epfd == epfd)
                    shim_ep_drop(g);
            }
        HASH_DEL(shim_ep.sets, s);
        if (shim_ep.last_set == s)
            shim_ep.last_set = NULL;
        zc_pool_free(s, sizeof(*s));
    }
    shim_ep_unlock();
}
