/* The configuration table: every ZCSOCK_* variable, parsed once.
 *
 * zc_config holds static defaults from load time, so code running before the
 * constructor sees sane values.  zc_config_load() is called once, from the
 * library's initialisation; it reads the environment without getenv (a plain
 * scan of environ: no locks, no allocation), warns once per invalid or
 * unknown variable and keeps the default. */
#ifndef ZC_CONFIG_H
#define ZC_CONFIG_H

#include <limits.h>
#include <stdint.h>

#include "zc_config_list.h"

typedef struct zc_config {
#define ZC_CONFIG_FIELD_BOOL(f) uint64_t f;
#define ZC_CONFIG_FIELD_UINT(f) uint64_t f;
#define ZC_CONFIG_FIELD_SIZE(f) uint64_t f;
#define ZC_CONFIG_FIELD_PATH(f) char f[PATH_MAX];
#define ZC_CONFIG_FIELD(f, type, def, min, max, doc) ZC_CONFIG_FIELD_##type(f)
    ZC_CONFIG_LIST(ZC_CONFIG_FIELD)
#undef ZC_CONFIG_FIELD
} zc_config_t;

extern zc_config_t zc_config;

/* Parse environ into zc_config; warnings go through report (may be NULL).
 * Returns the number of variables rejected. */
int zc_config_load(char **envp, void (*report)(const char *msg));

/* Parse one value of the given variable into *zc_config; for tests.
 * Returns 0, -EINVAL (bad value) or -ENOENT (unknown variable name). */
int zc_config_set(const char *name, const char *value);

/* Restore every default. */
void zc_config_reset(void);

/* Visit each variable: name, effective value as text, whether it was set from
 * the environment, and its doc string. */
typedef void (*zc_config_visit_func_t)(void *arg, const char *name, const char *value,
                                       int from_env, const char *doc);
void zc_config_visit(zc_config_visit_func_t visit, void *arg);

#endif
