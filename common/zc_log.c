/* Allocation-free logging: see zc_log.h for the contract. */
#include "zc_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "zc_sys.h"


#define ZC_LOG_LINE_MAX 512

static char log_path[PATH_MAX];    /* "" means stderr */
static int log_level;
static int (*log_is_app_socket)(int fd);

void zc_log_target_set(const char *path)
{
    size_t n = path ? strlen(path) : 0;

    if (n >= sizeof(log_path))
        n = sizeof(log_path) - 1;
    memcpy(log_path, path ? path : "", n);
    log_path[n] = '\0';
}

void zc_log_level_set(int level)
{
    log_level = level;
}

int zc_log_enabled(int level)
{
    return level <= log_level;
}

void zc_log_stderr_guard_set(int (*is_app_socket)(int fd))
{
    log_is_app_socket = is_app_socket;
}

/* --- formatter ----------------------------------------------------------- */

typedef struct zc_out {
    char *buf;
    size_t size, len;
} zc_out_t;

static void zc_out_char(zc_out_t *o, char c)
{
    if (o->len + 1 < o->size)
        o->buf[o->len++] = c;
}

static void zc_out_str(zc_out_t *o, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s)
        zc_out_char(o, *s++);
}

static void zc_out_uint(zc_out_t *o, unsigned long long v, unsigned base)
{
    char tmp[24];
    int i = 0;

    do {
        tmp[i++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (i)
        zc_out_char(o, tmp[--i]);
}

static void zc_out_int(zc_out_t *o, long long v)
{
    if (v < 0) {
        zc_out_char(o, '-');
        zc_out_uint(o, 0ULL - (unsigned long long)v, 10);
    } else {
        zc_out_uint(o, (unsigned long long)v, 10);
    }
}

/* Read an integer argument of the length given by the modifiers. */
static long long zc_arg_signed(va_list *ap, int lng, int size)
{
    if (size)
        return va_arg(*ap, ssize_t);
    if (lng >= 2)
        return va_arg(*ap, long long);
    if (lng == 1)
        return va_arg(*ap, long);
    return va_arg(*ap, int);
}

static unsigned long long zc_arg_unsigned(va_list *ap, int lng, int size)
{
    if (size)
        return va_arg(*ap, size_t);
    if (lng >= 2)
        return va_arg(*ap, unsigned long long);
    if (lng == 1)
        return va_arg(*ap, unsigned long);
    return va_arg(*ap, unsigned);
}

size_t zc_vfmt(char *buf, size_t size, const char *fmt, va_list ap_in)
{
    zc_out_t o = { buf, size, 0 };
    int saved_errno = errno;
    va_list ap;

    va_copy(ap, ap_in);
    for (; *fmt; fmt++) {
        int lng = 0, sz = 0;

        if (*fmt != '%') {
            zc_out_char(&o, *fmt);
            continue;
        }
        fmt++;
        for (;; fmt++) {
            if (*fmt == 'l')
                lng++;
            else if (*fmt == 'z')
                sz = 1;
            else
                break;
        }
        switch (*fmt) {
        case 's': zc_out_str(&o, va_arg(ap, const char *)); break;
        case 'c': zc_out_char(&o, (char)va_arg(ap, int)); break;
        case 'd':
        case 'i': zc_out_int(&o, zc_arg_signed(&ap, lng, sz)); break;
        case 'u': zc_out_uint(&o, zc_arg_unsigned(&ap, lng, sz), 10); break;
        case 'x': zc_out_uint(&o, zc_arg_unsigned(&ap, lng, sz), 16); break;
        case 'p':
            zc_out_str(&o, "0x");
            zc_out_uint(&o, (uintptr_t)va_arg(ap, void *), 16);
            break;
        case 'm': zc_out_str(&o, strerrordesc_np(saved_errno) ?: "unknown error"); break;
        case '%': zc_out_char(&o, '%'); break;
        case '\0': fmt--; break;
        default: zc_out_char(&o, '%'); zc_out_char(&o, *fmt); break;
        }
    }
    va_end(ap);
    if (size)
        buf[o.len] = '\0';
    return o.len;
}

size_t zc_fmt(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    size_t n;

    va_start(ap, fmt);
    n = zc_vfmt(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

/* --- output -------------------------------------------------------------- */

static ssize_t zc_log_sys_write(int fd, const void *buf, size_t len)
{
    /* The raw syscall: works before the resolver ran and never re-enters
     * our own write hook. */
    return zc_syscall(SYS_write, fd, buf, len);
}

/* Expand %p in the configured path. */
static void zc_log_path_expand(char *out, size_t size)
{
    zc_out_t o = { out, size, 0 };
    const char *s;

    for (s = log_path; *s; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            zc_out_uint(&o, (unsigned long long)getpid(), 10);
            s++;
        } else {
            zc_out_char(&o, *s);
        }
    }
    out[o.len] = '\0';
}

int zc_log_write_raw(const char *buf, size_t len)
{
    int saved = errno, fd = 2, rc = 0;
    char path[PATH_MAX];

    if (log_path[0]) {
        zc_log_path_expand(path, sizeof(path));
        fd = (int)zc_syscall(SYS_openat, AT_FDCWD, path,
                          O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = -errno;
            goto out;
        }
    } else if (log_is_app_socket && log_is_app_socket(2)) {
        goto out;   /* fd 2 is one of the app's own sockets: never write there */
    }
    while (len) {
        ssize_t n = zc_log_sys_write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            break;
        }
        buf += n;
        len -= (size_t)n;
    }
    if (fd != 2)
        zc_syscall(SYS_close, fd);
out:
    errno = saved;
    return rc;
}

void zc_log(int level, const char *fmt, ...)
{
    char line[ZC_LOG_LINE_MAX];
    size_t n;
    va_list ap;

    if (!zc_log_enabled(level))
        return;
    n = zc_fmt(line, sizeof(line), "zcsock[%d]: ", (int)getpid());
    va_start(ap, fmt);
    n += zc_vfmt(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    zc_log_write_raw(line, n);
}
