/* The local path: a connection's state and its one transition function.
 *
 * STATES (lp_conn_t.state; LP_* in lp_int.h)
 *   OFFER    accepted by a server of ours: its offer of a channel is due at
 *            its first data call, or once the connection pays (pairing.c)
 *   DEFER    a client's whose announcement is due once the connection pays
 *            (pair when it pays: pairing.c, lp_ann_due)
 *   PENDING  a client's: its announcement is out, and the server's offer
 *            may come
 *   PAIRED   the channel is ours: each direction moves to the ring at its
 *            switch point (local_pair.h, S1-S3, R1-R3)
 *   PLAIN    on the kernel for good: declined, cancelled before its offer,
 *            or handed back (handback.c)
 *
 * TRANSITIONS (lp_state_ok): a connection object is made OFFER (accept),
 * DEFER or PENDING (connect: PENDING when it announced at once) or PAIRED
 * (an exec'd image or a receiver adopting a channel: exec.c); then
 *   DEFER   -> PENDING  it paid and announced        (lp_ann_make)
 *   DEFER   -> PLAIN    declined when it paid, its connect failed, or it
 *                       left before (fork, exec, SCM_RIGHTS, shutdown)
 *   OFFER   -> PAIRED   the offer was made            (lp_offer_make)
 *   OFFER   -> PLAIN    declined, or it left before   (lp_offer_due, _cancel)
 *   PENDING -> PAIRED   the offer was taken           (lp_pickup_done)
 *   PENDING -> PLAIN    declined, or never announced  (connect checks,
 *                       lp_ann_make, lp_pickup_done, lp_offer_cancel)
 *   PAIRED  -> PLAIN    handed back to the kernel     (lp_revert,
 *                       lp_rv_check_done)
 *   PLAIN   -> PLAIN    a decline said again (lp_unclaim_plain): no change
 * and nothing else: PLAIN is final, a connection never pairs twice.  Each
 * change is counted (local.state.<from>_<to>); one the table does not allow
 * is refused, counted (local.state.refused) and said once, and aborts a
 * checked build (ZC_CHECKS: the sanitizer builds), so that a path that
 * would bring a plain connection back to the ring is found by the tests,
 * never by an application's bytes.
 *
 * DIRECTIONS (lp_conn_t.dir[LP_TX], dir[LP_RX]; LP_DIR_* in lp_int.h): each
 * direction of a connection is
 *   KERNEL   on the kernel stream, free to switch at its switch point
 *            (local_pair.h, S1-S3 and R1-R3)
 *   RING     switched: its bytes move through the ring
 *   PLAIN    on the kernel for good: it never switched (the peer's side
 *            refused, or the connection was handed back first) or it was
 *            handed back (handback.c), so every kernel byte is data
 * and changes only by lp_dir_set:
 *   KERNEL -> RING    switched (lp_tx_switch, lp_rx_catch_up; or a holder in
 *                     another process switched it, found at a hand-back)
 *   KERNEL -> PLAIN   never to switch, or handed back before it switched
 *   RING   -> PLAIN   handed back (lp_rv_tx, lp_rv_rx_done, lp_revert)
 * and to itself (no change); a direction never leaves PLAIN, never goes
 * back to KERNEL.  An adopted connection (exec, SCM_RIGHTS) starts in the
 * states its description carries.  A change the table refuses is counted
 * (local.state.refused), said once, left undone, and aborts a checked build,
 * as for the connection's state.  (One byte each, written under that
 * direction's lock: a reader without the lock sees the old state or the
 * new, never a mix of two flags, as it could before.) */
#include "lp_int.h"

#include <stdlib.h>

/* LP_* are 1..5; index 0 is "none" (a new object) */
static const uint8_t lp_state_ok[LP_STATES][LP_STATES] = {
    [0] = { [LP_OFFER] = 1, [LP_DEFER] = 1, [LP_PENDING] = 1, [LP_PAIRED] = 1 },
    [LP_DEFER] = { [LP_PENDING] = 1, [LP_PLAIN] = 1 },
    [LP_OFFER] = { [LP_PAIRED] = 1, [LP_PLAIN] = 1 },
    [LP_PENDING] = { [LP_PAIRED] = 1, [LP_PLAIN] = 1 },
    [LP_PAIRED] = { [LP_PLAIN] = 1 },
    [LP_PLAIN] = { [LP_PLAIN] = 1 },
};

