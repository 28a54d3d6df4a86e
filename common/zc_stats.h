/* Named statistics counters.
 *
 * The shim's counters are an enum with a parallel name table (one X-macro),
 * updated with relaxed atomics from any context (hooks, signal handlers).
 * Other modules publish their counters as sources (name table plus getter),
 * registered by the shim's initialisation; the report and zcsock_stat_get()
 * see every source.  Nothing here allocates. */
#ifndef ZC_STATS_H
#define ZC_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "zc_real.h"

/* X(id, name, doc) */
#define ZC_STAT_LIST(X)                                                                  \
    X(SOCKETS_CREATED, "sockets.created", "sockets made by socket() and socketpair()")   \
    X(SOCKETS_ACCEPTED, "sockets.accepted", "connections returned by accept/accept4")    \
    X(COPY_SEND_CALLS, "path.copy.send_calls", "socket sends that took the copy path")   \
    X(COPY_SEND_BYTES, "path.copy.send_bytes", "bytes sent by the copy path")            \
    X(COPY_RECV_CALLS, "path.copy.recv_calls", "socket receives that took the copy path") \
    X(COPY_RECV_BYTES, "path.copy.recv_bytes", "bytes received by the copy path")        \
    X(WHY_NO_FAST_PATH, "copy_why.no_fast_path",                                         \
      "stream socket calls copied because this build has no faster path for them")       \
    X(WHY_NOT_STREAM, "copy_why.not_stream",                                             \
      "calls on datagram, seqpacket or raw sockets (only streams are accelerated)")      \
    X(WHY_UNTRACKED, "copy_why.untracked_fd",                                            \
      "calls on sockets the library did not see created (inherited or received)")        \
    X(WHY_DECLINED, "copy_why.declined",                                                 \
      "stream socket calls on connections the local path declined to pair "              \
      "(local.declined.<reason> counts why)")                                            \
    X(FD_BEYOND_TABLE, "fd.beyond_table", "calls on descriptors above the state table")  \
    X(PROC_FORKS, "proc.forks", "fork() calls")                                          \
    X(SIG_DEFERRED, "proc.signals_deferred", "signals whose handler waited for the end of " \
      "a critical section of ours (SIGDEFER, shim/hooks_sig.c)")                          \
    X(PROC_EXECS, "proc.execs", "exec calls made")                                      \
    X(PROC_FD_WALKS, "proc.fd_walks", "walks of a process's descriptor table "          \
      "(/proc/PID/fd) to prove that it holds a socket (pairing, hand-over, fork "        \
      "checks): once per peer process and new sockets, not per connection "              \
      "(SOCKETS SEEN, shim/shim_proc.c)")                                                \
    X(LOCAL_SEND_CALLS, "path.local.send_calls", "sends that wrote to a local ring")     \
    X(LOCAL_SEND_BYTES, "path.local.send_bytes", "bytes sent through local rings")       \
    X(LOCAL_RECV_CALLS, "path.local.recv_calls", "receives that read from a local ring") \
    X(LOCAL_RECV_BYTES, "path.local.recv_bytes", "bytes received through local rings")   \
    X(LOCAL_PAIRED_SERVER, "local.paired.accepted",                                      \
      "accepted connections paired with a zcsock client")                                \
    X(LOCAL_PAIRED_CLIENT, "local.paired.connected",                                     \
      "connections whose zcsock server's channel this client attached")                  \
    X(LOCAL_UNMAPS, "local.unmaps", "system calls that unmapped the channels of "     \
      "closed connections (closed channels wait, up to 32 of them, and neighbours go "   \
      "in one call)")                                                                    \
    X(LOCAL_UNMAPPED, "local.unmapped", "channels of closed connections unmapped")       \
    X(LOCAL_DECLINED, "local.declined", "connections that stay on the kernel path "      \
      "(local.declined.<reason> says why)")                                              \
    X(LOCAL_SHORT_BULK, "local.short_bulk", "connections left to the kernel after a run "  \
      "of short ones (local.declined.learned_short) that moved 64 KiB or more in one call: " \
      "each ends its destination's or listener's run, so the next connections are tracked "  \
      "for pairing again (ZCSOCK_LOCAL_SHORT_SAMPLE)")                                        \
    X(LOCAL_DEST_KNOWN, "local.dest_known", "connections declined without a sock_diag "  \
      "query or beacon probe (plain from their connect when made after): a connection "   \
      "of this process to the same destination found it not local, another user's or "   \
      "without the library less than a second before (counted under that reason too)")   \
    X(LOCAL_PAIR_LEARNED, "local.pair_learned", "connections that wait past "       \
      "ZCSOCK_LOCAL_PAIR_AFTER before pairing: earlier connections to the same "     \
      "destination or through the same listener closed before pairing paid "       \
      "(ZCSOCK_LOCAL_PAIR_LEARN)")                                                   \
    X(LOCAL_OFFER_ONCE, "local.offer_once", "a server's connections that offered once "   \
      "only: the listener's last 8 connections in a row found no announcement at their "   \
      "first offer (local clients without the library; ZCSOCK_LOCAL_PAIR_LEARN)")         \
    X(LOCAL_STATE_DEFER_PENDING, "local.state.defer_pending", "connection state changes " \
      "(shim/paths/local/state.c): a client's connection announced once it paid")      \
    X(LOCAL_STATE_DEFER_PLAIN, "local.state.defer_plain", "a client's connection "        \
      "declined when it paid, or gone before")                                           \
    X(LOCAL_STATE_OFFER_PAIRED, "local.state.offer_paired", "a server's connection "      \
      "paired by its offer")                                                             \
    X(LOCAL_STATE_OFFER_PLAIN, "local.state.offer_plain", "a server's connection "       \
      "declined, or gone before its offer")                                              \
    X(LOCAL_STATE_PENDING_PAIRED, "local.state.pending_paired", "a client's connection " \
      "paired by the offer it took")                                                     \
    X(LOCAL_STATE_PENDING_PLAIN, "local.state.pending_plain", "an announced client's "    \
      "connection that found no offer, or gave it up")                                   \
    X(LOCAL_STATE_PAIRED_PLAIN, "local.state.paired_plain", "a paired connection "       \
      "handed back to the kernel")                                                       \
    X(LOCAL_STATE_REFUSED, "local.state.refused", "state changes the table does not "    \
      "allow, refused (a bug: said once; a checked build aborts)")                       \
    X(LOCAL_INHERITED, "local.inherited",                                               \
      "connections this image took over from the one before exec")                      \
    X(LOCAL_HANDED_OVER, "local.handed_over",                                           \
      "paired sockets passed with SCM_RIGHTS together with their channel")              \
    X(LOCAL_HANDED_BACK, "local.handed_back", "connections this process handed back to "  \
      "the kernel (exec or SCM_RIGHTS to a program without zcsock, ancillary data)")     \
    X(LOCAL_RETURNED_BYTES, "local.returned_bytes", "bytes moved from the ring to the "   \
      "kernel socket after the peer handed the connection back")                        \
    X(LOCAL_LINGERED, "local.lingered", "paired sockets closed with bytes of ours unread "  \
      "in the ring, left alive in the peer's mailbox in case it hands the connection back") \
    X(LOCAL_LINGER_PUMPS, "local.linger_pumps", "hand-backs whose closed peer's unread "  \
      "ring bytes a pump process gave to the kernel through its lingering socket")       \
    X(LOCAL_PEER_PUMPS, "local.peer_pumps", "hand-backs that started a pump process for "  \
      "the bytes an alive peer left unread in the ring (it gives them to the kernel if "  \
      "the peer has not begun to within 50 ms)")                                          \
    X(LOCAL_BELLS_LEFT, "local.handback_bells_left", "doorbell bytes a hand-back left "  \
      "in the kernel stream behind unread bytes from before the peer's switch-over, "   \
      "where the new reader takes them for data (warned)")                              \
    X(LOCAL_LOST_BYTES, "local.handback_lost_bytes", "ring bytes a hand-back could not "  \
      "give to the kernel: the peer had closed without a lingering socket (warned)")      \
    X(LOCAL_SWITCHES, "local.switches", "sending directions switched to the ring")       \
    X(LOCAL_DOORBELLS, "local.doorbells", "doorbell bytes sent to a sleeping peer")      \
    X(LOCAL_SLEEPS, "local.sleeps", "blocking calls that slept for the peer")            \
    X(LOCAL_SPINS_PAID, "local.spins_paid", "blocking waits the peer ended while this "   \
      "process spun (no sleep)")                                                        \
    X(LOCAL_SPINS_SLEPT, "local.spins_slept", "spins that ended in a sleep all the same") \
    X(READY_SPINS_PAID, "ready.spins_paid", "poll/select/epoll waits over claimed "    \
      "descriptors that an event ended while the thread spun (no sleep, no wake-up "    \
      "signal from the peer)")                                                          \
    X(READY_SPINS_SLEPT, "ready.spins_slept", "poll/select/epoll spins that ended in "  \
      "a sleep all the same")                                                           \
    X(READY_EP_STALE_TAGS, "ready.ep_stale_tags", "epoll events under a tag no "       \
      "registration of this process holds any more (a deleted or closed one, or a "     \
      "forked sibling's), dropped instead of reaching the application")                \
    X(READY_NET_RESCUES, "ready.net_rescues", "readiness waits the safety net "          \
      "ended (a sleep over a path's descriptors lasts at most 100 ms) whose next look "   \
      "found one to report: a wake-up that never came, 100 ms late instead of the "      \
      "timeout, or (edge-triggered EPOLLOUT) a change no send waited for")              \
    X(READY_KERNEL_SKIPS, "ready.kernel_skips", "zero-timeout poll/select/epoll "  \
      "waits that a thread repeated with nothing else done in between, answered from " \
      "the paths' memory without asking the kernel, whose last answer, less than "   \
      "ZCSOCK_POLL_KERNEL_US old, was nothing ready")                                 \
    X(READY_KERNEL_SKIPS_PLAIN, "ready.kernel_skips_plain", "the same for zero-timeout " \
      "epoll waits over a set without claimed connections, in a loop that also waits " \
      "over claimed ones (UCX polls two sets in turn): answered nothing without "      \
      "asking the kernel")                                                             \
    X(READY_EP_LOOKS, "ready.ep_looks", "registrations of claimed descriptors "       \
      "an epoll wait asked their path about (all of a small set, the ready list of "  \
      "a large one: ZCSOCK_EPOLL_SCAN_MAX)")                                           \
    X(READY_EP_SPUN, "ready.ep_spun", "registrations an epoll wait asked again when "  \
      "its spin ended, to give back wake-ups the spin withdrew (those it withdrew, "    \
      "not the whole set, unless more than 32)")                                        \
    X(READY_EP_KICKS, "ready.ep_kicks", "epoll sets woken because an ADD or MOD "    \
      "registered a claimed descriptor that was ready where the kernel does not look " \
      "(its ring): a wait already sleeping on the set looks again")                   \
    X(READY_EP_QUIET, "ready.ep_quiet", "epoll ADDs and MODs of claimed descriptors "  \
      "on a set made and watched by this process alone, with no wait of it sleeping "  \
      "there: neither armed nor kicked (the next wait's look arms them)")            \
    X(READY_EP_KEPT, "ready.ep_kept", "epoll DELs of paired connections on a set "     \
      "made and watched by this process alone, kept in the kernel instead (KEPT "      \
      "DELETES): the application no longer sees them, a later ADD takes them back "    \
      "without an epoll_ctl")                                                          \
    X(READY_EP_REVIVED, "ready.ep_revived", "epoll ADDs that took a kept registration " \
      "back (an epoll_ctl MOD only when the kernel events differ)")                   \
    X(READY_EP_MOD_SAME, "ready.ep_mod_same", "level-triggered epoll MODs of claimed "  \
      "descriptors that asked the kernel for the events it already had: no epoll_ctl") \
    X(READY_EP_KEPT_GONE, "ready.ep_kept_gone", "kept registrations deleted from the " \
      "kernel after all: an event on one (a doorbell, EOF or reset), its set seen "    \
      "from outside (fork, exec, dup, poll), its connection handed back or closed")    \
    X(READY_EP_WAKE_UNPARKED, "ready.ep_wake_unparked", "epoll registrations whose "\
      "wake fd was still in the set from an earlier registration of the descriptor "   \
      "(parked at its DEL or close): taken back without an epoll_ctl ADD")             \
    X(READY_EP_WAKE_STRIPPED, "ready.ep_wake_stripped", "times an epoll_ctl of the "    \
      "application's met ELOOP and every wake fd left every set (each is one level of " \
      "epoll nesting), the call then tried again: their connections take doorbell "   \
      "bytes from then on")                                                            \
    X(READY_EP_ADOPTED, "ready.ep_adopted", "epoll registrations made before their "   \
      "socket was claimed (before its connect), or while its connection had not "      \
      "paired (ready.ep_plain), taken over at the claim or the pairing")               \
    X(READY_EP_PLAIN, "ready.ep_plain", "epoll_ctl calls on a connection that had not " \
      "paired (an accepted one before its offer, a client's before its announcement), " \
      "passed to the kernel as the application made them and only recorded "            \
      "(ZCSOCK_EPOLL_PLAIN): its waits cost what the kernel's do")                       \
    X(LOCAL_FUTEX_WAKES, "local.futex_wakes", "peers woken from a blocking sleep")       \
    X(LOCAL_EFD_WAKES, "local.efd_wakes", "peers woken from a poll/select/epoll wait "   \
      "through their wake-up eventfd (no doorbell byte)")                               \
    X(LOCAL_PICKUP_DEFERRED, "local.pickup_deferred", "offers a client found while "  \
      "another of its threads held the other direction's lock (a blocking send or "  \
      "receive in the kernel): taken up at a later call, so that the channel never "  \
      "appears under a thread's feet")                                               \
    X(LOCAL_EFD_FETCHED, "local.efd_fetched", "peers' wake-up eventfds fetched "         \
      "(pidfd_getfd, once per connection)")                                             \
    X(LOCAL_WAKES_AVOIDED, "local.wakes_avoided", "ring writes that needed no wake-up "  \
      "signal: the peer was not waiting (busy, or spinning)")                           \
    X(LOCAL_XCHG_LENT, "local.xchg.bytes_lent", "bytes sent as lent 2 MiB units "      \
      "(page exchange) instead of through the ring")                                     \
    X(LOCAL_XCHG_MAPPED, "local.xchg.bytes_mapped", "lent bytes received by mapping "   \
      "the unit in place (no copy)")                                                     \
    X(LOCAL_XCHG_COPIED, "local.xchg.bytes_copied", "lent bytes received by one copy "  \
      "out of the unit (destination not a placed, aligned unit, a peek, a part)")        \
    X(LOCAL_XCHG_UNAVAILABLE, "local.xchg.unavailable", "connections whose sends "    \
      "could not lend at all: no 2 MiB shared pages, or no memory events (ZCSOCK_DEBUG "  \
      "says why)")                                                                       \
    X(LOCAL_XCHG_NOT_PLACED, "local.xchg.not_placed", "2 MiB-aligned units of a send "  \
      "that were not placed huge memory (sent through the ring)")                        \
    X(LOCAL_XCHG_RECLAIMED, "local.xchg.reclaimed", "received units mapped in place "  \
      "that a ring receive then overwrote whole: given their own memory back first "     \
      "instead of copying each 4 KiB page on write")                                     \
    X(LOCAL_XCHG_REWRITTEN, "local.xchg.rewritten", "units refused because the "        \
      "application rewrote them since they were lent: a refilled buffer goes through "   \
      "the ring until freed")                                                            \
    X(LOCAL_XCHG_BUDGET, "local.xchg.budget", "units refused by the cache's limits, for " \
      "want of descriptors, or because ZCSOCK_PDC_SEND_BUDGET bytes lent are unread "    \
      "(sent through the ring)")                                                         \
    X(LOCAL_XCHG_PROC_BUDGET, "local.xchg.proc_budget", "of them, sends whose units "   \
      "did not fit because the process's connections together hold "                      \
      "ZCSOCK_PDC_SEND_BUDGET lent bytes unread (each connection within its own)")        \
    X(LOCAL_XCHG_BUDGET_WAITS, "local.xchg.budget_waits", "naps of blocking sends "   \
      "waiting for the receiver to read lent bytes (ZCSOCK_PDC_SEND_BUDGET)")            \
    X(LOCAL_XCHG_NO_TRANSPORT, "local.xchg.no_transport", "lends given up because the " \
      "peer holds no unit transport of ours or it was full (sent through the ring)")     \
    X(LOCAL_XCHG_TOO_SMALL, "local.xchg.too_small", "sends of 256 KiB to 2 MiB, "     \
      "shorter than one exchange unit (through the ring)")                               \
    X(LOCAL_XCHG_UNALIGNED, "local.xchg.unaligned", "sends of 2 MiB or more that "     \
      "hold no whole 2 MiB-aligned unit (through the ring)")                             \
    X(LOCAL_XCHG_COST, "local.xchg.cost", "units not lent yet because lending one "   \
      "the first time costs more, so far, than the ring passes its bytes took "        \
      "(ZCSOCK_EXCHANGE_UNIT_US; sent through the ring)")                                \
    X(LOCAL_XCHG_APP, "local.xchg.app", "units the application mapped something over "  \
      "or changed the protection of (mmap MAP_FIXED, mremap, shmat, mprotect): never "  \
      "lent, frozen or mapped over until freed (sent through the ring)")                  \
    X(LOCAL_XCHG_PINNED, "local.xchg.pinned", "units compared rather than frozen, and "   \
      "received units copied rather than mapped in place, because a library that pins " \
      "memory for the kernel or a device is loaded (io_uring, RDMA verbs, CUDA)")        \
    X(LOCAL_XCHG_POOL_DRY, "local.xchg.pool_dry", "units copied because the hugetlb "   \
      "pool had no free page: for a unit file (sent through the ring) or for a "       \
      "received unit's copy-on-write (copied out instead of mapped)")                    \
    X(LOCAL_PROTO_ERRORS, "local.proto_errors",                                          \
      "channels found corrupted (the connection then reads as reset)")                  \
    X(LOCAL_MBOX_REFUSED, "local.mailbox.refused", "mailbox messages refused: not of "  \
      "this user, not a record, or a record whose poster did not pass the socket")      \
    X(LOCAL_MBOX_FOREIGN, "local.mailbox.foreign_fds", "descriptors passed to the "     \
      "mailbox that were not a record's, dropped without a close that can block")      \
    X(LOCAL_MBOX_EVICTED, "local.mailbox.evicted", "records whose socket had not come, "\
      "dropped from the full table (the oldest of the poster with the most) or after "  \
      "10 s")                                                                            \
    X(LOCAL_MBOX_HANDED_BACK, "local.mailbox.handed_back", "connections of evicted "    \
      "records handed back to the kernel (their socket then reads as a plain one)")     \
    X(LOCAL_MBOX_LOST, "local.mailbox.lost", "evicted records dropped without a "       \
      "hand-back (too many at once, or the copy of their socket was gone): a socket "   \
      "that still comes reads as a plain one with the ring's bytes stranded")           \
    X(LOCAL_MBOX_SLOW, "local.mailbox.slow", "looks into the mailbox that stopped at " \
      "their time bound of 100 ms (connections held or waiting for the next look)")

