/* The local path: pairing decisions and pair when it pays (pairing.c). What
 * the rest of the path may call of it; the connection object and its locks
 * are lp_int.h's. */
#ifndef LP_PAIRING_H
#define LP_PAIRING_H

#include "lp_int.h"

/* Pair when it pays (issue 31). */
#define LP_PAIR_BYTES (128u << 10)    /* moved bytes per ZCSOCK_LOCAL_PAIR_AFTER unit */
/* Has c moved enough bytes through the kernel to pay (extra: a send's
 * bytes about to go)?  Both ends count alike (lp_pays, lp_pickup). */
static inline int lp_pays_bytes(const lp_conn_t *c, size_t extra)
{
    return c->rx_kernel + c->tx_kernel + extra >=
           (uint64_t)zc_config.local_pair_after * LP_PAIR_BYTES;
}
/* Has c made enough data calls on the kernel to pay?  A stream of small
 * messages in one direction answers no request and moves few bytes (1-byte
 * sends: 256 KiB after 262,144 of them), yet each call is a system call the
 * ring would save: LP_PAIR_CALLS calls per ZCSOCK_LOCAL_PAIR_AFTER unit,
 * twice that for the server (offer: 1), whose offer should find the
 * client's announcement made (each end counts its own calls; a receiver
 * that reads several messages at a time makes fewer). */
#define LP_PAIR_CALLS 512u
static inline int lp_pays_calls(const lp_conn_t *c, int offer)
{
    return (uint64_t)c->pair.calls >=
           ((uint64_t)zc_config.local_pair_after * LP_PAIR_CALLS << (offer ? 1 : 0));
}
/* The ring of a connection that paired for its turns, not its bytes: at
 * most this much a direction (ZCSOCK_LOCAL_RING still caps it).  The
 * pages a ring touches and the page tables behind its mapping are paid
 * again at every close (unmapped, with a TLB shootdown to the other CPUs):
 * 1,000 redis-benchmark connections that paired after a few requests each
 * cost both ends 40% more CPU with 4 MiB rings than with 256 KiB. */
#define LP_RING_CHATTY (256u << 10)
#define LP_R3_PATIENCE 4096u       /* receives a pending client waits for a deferred offer */
int lp_offer_wait(lp_conn_t *c, int fd, int is_send, size_t len);
/* Count a data call's turn (a send after a receive is one), paired or not:
 * the learned lifetime counts every connection's turns (lp_life_learn). */
static inline void lp_turn(lp_conn_t *c, int is_send)
{
    if (is_send && c->pair.last == 1)
        c->pair.turns++;
    c->pair.last = is_send ? 2 : 1;
}
uint32_t lp_life_key(const struct sockaddr *addr, socklen_t len, int lfd);
void lp_short_bulk(uint32_t key);
void lp_life_start(lp_conn_t *c, uint32_t key);
void lp_life_learn(lp_conn_t *c);
void lp_life_table(void);
int lp_kio_enter(lp_conn_t *c);
void lp_kio_exit(lp_conn_t *c);
int lp_r3_due(lp_conn_t *c);
void lp_ann_due(lp_conn_t *c, int fd, int is_send, size_t len);

/* A client connection's announcement held / let go (counted: lp_fd_limited). */
void lp_ann_keep(lp_conn_t *c, int ann);
void lp_ann_drop(lp_conn_t *c);
void lp_pickup_done(lp_conn_t *c, int rc, int memfd, int fd);
void lp_pickup_try(lp_conn_t *c, int fd, int r3);
void lp_pending_end(lp_conn_t *c);
int lp_offer_due(lp_conn_t *c, int fd);
int lp_offer_defer(lp_conn_t *c, int fd);
void lp_offer_cancel(lp_conn_t *c, const char *why);
int lp_unclaim_plain(lp_conn_t *c, int fd);
void lp_connect_check_(lp_conn_t *c, int fd);
/* (every data call: the flag looked at here, the rest out of line) */
static inline void lp_connect_check(lp_conn_t *c, int fd)
{
    if (c->pair.connect_check)
        lp_connect_check_(c, fd);
}
int path_local_enabled(void);
int lp_wants_creds(int fd);
int lp_candidate(int fd);
void path_local_listened(int fd);
void path_local_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len);
void path_local_connect_done(int fd, int rc, int err);
void path_local_accepted(int lfd, int fd);

#endif
