/* `zcsock run`: preload libzcsock.so into a command and exec it.
 *
 * The library goes first in LD_PRELOAD and everything already there stays,
 * in order.  When the same library is already listed, LD_PRELOAD is left as
 * it is; when another copy named libzcsock.so is listed, it is replaced in
 * place (two copies would both interpose).  Exit statuses follow env(1):
 * 127 when the command is not found, 126 when it cannot be run. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zcl.h"

#define ZCL_PRELOAD_MAX (64 * 1024)

typedef struct zcl_run_opts {
	const char *lib;
	const char *log;
	const char *stats;   /* value for ZCSOCK_STATS or NULL */
	const char *debug;   /* value for ZCSOCK_DEBUG or NULL */
	int verbose;
	int cmd_index;       /* argv index of the command */
} zcl_run_opts_t;

static const char zcl_run_usage[] =
	"usage: zcsock run [options] [--] command [args...]\n"
	"\n"
	"Run command with libzcsock.so preloaded (LD_PRELOAD, keeping what is\n"
	"already there).  The -- is needed only when command starts with '-'.\n"
	"\n"
	"options:\n"
	"  --stats[=N]   ZCSOCK_STATS=N (default 1): print a report at exit\n"
	"                (1: processes that did socket I/O, 2: every process,\n"
	"                3: every process, zero counters too)\n"
	"  --debug[=N]   ZCSOCK_DEBUG=N (default 1): one-line notices about\n"
	"                fallbacks (2: also every path decision)\n"
	"  --verbose     ZCSOCK_VERBOSE=1: print the effective configuration\n"
	"  --log FILE    ZCSOCK_LOG_FILE=FILE: logs and reports go to FILE\n"
	"                instead of stderr (%p in FILE becomes the pid)\n"
	"  --lib PATH    preload PATH instead of looking libzcsock.so up\n"
	"  -h, --help    print this text\n"
	"\n"
	"exit status: the command's; 127 when it is not found, 126 when it\n"
	"cannot be run, 1 when the library is missing, 2 on a usage error.\n";

/* Level of --stats=N (0 to 3) / --debug=N (0 to 2), as the library accepts. */
static const char *zcl_run_level_parse(const char *opt, const char *value, char max)
{
	if (strlen(value) != 1 || value[0] < '0' || value[0] > max)
		zcl_usage_fail("run: %s takes 0 to %c, not '%s'", opt, max, value);
	return value;
}

static void zcl_run_opts_parse(int argc, char **argv, zcl_run_opts_t *opts)
{
	const char *value;
	int i;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			fputs(zcl_run_usage, stdout);
			exit(ZCL_EXIT_OK);
		} else if (strcmp(arg, "--stats") == 0) {
			opts->stats = "1";
		} else if (strncmp(arg, "--stats=", 8) == 0) {
			opts->stats = zcl_run_level_parse("--stats", arg + 8, '3');
		} else if (strcmp(arg, "--debug") == 0) {
			opts->debug = "1";
		} else if (strncmp(arg, "--debug=", 8) == 0) {
			opts->debug = zcl_run_level_parse("--debug", arg + 8, '2');
		} else if (strcmp(arg, "--verbose") == 0) {
			opts->verbose = 1;
		} else if (zcl_opt_value(argc, argv, &i, "--log", &value)) {
			opts->log = value;
		} else if (zcl_opt_value(argc, argv, &i, "--lib", &value)) {
			opts->lib = value;
		} else {
			zcl_usage_fail("run: unknown option '%s'", arg);
		}
	}
	if (i >= argc)
		zcl_usage_fail("run: missing command to run");
	opts->cmd_index = i;
}

/* 1 when entry names the same file as lib (already preloaded), 2 when it
 * is another file called libzcsock.so, else 0. */
static int zcl_preload_entry_match(const char *entry, const char *lib)
{
	char real[PATH_MAX];
	const char *base = strrchr(entry, '/');

	if (realpath(entry, real) && strcmp(real, lib) == 0)
		return 1;
	if (strcmp(entry, lib) == 0)
		return 1;
	base = base ? base + 1 : entry;
	return strcmp(base, ZCL_LIB_NAME) == 0 ? 2 : 0;
}

/* Build the new LD_PRELOAD value from old (may be NULL) into out.
 * Returns 0, or -E2BIG when it does not fit. */
