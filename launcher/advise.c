/* `zcsock stat PID --advise`: what to change, from what the process did.
 * Each rule reads a few counters, fires only above a threshold, and says
 * what it saw (the evidence, with the counters' names) and what to do.  At
 * most ZCL_ADVICE_MAX are printed, the biggest first (by the bytes or
 * connections behind them).  The rules are tested against programs built
 * to trigger each (tests/live). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcl.h"

#define ZCL_ADVICE_MAX 4

typedef struct zcl_advice {
	const char *id;
	double weight;
	char text[600];
} zcl_advice_t;

typedef int (*zcl_rule_t)(const zcl_snap_t *s, zcl_advice_t *a);

#define G(k) zcl_stat_get(s, k)
#define U(v) ((unsigned long long)(v))

/* Connections whose peer runs without the library stayed on the kernel. */
static int zcl_rule_peer(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("local.declined.not_zcsock");

	if (n < 1)
		return 0;
	a->id = "peer_without_library";
	a->weight = (double)n * 1e6;
	snprintf(a->text, sizeof(a->text),
		 "%llu connection%s stayed on the kernel because the other end runs without "
		 "the library (local.declined.not_zcsock = %llu; paired: %llu). Start the peer "
		 "under `zcsock run` too (or LD_PRELOAD=libzcsock.so) to pair them.",
		 U(n), n == 1 ? "" : "s", U(n),
		 U(G("local.paired.accepted") + G("local.paired.connected")));
	return 1;
}

/* Pairing refused for want of descriptors. */
static int zcl_rule_fd_limit(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("local.declined.fd_limit");

	if (n < 1)
		return 0;
	a->id = "fd_limit";
	a->weight = (double)n * 1e6;
	snprintf(a->text, sizeof(a->text),
		 "%llu connection end%s of this process stayed on the kernel because its "
		 "descriptor limit was nearly used up: its paired connections hold a quarter of it "
		 "(local.declined.fd_limit = %llu). Raise RLIMIT_NOFILE "
		 "(`ulimit -n`, LimitNOFILE= for a systemd service) to pair them.",
		 U(n), n == 1 ? "" : "s", U(n));
	return 1;
}

/* Page exchange off: no 2 MiB shared-memory pages. */
static int zcl_rule_xchg_unavailable(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("local.xchg.unavailable"), bytes = G("path.local.send_bytes");

	if (n < 1)
		return 0;
	a->id = "exchange_unavailable";
	a->weight = (double)bytes;
	snprintf(a->text, sizeof(a->text),
		 "page exchange is off: shared memory has no 2 MiB pages here "
		 "(local.xchg.unavailable = %llu), so the %llu bytes sent on paired connections "
		 "were copied through the ring. As root, `echo advise > "
		 "/sys/kernel/mm/transparent_hugepage/shmem_enabled` (or a hugetlb pool: "
		 "vm.nr_hugepages) lets large sends lend their pages instead; "
		 "ZCSOCK_EXCHANGE_4K=1 lends 4 KiB pages where that is not possible.",
		 U(n), U(bytes));
	return 1;
}

/* Large sends copied because their buffers were not placed. */
static int zcl_rule_not_placed(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("local.xchg.not_placed"), lent = G("local.xchg.bytes_lent");

	if (n < 16)
		return 0;
	a->id = "not_placed";
	a->weight = (double)n * 2e6;
	snprintf(a->text, sizeof(a->text),
		 "%llu large send%s went through the ring because their buffers were not placed "
		 "by the library's allocator hooks (local.xchg.not_placed = %llu; bytes lent: "
		 "%llu): the buffers come from memory the hooks did not place (a custom "
		 "allocator, static or stack memory, or blocks below ZCSOCK_ALLOC_MIN). Allocate "
		 "them with malloc/posix_memalign/mmap, or lower ZCSOCK_ALLOC_MIN to their size.",
		 U(n), n == 1 ? "" : "s", U(n), U(lent));
	return 1;
}

/* Sends that were too small or unaligned for page exchange. */
static int zcl_rule_unaligned(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("local.xchg.unaligned") + G("local.xchg.too_small");

	if (n < 16)
		return 0;
	a->id = "unaligned";
	a->weight = (double)n * 1e6;
	snprintf(a->text, sizeof(a->text),
		 "%llu send%s of placed memory could not lend whole 2 MiB units (local.xchg."
		 "unaligned = %llu, local.xchg.too_small = %llu): send from 2 MiB-aligned offsets "
		 "in multiples of 2 MiB to lend pages instead of copying.",
		 U(n), n == 1 ? "" : "s", U(G("local.xchg.unaligned")), U(G("local.xchg.too_small")));
	return 1;
}

/* Descriptors beyond the library's table go untracked (copied, unpaired). */
static int zcl_rule_untracked(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t n = G("copy_why.untracked_fd"), b = G("fd.beyond_table");

	if (n + b < 1)
		return 0;
	a->id = "untracked";
	a->weight = (double)(n + b) * 1e3;
	snprintf(a->text, sizeof(a->text),
		 "%llu data call%s used descriptors beyond the library's table (copy_why."
		 "untracked_fd = %llu, fd.beyond_table = %llu): those sockets are never paired. "
		 "The table follows the soft RLIMIT_NOFILE at start: start the process with the "
		 "limit it will use.", U(n), n == 1 ? "" : "s", U(n), U(b));
	return 1;
}

/* The process's mailbox is being flooded. */
static int zcl_rule_mailbox(const zcl_snap_t *s, zcl_advice_t *a)
{
	uint64_t e = G("local.mailbox.evicted"), r = G("local.mailbox.refused");

	if (e + r < 64)
		return 0;
	a->id = "mailbox_flood";
	a->weight = (double)(e + r) * 1e3;
	snprintf(a->text, sizeof(a->text),
		 "something posts to this process's hand-over mailbox that is not a peer "
		 "(local.mailbox.refused = %llu, local.mailbox.evicted = %llu): hand-overs still "
		 "work (evicted ones go back to the kernel, local.mailbox.handed_back = %llu), "
		 "but look for a process of this user, or another user, flooding "
		 "\\0zcsock/v1/M/<pid> (ss -xp).", U(r), U(e), U(G("local.mailbox.handed_back")));
	return 1;
}

static const zcl_rule_t zcl_rules[] = {
	zcl_rule_peer, zcl_rule_fd_limit, zcl_rule_xchg_unavailable, zcl_rule_not_placed,
	zcl_rule_unaligned, zcl_rule_untracked, zcl_rule_mailbox,
};

int zcl_advise(const zcl_snap_t *s, FILE *out)
{
	zcl_advice_t got[sizeof(zcl_rules) / sizeof(zcl_rules[0])];
	int n = 0, i, j;

	for (i = 0; i < (int)(sizeof(zcl_rules) / sizeof(zcl_rules[0])); i++)
		if (zcl_rules[i](s, &got[n]))
			n++;
	for (i = 1; i < n; i++)             /* biggest first */
		for (j = i; j > 0 && got[j].weight > got[j - 1].weight; j--) {
			zcl_advice_t t = got[j];

			got[j] = got[j - 1];
			got[j - 1] = t;
		}
	if (!n)
		fprintf(out, "no advice: nothing the library saw calls for a change\n");
	for (i = 0; i < n && i < ZCL_ADVICE_MAX; i++)
		fprintf(out, "[%s] %s\n", got[i].id, got[i].text);
	return n;
}
