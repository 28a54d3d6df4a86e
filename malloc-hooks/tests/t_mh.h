/* Helpers for the malloc-hooks preload tests: exit 0 pass, 1 fail, 77 skip.
 * Counters are read through zcsock_stat_get() found with dlsym, so every
 * program also runs without the library (event checks then skip). */
#ifndef T_MH_H
#define T_MH_H

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mh.h"

#define T_SKIP 77

/* The feature a test exists for is missing: a skip only when no library was
 * preloaded (the plain run), a failure when one was (it should publish it). */
static inline int t_missing(const char *what)
{
    const char *pre = getenv("LD_PRELOAD");

    if (pre && *pre) {
        fprintf(stderr, "FAIL: preloaded (%s) but %s\n", pre, what);
        return 1;
    }
    printf("skip: %s (no library preloaded)\n", what);
    return T_SKIP;
}

#define T_CHECK(c)                                                              \
    do {                                                                        \
        if (!(c)) {                                                             \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__,   \
                    __LINE__, #c, errno);                                       \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static inline int t_stat(const char *name, uint64_t *v)
{
    int (*f)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");

    return f ? f(name, v) : -1;
}

static inline int t_active(void)
{
    int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "zcsock_is_active");

    return f && f();
}

/* Count of events of kind, or -1 when the library does not publish it. */
static inline long long t_ev(const char *kind)
{
    char name[64];
    uint64_t v;

    snprintf(name, sizeof(name), "mh.events.%s", kind);
    return t_stat(name, &v) == 0 ? (long long)v : -1;
}

static inline unsigned t_status(void)
{
    uint64_t v;

    return t_stat("mh.status", &v) == 0 ? (unsigned)v : 0;
}

/* Placement is on: the library publishes mh.status with PLACEMENT_ACTIVE.
 * A library that publishes no status is treated as placing nothing. */
static inline int t_placement(void)
{
    uint64_t v;

    /* placement of every large block, not page exchange's narrow one */
    return t_stat("mh.status", &v) == 0 && (v & MH_ST_PLACEMENT_ACTIVE) != 0 &&
           !(v & MH_ST_PLACEMENT_NARROW);
}

/* 1 when p lies in a mapping of a zcsock memfd arena. */
static inline int t_in_memfd(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;

    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;

        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo &&
            (uintptr_t)p < hi)
            found = strstr(line, "memfd:zcsock") != NULL ? 1 : -1;
    }
    fclose(f);
    return found == 1;
}

/* Pattern on every 64th byte: enough to catch a lost or swapped page. */
static inline void t_fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 64)
        p[i] = (unsigned char)(seed * 31 + i / 64);
}

/* The first n bytes still hold the pattern of t_fill(.., seed). */
static inline int t_same(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 64)
        if (p[i] != (unsigned char)(seed * 31 + i / 64))
            return 0;
    return 1;
}

#endif
