/* Allocation-free logging.
 *
 * Messages are formatted into a stack buffer by a small formatter of our own
 * (no stdio, no malloc, no locks) and written with one write(2), prefixed
 * `zcsock[pid]: `, to stderr or to ZCSOCK_LOG_FILE (opened, appended to and
 * closed per message, so the library never owns a descriptor the app could
 * reuse).  Safe from hooks, from signal handlers and after fork.
 *
 * Formats: %s %c %d %i %u %x %p %% with the l, ll, z length modifiers, and %m
 * (strerror of the errno at the call).  Messages are lowercase, one line.
 */
#ifndef ZC_LOG_H
#define ZC_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum { ZC_LOG_WARN = 0, ZC_LOG_NOTICE = 1, ZC_LOG_TRACE = 2 };

/* Where messages go: path (may hold %p, copied) or NULL for stderr.
 * Called once from the constructor, before any other thread exists. */
void zc_log_target_set(const char *path);

/* The level above which messages are dropped (ZCSOCK_DEBUG). */
void zc_log_level_set(int level);
int zc_log_enabled(int level);

/* Format and write one message at level. */
void zc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write raw bytes to the log target, unprefixed (reports).  Returns 0 or
 * -errno. */
int zc_log_write_raw(const char *buf, size_t len);

/* Format into buf (always NUL-terminated when size > 0); returns the length
 * written, truncating silently. */
size_t zc_fmt(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
size_t zc_vfmt(char *buf, size_t size, const char *fmt, va_list ap);

/* A callback the shim installs to tell whether fd 2 is a socket the app
 * opened itself (then stderr output would corrupt its stream and is dropped). */
void zc_log_stderr_guard_set(int (*is_app_socket)(int fd));

/* Log at most once per call site. */
#define ZC_LOG_ONCE(level, ...)                                               \
    do {                                                                      \
        static int zc_log_once_done_;                                         \
        if (!__atomic_exchange_n(&zc_log_once_done_, 1, __ATOMIC_RELAXED))    \
            zc_log(level, __VA_ARGS__);                                       \
    } while (0)

#endif
