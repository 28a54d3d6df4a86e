/* The fake pdc backend (see pdc_fake.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pdc_fake.h"

static void *t_alloc(void *arg, size_t size)
{
    (void)arg;
    return malloc(size);
}

static void t_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}

void t_fake_params(pdc_params_t *p, size_t max_bytes, unsigned max_entries)
{
    pdc_params_default(p);
    p->max_bytes = max_bytes;
    p->max_entries = max_entries;
    p->memlock_bytes = PDC_MEMLOCK_NONE;
    p->budget[PDC_SEND] = 0;
    p->budget[PDC_RECV] = 0;
    p->alloc = t_alloc;
    p->free = t_free;
}

t_fake_t *t_fake_new(unsigned cap)
{
    t_fake_t *f = calloc(1, sizeof(*f));

    f->cap = cap;
    f->slots = calloc(cap, sizeof(*f->slots));
    pthread_mutex_init(&f->lock, NULL);
    return f;
}

void t_fake_free(t_fake_t *f)
{
    pthread_mutex_destroy(&f->lock);
    free(f->slots);
    free(f);
}

int t_fake_covered(t_fake_t *f, uintptr_t addr, size_t len)
{
    unsigned i;
    int found = 0;

    pthread_mutex_lock(&f->lock);
    for (i = 0; i < f->cap && !found; i++)
        found = f->slots[i].live && f->slots[i].addr <= addr &&
                f->slots[i].addr + f->slots[i].len >= addr + len;
    pthread_mutex_unlock(&f->lock);
    return found;
}

static int t_fake_reg(void *arg, void *addr, size_t len, pdc_handle_t *h_p)
{
    t_fake_t *f = arg;
    unsigned i;

    if (f->hook)
        f->hook(f->hook_arg, addr, len);
    if (f->reg_delay_us)
        usleep(f->reg_delay_us);
    pthread_mutex_lock(&f->lock);
    f->reg_calls++;
    if (f->fail_next > 0) {
        f->fail_next--;
        pthread_mutex_unlock(&f->lock);
        return f->fail_err ? f->fail_err : -ENOMEM;
    }
    for (i = 0; i < f->cap && f->slots[i].live; i++)
        ;
    if (i == f->cap) {
        f->errors++;   /* the cache must respect max_regions */
        pthread_mutex_unlock(&f->lock);
        return -ENOSPC;
    }
    f->slots[i].addr = (uintptr_t)addr;
    f->slots[i].len = len;
    f->slots[i].serial = ++f->serial;
    f->slots[i].live = 1;
    f->live++;
    f->live_bytes += len;
    f->regs++;
    h_p->id = i;
    h_p->aux = f->slots[i].serial;
    h_p->ptr = addr;
    pthread_mutex_unlock(&f->lock);
    return 0;
}

static int t_fake_dereg(void *arg, pdc_handle_t h)
{
    t_fake_t *f = arg;
    t_fake_slot_t *s;
    int rc = 0;

    pthread_mutex_lock(&f->lock);
    s = h.id < f->cap ? &f->slots[h.id] : NULL;
    if (!s || !s->live || s->serial != h.aux) {
        f->errors++;   /* double or bogus deregistration */
        rc = -EINVAL;
    } else {
        s->live = 0;
        f->live--;
        f->live_bytes -= s->len;
        f->deregs++;
    }
    pthread_mutex_unlock(&f->lock);
    if (f->hook)
        f->hook(f->hook_arg, NULL, 0);
    return rc;
}

static void t_fake_fork_child(void *arg)
{
    t_fake_t *f = arg;

    pthread_mutex_init(&f->lock, NULL);
    memset(f->slots, 0, f->cap * sizeof(*f->slots));
    f->live = 0;
    f->live_bytes = 0;
    f->forked = 1;
}

const pdc_ops_t t_fake_ops = {
    .name = "fake",
    .reg = t_fake_reg,
    .dereg = t_fake_dereg,
    .fork_child = t_fake_fork_child,
    .max_region_len = 0,
    .max_regions = 0,
};
