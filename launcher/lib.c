/* Finding libzcsock.so for `zcsock run`, `doctor` and `version`, checking
 * that it is a loadable shared object, and the `version` command. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zcl.h"

static void zcl_lookup_add(zcl_lookup_t *lookup, const char *source,
			   const char *dir, const char *rel)
{
	int n = lookup->count, len;

	if (n >= ZCL_LOOKUP_MAX)
		return;
	lookup->source[n] = source;
	len = snprintf(lookup->path[n], ZCL_PATH_MAX, "%s%s%s", dir ? dir : "",
		       dir ? "/" : "", rel);
	if (len < 0 || len >= ZCL_PATH_MAX)
		return; /* too long to be a usable path: not a candidate */
	lookup->count++;
}

static int zcl_lib_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, R_OK) == 0;
}

/* Directory of the running executable, or -errno when /proc is missing. */
static int zcl_exe_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	char *slash;

	if (n < 0)
		return -errno;
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0'; /* "/zcsock" leaves "", so that "<dir>/x" is "/x" */
	return 0;
}

static void zcl_lookup_fill(const char *lib_opt, zcl_lookup_t *lookup)
{
	static char exe_dir[ZCL_PATH_MAX], prefix[ZCL_PATH_MAX];
	const char *env = getenv("ZCSOCK_LIBRARY");
	char *slash;

	if (lib_opt) {
		zcl_lookup_add(lookup, "--lib", NULL, lib_opt);
		lookup->explicit_source = 1;
		return;
	}
	if (env && env[0]) {
		zcl_lookup_add(lookup, "ZCSOCK_LIBRARY", NULL, env);
		lookup->explicit_source = 1;
		return;
	}
	if (zcl_exe_dir(exe_dir, sizeof(exe_dir)) == 0) {
		zcl_lookup_add(lookup, "next to zcsock", exe_dir, ZCL_LIB_NAME);
		/* <dir>/.. spelled without "..": exe_dir has no symlinks */
		snprintf(prefix, sizeof(prefix), "%s", exe_dir);
		slash = strrchr(prefix, '/');
		if (slash)
			*slash = '\0';
		zcl_lookup_add(lookup, "<dir>/../lib", prefix, "lib/" ZCL_LIB_NAME);
		if (ZCSOCK_MULTIARCH[0])
			zcl_lookup_add(lookup, "<dir>/../lib/<multiarch>", prefix,
				       "lib/" ZCSOCK_MULTIARCH "/" ZCL_LIB_NAME);
	}
	zcl_lookup_add(lookup, "ZCSOCK_LIBDIR", ZCSOCK_LIBDIR, ZCL_LIB_NAME);
}

int zcl_lib_find(const char *lib_opt, zcl_lookup_t *lookup_p)
{
	memset(lookup_p, 0, sizeof(*lookup_p));
	lookup_p->chosen = -1;
	zcl_lookup_fill(lib_opt, lookup_p);
	for (int i = 0; i < lookup_p->count; i++) {
		if (!zcl_lib_exists(lookup_p->path[i]))
			continue;
		if (!realpath(lookup_p->path[i], lookup_p->resolved))
			continue;
		lookup_p->chosen = i;
		return 0;
	}
	return -ENOENT;
}

void zcl_lookup_print(const zcl_lookup_t *lookup)
{
	fprintf(stderr, "zcsock: " ZCL_LIB_NAME " not found; looked in:\n");
	for (int i = 0; i < lookup->count; i++)
		fprintf(stderr, "  %s (%s)\n", lookup->path[i], lookup->source[i]);
	if (lookup->explicit_source)
		fprintf(stderr, "zcsock: an explicit --lib or ZCSOCK_LIBRARY "
			"is final; fix or unset it to search the default places\n");
	else
		fprintf(stderr, "zcsock: build it with 'make', install it with "
			"'make install', or name it with --lib or ZCSOCK_LIBRARY\n");
}

void zcl_lookup_print_line(const zcl_lookup_t *lookup, FILE *out)
{
	fputs("library: not found; looked in", out);
	for (int i = 0; i < lookup->count; i++)
		fprintf(out, "%s %s", i ? "," : ":", lookup->path[i]);
	fputc('\n', out);
}

/* The ELF class this program was built for; a preloaded library must match. */
#if __SIZEOF_POINTER__ == 8
#define ZCL_ELF_CLASS ELFCLASS64
#else
#define ZCL_ELF_CLASS ELFCLASS32
#endif

int zcl_lib_check(const char *path, const char **why_p)
{
	unsigned char ident[EI_NIDENT];
	Elf64_Half type = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*why_p = NULL;
	if (fd < 0) {
		*why_p = strerror(errno);
		return -errno;
	}
	n = read(fd, ident, sizeof(ident));
	if (n == (ssize_t)sizeof(ident) &&
	    read(fd, &type, sizeof(type)) != (ssize_t)sizeof(type))
		type = 0;
	close(fd);
	if (n != (ssize_t)sizeof(ident) || memcmp(ident, ELFMAG, SELFMAG) != 0)
		*why_p = "not an ELF file";
	else if (ident[EI_CLASS] != ZCL_ELF_CLASS)
		*why_p = "ELF class does not match this machine's programs";
	else if (type != ET_DYN)
		*why_p = "not a shared object";
	return *why_p ? -ENOEXEC : 0;
}

static const char zcl_version_usage[] =
	"usage: zcsock version [--lib PATH]\n"
	"       zcsock --version\n"
	"\n"
	"Print `zcsock <version>`, then the library `zcsock run` would preload\n"
	"(or where it looked when there is none).\n";

int zcl_cmd_version(int argc, char **argv)
{
	const char *lib_opt = NULL;
	zcl_lookup_t lookup;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(zcl_version_usage, stdout);
			return ZCL_EXIT_OK;
		} else if (zcl_opt_value(argc, argv, &i, "--lib", &lib_opt)) {
			continue;
		}
		zcl_usage_fail("version: unexpected argument '%s'", argv[i]);
	}
	printf("zcsock %s\n", ZCSOCK_VERSION);
	if (zcl_lib_find(lib_opt, &lookup) == 0)
		printf("library: %s\n", lookup.resolved);
	else
		zcl_lookup_print_line(&lookup, stdout);
	return ZCL_EXIT_OK;
}
