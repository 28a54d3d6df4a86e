/* The local path: wake-up file descriptors for poll/select/epoll waiters.
 *
 * A receiver that sleeps in poll, select or epoll used to be woken by one
 * doorbell byte through the kernel socket: the TCP (or AF_UNIX) stack on the
 * sender's side, a drain on the receiver's.  On this kind of machine that
 * costs about as much as the kernel's own round trip (`make bench`: the
 * epoll ping-pong's "bytes" column, README Performance).  Instead each side
 * of a connection may offer a wake-up descriptor of its own, which the
 * readiness engine puts in every wait over the connection (epoll:
 * registered edge-triggered in the application's set under a tag the
 * application never sees; poll/select: an extra entry, emptied when it
 * fires).  That descriptor is an epoll instance holding nothing of ours.
 * The peer fetches it once (pidfd_getfd), adds to it an eventfd of its own
 * (edge-triggered), keeps only that eventfd, and for an announcement of
 * the wake-up kind writes it instead of sending a byte: the write readies
 * our epoll instance, which readies every wait listening to it.
 *
 * Why the writer's own eventfd (up to 2026-11-30 the peer wrote the
 * waiter's eventfd): a write to an eventfd blocks when the count would pass
 * 2^64 - 2 and the file is not O_NONBLOCK, and both were the waiter's to
 * set (the count by writing, the flag with F_SETFL on its copy: one open
 * file), so a hostile peer could stop the victim's event loop inside a send
 * for as long as it liked (issue 30: every wait a peer can cause is bounded
 * by the victim).  Now the eventfd written is private to the writer,
 * non-blocking and never read: no one else can fill it or make it block.
 * The waiter holds only the epoll instance, which a write cannot block on,
 * and a waiter that scribbles in its own instance only wakes itself.
 * (A datagram pair sent with MSG_DONTWAIT was tried: safe too, but each
 * wake-up took 5-7 us more here, in the kernel's socket wake-up.)
 *
 * Who may announce the wake-up kind (lp_efd_kind): a consumer that alone
 * holds its side (c->sole: every waiter is one of our threads, and every
 * poll/epoll wait of ours listens to its descriptor once it exists), whose
 * peer acknowledged having added its eventfd to this very instance
 * (efd_ack == efd_gen in the peer's shared side words), and only into an
 * empty announcement word (local_ring_rx_wait_prepare_kind): a socket or
 * futex announcement standing there may belong to a waiter that does not
 * listen, and keeps its kind.
 *
 * Retiring (lp_efd_retire): a producer whose side stops being ours alone
 * (fork, exec, SCM_RIGHTS) may hand its role to a process without the
 * eventfd.  It withdraws its acknowledgement, then claims and rings any
 * wake-up announcement standing.  A consumer that announced meanwhile
 * re-checks the acknowledgement after its announcement (lp_rx_arm: store,
 * fence, load against the retirer's store, fence, claim), so a wake-up
 * announcement is never left to a producer that cannot ring it.
 *
 * Trust: the peer names the process and descriptor; the producer fetches
 * only from the process the channel header names as the peer side (in this
 * very process only a descriptor of the library's own, lp_fetch_fd), and
 * keeps nothing of what it fetched: the add fails unless it is an epoll
 * instance, and the copy is closed at once.  A producer that cannot fetch
 * or add (no ptrace permission over the peer, seccomp, descriptors or
 * epoll watches running out) never acknowledges, and the peer keeps
 * announcing doorbell bytes. */
#include "lp_int.h"
#include "efd.h"
#include "bell.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>


/* Our wake-up descriptor for poll/epoll waiters on c (an epoll instance
 * the peer adds its eventfd to), made and offered at the first wait that
 * can listen to it; -1 when there is none. */
static int lp_efd_wake_fd(lp_conn_t *c)
{
    lp_side_t *me;
    uint32_t gen;
    int fd;

    if (c->efd.fd >= 0)
        return c->efd.fd;
    if (c->efd.off || !zc_config.wake_eventfd || c->state != LP_PAIRED || !c->ch.base ||
        !c->sole || lp_rv(c) || c->rv_seen || shim_vfork_child())
        return -1;
    fd = (int)LP_SYS(SYS_epoll_create1, EPOLL_CLOEXEC, 0, 0);
    if (fd < 0) {
        c->efd.off = 1;
        return -1;
    }
    fd = shim_fd_internal_keep(fd, &path_local, c);
    c->efd.fd = fd;
    me = lp_side(c, c->ch.side);
    gen = __atomic_load_n(&me->efd_gen, __ATOMIC_ACQUIRE) + 1;
    if (!gen)
        gen = 1;
    __atomic_store_n(&me->efd_pid, (int32_t)zc_getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&me->efd_no, fd, __ATOMIC_RELAXED);
    __atomic_store_n(&me->efd_gen, gen, __ATOMIC_RELEASE);
    c->efd.gen = gen;
    return fd;
}