static int zcl_preload_build(const char *lib, const char *old, int noisy,
			     char *out, size_t len)
{
	char copy[ZCL_PRELOAD_MAX], joined[ZCL_PRELOAD_MAX] = "";
	char *save = NULL, *entry;
	int replaced = 0;
	size_t used = 0;

	if (!old)
		old = "";
	if (strlen(old) >= sizeof(copy))
		return -E2BIG;
	snprintf(copy, sizeof(copy), "%s", old);
	for (entry = strtok_r(copy, " :", &save); entry;
	     entry = strtok_r(NULL, " :", &save)) {
		int match = zcl_preload_entry_match(entry, lib);

		if (match == 1) /* already there: leave LD_PRELOAD alone */
			return snprintf(out, len, "%s", old) < (int)len ? 0 : -E2BIG;
		if (match == 2 && !replaced) {
			if (noisy)
				fprintf(stderr, "zcsock: replacing %s by %s in "
					"LD_PRELOAD\n", entry, lib);
			entry = (char *)lib;
			replaced = 1;
		}
		used += snprintf(joined + used, sizeof(joined) - used, "%s%s",
				 used ? ":" : "", entry);
		if (used >= sizeof(joined))
			return -E2BIG;
	}
	if (replaced)
		return snprintf(out, len, "%s", joined) < (int)len ? 0 : -E2BIG;
	/* prepend, keeping the old text exactly as it was */
	return snprintf(out, len, "%s%s%s", lib, used ? ":" : "",
			used ? old : "") < (int)len ? 0 : -E2BIG;
}

static int zcl_run_lib_resolve(const zcl_run_opts_t *opts, char *lib,
			       size_t len)
{
	zcl_lookup_t lookup;
	const char *why;

	if (zcl_lib_find(opts->lib, &lookup) < 0) {
		zcl_lookup_print(&lookup);
		return -ENOENT;
	}
	if (zcl_lib_check(lookup.resolved, &why) < 0) {
		fprintf(stderr, "zcsock: cannot preload %s: %s\n",
			lookup.resolved, why);
		return -ENOEXEC;
	}
	if (strpbrk(lookup.resolved, " :")) {
		fprintf(stderr, "zcsock: cannot preload %s: LD_PRELOAD cannot "
			"express a path with a space or colon\n", lookup.resolved);
		return -EINVAL;
	}
	snprintf(lib, len, "%s", lookup.resolved);
	return 0;
}

/* ZCSOCK_LOG_FILE relative to the launch directory, so that a command that
 * changes directory still logs where the user asked. */
static int zcl_run_log_set(const char *log)
{
	char cwd[PATH_MAX], path[2 * PATH_MAX];

	if (log[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return setenv("ZCSOCK_LOG_FILE", log, 1);
	snprintf(path, sizeof(path), "%s/%s", cwd, log);
	return setenv("ZCSOCK_LOG_FILE", path, 1);
}

static int zcl_run_env_set(const zcl_run_opts_t *opts, const char *lib)
{
	static char preload[ZCL_PRELOAD_MAX];
	int noisy = opts->debug && opts->debug[0] != '0';

	if (zcl_preload_build(lib, getenv("LD_PRELOAD"), noisy, preload,
			      sizeof(preload)) < 0) {
		fprintf(stderr, "zcsock: LD_PRELOAD is too long\n");
		return -E2BIG;
	}
	if (setenv("LD_PRELOAD", preload, 1) < 0 ||
	    (opts->stats && setenv("ZCSOCK_STATS", opts->stats, 1) < 0) ||
	    (opts->debug && setenv("ZCSOCK_DEBUG", opts->debug, 1) < 0) ||
	    (opts->verbose && setenv("ZCSOCK_VERBOSE", "1", 1) < 0) ||
	    (opts->log && zcl_run_log_set(opts->log) < 0)) {
		fprintf(stderr, "zcsock: cannot set the environment: %m\n");
		return -ENOMEM;
	}
	if (noisy)
		fprintf(stderr, "zcsock: LD_PRELOAD=%s\n", preload);
	return 0;
}

int zcl_cmd_run(int argc, char **argv)
{
	zcl_run_opts_t opts = { 0 };
	char lib[PATH_MAX];
	char **cmd;
	int err;

	zcl_run_opts_parse(argc, argv, &opts);
	cmd = argv + opts.cmd_index;
	if (zcl_run_lib_resolve(&opts, lib, sizeof(lib)) < 0 ||
	    zcl_run_env_set(&opts, lib) < 0)
		return ZCL_EXIT_FAIL;
	execvp(cmd[0], cmd);
	err = errno;
	fprintf(stderr, "zcsock: cannot run '%s': %s\n", cmd[0], strerror(err));
	return err == ENOENT ? ZCL_EXIT_NOT_FOUND : ZCL_EXIT_CANNOT_EXEC;
}