enum {
#define ZC_STAT_ENUM(id, name, doc) ZC_STAT_##id,
    ZC_STAT_LIST(ZC_STAT_ENUM)
#undef ZC_STAT_ENUM
#define ZC_STAT_CALLS_ENUM(ret, name, params, mandatory) ZC_STAT_CALLS_##name,
    ZC_REAL_SOCKET_LIST(ZC_STAT_CALLS_ENUM)
#undef ZC_STAT_CALLS_ENUM
    ZC_STAT_COUNT
};

/* Counters are kept per thread: each of the first ZC_STATS_BLOCKS threads
 * that counts gets a block of its own (static memory, so the counts of a
 * thread that exited stay readable) and adds to it without a locked
 * instruction; later threads share zc_stats with atomic adds.  Readers sum.
 * A signal handler counting in the middle of its own thread's update can
 * lose that one count; nothing else is lost. */
#define ZC_STATS_BLOCKS 256

typedef struct zc_stats_block {
    uint64_t v[ZC_STAT_COUNT];
} __attribute__((aligned(64))) zc_stats_block_t;

#define ZC_STATS_SHARED ((zc_stats_block_t *)1)

/* Every counter of the shim, in whole pages of their own: a live segment
 * (zc_live.h) maps its file over them, so that `zcsock stat` reads the
 * counts as they move, at no cost to the counting. */