/* The kind a receive announcement of ours takes: the wake-up kind when the
 * peer's eventfd is in our descriptor and every waiter hears it
 * (listening: this wait does, or, for an announcement left for later
 * waits, 1), else a doorbell byte. */
static int lp_efd_kind(lp_conn_t *c, int listening)
{
    if (c->efd.fd < 0 || c->efd.off || !listening || !c->sole)
        return LOCAL_RING_WAIT_SOCKET;
    if (__atomic_load_n(&lp_side(c, !c->ch.side)->efd_ack, __ATOMIC_ACQUIRE) != c->efd.gen)
        return LOCAL_RING_WAIT_SOCKET;
    return LOCAL_RING_WAIT_EVENTFD;
}

/* Announce a receive wait (local_ring_rx_wait_prepare's answers), of the
 * wake-up kind when lp_efd_kind allows.  RX lock held. */
int lp_rx_arm(lp_conn_t *c, int listening)
{
    return lp_rx_arm_ex(c, listening, 0);
}

int lp_rx_arm_ex(lp_conn_t *c, int listening, int next)
{
    int (*prepare)(local_ring_t *, int, int) = next ? local_ring_rx_wait_arm_next
                                                    : local_ring_rx_wait_prepare_kind;
    int dir = lp_rxdir(c), kind = lp_efd_kind(c, listening), rc;
    uint32_t *w = local_ring_wait_word(&c->ch, dir, LOCAL_RING_ROLE_CONS);
    uint32_t cur = LOCAL_RING_WAIT_FUTEX;

    /* A blocking receive sleeps on the futex (this process's other thread,
     * or another holder): its announcement would wake only it.  Ours takes
     * its place, and it is woken to join ours (lp_rx_listened). */
    if (__atomic_load_n(w, __ATOMIC_RELAXED) == LOCAL_RING_WAIT_FUTEX &&
        __atomic_compare_exchange_n(w, &cur, LOCAL_RING_WAIT_SOCKET, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        LP_SYS(SYS_futex, w, FUTEX_WAKE, INT_MAX);
    lp_ring_others(c);
    rc = prepare(&c->ch, dir, kind);

    if (rc != 1 || local_ring_rx_wait_kind(&c->ch, dir) != LOCAL_RING_WAIT_EVENTFD)
        return rc;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&lp_side(c, !c->ch.side)->efd_ack, __ATOMIC_ACQUIRE) == c->efd.gen)
        return rc;
    /* the peer retired its copy meanwhile: a doorbell byte from now on */
    local_ring_rx_wait_cancel(&c->ch, dir);
    return prepare(&c->ch, dir, LOCAL_RING_WAIT_SOCKET);
}

/* Reset our wake-up descriptor (an event standing in it would keep a poll
 * from sleeping); called with nothing to read on c.  Returns it, or -1. */
int lp_efd_reset(lp_conn_t *c)
{
    int efd = c->efd.fd;

    if (efd >= 0)
        shim_wake_drain(efd);
    return efd;
}

/* We just rang the peer with a doorbell byte: if it offers a wake-up
 * descriptor we have not served yet, fetch it, add an eventfd of ours to
 * it, and say so (one try per generation).  The peer's next announcements
 * may then take the wake-up kind. */
void lp_efd_offered(lp_conn_t *c)
{
    struct epoll_event add = { EPOLLIN | EPOLLET, { .u64 = 0 } };
    lp_side_t *peer, *me;
    uint32_t gen;
    int32_t pid, no;
    int fd, ev, added;

    if (!c->ch.base || !c->sole || !zc_config.wake_eventfd)
        return;
    peer = lp_side(c, !c->ch.side);
    gen = __atomic_load_n(&peer->efd_gen, __ATOMIC_ACQUIRE);
    /* (the vfork check, a system call, only when there is something to do:
     * every doorbell comes here) */
    if (!gen || gen == c->efd.peer_gen || shim_vfork_child())
        return;
    c->efd.peer_gen = gen;
    pid = __atomic_load_n(&peer->efd_pid, __ATOMIC_RELAXED);
    no = __atomic_load_n(&peer->efd_no, __ATOMIC_RELAXED);
    if (pid <= 0 || no < 0 || pid != __atomic_load_n(&c->ch.hdr->side_pid[!c->ch.side],
                                                     __ATOMIC_RELAXED))
        return;
    fd = lp_fetch_fd(pid, no, 0);
    if (fd < 0)
        return;
    ev = (int)LP_SYS(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK, 0);
    /* (fails unless fd is an epoll instance: nothing else is checked, and
     * nothing of it is kept) */
    added = ev >= 0 && zc_real.syscall(SYS_epoll_ctl, (long)fd, (long)EPOLL_CTL_ADD, (long)ev,
                                       (long)&add, 0L, 0L) == 0;
    LP_SYS(SYS_close, fd, 0, 0);
    if (!added) {
        if (ev >= 0)
            LP_SYS(SYS_close, ev, 0, 0);
        return;
    }
    if (c->efd.peer >= 0)
        shim_fd_internal_drop(c->efd.peer);
    c->efd.peer = shim_fd_internal_keep(ev, &path_local, c);
    me = lp_side(c, c->ch.side);
    __atomic_store_n(&me->efd_ack, gen, __ATOMIC_SEQ_CST);
    zc_stat_add(ZC_STAT_LOCAL_EFD_FETCHED, 1);
}


