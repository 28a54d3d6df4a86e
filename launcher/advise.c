/* `zcsock stat PID --advise`: what to change, from what the process did.
 * Each rule is data: the counters whose sum must reach a threshold, what
 * weighs it (the bytes or connections behind it), and a text in which
 * $(key) and $(key+key) stand for counters' values, so every suggestion
 * carries its evidence.  At most ZCL_ADVICE_MAX are printed, the heaviest
 * first.  The tier `live` fires each rule on a program built for it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcl.h"

#define ZCL_ADVICE_MAX 4

typedef struct zcl_rule {
	const char *id;
	const char *when;       /* counters ('+'-separated) whose sum fires the rule... */
	uint64_t least;         /* ... from this much */
	const char *weigh;      /* counters whose sum, times scale, orders the advice */
	double scale;
	const char *text;
} zcl_rule_t;

static const zcl_rule_t zcl_rules[] = {
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
	  "this user, or another user, flooding \\0zcsock/v1/M/<pid> (ss -xp)." },
};

/* The sum of the counters named in keys ('+'-separated, len bytes). */
static uint64_t zcl_keys_sum(const zcl_snap_t *s, const char *keys, size_t len)
{
	uint64_t v = 0;

	while (len) {
		size_t n = strcspn(keys, "+");
		char key[64];

		if (n > len)
			n = len;
		snprintf(key, sizeof(key), "%.*s", (int)n, keys);
		v += zcl_stat_get(s, key);
		keys += n;
		len -= n;
		if (len && *keys == '+') {
			keys++;
			len--;
		}
	}
	return v;
}

/* text with every $(keys) replaced by its value, into out. */
static void zcl_expand(const zcl_snap_t *s, const char *text, char *out, size_t size)
{
	size_t o = 0;

	while (*text && o + 1 < size) {
		const char *end;

		if (text[0] == '$' && text[1] == '(' && (end = strchr(text, ')'))) {
			o += (size_t)snprintf(out + o, size - o, "%llu", (unsigned long long)
					      zcl_keys_sum(s, text + 2, (size_t)(end - text - 2)));
			text = end + 1;
		} else {
			out[o++] = *text++;
		}
	}
	out[o < size ? o : size - 1] = 0;
}

int zcl_advise(const zcl_snap_t *s, FILE *out)
{
	const size_t nr = sizeof(zcl_rules) / sizeof(zcl_rules[0]);
	const zcl_rule_t *fired[sizeof(zcl_rules) / sizeof(zcl_rules[0])];
	double w[sizeof(zcl_rules) / sizeof(zcl_rules[0])];
	size_t i, j, n = 0;

	for (i = 0; i < nr; i++) {
		const zcl_rule_t *r = &zcl_rules[i];

		if (zcl_keys_sum(s, r->when, strlen(r->when)) < r->least)
			continue;
		w[n] = (double)zcl_keys_sum(s, r->weigh, strlen(r->weigh)) * r->scale;
		fired[n++] = r;
	}
	for (i = 1; i < n; i++)             /* heaviest first */
		for (j = i; j > 0 && w[j] > w[j - 1]; j--) {
			const zcl_rule_t *t = fired[j];
			double tw = w[j];

			fired[j] = fired[j - 1];
			w[j] = w[j - 1];
			fired[j - 1] = t;
			w[j - 1] = tw;
		}
	if (!n)
		fprintf(out, "no advice: nothing the library saw calls for a change\n");
	for (i = 0; i < n && i < ZCL_ADVICE_MAX; i++) {
		char text[1024];

		zcl_expand(s, fired[i]->text, text, sizeof(text));
		fprintf(out, "[%s] %s\n", fired[i]->id, text);
	}
	return (int)n;
}