const char *lp_state_name(int s)
{
    switch (s) {
    case LP_OFFER: return "offer";
    case LP_PENDING: return "pending";
    case LP_PAIRED: return "paired";
    case LP_PLAIN: return "plain";
    case LP_DEFER: return "defer";
    default: return "none";
    }
}

/* The statistic each counted change adds to (0: not counted), indexed
 * like lp_state_ok (a lookup: every accepted connection changes state at
 * least twice) */
static const uint16_t lp_state_stat[LP_STATES][LP_STATES] = {
    [LP_DEFER] = { [LP_PENDING] = ZC_STAT_LOCAL_STATE_DEFER_PENDING,
                   [LP_PLAIN] = ZC_STAT_LOCAL_STATE_DEFER_PLAIN },
    [LP_OFFER] = { [LP_PAIRED] = ZC_STAT_LOCAL_STATE_OFFER_PAIRED,
                   [LP_PLAIN] = ZC_STAT_LOCAL_STATE_OFFER_PLAIN },
    [LP_PENDING] = { [LP_PAIRED] = ZC_STAT_LOCAL_STATE_PENDING_PAIRED,
                     [LP_PLAIN] = ZC_STAT_LOCAL_STATE_PENDING_PLAIN },
    [LP_PAIRED] = { [LP_PLAIN] = ZC_STAT_LOCAL_STATE_PAIRED_PLAIN },
};

_Static_assert(ZC_STAT_LOCAL_STATE_DEFER_PENDING > 0 && ZC_STAT_LOCAL_STATE_PAIRED_PLAIN > 0,
               "0 means not counted");

static void lp_state_count(int from, int to)
{
    if (lp_state_stat[from][to])
        zc_stat_add(lp_state_stat[from][to], 1);
}

static const uint8_t lp_dir_ok[LP_DIRS][LP_DIRS] = {
    [LP_DIR_KERNEL] = { [LP_DIR_KERNEL] = 1, [LP_DIR_RING] = 1, [LP_DIR_PLAIN] = 1 },
    [LP_DIR_RING] = { [LP_DIR_RING] = 1, [LP_DIR_PLAIN] = 1 },
    [LP_DIR_PLAIN] = { [LP_DIR_PLAIN] = 1 },
};

static const char *lp_dir_name(int d)
{
    return d == LP_DIR_KERNEL ? "kernel" : d == LP_DIR_RING ? "ring" : d == LP_DIR_PLAIN ? "plain"
                                                                                          : "?";
}

/* A change the tables refuse: counted, said once, left undone. */
static int lp_refused(const char *what, const char *from, const char *to)
{
    static int told;

    zc_stat_add(ZC_STAT_LOCAL_STATE_REFUSED, 1);
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        zc_log(ZC_LOG_WARN, "local path: a connection's %s would go from %s to %s, which is "
               "not allowed: it stays %s (local.state.refused; said once)", what, from, to, from);
#ifdef ZC_CHECKS
    abort();
#endif
    return -1;
}

int lp_dir_set(lp_conn_t *c, int role, int to)
{
    int from = c->dir[role & 1];

    if (from >= LP_DIRS || to < 0 || to >= LP_DIRS || !lp_dir_ok[from][to])
        return lp_refused(role == LP_TX ? "sending direction" : "receiving direction",
                          lp_dir_name(from), lp_dir_name(to));
    __atomic_store_n(&c->dir[role & 1], (uint8_t)to, __ATOMIC_RELEASE);
    return 0;
}

int lp_state_set(lp_conn_t *c, int to)
{
    int from = __atomic_load_n(&c->state, __ATOMIC_RELAXED);

    if (from < 0 || from >= LP_STATES || to <= 0 || to >= LP_STATES || !lp_state_ok[from][to])
        return lp_refused("state", lp_state_name(from), lp_state_name(to));
    /* (sequentially consistent: a thread that reads the new state reads
     * what was set before it, as every store of it always was) */
    __atomic_store_n(&c->state, to, __ATOMIC_SEQ_CST);
    if (to == LP_PENDING || to == LP_PAIRED)
        c->went_far = 1;
    if (from != to)
        lp_state_count(from, to);
    return 0;
}
