/* doctor's "library" item: which libzcsock.so `zcsock run` would preload and
 * whether it really starts.  The check runs this program again as
 * `zcsock __probe` with only that library preloaded; the probe asks the
 * library through dlsym whether it is active.  A library that ld.so refuses,
 * that does not initialise, or that hangs in its constructor (killed after
 * ZCL_PROBE_TIMEOUT_MS) is reported with the first line it printed. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zcl.h"

#define ZCL_PROBE_TIMEOUT_MS 5000

int zcl_cmd_probe(int argc, char **argv)
{
	int (*is_active)(void);
	const char *(*version)(void);

	(void)argc;
	(void)argv;
	*(void **)&is_active = dlsym(RTLD_DEFAULT, "zcsock_is_active");
	*(void **)&version = dlsym(RTLD_DEFAULT, "zcsock_version");
	if (!is_active) {
		printf("missing=zcsock_is_active\n");
		return ZCL_EXIT_OK;
	}
	printf("active=%d version=%s\n", is_active(),
	       version ? version() : "unknown");
	return ZCL_EXIT_OK;
}

static void zcl_probe_child(const char *lib, int out_fd)
{
	char *argv[] = { "zcsock", "__probe", NULL };

	dup2(out_fd, STDOUT_FILENO);
	dup2(out_fd, STDERR_FILENO);
	setenv("LD_PRELOAD", lib, 1);
	unsetenv("ZCSOCK_STATS");
	unsetenv("ZCSOCK_LOG_FILE");
	execv("/proc/self/exe", argv);
	printf("cannot run /proc/self/exe: %s\n", strerror(errno));
	_exit(ZCL_EXIT_CANNOT_EXEC);
}

static long zcl_ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Read the child's output into buf until EOF or the deadline.  Returns 0,
 * or -ETIMEDOUT. */
static int zcl_probe_read(int fd, char *buf, size_t len)
{
	long deadline = zcl_ms_now() + ZCL_PROBE_TIMEOUT_MS, left;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t used = 0;
	ssize_t n;

	buf[0] = '\0';
	while ((left = deadline - zcl_ms_now()) > 0) {
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(fd, buf + used, len - 1 - used);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			return 0;
		if (n > 0)
			used += (size_t)n;
		buf[used] = '\0';
		if (used == len - 1)
			return 0;
	}
	return -ETIMEDOUT;
}

/* Run the probe with lib preloaded; its output lands in out.  Returns 0,
 * or -errno (-ETIMEDOUT when it had to be killed). */
static int zcl_probe_run(const char *lib, char *out, size_t len)
{
	int pipe_fd[2], ret, status;
	pid_t child;

	if (pipe2(pipe_fd, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	child = fork();
	if (child < 0) {
		ret = -errno;
		close(pipe_fd[0]);
		close(pipe_fd[1]);
		return ret;
	}
	if (child == 0)
		zcl_probe_child(lib, pipe_fd[1]);
	close(pipe_fd[1]);
	ret = zcl_probe_read(pipe_fd[0], out, len);
	close(pipe_fd[0]);
	if (ret < 0)
		kill(child, SIGKILL);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	return ret;
}

/* First line of s, at most 160 characters, for a one-line report. */
static const char *zcl_first_line(char *s)
{
	s[strcspn(s, "\n")] = '\0';
	if (strlen(s) > 160)
		strcpy(s + 157, "...");
	return s[0] ? s : "no output";
}

static void zcl_library_probe(zcl_item_t *it, const char *lib)
{
	static char out[4096];
	char *line, version[64] = "";
	int active = -1;
	int ret = zcl_probe_run(lib, out, sizeof(out));

	line = strstr(out, "active=");
	if (ret == 0 && line && (line == out || line[-1] == '\n'))
		sscanf(line, "active=%d version=%63s", &active, version);
	if (active == 1) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->value, "%s, version %s", lib, version);
		ZCL_SET(it->meaning, "active in a test process; 'zcsock run' "
			"preloads this file");
		return;
	}
	it->status = ZCL_ST_NO;
	if (ret == -ETIMEDOUT)
		ZCL_SET(it->value, "%s: a test process hung for %d ms", lib,
			ZCL_PROBE_TIMEOUT_MS);
	else if (ret == 0 && strstr(out, "missing=zcsock_is_active"))
		ZCL_SET(it->value, "%s loads but has no zcsock_is_active: not a "
			"zcsock library", lib);
	else if (active == 0)
		ZCL_SET(it->value, "%s, version %s, loaded but not active: %s",
			lib, version, zcl_first_line(out));
	else
		ZCL_SET(it->value, "%s does not start: %s", lib,
			ret < 0 ? strerror(-ret) : zcl_first_line(out));
	ZCL_SET(it->meaning, "programs run without zcsock (plain kernel sockets)");
	ZCL_SET(it->fix, "run 'zcsock run --debug -- true' for details; "
		"rebuild with 'make'");
}

void zcl_check_library(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "library");
	zcl_lookup_t lookup;
	const char *why;
	size_t used = 0;

	if (zcl_lib_find(doc->lib_opt, &lookup) == 0) {
		if (zcl_lib_check(lookup.resolved, &why) == 0) {
			zcl_library_probe(it, lookup.resolved);
			return;
		}
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "%s", lookup.resolved);
		ZCL_SET(it->meaning, "cannot be preloaded: %s", why);
		ZCL_SET(it->fix, "rebuild it with 'make'");
		return;
	}
	used = ZCL_SET(it->value, "not found; looked in");
	for (int i = 0; i < lookup.count && used < sizeof(it->value); i++)
		used += snprintf(it->value + used, sizeof(it->value) - used,
				 "%s %s", i ? "," : ":", lookup.path[i]);
	it->status = ZCL_ST_NO;
	ZCL_SET(it->meaning, "'zcsock run' cannot start programs");
	ZCL_SET(it->fix, "build it with 'make', install it with 'make "
		"install', or name it with --lib or ZCSOCK_LIBRARY");
}
