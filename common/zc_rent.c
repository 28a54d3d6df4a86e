/* Rent or buy: when a unit's first lend pays (zc_rent.h). */
#include "zc_rent.h"

#include "zc_config.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A moving average, a quarter per sample; the first sample sets it. */
static void zc_rent_avg(uint64_t *avg, uint64_t v)
{
    uint64_t a = __atomic_load_n(avg, __ATOMIC_RELAXED);

    __atomic_store_n(avg, a ? a - a / 4 + v / 4 : (v ? v : 1), __ATOMIC_RELAXED);
}

void zc_rent_bought(zc_rent_t *r, uint64_t ns, uint64_t copy_ns)
{
    zc_rent_avg(&r->buy_ns, ns);
    if (copy_ns)
        zc_rent_avg(&r->copy_ns, copy_ns);
}

void zc_rent_ring(zc_rent_t *r, uint64_t bytes, uint64_t ns, size_t unit)
{
    if (bytes < unit)
        return;
    /* the first ring sample starts from the copy's estimate, where there
     * is one, rather than replacing it: one send slowed by a preemption
     * or a slow receiver then moves the average a quarter of the way, and
     * cannot alone make every unit look cheap to buy */
    if (!LD(r->rent_ns) && LD(r->copy_ns))
        ST(r->rent_ns, LD(r->copy_ns));
    zc_rent_avg(&r->rent_ns, (uint64_t)((double)ns * (double)unit / (double)bytes));
}

static uint64_t zc_rent_buy_ns(const zc_rent_t *r)
{
    return zc_config.exchange_unit_us ? zc_config.exchange_unit_us * 1000ull : LD(r->buy_ns);
}

static uint64_t zc_rent_pass_ns(const zc_rent_t *r)
{
    return LD(r->rent_ns) ? LD(r->rent_ns) : LD(r->copy_ns);
}

int zc_rent_cheap(const zc_rent_t *r)
{
    uint64_t buy = zc_rent_buy_ns(r), rent = zc_rent_pass_ns(r);

    return !buy || !rent || buy <= rent;    /* not known yet (buying finds out), or cheap */
}

int zc_rent_decide(zc_rent_t *r, uintptr_t unit, uint64_t fp)
{
    uint64_t buy = zc_rent_buy_ns(r), paid = zc_rent_pass_ns(r);
    zc_rent_hint_t *h = &r->hint[(unit >> 21) % ZC_RENT_HINTS];

    if (zc_rent_cheap(r))
        return 1;
    if (LD(h->unit) == unit && LD(h->fp) == fp)
        paid += LD(h->paid_ns);     /* sent again unchanged */
    if (paid >= buy) {
        ST(h->unit, 0);
        return 1;
    }
    ST(h->unit, unit);
    ST(h->fp, fp);
    ST(h->paid_ns, paid);
    return 0;
}

uint64_t zc_rent_fp(const void *p, size_t len)
{
    const uint64_t *w = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len / 4096; i++)
        h = (h ^ __atomic_load_n(&w[i * 512 + ((i * 67) & 511)], __ATOMIC_RELAXED)) *
            0x100000001b3ull;
    return h;
}
