/* The user's secret key and SipHash-2-4 (zc_key.h). */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "zc_key.h"
#include "zc_live.h"
#include "zc_log.h"
#include "zc_sys.h"
#include "zc_real.h"

/* --- SipHash-2-4 (Aumasson and Bernstein, 2012) -------------------------- */

static inline uint64_t zc_rotl(uint64_t x, int b)
{
    return x << b | x >> (64 - b);
}

static inline uint64_t zc_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define ZC_SIPROUND(v)                                                        \
    do {                                                                      \
        v[0] += v[1], v[1] = zc_rotl(v[1], 13), v[1] ^= v[0];                 \
        v[0] = zc_rotl(v[0], 32);                                             \
        v[2] += v[3], v[3] = zc_rotl(v[3], 16), v[3] ^= v[2];                 \
        v[0] += v[3], v[3] = zc_rotl(v[3], 21), v[3] ^= v[0];                 \
        v[2] += v[1], v[1] = zc_rotl(v[1], 17), v[1] ^= v[2];                 \
        v[2] = zc_rotl(v[2], 32);                                             \
    } while (0)

uint64_t zc_siphash(const uint8_t k[ZC_KEY_LEN], const void *in, size_t len)
{
    const uint8_t *p = in;
    uint64_t k0 = zc_le64(k), k1 = zc_le64(k + 8), m, b = (uint64_t)len << 56;
    uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                      k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull };
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        m = zc_le64(p + i);
        v[3] ^= m;
        ZC_SIPROUND(v);
        ZC_SIPROUND(v);
        v[0] ^= m;
    }
    for (size_t j = 0; i + j < len; j++)
        b |= (uint64_t)p[i + j] << (8 * j);
    v[3] ^= b;
    ZC_SIPROUND(v);
    ZC_SIPROUND(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++)
        ZC_SIPROUND(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* --- a keyed permutation of 32-bit numbers ------------------------------ */

static uint16_t zc_key_round(const uint8_t k[ZC_KEY_LEN], int i, uint16_t x)
{
    uint8_t in[4] = { 'P', (uint8_t)i, (uint8_t)x, (uint8_t)(x >> 8) };

    return (uint16_t)zc_siphash(k, in, sizeof(in));
}

uint32_t zc_key_hide(const uint8_t k[ZC_KEY_LEN], uint32_t v)
{
    uint16_t l = (uint16_t)(v >> 16), r = (uint16_t)v, t;

    for (int i = 0; i < 4; i++) {
        t = r;
        r = l ^ zc_key_round(k, i, r);
        l = t;
    }
    return (uint32_t)l << 16 | r;
}

uint32_t zc_key_show(const uint8_t k[ZC_KEY_LEN], uint32_t v)
{
    uint16_t l = (uint16_t)(v >> 16), r = (uint16_t)v, t;

    for (int i = 3; i >= 0; i--) {
        t = l;
        l = r ^ zc_key_round(k, i, l);
        r = t;
    }
    return (uint32_t)l << 16 | r;
}

/* --- the key file -------------------------------------------------------- */

/* Read the key at path: -ENOENT when there is none. */
static int zc_key_read(const char *path, uint8_t key[ZC_KEY_LEN])
{
    struct stat st;
    long fd = zc_sys(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    long n, rc = 0;

    if (fd < 0)
        return fd == -ELOOP ? -EPERM : (int)fd;
    if (zc_sys(SYS_fstat, fd, &st, 0) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) || st.st_size != ZC_KEY_LEN)
        rc = -EPERM;
    else if ((n = zc_sys(SYS_read, fd, key, ZC_KEY_LEN)) != ZC_KEY_LEN)
        rc = n < 0 ? n : -EPERM;
    zc_sys(SYS_close, fd, 0, 0);
    return (int)rc;
}

/* Make the key: 16 random bytes under a name of this process's, then
 * linked as the key (which fails when another process made one first). */
static int zc_key_make(const char *dir, const char *path)
{
    char tmp[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];
    uint8_t k[ZC_KEY_LEN];
    long fd, rc;

    if (zc_sys(SYS_getrandom, k, sizeof(k), 0) != (long)sizeof(k))
        return -EIO;
    zc_fmt(tmp, sizeof(tmp), "%s/.key.%ld", dir, zc_sys(SYS_getpid, 0, 0, 0));
    zc_sys(SYS_unlinkat, AT_FDCWD, tmp, 0);     /* an earlier image's of this pid */
    fd = zc_sys6(SYS_openat, AT_FDCWD, (long)tmp,
                 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600, 0, 0);
    if (fd < 0)
        return (int)fd;
    rc = zc_sys(SYS_write, fd, k, sizeof(k)) == (long)sizeof(k) ? 0 : -EIO;
    zc_sys(SYS_close, fd, 0, 0);
    if (!rc)
        rc = zc_sys6(SYS_linkat, AT_FDCWD, (long)tmp, AT_FDCWD, (long)path, 0, 0);
    zc_sys(SYS_unlinkat, AT_FDCWD, tmp, 0);
    memset(k, 0, sizeof(k));
    return rc == -EEXIST ? 0 : (int)rc;
}

int zc_key_load(const char *dir, uint8_t key[ZC_KEY_LEN])
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];
    int rc;

    if (strlen(dir) + sizeof("/.key.4194304") > sizeof(path))
        return -ENAMETOOLONG;
    zc_fmt(path, sizeof(path), "%s/" ZC_KEY_FILE, dir);
    rc = zc_key_read(path, key);
    if (rc != -ENOENT)
        return rc;
    rc = zc_key_make(dir, path);
    return rc ? rc : zc_key_read(path, key);
}

