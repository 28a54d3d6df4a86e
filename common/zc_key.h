/* The user's secret key and the names derived from it (issue 30, item 7).
 *
 * The local path meets its peer at abstract socket names (a listener's
 * beacon, a client's announcement), and abstract names are public: anyone
 * on the host may bind one first.  Derived from a socket cookie alone, the
 * name of a connection not yet made could be bound by another user, who
 * then kept it from pairing.  So where the user has a private directory
 * (common/zc_live.h: 0700, this user's), a 16-byte random key lives there
 * (<dir>/key, mode 0600, made once, by whichever process of the user needs
 * it first) and the names carry a keyed hash of the cookie (SipHash-2-4): a
 * process of another user cannot read the key, so it cannot know, let
 * alone bind first, any name of ours.  A same-user process can, as it can
 * ptrace ours.  Where there is no private directory, the names stay the
 * public ones (zc_key_get says so with 0). */
#ifndef ZC_KEY_H
#define ZC_KEY_H

#include <stddef.h>
#include <stdint.h>

#define ZC_KEY_LEN 16
#define ZC_KEY_FILE "key"

/* SipHash-2-4 of in[0, len) under key k. */
uint64_t zc_siphash(const uint8_t k[ZC_KEY_LEN], const void *in, size_t len);

/* The key file of directory dir (a private directory of this user): read
 * it, or make it when there is none (a complete file appears at once: it
 * is written under another name and linked).  0 with key filled, or
 * -errno; -EPERM: something is there that is not a 16-byte regular file of
 * this user closed to everyone else (not used, not replaced). */
int zc_key_load(const char *dir, uint8_t key[ZC_KEY_LEN]);

/* This process's key for its effective user (from the private directory,
 * loaded once per user and image; fork children keep it): 1 with key
 * filled, 0 when there is none to be had (no private directory, or a bad
 * key file: said once). Hook-safe. */
int zc_key_get(uint8_t key[ZC_KEY_LEN]);
/* The same for effective user euid, which the caller read (geteuid) for
 * the operation the key serves: one system call per pairing, not one per
 * name. */
int zc_key_get_for(uint32_t euid, uint8_t key[ZC_KEY_LEN]);

/* A keyed permutation of 32-bit numbers (a 4-round Feistel network whose
 * round function is SipHash-2-4 under k) and its inverse: the local path's
 * mailbox files are named by zc_key_hide(k, pid), so that the paths every
 * user sees in /proc/net/unix do not tell which processes use the library,
 * while the user's own processes find a mailbox by pid and a sweep finds
 * the pid a file stands for. */
uint32_t zc_key_hide(const uint8_t k[ZC_KEY_LEN], uint32_t v);
uint32_t zc_key_show(const uint8_t k[ZC_KEY_LEN], uint32_t v);

/* A fork child: a load another thread of the parent was making is not
 * under way here (its lock is let go; the cache, read under its seqlock,
 * is what the parent had). */
void zc_key_fork_child(void);

#endif
