/* The local path: same-host zcsock peers exchange payload through a shared
 * memory channel (shim/local_ring.h) found by pairing (shim/local_pair.h).
 *
 * The kernel socket stays the descriptor the application holds.  Until a
 * direction switches (local_pair.h, SWITCH-OVER) its bytes travel in the
 * kernel stream; afterwards they travel in the ring and the kernel stream of
 * that direction carries only doorbells: one byte, sent only when the other
 * side announced that it sleeps (or will sleep in poll/epoll) on the socket.
 *
 * The connection object (lp_conn_t, process memory) is shared by every
 * descriptor of this process that refers to the socket (dup, dup2, F_DUPFD);
 * what several processes holding the socket must agree on (the per-role
 * locks, the number of holders) lives in the channel's header page.
 *
 * Readiness: for claimed descriptors the poll family and epoll answer from
 * the ring (path_local_poll.c); a doorbell byte left in the kernel socket
 * never makes a descriptor look readable.
 *
 * Hook-safety: no process allocator (zc_pool), no stdio, no getenv; every
 * socket call through zc_real.  Return convention: what the call returns
 * (>= 0) or -errno. */
#ifndef PATH_LOCAL_H
#define PATH_LOCAL_H

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "shim_path.h"

extern const shim_path_ops_t path_local_ops;

/* Read the configuration; called once from initialisation. */
void path_local_init(void);

/* 1 when the local path is enabled (ZCSOCK_LOCAL). */
int path_local_enabled(void);

/* Hooks of the descriptor calls (each after or around the real call). */
void path_local_listened(int fd);
void path_local_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len);
void path_local_connect_done(int fd, int rc, int err);
void path_local_accepted(int lfd, int fd);

/* shutdown() on a claimed descriptor: the path's answer, or 1 for "let the
 * kernel do it" (it already decided nothing else is needed). */
int path_local_shutdown(shim_fd_t *f, int fd, int how);

/* sendfile to / splice from or to a claimed descriptor: through a bounce
 * buffer and the path (the kernel cannot write into the ring).  Returns what
 * the call returns or -errno. */
ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count);
ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags);

/* ioctl(FIONREAD/SIOCINQ) and getsockopt/setsockopt(SO_RCVLOWAT) on a claimed
 * descriptor: 1 when handled (*rc is the result), 0 to pass through. */
int path_local_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc);
void path_local_setsockopt(shim_fd_t *f, int fd, int level, int name, const void *val,
                           socklen_t len);
/* fcntl(F_SETFL) or ioctl(FIONBIO) changed a claimed descriptor's flags
 * (after the real call): cached settings are stale. */
void path_local_settings_changed(shim_fd_t *f);
/* getsockopt the path answers (TCP_NODELAY as the application set it, the
 * doorbells force it on): 1 when handled. */
int path_local_getsockopt(shim_fd_t *f, int level, int name, void *val, socklen_t *len);

/* 1 when fd is claimed by the local path. */
static inline int path_local_claimed(const shim_fd_t *f)
{
    return f && f->path == &path_local_ops;
}

/* Readiness of a claimed descriptor for poll events ev (POLLIN, POLLOUT,
 * POLLRDHUP, ...): the revents the ring and what the kernel socket said
 * (kev: revents of the kernel socket, or -1 when it was not polled) give.
 * arm: when nothing in ev is ready, announce that we are going to sleep so
 * the peer rings a doorbell (returns the revents, 0 when armed). */
short path_local_revents(shim_fd_t *f, int fd, short ev, int kev, int arm);

/* Set (in milliseconds) by path_local_revents when a waiter must look again
 * on its own (SO_RCVLOWAT above what the ring holds); the poll hooks cap
 * their sleep to it and reset it to 0. */
extern __thread int path_local_poll_slice_ms;

/* The events to ask the kernel socket of a claimed descriptor for, in place
 * of the application's ev. */
short path_local_kernel_events(shim_fd_t *f, short ev);

/* Positions that change when new data arrives / space frees (for epoll's
 * edge-triggered reporting). */
uint64_t path_local_rx_gen(shim_fd_t *f);
uint64_t path_local_tx_gen(shim_fd_t *f);

/* dup2/dup3 onto the library's descriptor fd: move it away.  0 or -errno. */
int path_local_fd_move(int fd);

/* exec: the environment to give the next image.  Connections whose socket
 * survives the exec are described in ZCSOCK_INHERIT (their channel memfd
 * made inheritable) when the next image loads the library (LD_PRELOAD in
 * envp names it, and the program, image (searched in PATH with search) or
 * image_fd, honours LD_PRELOAD: shim_exec_image_preloads); otherwise they are handed back to the kernel first
 * (path_local_hand_back), so the next image reads a plain stream.  vec
 * (vec_n entries) and buf receive the new environment; returns envp itself
 * when nothing changes.  In a vfork child it changes only what the parent
 * must see too (a handed-back connection is plain for every holder). */
char *const *path_local_exec_env(const char *image, int search, int image_fd,
                                 char *const *envp, char **vec, size_t vec_n, char *buf,
                                 size_t bufsz);
#define PATH_LOCAL_INHERIT_MAX 4096

/* The exec failed: make the channel memfds close-on-exec again. */
void path_local_exec_failed(void);

/* Start-up: adopt the connections the previous image handed over. */
void path_local_inherit(void);

/* SCM_RIGHTS hand-over (path_local_scm.c): what travels with a passed socket. */
typedef struct path_local_handover {
    uint64_t cookie;            /* SO_COOKIE of the passed socket */
    uint32_t side, flags;
    uint64_t tx_kernel, rx_kernel, bells_drained, bells_claimed;
} path_local_handover_t;

/* Sender: describe claimed descriptor fd for a hand-over (0, or -errno when it
 * is not a paired connection); *memfd_p is its channel memfd (still ours). */
int path_local_handover_prepare(shim_fd_t *f, int fd, path_local_handover_t *h, int *memfd_p);
/* Hand the connection of claimed descriptor fd back to the kernel for good
 * (path_local.c, HAND-BACK): before it reaches a program that cannot read
 * the channel.  Blocks at most a moment for doorbells in flight. */
void path_local_hand_back(shim_fd_t *f, int fd, const char *why);
/* Sender: the hand-over was posted: the receiver is a holder from now on. */
void path_local_handover_posted(shim_fd_t *f);
/* Receiver: adopt the channel for socket fd (memfd is consumed). */
void path_local_handover_adopt(int fd, const path_local_handover_t *h, int memfd);
/* sendmsg on any socket with SCM_RIGHTS / recvmsg that received some. */
void path_local_scm_send(int fd, const struct msghdr *msg);
void path_local_scm_received(struct msghdr *msg);
/* This process has an AF_UNIX socket: make sure its mailbox exists. */
void path_local_mbox_ensure(void);
int path_local_mbox_fd_is(int fd);
void path_local_mbox_fork_child(void);
void path_local_mbox_moved(int from, int to);
/* Keep descriptor fd as the library's (high, close-on-exec, refused to the
 * application) / give it up.  keep returns the (new) number. */
int path_local_fd_keep_internal(int fd);
void path_local_fd_release(int fd);

/* fork: the child holds every connection too.  fork_hold(+1) before the
 * real fork, (-1) when it failed; the atfork handlers keep the list sane. */
void path_local_fork_hold(int delta);
void path_local_fork_prepare(void);
void path_local_fork_parent(void);
void path_local_fork_child(void);

#endif
