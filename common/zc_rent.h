/* Rent or buy: when a unit's first lend pays (page exchange, ARCHITECTURE.md
 * "When a first lend pays").
 *
 * Lending a 2 MiB unit the first time ("buying" it) costs a new 2 MiB page
 * and one copy into its unit file; on a VM whose balloon hands freed pages
 * back to the host, that page is faulted in from the host: 0.2-7 ms per
 * unit measured here, against 0.15-0.7 ms to send the unit through the ring
 * ("renting").  A bought unit sent again unchanged then costs nothing; a
 * refilled one gains nothing.  Which a unit will be is not known at its
 * first send, so this is the ski-rental problem, and its deterministic
 * answer is taken: a unit goes through the ring until the ring passes it
 * paid for (with the same bytes) add up to what buying costs, then it is
 * bought.  That costs at most twice what knowing the future would, and a
 * unit refilled before every send (whose bytes differ each time) is never
 * bought at all.  Where buying costs no more than one ring pass (hugetlb
 * pages, a host that does not take pages back) every unit is bought at
 * its first send.
 *
 * Both costs are measured as the process runs (moving averages of unit
 * files made and of large sends the ring carried alone; until the ring has
 * been timed, a ring pass is taken to cost what copying a unit's bytes into
 * its file did, the ring's two copies running side by side on two CPUs,
 * and the ring's average starts from that copy, so one slow send cannot
 * alone make buying look cheap; a ring's first pass over its fresh pages
 * is not timed);
 * until a unit has been bought, units are bought.  A unit's identity is
 * its address and a fingerprint of its bytes (one word of each 4 KiB
 * page), kept in a small table of hints: a wrong hint (a collision, a
 * change the fingerprint did not see) only buys a unit early or rents it
 * once more; what is lent is always the unit's bytes at the lend.  (A
 * credit for processes whose bought units were hit often was tried and
 * dropped: ARCHITECTURE.md.)
 *
 * ZCSOCK_EXCHANGE_UNIT_US fixes the cost of buying instead of measuring it
 * (1: every unit is bought at its first send).
 *
 * Hook-safe and lock-free: racing updates may lose a sample or a hint,
 * never more. */
#ifndef ZC_RENT_H
#define ZC_RENT_H

#include <stddef.h>
#include <stdint.h>

#define ZC_RENT_HINTS 512

typedef struct zc_rent_hint {
    uintptr_t unit;
    uint64_t fp;
    uint64_t paid_ns;       /* ring passes paid for these bytes */
} zc_rent_hint_t;

typedef struct zc_rent {
    uint64_t buy_ns;        /* a unit bought: moving average (0: unknown) */
    uint64_t rent_ns;       /* a unit's bytes through the ring (0: unknown) */
    uint64_t copy_ns;       /* the copy part of buying: the ring's cost until
                             * the ring has been timed */
    zc_rent_hint_t hint[ZC_RENT_HINTS];
} zc_rent_t;

/* A unit was bought in ns nanoseconds, copy_ns of them copying its bytes
 * into a page already there (0: not told apart). */
void zc_rent_bought(zc_rent_t *r, uint64_t ns, uint64_t copy_ns);
/* The ring alone carried bytes (a large send) in ns nanoseconds. */
void zc_rent_ring(zc_rent_t *r, uint64_t bytes, uint64_t ns, size_t unit);
/* 1 when every unit is bought at its first send for now (costs unknown,
 * or buying no dearer than a ring pass): no fingerprint needed. */
int zc_rent_cheap(const zc_rent_t *r);
/* The unit at unit, whose bytes have fingerprint fp, is about to be sent:
 * 1 buy it now, 0 through the ring this time (counted as paid). */
int zc_rent_decide(zc_rent_t *r, uintptr_t unit, uint64_t fp);
/* The fingerprint of the len bytes at p (len a multiple of 4096): one word
 * of each 4 KiB page, at an offset that moves from page to page.  Reads the
 * bytes as they are (another thread may be writing them). */
uint64_t zc_rent_fp(const void *p, size_t len);

#endif