/* The cached key, a seqlock (seq odd while written; written under lock):
 * state 1 held for user euid, -1 none for euid, 0 not looked for. */
static struct {
    int lock;
    uint32_t seq;
    int state;
    uint32_t euid;
    uint8_t key[ZC_KEY_LEN];
} zc_key_cache;

/* The cache's answer for euid: 1 or -1, 0 when it has none (or is being
 * written). */
static int zc_key_cached(uint32_t euid, uint8_t key[ZC_KEY_LEN])
{
    uint32_t seq = __atomic_load_n(&zc_key_cache.seq, __ATOMIC_ACQUIRE);
    int state;

    if (seq & 1)
        return 0;
    /* (acquire loads: the second look at seq cannot come before them) */
    state = __atomic_load_n(&zc_key_cache.state, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&zc_key_cache.euid, __ATOMIC_ACQUIRE) != euid)
        state = 0;
    if (state == 1)
        for (int i = 0; i < ZC_KEY_LEN; i++)
            key[i] = __atomic_load_n(&zc_key_cache.key[i], __ATOMIC_ACQUIRE);
    return __atomic_load_n(&zc_key_cache.seq, __ATOMIC_RELAXED) == seq ? state : 0;
}

int zc_key_get(uint8_t key[ZC_KEY_LEN])
{
    return zc_key_get_for((uint32_t)geteuid(), key);
}

int zc_key_get_for(uint32_t euid, uint8_t key[ZC_KEY_LEN])
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uint8_t k[ZC_KEY_LEN];
    int state, rc;

    /* Loaded once; a thread (or a signal handler) that finds the load under
     * way waits a little, then goes without: its names are the public
     * ones, which only costs a pairing (the peer's names differ). */
    for (int tries = 0;; tries++) {
        state = zc_key_cached(euid, key);
        if (state)
            return state == 1;
        if (!__atomic_exchange_n(&zc_key_cache.lock, 1, __ATOMIC_ACQUIRE))
            break;
        if (tries >= 1000)
            return 0;
        zc_sys(SYS_sched_yield, 0, 0, 0);
    }
    state = zc_key_cached(euid, key);
    if (!state) {
        rc = zc_live_dir(dir, sizeof(dir), 1);
        if (!rc)
            rc = zc_key_load(dir, k);
        state = rc ? -1 : 1;
        if (rc)
            zc_log(ZC_LOG_NOTICE, "local path: no key in the private directory (error %d): "
                   "its rendezvous names are public ones, which another user may bind "
                   "first", -rc);
        /* (release stores: a reader that sees one sees seq odd first) */
        __atomic_store_n(&zc_key_cache.seq, zc_key_cache.seq + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&zc_key_cache.euid, euid, __ATOMIC_RELEASE);
        __atomic_store_n(&zc_key_cache.state, state, __ATOMIC_RELEASE);
        for (int i = 0; i < ZC_KEY_LEN; i++)
            __atomic_store_n(&zc_key_cache.key[i], rc ? 0 : k[i], __ATOMIC_RELEASE);
        __atomic_store_n(&zc_key_cache.seq, zc_key_cache.seq + 1, __ATOMIC_RELEASE);
        if (state == 1)
            memcpy(key, k, ZC_KEY_LEN);
        memset(k, 0, sizeof(k));
    }
    __atomic_store_n(&zc_key_cache.lock, 0, __ATOMIC_RELEASE);
    return state == 1;
}

ZC_FORK_CODE void zc_key_fork_child(void)
{
    if (zc_key_cache.seq & 1) {     /* an interrupted write: load again */
        zc_key_cache.state = 0;
        zc_key_cache.seq++;
    }
    if (__atomic_load_n(&zc_key_cache.lock, __ATOMIC_RELAXED))   /* (FORK PAGES) */
        __atomic_store_n(&zc_key_cache.lock, 0, __ATOMIC_RELEASE);
}
