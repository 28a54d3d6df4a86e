/* The configuration table: see zc_config.h. */
#include "zc_config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "zc_log.h"

typedef enum { ZC_CFG_BOOL, ZC_CFG_UINT, ZC_CFG_SIZE, ZC_CFG_PATH } zc_cfg_type_t;

typedef struct zc_config_entry {
    const char *name;       /* without the ZCSOCK_ prefix, lowercase field */
    zc_cfg_type_t type;
    uint64_t def, min, max;
    size_t offset;
    const char *doc;
} zc_config_entry_t;

zc_config_t zc_config = {
#define ZC_CONFIG_INIT_BOOL(f, def) .f = def,
#define ZC_CONFIG_INIT_UINT(f, def) .f = def,
#define ZC_CONFIG_INIT_SIZE(f, def) .f = def,
#define ZC_CONFIG_INIT_PATH(f, def)
#define ZC_CONFIG_INIT(f, type, def, min, max, doc) ZC_CONFIG_INIT_##type(f, def)
    ZC_CONFIG_LIST(ZC_CONFIG_INIT)
#undef ZC_CONFIG_INIT
};

static const zc_config_entry_t zc_config_table[] = {
#define ZC_CONFIG_ENTRY(f, type, def, min, max, doc) \
    { #f, ZC_CFG_##type, def, min, max, offsetof(zc_config_t, f), doc },
    ZC_CONFIG_LIST(ZC_CONFIG_ENTRY)
#undef ZC_CONFIG_ENTRY
};

#define ZC_CONFIG_COUNT (sizeof(zc_config_table) / sizeof(zc_config_table[0]))
#define ZC_PREFIX "ZCSOCK_"
#define ZC_PREFIX_LEN (sizeof(ZC_PREFIX) - 1)

static uint8_t zc_config_from_env[ZC_CONFIG_COUNT];

/* ZCSOCK_LOG_FILE <-> log_file */
static int zc_config_name_eq(const char *env_name, size_t len, const char *field)
{
    size_t i;

    for (i = 0; i < len; i++) {
        char c = env_name[i];

        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != field[i])
            return 0;
    }
    return field[len] == '\0';
}

static const zc_config_entry_t *zc_config_find(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < ZC_CONFIG_COUNT; i++)
        if (zc_config_name_eq(name, len, zc_config_table[i].name))
            return &zc_config_table[i];
    return NULL;
}

static int zc_config_parse_bool(const char *v, uint64_t *out_p)
{
    static const char *const yes[] = { "1", "yes", "on", "true", "y" };
    static const char *const no[] = { "0", "no", "off", "false", "n" };
    size_t i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcasecmp(v, yes[i])) {
            *out_p = 1;
            return 0;
        }
        if (!strcasecmp(v, no[i])) {
            *out_p = 0;
            return 0;
        }
    }
    return -EINVAL;
}

