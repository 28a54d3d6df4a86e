/* Advice from a process's counters: what to change, each suggestion with
 * the counters behind it.  The rules are data (common/zc_advise.c): the
 * counters whose sum fires a rule from a threshold, what weighs it, and a
 * text in which $(key) and $(key+key) stand for counters' values.  Used by
 * `zcsock stat --advise` (launcher/advise.c) on a live process and by the
 * exit report (ZCSOCK_STATS) in the process itself; hook-safe (no
 * allocation, no stdio). */
#ifndef ZC_ADVISE_H
#define ZC_ADVISE_H

#include <stddef.h>
#include <stdint.h>

#define ZC_ADVICE_MAX 4         /* suggestions given at most, the heaviest first */

/* A counter's value by key (0 when there is none). */
typedef uint64_t (*zc_advise_get_t)(void *ctx, const char *key);

/* Each suggestion that fires, heaviest first, at most ZC_ADVICE_MAX:
 * emit(ctx, id, text).  Returns how many fired (all of them, even past
 * the ones given). */
int zc_advise(zc_advise_get_t get, void *ctx,
              void (*emit)(void *ctx, const char *id, const char *text), void *emit_ctx);

#endif
