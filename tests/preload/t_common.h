/* Shared by the preload integration tests.
 *
 * Each test defines `int t_main(void)` returning T_PASS, T_FAIL or T_SKIP
 * (0/1/77, liburing's convention).  It is built twice: as a program (t_main
 * called from main) and as a shared library whose constructor calls t_main,
 * loaded by a host program (so the calls run from another library's
 * constructor, possibly before libzcsock's own).
 *
 * T_EXPECT_PRELOAD=1 in the environment says the runner preloaded the
 * library: then zcsock_is_active() must say so and T_CALLED() proves that
 * each intercepted call really went through the library by reading its
 * counter.  Without it, the library must be absent and the same program must
 * pass: the behaviour with and without the library is the same code. */
#ifndef T_COMMON_H
#define T_COMMON_H

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_PASS = 0, T_FAIL = 1, T_SKIP = 77 };

int t_main(void);

#define T_CHECK(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d %s)\n", __FILE__, \
                    __LINE__, #cond, errno, strerror(errno));                    \
            return T_FAIL;                                                       \
        }                                                                        \
    } while (0)

/* T_EXPECT_PATH: the path the test's paired connection must take when
 * preloaded: "local" (default) or "copy" (ZCSOCK_LOCAL=0). */
static inline int t_expect_local(void)
{
    const char *e = getenv("T_EXPECT_PATH");

    return !e || strcmp(e, "copy") != 0;
}

static inline int t_preloaded(void)
{
    const char *e = getenv("T_EXPECT_PRELOAD");

    return e && *e == '1';
}

/* Counter value, or 0 when the library is absent. */
static inline uint64_t t_stat(const char *name)
{
    int (*get)(const char *, uint64_t *) =
        (int (*)(const char *, uint64_t *))dlsym(RTLD_DEFAULT, "zcsock_stat_get");
    uint64_t v = 0;

    if (get && get(name, &v) != 0) {
        fprintf(stderr, "no counter %s\n", name);
        abort();
    }
    return v;
}

/* The library must be active exactly when the runner preloaded it. */
static inline int t_check_active(void)
{
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "zcsock_is_active");
    int is = active && active();

    if (is != t_preloaded()) {
        fprintf(stderr, "zcsock active=%d but expected %d\n", is, t_preloaded());
        return T_FAIL;
    }
    return T_PASS;
}

/* Snapshot a call counter; after the calls, T_CALLED proves interception. */
#define T_COUNT(name) uint64_t t_before_##name = t_stat("calls." #name)
#define T_CALLED(name) T_CHECK(!t_preloaded() || t_stat("calls." #name) > t_before_##name)

#endif
