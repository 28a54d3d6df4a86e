/* Advice from a process's counters: see zc_advise.h. */
#include "zc_advise.h"

#include <string.h>

typedef struct zc_rule {
    const char *id;
    const char *when;       /* counters ('+'-separated) whose sum fires the rule... */
    uint64_t least;         /* ... from this much */
    const char *weigh;      /* counters whose sum, times scale, orders the advice */
    double scale;
    const char *text;
} zc_rule_t;

static const zc_rule_t zc_rules[] = {
    { "peer_without_library", "local.declined.not_zcsock", 1,
      "local.declined.not_zcsock", 1e6,
      "connection ends that stayed on the kernel because the other end runs without the "
      "library: $(local.declined.not_zcsock) (local.declined.not_zcsock = "
      "$(local.declined.not_zcsock); paired: $(local.paired.accepted+local.paired.connected)). "
      "Start the peer under `zcsock run` too (or LD_PRELOAD=libzcsock.so) to pair them." },
    { "fd_limit", "local.declined.fd_limit", 1, "local.declined.fd_limit", 1e6,
      "$(local.declined.fd_limit) connection ends of this process stayed on the kernel because "
      "its descriptor limit was nearly used up: its paired connections hold a quarter of it "
      "(local.declined.fd_limit = $(local.declined.fd_limit)). Raise RLIMIT_NOFILE (`ulimit "
      "-n`, LimitNOFILE= for a systemd service) to pair them." },
    { "exchange_unavailable", "local.xchg.unavailable", 1, "path.local.send_bytes", 1,
      "page exchange is off: shared memory has no 2 MiB pages here (local.xchg.unavailable = "
      "$(local.xchg.unavailable)), so the $(path.local.send_bytes) bytes sent on paired "
      "connections were copied through the ring. As root, `echo advise > "
      "/sys/kernel/mm/transparent_hugepage/shmem_enabled` (or a hugetlb pool: vm.nr_hugepages) "
      "lets large sends lend their pages instead; ZCSOCK_EXCHANGE_4K=1 lends 4 KiB pages where "
      "that is not possible." },
    { "not_placed", "local.xchg.not_placed", 16, "local.xchg.not_placed", 2e6,
      "$(local.xchg.not_placed) units of large sends went through the ring because their "
      "buffers were not placed by the library's allocator hooks (local.xchg.not_placed = "
      "$(local.xchg.not_placed); bytes lent: $(local.xchg.bytes_lent)): the buffers come from "
      "memory the hooks did not place (a custom allocator, static or stack memory, or blocks "
      "below ZCSOCK_ALLOC_MIN). Allocate them with malloc/posix_memalign/mmap, or lower "
      "ZCSOCK_ALLOC_MIN to their size." },
    { "unaligned", "local.xchg.unaligned+local.xchg.too_small", 16,
      "local.xchg.unaligned+local.xchg.too_small", 1e6,
      "$(local.xchg.unaligned+local.xchg.too_small) sends of placed memory could not lend "
      "whole 2 MiB units (local.xchg.unaligned = $(local.xchg.unaligned), "
      "local.xchg.too_small = $(local.xchg.too_small)): send from 2 MiB-aligned offsets in "
      "multiples of 2 MiB to lend pages instead of copying." },
    { "untracked", "copy_why.untracked_fd+fd.beyond_table", 1,
      "copy_why.untracked_fd+fd.beyond_table", 1e3,
      "data calls on descriptors beyond the library's table: $(copy_why.untracked_fd) "
      "(copy_why.untracked_fd = $(copy_why.untracked_fd), fd.beyond_table = "
      "$(fd.beyond_table)): those sockets are never paired. The table is sized by the hard "
      "RLIMIT_NOFILE at start (at most 4,194,304): a process that raises its hard limit later "
      "gets descriptors beyond it. Start it with the hard limit it will use (`ulimit -Hn`, "
      "LimitNOFILE=)." },
    { "mailbox_flood", "local.mailbox.evicted+local.mailbox.refused", 64,
      "local.mailbox.evicted+local.mailbox.refused", 1e3,
      "something posts to this process's hand-over mailbox that is not a peer "
      "(local.mailbox.refused = $(local.mailbox.refused), local.mailbox.evicted = "
      "$(local.mailbox.evicted)): hand-overs still work (evicted ones go back to the kernel, "
      "local.mailbox.handed_back = $(local.mailbox.handed_back)), but look for a process of "
      "this user flooding the mailbox (ss -xp: <private dir>/mbox/k<8 hex>, the pid hidden under "
      "the user's key, or "
      "\\0zcsock/v1/M/<pid> where there is no private directory, which anyone can reach)." },
};

/* The sum of the counters named in keys ('+'-separated, len bytes). */
static uint64_t zc_keys_sum(zc_advise_get_t get, void *ctx, const char *keys, size_t len)
{
    uint64_t v = 0;

    while (len) {
        size_t n = strcspn(keys, "+");
        char key[64];

        if (n > len)
            n = len;
        if (n < sizeof(key)) {
            memcpy(key, keys, n);
            key[n] = 0;
            v += get(ctx, key);
        }
        keys += n;
        len -= n;
        if (len && *keys == '+') {
            keys++;
            len--;
        }
    }
    return v;
}

/* v in decimal at out (room for 21); its length. */
static size_t zc_utoa(uint64_t v, char *out)
{
    char t[21];
    size_t n = 0, i;

    do
        t[n++] = (char)('0' + v % 10);
    while ((v /= 10));
    for (i = 0; i < n; i++)
        out[i] = t[n - 1 - i];
    return n;
}

/* text with every $(keys) replaced by its value, into out. */
static void zc_expand(zc_advise_get_t get, void *ctx, const char *text, char *out, size_t size)
{
    size_t o = 0;

    while (*text && o + 22 < size) {
        const char *end;

        if (text[0] == '$' && text[1] == '(' && (end = strchr(text, ')'))) {
            o += zc_utoa(zc_keys_sum(get, ctx, text + 2, (size_t)(end - text - 2)), out + o);
            text = end + 1;
        } else {
            out[o++] = *text++;
        }
    }
    out[o] = 0;
}

int zc_advise(zc_advise_get_t get, void *ctx,
              void (*emit)(void *ctx, const char *id, const char *text), void *emit_ctx)
{
    enum { NR = sizeof(zc_rules) / sizeof(zc_rules[0]) };
    const zc_rule_t *fired[NR];
    double w[NR];
    size_t i, j, n = 0;

    for (i = 0; i < NR; i++) {
        const zc_rule_t *r = &zc_rules[i];

        if (zc_keys_sum(get, ctx, r->when, strlen(r->when)) < r->least)
            continue;
        w[n] = (double)zc_keys_sum(get, ctx, r->weigh, strlen(r->weigh)) * r->scale;
        fired[n++] = r;
    }
    for (i = 1; i < n; i++)             /* heaviest first */
        for (j = i; j > 0 && w[j] > w[j - 1]; j--) {
            const zc_rule_t *t = fired[j];
            double tw = w[j];

            fired[j] = fired[j - 1];
            w[j] = w[j - 1];
            fired[j - 1] = t;
            w[j - 1] = tw;
        }
    for (i = 0; i < n && i < ZC_ADVICE_MAX; i++) {
        char text[1024];

        zc_expand(get, ctx, fired[i]->text, text, sizeof(text));
        emit(emit_ctx, fired[i]->id, text);
    }
    return (int)n;
}
