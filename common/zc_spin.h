/* When a wait spins before it sleeps: the one policy of the library's
 * blocking paths and of the readiness engine (README "Adaptive spinning").
 *
 * A fixed spin (ZCSOCK_SPIN_US > 0) spins that long before every sleep.
 * Otherwise, with ZCSOCK_SPIN=1 (the default), the spin adapts per waiter
 * (a connection's role, a thread's epoll waits): a wait that ended within
 * ZC_SPIN_LEARN_US (the peer answers quickly: request/response, ping-pong)
 * sets the next spin to ZC_SPIN_MAX_US; a longer one halves it, so an idle
 * waiter stops spinning after a few waits and costs no CPU.  And it spins
 * only while no CPU has more than one runnable task (/proc/loadavg, read at
 * most every ZC_SPIN_LOAD_MS) and the process may use two CPUs or more: on
 * an oversubscribed machine the spinner would take the CPU its peer needs.
 *
 * Hook-safe: no allocation, no stdio, no locks (the load figure is a
 * racy cache: a stale answer only spins or sleeps once too often). */
#ifndef ZC_SPIN_H
#define ZC_SPIN_H

#include <stdint.h>

#define ZC_SPIN_MAX_US 50
#define ZC_SPIN_LEARN_US 200
#define ZC_SPIN_LOAD_MS 10

/* One waiter's adaptive budget (zero-initialised: no spin until a wait
 * ended quickly). */
typedef struct zc_spin {
    uint16_t budget_us;
} zc_spin_t;

/* Count the CPUs this process may use (once, at start-up). */
void zc_spin_init(void);
/* CLOCK_MONOTONIC in microseconds. */
int64_t zc_now_us(void);
/* How long to spin before this sleep (0: sleep at once). */
unsigned zc_spin_for(const zc_spin_t *s);
/* After a wait that began at t0_us (zc_now_us): the next spin. */
void zc_spin_learn(zc_spin_t *s, int64_t t0_us);

#endif
