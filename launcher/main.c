/* zcsock: the command-line launcher.  Dispatches to the commands (run,
 * doctor, version) and owns the usage conventions shared by all of them:
 * --help/-h prints usage to stdout and exits 0; any usage error prints one
 * line `zcsock: <what> (try 'zcsock --help')` to stderr and exits 2. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zcl.h"

typedef int (*zcl_cmd_func_t)(int argc, char **argv);

typedef struct zcl_command {
	const char *name;
	zcl_cmd_func_t func;
} zcl_command_t;

static const zcl_command_t zcl_commands[] = {
	{ "run", zcl_cmd_run },
	{ "doctor", zcl_cmd_doctor },
	{ "stat", zcl_cmd_stat },
	{ "top", zcl_cmd_top },
	{ "version", zcl_cmd_version },
	{ "__probe", zcl_cmd_probe }, /* internal, for doctor */
};

static const char zcl_usage_text[] =
	"usage: zcsock <command> [options]\n"
	"\n"
	"Run unmodified programs with zero-copy socket I/O (libzcsock.so).\n"
	"\n"
	"commands:\n"
	"  run [--stats] [--debug] [--log FILE] [--lib PATH] [--] cmd [args...]\n"
	"                 run cmd with libzcsock.so preloaded\n"
	"  doctor [--json] [--lib PATH]\n"
	"                 report what this machine offers zcsock and what to change\n"
	"  stat [PID] [--json] [--watch [S]] [--all] [--advise]\n"
	"                 what the library does in running processes, live\n"
	"  top [--interval S] [--sort bytes|avoided|calls|pid] [--count N]\n"
	"                 every process under the library, refreshed, like top(1)\n"
	"  version        print the version and the library that run would use\n"
	"  help [command] print this text or a command's usage\n"
	"\n"
	"options:\n"
	"  -h, --help     print usage (also after a command: zcsock run --help)\n"
	"  --version      same as 'zcsock version'\n"
	"\n"
	"The library is looked up in this order: --lib, $ZCSOCK_LIBRARY,\n"
	"<dir of zcsock>/libzcsock.so, <dir>/../lib/libzcsock.so,\n"
	"<dir>/../lib/<multiarch>/libzcsock.so, " ZCSOCK_LIBDIR "/libzcsock.so.\n";

void zcl_usage_fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "zcsock: %s (try 'zcsock --help')\n", msg);
	exit(ZCL_EXIT_USAGE);
}

int zcl_opt_value(int argc, char **argv, int *i_p, const char *name,
		  const char **value_p)
{
	const char *arg = argv[*i_p];
	size_t len = strlen(name);

	if (strncmp(arg, name, len) != 0)
		return 0;
	if (arg[len] == '=') {
		*value_p = arg + len + 1;
	} else if (arg[len] == '\0') {
		if (*i_p + 1 >= argc)
			zcl_usage_fail("option '%s' needs a value", name);
		*value_p = argv[++*i_p];
	} else {
		return 0;
	}
	if (!**value_p)
		zcl_usage_fail("option '%s' needs a non-empty value", name);
	return 1;
}

static const zcl_command_t *zcl_command_find(const char *name)
{
	for (size_t i = 0; i < sizeof(zcl_commands) / sizeof(zcl_commands[0]); i++)
		if (strcmp(zcl_commands[i].name, name) == 0)
			return &zcl_commands[i];
	return NULL;
}

static int zcl_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* `zcsock help [command]`: the command's own --help. */
static int zcl_cmd_help(int argc, char **argv)
{
	const zcl_command_t *cmd;
	char help_arg[] = "--help";

	if (argc < 2 || zcl_is_help(argv[1])) {
		fputs(zcl_usage_text, stdout);
		return ZCL_EXIT_OK;
	}
	if (argc > 2)
		zcl_usage_fail("help: unexpected argument '%s'", argv[2]);
	cmd = zcl_command_find(argv[1]);
	if (!cmd)
		zcl_usage_fail("help: unknown command '%s'", argv[1]);
	char *sub_argv[] = { argv[1], help_arg, NULL };
	return cmd->func(2, sub_argv);
}

int main(int argc, char **argv)
{
	const zcl_command_t *cmd;

	if (argc < 2)
		zcl_usage_fail("missing command");
	if (zcl_is_help(argv[1])) {
		if (argc > 2)
			zcl_usage_fail("unexpected argument '%s'", argv[2]);
		fputs(zcl_usage_text, stdout);
		return ZCL_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return zcl_cmd_version(argc - 1, argv + 1);
	if (strcmp(argv[1], "help") == 0)
		return zcl_cmd_help(argc - 1, argv + 1);
	if (argv[1][0] == '-')
		zcl_usage_fail("unknown option '%s'", argv[1]);
	cmd = zcl_command_find(argv[1]);
	if (!cmd)
		zcl_usage_fail("unknown command '%s'", argv[1]);
	return cmd->func(argc - 1, argv + 1);
}
