/* The readiness engine (shim_ready.c, shim_epoll.c): poll, select and
 * epoll over sets that hold descriptors a path claimed.  Called by the
 * readiness hooks (hooks_poll.c) only when such a descriptor is involved.
 * Every function returns what the libc call returns (-1 and errno). */
#ifndef SHIM_READY_H
#define SHIM_READY_H

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns; a deadline from a timeout (NULL: none, -1); the
 * time left until deadline into *ts (NULL when none); deadline passed. */
int64_t shim_now_ns(void);
int64_t shim_deadline(const struct timespec *ts);
const struct timespec *shim_left(int64_t deadline, struct timespec *ts);
int shim_expired(int64_t deadline);

/* One wait's spin before its arming look (shim_ready.c): begin (may_sleep:
 * the timeout is not zero); at each round, whether to spin (look without
 * arming, ask the kernel with a zero timeout) and, when the round's look
 * found nothing, idle; at the end, whether events were reported (the
 * thread's spin budget learns from the waits that waited). */
#define SHIM_WAIT_WITHDREW 32
typedef struct shim_wait {
    int64_t t0, end;
    int64_t kernel_next;    /* spinning: no kernel look before this (us) */
    int may_sleep, waited;
    int spun;           /* a look ran with SHIM_READY_SPIN: end with SPUN */
    int ring;           /* the last look met a descriptor the kernel does not
                         * follow alone (shim_ready_ask_t.ring): spinning may pay */
    unsigned sig0;      /* shim_sig_ran when the wait began */
    /* epoll: the registrations whose wake-up a SPIN look withdrew
     * (shim_ready_ask_t.withdrew), which alone get SHIM_READY_SPUN when the
     * spin ends; more than SHIM_WAIT_WITHDREW: the whole set gets it */
    int nwithdrew;
    struct { int fd; uint32_t events; } withdrew[SHIM_WAIT_WITHDREW];
} shim_wait_t;
void shim_wait_begin(shim_wait_t *w, int may_sleep);
int shim_wait_spinning(shim_wait_t *w);
/* What a round's looks found (ask.ring): the next round, and the thread's
 * next wait, spin only after looks that met a descriptor of ring 1. */
void shim_wait_looked(shim_wait_t *w, int ring);
/* A handler of the application's ran on this thread since the wait began
 * (while we looked or spun, outside the kernel's wait): the kernel would
 * have interrupted the application's poll/select/epoll call (never
 * restarted, whatever SA_RESTART says), so the wait must end with EINTR
 * rather than sleep.  Always 0 with ZCSOCK_SIGNAL_DEFER=0 (handlers are not
 * ours to see). */
extern __thread unsigned shim_sig_ran __attribute__((tls_model("initial-exec")));
static inline int shim_wait_signalled(const shim_wait_t *w)
{
    return w->may_sleep && shim_sig_ran != w->sig0;
}
/* While spinning, the kernel (a system call over the whole set) is asked at
 * most every SHIM_SPIN_KERNEL_US; the looks in between ask only the paths'
 * memory.  The first look of a wait always asks the kernel.  1: skip this
 * kernel look (after a short pause). */
#define SHIM_SPIN_KERNEL_US 8
int shim_wait_kernel_skip(shim_wait_t *w);
void shim_wait_idle(shim_wait_t *w);
/* A zero-timeout wait over set sig (shim_ready.c, KERNEL SKIP): 1 when it
 * may answer from the paths' memory alone, without asking the kernel (the
 * kernel's last answer about this set was nothing ready, less than
 * ZCSOCK_POLL_KERNEL_US ago, and since then the thread has only made
 * zero-timeout waits and sends and receives on claimed connections); after
 * a wait that did ask, what the kernel said (quiet: nothing ready). */
int shim_nowait_skip(uint64_t sig);
void shim_nowait_asked(uint64_t sig, int quiet);
/* A zero-timeout wait that went straight to the kernel (a set with no
 * claimed registration) and heard nothing: it breaks no chain of waits. */
void shim_nowait_passed(void);
/* The same wait before it goes to the kernel: 1 when it may answer
 * "nothing" without asking, as shim_nowait_skip would, but only in a chain
 * that also waits over claimed connections (a progress loop that polls a
 * set of paired connections and one of kernel descriptors in turn, as
 * UCX's does); a thread whose waits never meet a claimed connection always
 * asks.  After it asked: shim_nowait_asked. */
int shim_nowait_skip_plain(uint64_t sig);
/* ... and what the kernel said (remembered only in such a chain: a loop
 * with no paired connection pays no clock read for it). */
void shim_nowait_asked_plain(uint64_t sig, int quiet);
/* An epoll set's signature for the above (poll's lack the top bit). */
#define SHIM_EP_NOWAIT_SIG(epfd) (1ull << 63 | (uint32_t)(epfd))
void shim_wait_end(shim_wait_t *w, int events);

/* 1 when a claimed descriptor is in the poll set / select sets. */
/* Does a poll (select) set hold a claimed descriptor (bit 1) or one of our
 * epoll sets (SHIM_POLL_SETS: shim_epoll.c, NESTED SETS)? */
#define SHIM_POLL_SETS 2
int shim_poll_claims(const struct pollfd *fds, nfds_t n);
int shim_select_claims(int nfds, fd_set *r, fd_set *w, fd_set *e);

/* ppoll / pselect over sets holding claimed descriptors. */
int shim_ready_poll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
                    const sigset_t *mask);
int shim_ready_select(int nfds, fd_set *r, fd_set *w, fd_set *e,
                      const struct timespec *timeout, const sigset_t *mask);

/* epoll_ctl of a claimed descriptor (f: its pinned entry); epoll_pwait on
 * an epoll descriptor that holds claimed registrations (shim_ep_has). */
int shim_ep_ctl(int epfd, int op, int fd, struct epoll_event *ev, shim_fd_t *f);
/* epoll_ctl on an unclaimed descriptor, before the real call: a
 * registration left from when it was claimed gives the kernel the
 * application's data back and leaves the table. */
void shim_ep_unclaimed(int epfd, int fd);
/* ... and after it succeeded: an unconnected socket's registration is
 * recorded for a claim at its connect (shim_ep_claimed). */
void shim_ep_plain_ctl(int epfd, int op, int fd, const struct epoll_event *ev);
/* The library's descriptor w is closing or moving: no set keeps it parked
 * (shim_epoll.c, PARKED WAKE FDS). */
void shim_ep_aux_gone(int w);

/* A wait that may sleep on epfd begins and ends (QUIET SETS); a poll or
 * select over private sets exposes them. */
void shim_ep_sleep_enter(int epfd);
void shim_ep_sleep_leave(int epfd);
void shim_ep_exposed_poll(const struct pollfd *fds, nfds_t n);
void shim_ep_exposed_select(int nfds, const fd_set *r, const fd_set *w, const fd_set *e);

int shim_ready_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout,
                     const sigset_t *mask);
int shim_ep_has(int epfd);
/* What a wait that went straight to the kernel returned (n events): tags
 * of ours translated or dropped (shim_epoll.c, TAGS NEVER LEAK); the
 * events left.  When none is left but time is, shim_ep_wait_rest waits on
 * (t0_ns: when the call began). */
int shim_ep_translate(int epfd, struct epoll_event *evs, int n);
int shim_ep_wait_rest(int epfd, struct epoll_event *evs, int max, int timeout_ms,
                      int64_t t0_ns, const sigset_t *mask);

#endif
