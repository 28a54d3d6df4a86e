/* `zcsock stat PID --advise`: the advice rules of common/zc_advise.c over a
 * live reading of the process's counters. */
#include <stdint.h>
#include <stdio.h>

#include "zcl.h"
#include "zc_advise.h"

static uint64_t zcl_advise_get(void *ctx, const char *key)
{
	return zcl_stat_get(ctx, key);
}

static void zcl_advise_emit(void *ctx, const char *id, const char *text)
{
	fprintf(ctx, "[%s] %s\n", id, text);
}

int zcl_advise(const zcl_snap_t *s, FILE *out)
{
	int n = zc_advise(zcl_advise_get, (void *)s, zcl_advise_emit, out);

	if (!n)
		fprintf(out, "no advice: nothing the library saw calls for a change\n");
	return n;
}
