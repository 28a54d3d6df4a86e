/* The per-descriptor state table.
 *
 * One entry per descriptor number, in an array mapped at initialisation and
 * sized from RLIMIT_NOFILE's hard limit (capped at SHIM_FD_TABLE_MAX; pages
 * are only touched when used).  Entries are filled when the library sees a
 * socket being made (socket, socketpair, accept, accept4) and copied on
 * dup/dup2/dup3/F_DUPFD; they are cleared before close.  Descriptors the
 * library never saw being made (inherited, received through SCM_RIGHTS,
 * closed behind our back by libc internals) read as SHIM_FD_UNKNOWN: the
 * state is a hint for choosing a path, never a source of truth the copy path
 * depends on.
 *
 * Lookups are lock-free and hook-safe.  Concurrent updates of one entry race
 * exactly like the descriptor numbers themselves do in the application,
 * except the claim (claim, path, path_ctx): it changes only under the
 * entry's seize byte, and a call that goes to the path pins the claim's
 * state first (shim_fd_pin in shim_path.h), so a close, a hand-back or a
 * dup2 in another thread never frees state a call is still using. */
#ifndef SHIM_FD_H
#define SHIM_FD_H

#include <stddef.h>
#include <stdint.h>

#define SHIM_FD_TABLE_MAX (1u << 22)

/* One copied data call this large is bulk traffic (shim_fd_t.left_key):
 * no request or answer of a request/response protocol that opens a
 * connection per request comes in one call of 64 KiB. */
#define SHIM_BULK_CALL (64 << 10)

typedef enum {
    SHIM_FD_UNKNOWN = 0,
    SHIM_FD_SOCKET = 1,
    SHIM_FD_EPOLL = 2,      /* an epoll descriptor holding claimed registrations */
    SHIM_FD_INTERNAL = 3,   /* the library's own (a path's channel memfd, mailbox) */
} shim_fd_kind_t;

/* What the path in .path does with the descriptor (shim_path.h). */
typedef enum {
    SHIM_CLAIM_NONE = 0,    /* the copy path */
    SHIM_CLAIM_DATA = 1,    /* every call goes to path->ops */
    SHIM_CLAIM_WATCH = 2,   /* the path only hears the close (path->ops->forget) */
} shim_claim_t;

struct shim_path;
struct shim_fd;

extern struct shim_fd *shim_fd_table;
extern unsigned shim_fd_table_size;

typedef struct shim_fd {
    uint8_t kind;      /* shim_fd_kind_t */
    uint8_t family;    /* AF_INET, AF_INET6, AF_UNIX, ... */
    uint8_t stream;    /* 1 for SOCK_STREAM; SHIM_FD_STREAM_TCP: one made with
                        * the family's default protocol (TCP for inet; any
                        * AF_UNIX stream), so a path need not ask the kernel */
    uint8_t copy_why;  /* ZC_STAT_WHY_* counter charged when this fd is copied */
    uint8_t claim;     /* shim_claim_t */
    uint8_t seize;     /* held while claim/path/path_ctx change or a pin copies them */
    uint8_t unconnected; /* a stream socket made by socket() that has not connected
                          * yet: a path may still claim it (its epoll registrations
                          * are kept, shim_epoll.c) */
    uint8_t ep_clean;  /* an epoll registration of it may be off its set's ready
                        * list: the next operation on it puts it back
                        * (shim_ep_touched, shim_epoll.c READY LIST) */
    uint8_t ep_nested; /* an epoll set of ours put in another set, or polled
                        * (shim_epoll.c, NESTED SETS) */
    uint8_t ep_plain;  /* claimed, but its readiness is the kernel's alone for
                        * now: its epoll registrations stay the application's
                        * own, recorded, until the path ends it
                        * (shim_ep_plain_end, shim_epoll.c PLAIN UNTIL PAIRED) */
    uint8_t ep_tagged; /* an epoll set of ours with a tagged registration: its
                        * waits go through the engine (shim_ep_has; kept with
                        * the set's count, under the engine's lock) */
    uint32_t left_key; /* a path left this socket to the kernel from its start
                        * for a reason bulk traffic undoes (the local path's
                        * LEARNED SHORT: its learning key); a copied data
                        * call of SHIM_BULK_CALL bytes or more tells it once
                        * (shim_path_t.left_bulk); 0: none */
    const struct shim_path *path;   /* the path that claims or watches it, or NULL;
                                     * for SHIM_FD_INTERNAL, the path keeping it */
    void *path_ctx;    /* that path's state for it */
} shim_fd_t;

/* Map the table (idempotent).  Returns 0 or -errno; without a table every
 * descriptor is simply untracked. */
int shim_fd_table_init(void);

/* Entry for fd, or NULL when fd is negative or beyond the table. */
static inline shim_fd_t *shim_fd_get(int fd)
{
    return (unsigned)fd < shim_fd_table_size ? &shim_fd_table[fd] : NULL;
}

#define SHIM_FD_STREAM_TCP 2

/* Record a new socket (type may carry SOCK_NONBLOCK/SOCK_CLOEXEC). */
void shim_fd_socket_track(int fd, int family, int type);
/* The same, with the protocol it was made with (socket(), socketpair()). */
void shim_fd_socket_track_proto(int fd, int family, int type, int protocol);

/* fd connected, listened or was accepted: no path claims it at a connect
 * any more, so its epoll registrations need no record (shim_ep_plain_ctl);
 * the records kept so far go. */
void shim_fd_connected(int fd);

/* A descriptor is going away (close, close_range, dup2 target). */
void shim_fd_forget(int fd);

/* Every tracked socket, one line each, into out (zcsock stat --conns). */
void shim_fd_describe_all(int out);

/* The entry's seize byte: a spinlock held for a few instructions, inside
 * a critical section of the thread's (a signal handler of the
 * application's that would call into the same entry runs after it,
 * SIGDEFER in hooks_sig.c). */
void shim_fd_seize(shim_fd_t *f);
void shim_fd_unseize(shim_fd_t *f);

/* Clear f's claim (claim, path, path_ctx) under its seize byte (and the
 * records of its plain epoll registrations, ep_plain). */
void shim_fd_claim_clear(shim_fd_t *f);
/* Clear every field of f but its seize byte (another thread may hold it). */
void shim_fd_reset(shim_fd_t *f);
/* The same, handing what f held to *was (one thread only gets a claim). */
void shim_fd_take(shim_fd_t *f, shim_fd_t *was);

/* newfd now refers to what oldfd refers to. */
void shim_fd_copy(int oldfd, int newfd);

/* 1 when fd is a socket the application made itself. */
int shim_fd_is_app_socket(int fd);

#endif