static int zc_config_parse_uint(const char *v, int allow_suffix, uint64_t *out_p)
{
    uint64_t x = 0, mult = 1;

    if (*v < '0' || *v > '9')
        return -EINVAL;
    for (; *v >= '0' && *v <= '9'; v++) {
        if (x > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    if (allow_suffix && *v) {
        switch (*v) {
        case 'k': case 'K': mult = 1ULL << 10; break;
        case 'm': case 'M': mult = 1ULL << 20; break;
        case 'g': case 'G': mult = 1ULL << 30; break;
        default: return -EINVAL;
        }
        v++;
        if (*v == 'i' || *v == 'I')
            v++;
        if (*v == 'b' || *v == 'B')
            v++;
    }
    if (*v)
        return -EINVAL;
    if (x > UINT64_MAX / mult)
        return -ERANGE;
    *out_p = x * mult;
    return 0;
}

static int zc_config_apply(const zc_config_entry_t *e, const char *value)
{
    char *field = (char *)&zc_config + e->offset;
    uint64_t x;
    int rc;

    switch (e->type) {
    case ZC_CFG_PATH:
        if (strlen(value) >= PATH_MAX)
            return -EINVAL;
        strcpy(field, value);
        return 0;
    case ZC_CFG_BOOL:
        rc = zc_config_parse_bool(value, &x);
        break;
    default:
        rc = zc_config_parse_uint(value, e->type == ZC_CFG_SIZE, &x);
        if (!rc && (x < e->min || x > e->max))
            rc = -ERANGE;
        break;
    }
    if (rc)
        return -EINVAL;
    memcpy(field, &x, sizeof(x));
    return 0;
}

static void zc_config_warn(void (*report)(const char *), const zc_config_entry_t *e,
                           const char *env)
{
    char msg[PATH_MAX + 128];
    const char *what = "0 or 1";
    char range[64];

    if (!report)
        return;
    if (!e) {
        zc_fmt(msg, sizeof(msg), "unknown variable %s ignored (see zcsock --help)", env);
    } else {
        if (e->type == ZC_CFG_UINT || e->type == ZC_CFG_SIZE) {
            zc_fmt(range, sizeof(range), "%s %llu..%llu",
                   e->type == ZC_CFG_SIZE ? "a size (K/M/G suffixes)" : "an integer",
                   (unsigned long long)e->min, (unsigned long long)e->max);
            what = range;
        } else if (e->type == ZC_CFG_PATH) {
            what = "a path shorter than PATH_MAX";
        }
        zc_fmt(msg, sizeof(msg), "ignoring %s: expected %s; keeping the default", env, what);
    }
    report(msg);
}

int zc_config_load(char **envp, void (*report)(const char *))
{
    int rejected = 0;

    for (; envp && *envp; envp++) {
        const char *env = *envp, *eq;
        const zc_config_entry_t *e;

        if (strncmp(env, ZC_PREFIX, ZC_PREFIX_LEN) ||
            !strncmp(env, ZC_PREFIX "INHERIT=", ZC_PREFIX_LEN + 8))
            continue;   /* not ours, or the library's own hand-over across exec */
        eq = strchr(env, '=');
        if (!eq)
            continue;
        e = zc_config_find(env + ZC_PREFIX_LEN, (size_t)(eq - env) - ZC_PREFIX_LEN);
        if (!e || zc_config_apply(e, eq + 1)) {
            zc_config_warn(report, e, env);
            rejected++;
            continue;
        }
        zc_config_from_env[e - zc_config_table] = 1;
    }
    return rejected;
}

int zc_config_set(const char *name, const char *value)
{
    const zc_config_entry_t *e;

    if (strncmp(name, ZC_PREFIX, ZC_PREFIX_LEN))
        return -ENOENT;
    e = zc_config_find(name + ZC_PREFIX_LEN, strlen(name) - ZC_PREFIX_LEN);
    if (!e)
        return -ENOENT;
    return zc_config_apply(e, value);
}

void zc_config_reset(void)
{
    size_t i;

    for (i = 0; i < ZC_CONFIG_COUNT; i++) {
        const zc_config_entry_t *e = &zc_config_table[i];
        char *field = (char *)&zc_config + e->offset;

        if (e->type == ZC_CFG_PATH)
            field[0] = '\0';
        else
            memcpy(field, &e->def, sizeof(e->def));
        zc_config_from_env[i] = 0;
    }
}

void zc_config_visit(zc_config_visit_func_t visit, void *arg)
{
    size_t i, j;

    for (i = 0; i < ZC_CONFIG_COUNT; i++) {
        const zc_config_entry_t *e = &zc_config_table[i];
        const char *field = (const char *)&zc_config + e->offset;
        char name[64], value[PATH_MAX];
        uint64_t x;

        zc_fmt(name, sizeof(name), ZC_PREFIX "%s", e->name);
        for (j = ZC_PREFIX_LEN; name[j]; j++)
            if (name[j] >= 'a' && name[j] <= 'z')
                name[j] = (char)(name[j] - 'a' + 'A');
        if (e->type == ZC_CFG_PATH) {
            zc_fmt(value, sizeof(value), "%s", field);
        } else {
            memcpy(&x, field, sizeof(x));
            zc_fmt(value, sizeof(value), "%llu", (unsigned long long)x);
        }
        visit(arg, name, value, zc_config_from_env[i], e->doc);
    }
}
