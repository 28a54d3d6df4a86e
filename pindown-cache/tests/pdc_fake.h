/* The fake pdc backend for tests: registrations are bookkeeping only, in a
 * fixed slot table, with failure injection and a hook run inside reg(). */
#ifndef PDC_FAKE_H
#define PDC_FAKE_H

#include <pthread.h>
#include <stdint.h>

#include "pdc.h"

typedef struct t_fake_slot {
    uintptr_t addr;
    size_t len;
    uint64_t serial;
    int live;
} t_fake_slot_t;

typedef struct t_fake {
    pthread_mutex_t lock;      /* protects everything below */
    unsigned cap;
    t_fake_slot_t *slots;
    unsigned live;
    size_t live_bytes;
    uint64_t regs, deregs, errors, serial;
    int fail_next;             /* fail this many reg() calls with fail_err */
    int fail_err;              /* 0: -ENOMEM */
    uint64_t reg_calls;
    unsigned reg_delay_us;     /* sleep inside reg() */
    /* Run inside reg() and dereg(), without the fake's lock (re-entrancy
     * pass, in-flight invalidation tests). */
    void (*hook)(void *arg, void *addr, size_t len);
    void *hook_arg;
    int forked;
} t_fake_t;

extern const pdc_ops_t t_fake_ops;

t_fake_t *t_fake_new(unsigned cap);
void t_fake_free(t_fake_t *f);
/* 1 when [addr, addr+len) is inside one live registration. */
int t_fake_covered(t_fake_t *f, uintptr_t addr, size_t len);
/* pdc_params_t with malloc/free and the given limits. */
void t_fake_params(pdc_params_t *p, size_t max_bytes, unsigned max_entries);

#endif