#define ZC_STATS_AUX 192    /* named counters of the modules' own (zc_stats_aux) */
#define ZC_STATS_AUX_NAME 48 /* the longest key, its NUL included (ZC_LIVE_NAME_LEN) */

typedef struct zc_stats_store {
    uint64_t shared[ZC_STAT_COUNT] __attribute__((aligned(64)));  /* threads past the blocks */
    uint32_t blocks_used __attribute__((aligned(64)));  /* claimed so far (may exceed) */
    uint32_t naux;                                      /* aux slots named */
    uint64_t aux[ZC_STATS_AUX] __attribute__((aligned(64)));
    /* (from a page of their own: a fork child that zeroes the first
     * thread's counts copies that page only, FORK PAGES in zc_real.h) */
    zc_stats_block_t blocks[ZC_STATS_BLOCKS] __attribute__((aligned(4096)));
} zc_stats_store_t;

#define ZC_STATS_STORE_SIZE ((sizeof(zc_stats_store_t) + 4095) & ~(size_t)4095)

typedef union zc_stats_store_pages {
    zc_stats_store_t s;
    char pages[ZC_STATS_STORE_SIZE];
} __attribute__((aligned(4096))) zc_stats_store_pages_t;

extern zc_stats_store_pages_t zc_stats_store;
#define zc_stats (zc_stats_store.s.shared)
extern __thread zc_stats_block_t *zc_stats_tls;

