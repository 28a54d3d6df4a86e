/* Internal header of the zcsock launcher (launcher/): the `zcsock` command.
 * Never included outside this folder. */
#ifndef ZCL_H
#define ZCL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifndef ZCSOCK_VERSION
#define ZCSOCK_VERSION "unknown"
#endif
#ifndef ZCSOCK_LIBDIR
#define ZCSOCK_LIBDIR "/usr/local/lib"
#endif
#ifndef ZCSOCK_MULTIARCH
#define ZCSOCK_MULTIARCH ""
#endif

#define ZCL_LIB_NAME "libzcsock.so"
#define ZCL_PATH_MAX 4096
#define ZCL_LOOKUP_MAX 8

/* Exit statuses, as env(1) uses them. */
enum {
	ZCL_EXIT_OK = 0,
	ZCL_EXIT_FAIL = 1,
	ZCL_EXIT_USAGE = 2,
	ZCL_EXIT_CANNOT_EXEC = 126,
	ZCL_EXIT_NOT_FOUND = 127,
};

/* Where the library lookup looked, in order, and what it found.  Filled by
 * zcl_lib_find(); chosen is an index into path[] or -1. */
typedef struct zcl_lookup {
	int count;
	int chosen;
	int explicit_source;      /* 1 when --lib or ZCSOCK_LIBRARY decided */
	const char *source[ZCL_LOOKUP_MAX]; /* "--lib", "ZCSOCK_LIBRARY", ... */
	char path[ZCL_LOOKUP_MAX][ZCL_PATH_MAX];
	char resolved[ZCL_PATH_MAX]; /* absolute, symlink-free chosen path */
} zcl_lookup_t;

/* Find libzcsock.so.  lib_opt is the --lib argument or NULL.  Order: --lib,
 * $ZCSOCK_LIBRARY, <exe dir>/libzcsock.so, <exe dir>/../lib/libzcsock.so,
 * <exe dir>/../lib/<multiarch>/libzcsock.so, ZCSOCK_LIBDIR/libzcsock.so.
 * An explicit choice (--lib or ZCSOCK_LIBRARY) is final: when that file is
 * missing the lookup fails instead of silently taking another copy.
 * Returns 0 with lookup_p->resolved set, or -ENOENT; lookup_p always records
 * the candidates tried (for zcl_lookup_print). */
int zcl_lib_find(const char *lib_opt, zcl_lookup_t *lookup_p);

/* Print "zcsock: libzcsock.so not found; looked in:" and one indented line
 * per candidate to stderr. */
void zcl_lookup_print(const zcl_lookup_t *lookup);

/* Print "library: not found; looked in: a, b, ..." as one line to out. */
void zcl_lookup_print_line(const zcl_lookup_t *lookup, FILE *out);

/* Check that path is an ELF shared object of this machine's class, so that
 * ld.so will not ignore it.  Returns 0, or -errno with *why_p saying what is
 * wrong. */
int zcl_lib_check(const char *path, const char **why_p);

/* Option with a value: when argv[*i_p] is "name=VALUE" or "name" followed
 * by VALUE, store VALUE in *value_p, advance *i_p past it and return 1;
 * return 0 when argv[*i_p] is another argument.  A missing value is a usage
 * error (exit 2). */
int zcl_opt_value(int argc, char **argv, int *i_p, const char *name,
		  const char **value_p);

/* Print `zcsock: <message> (try 'zcsock --help')` as one line on stderr and
 * exit with status 2.  Used for every usage error. */
void zcl_usage_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/* The commands; argv[0] is the command name.  Each returns the exit status
 * (run returns only on failure). */
int zcl_cmd_run(int argc, char **argv);
int zcl_cmd_doctor(int argc, char **argv);
int zcl_cmd_stat(int argc, char **argv);
int zcl_cmd_top(int argc, char **argv);

/* stat.c: one reading of a process's counters; advise.c: the advice rules
 * over it (the number given). */
typedef struct zcl_snap zcl_snap_t;
uint64_t zcl_stat_get(const zcl_snap_t *s, const char *key);
int zcl_advise(const zcl_snap_t *s, FILE *out);
int zcl_cmd_version(int argc, char **argv);

/* Read at most len-1 bytes of a small file (/proc, /sys) with open/read,
 * NUL-terminate and strip the trailing newline.  Returns the length or
 * -errno; buf is "" on failure. */
int zcl_file_read(const char *path, char *buf, size_t len);

/* doctor: one checked item per output line. */
typedef enum zcl_status {
	ZCL_ST_OK,      /* present and good for zcsock */
	ZCL_ST_INFO,    /* worth knowing, nothing to change */
	ZCL_ST_WARN,    /* works, but a change would make zcsock faster */
	ZCL_ST_NO,      /* missing: zcsock falls back to copying */
} zcl_status_t;

#define ZCL_ITEMS_MAX 24

typedef struct zcl_item {
	const char *name;
	zcl_status_t status;
	char value[256];   /* what was found */
	char meaning[384]; /* what it means for zcsock */
	char fix[384];     /* what to change for more speed, or "" */
} zcl_item_t;

typedef struct zcl_doctor {
	const char *lib_opt;
	int count;
	zcl_item_t items[ZCL_ITEMS_MAX];
} zcl_doctor_t;

/* Append a zeroed item called name (a string literal), status info. */
zcl_item_t *zcl_item_add(zcl_doctor_t *doc, const char *name);

#define ZCL_SET(field, ...) snprintf((field), sizeof(field), __VA_ARGS__)

/* The checks; each appends its items to doc and never fails. */
void zcl_check_uring(zcl_doctor_t *doc);       /* doctor_kern.c */
void zcl_check_zerocopy(zcl_doctor_t *doc);
void zcl_check_uffd(zcl_doctor_t *doc);
void zcl_check_ptrace(zcl_doctor_t *doc);
void zcl_check_thp(zcl_doctor_t *doc);         /* doctor_mem.c */
void zcl_check_hugetlb(zcl_doctor_t *doc);
void zcl_check_balloon(zcl_doctor_t *doc);
void zcl_check_memlock(zcl_doctor_t *doc);
void zcl_check_memfd(zcl_doctor_t *doc);
void zcl_check_library(zcl_doctor_t *doc);     /* doctor_lib.c */

/* The hidden command `zcsock __probe` that doctor runs with the library
 * preloaded: prints "active=N version=V" or "missing=zcsock_is_active". */
int zcl_cmd_probe(int argc, char **argv);

#endif
