/* zcsock public API.
 *
 * libzcsock.so is meant to be preloaded (LD_PRELOAD or `zcsock run`); an
 * application never needs this header.  Tests and tools use it to ask a
 * process whether the library is active and to read its counters.  Look the
 * functions up with dlsym(RTLD_DEFAULT, "zcsock_is_active") to stay runnable
 * without the library.
 *
 * Every function here is thread-safe and async-signal-safe, never allocates,
 * and may be called before the library's constructor has run.
 */
#ifndef ZCSOCK_H
#define ZCSOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZCSOCK_API __attribute__((visibility("default")))

/* 1 when the library is loaded, initialised and intercepting calls. */
ZCSOCK_API int zcsock_is_active(void);

/* The library's version string, for example "0.1.0". */
ZCSOCK_API const char *zcsock_version(void);

/* Read the counter called name (the keys of the ZCSOCK_STATS report, for
 * example "calls.send" or "path.copy.send_bytes") into *value_p.
 * Returns 0, or -1 with errno ENOENT when there is no such counter and
 * EINVAL when an argument is NULL. */
ZCSOCK_API int zcsock_stat_get(const char *name, uint64_t *value_p);

/* Write the full `key: value` statistics report to fd.  Returns 0, or -1 with
 * errno from write(2). */
ZCSOCK_API int zcsock_stats_write(int fd);

#ifdef __cplusplus
}
#endif
#endif