/* First count of this thread: a block of its own, or ZC_STATS_SHARED. */
zc_stats_block_t *zc_stats_block_claim(void);

static inline void zc_stat_add(unsigned id, uint64_t n)
{
    zc_stats_block_t *b = zc_stats_tls;

    if (__builtin_expect(!b, 0))
        b = zc_stats_block_claim();
    if (__builtin_expect(b == ZC_STATS_SHARED, 0)) {
        __atomic_fetch_add(&zc_stats[id], n, __ATOMIC_RELAXED);
        return;
    }
    /* only this thread writes its block: a plain add, made of relaxed
     * atomics so that concurrent readers see whole values */
    __atomic_store_n(&b->v[id], __atomic_load_n(&b->v[id], __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

/* The sum over every thread. */
uint64_t zc_stat_read(unsigned id);

/* A module's counters: visit(arg, emit, ctx) calls emit(ctx, key, value)
 * once per counter, keys in full ("pdc.hits"); hook-safe, lock-free. */
typedef void (*zc_stats_emit_func_t)(void *ctx, const char *name, uint64_t value);
typedef struct zc_stats_source {
    void (*visit)(void *arg, zc_stats_emit_func_t emit, void *ctx);
    void *arg;
} zc_stats_source_t;

/* Register src (kept by pointer; static storage).  Returns 0 or -ENOSPC. */
int zc_stats_source_add(const zc_stats_source_t *src);

/* Zero the shim's own counters (fork child). */
void zc_stats_reset(void);

/* The key of counter id (< ZC_STAT_COUNT). */
const char *zc_stat_name(unsigned id);

/* A counter of a module's own, kept with the shim's (so live, in the
 * report, and readable by zc_stats_get) under name (static storage; keys
 * in full, "local.declined.short"): add to it with atomics.  Reported when
 * not zero.  Never NULL: past ZC_STATS_AUX names, a slot nobody reads. */
uint64_t *zc_stats_aux(const char *name);

/* The name of aux slot i (< the store's naux), or NULL. */
const char *zc_stats_aux_name(unsigned i);

/* Told when an aux name is added (zc_live: its file names it too). */
extern void (*zc_stats_aux_named)(unsigned i, const char *name);

/* Look up a counter by key in every source.  Returns 0 or -ENOENT. */
int zc_stats_get(const char *name, uint64_t *value_p);

/* 1 when the process did any socket work worth reporting. */
int zc_stats_any_socket_activity(void);

/* Format the whole report into buf: a header line naming `when`, then
 * `key: value` lines grouped by their first component, each group after a
 * `# group` comment line; zero counters only when zeros.  Returns its
 * length. */
size_t zc_stats_format(char *buf, size_t size, const char *when, int zeros);

#endif