/* Wake the peer through our eventfd in its wake-up descriptor (an
 * announcement of that kind was claimed): ours alone, non-blocking, never
 * read (the count would take 2^64 - 2 wake-ups to fill).  Without it (a
 * dishonest announcement) a doorbell byte is the best effort left. */
void lp_efd_ring(lp_conn_t *c, int fd)
{
    uint64_t one = 1;

    if (c->efd.peer >= 0 && LP_SYS(SYS_write, c->efd.peer, &one, sizeof(one)) == sizeof(one)) {
        zc_stat_add(ZC_STAT_LOCAL_EFD_WAKES, 1);
        return;
    }
    if (fd >= 0)
        lp_bell(c, fd);
}

/* Our side may now be held by a process without our copy of the peer's
 * eventfd: stop acknowledging it, then ring any wake-up announcement that
 * stands (see the top of this file). */
void lp_efd_retire(lp_conn_t *c)
{
    lp_side_t *me;

    if (!c->ch.base || c->efd.peer < 0)
        return;
    me = lp_side(c, c->ch.side);
    if (!__atomic_load_n(&me->efd_ack, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&me->efd_ack, 0, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (local_ring_claim_kind(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS,
                              LOCAL_RING_WAIT_EVENTFD))
        lp_efd_ring(c, -1);
}

/* The connection leaves this process. */
void lp_efd_close(lp_conn_t *c)
{
    if (c->efd.fd >= 0)
        shim_fd_internal_drop(c->efd.fd);
    if (c->efd.peer >= 0)
        shim_fd_internal_drop(c->efd.peer);
    c->efd.fd = c->efd.peer = -1;
}

/* One of our wake-up descriptors moved to another number (lp_internal_moved): 1 when it
 * was one. */
int lp_efd_moved(lp_conn_t *c, int from, int to)
{
    if (c->efd.fd == from) {
        c->efd.fd = to;
        if (c->ch.base && c->sole)
            __atomic_store_n(&lp_side(c, c->ch.side)->efd_no, to, __ATOMIC_RELEASE);
        return 1;
    }
    if (c->efd.peer == from) {
        c->efd.peer = to;
        return 1;
    }
    return 0;
}

/* The engine asks which descriptor a poll/epoll waiter on fd should listen
 * to besides the socket (shim_path_ops_t.wake_fd). */
int lp_wake_fd(shim_fd_t *f, int fd, int unusable)
{
    lp_conn_t *c = lp_conn(f);

    (void)fd;
    if (unusable) {
        c->efd.off = 1;     /* a waiter could not listen: no wake-up announcements */
        if (c->ch.base) {
            /* and one standing goes back to a doorbell byte (a wake fd
             * taken out of the sets, shim_ep_wake_strip: nobody may hear it) */
            uint32_t cur = LOCAL_RING_WAIT_EVENTFD;

            __atomic_compare_exchange_n(local_ring_wait_word(&c->ch, lp_rxdir(c),
                                                             LOCAL_RING_ROLE_CONS),
                                        &cur, LOCAL_RING_WAIT_SOCKET, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
        }
        return -1;
    }
    if (c->efd.off)
        return -1;          /* (no announcement of the wake-up kind is made) */
    if (c->efd.fd >= 0)
        return c->efd.fd;      /* every wait listens once it exists */
    if (!lp_rx_ring(c))
        return -1;
    return lp_efd_wake_fd(c);
}

/* PARTS (lp_int.h): a side shared with another process retires its copy of
 * the peer's eventfd; the object's eventfds close with it. */
const lp_part_t lp_part_efd = { .shared = lp_efd_retire, .final = lp_efd_close };
