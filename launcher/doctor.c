/* `zcsock doctor`: what this machine offers zcsock, one line per item with
 * a status, what was found, what it means for zcsock and what to change for
 * more speed.  Every probe is read-only towards the system (files are read
 * with open/read, kernel features are tried on private objects) and a
 * missing file or feature is reported, never fatal.  Exit status 0. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "zcl.h"

static const char zcl_doctor_usage[] =
	"usage: zcsock doctor [--json] [--lib PATH]\n"
	"\n"
	"Report what this machine offers zcsock: kernel, io_uring (SEND_ZC,\n"
	"registered buffers), MSG_ZEROCOPY, userfaultfd write-protect,\n"
	"transparent huge pages, the hugetlb pool, RLIMIT_MEMLOCK, ptrace\n"
	"scope, memfd_create and the library.  Each line: status (ok, info,\n"
	"warn, no), item, what was found, what it means for zcsock and, after\n"
	"'fix:', what to change for more speed.  Always exits 0.\n"
	"\n"
	"options:\n"
	"  --json       one JSON object instead of text\n"
	"  --lib PATH   check this library instead of looking it up\n"
	"  -h, --help   print this text\n";

static const char *const zcl_status_names[] = {
	[ZCL_ST_OK] = "ok", [ZCL_ST_INFO] = "info",
	[ZCL_ST_WARN] = "warn", [ZCL_ST_NO] = "no",
};

int zcl_file_read(const char *path, char *buf, size_t len)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	while ((size_t)total < len - 1) {
		n = read(fd, buf + total, len - 1 - total);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	while (total > 0 && buf[total - 1] == '\n')
		buf[--total] = '\0';
	return (int)total;
}

zcl_item_t *zcl_item_add(zcl_doctor_t *doc, const char *name)
{
	static zcl_item_t overflow;
	zcl_item_t *it = doc->count < ZCL_ITEMS_MAX ?
			 &doc->items[doc->count++] : &overflow;

	memset(it, 0, sizeof(*it));
	it->name = name;
	it->status = ZCL_ST_INFO;
	return it;
}

static void zcl_check_kernel(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "kernel");
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) < 0) {
		ZCL_SET(it->value, "not available (uname: %s)", strerror(errno));
		ZCL_SET(it->meaning, "features are probed one by one below");
		return;
	}
	sscanf(u.release, "%d.%d", &major, &minor);
	ZCL_SET(it->value, "%s %s %s", u.sysname, u.release, u.machine);
	if (major > 6 || (major == 6 && minor >= 4)) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "new enough for every zcsock feature");
		return;
	}
	it->status = ZCL_ST_WARN;
	ZCL_SET(it->meaning, "older than 6.4: io_uring SEND_ZC needs 6.0, "
		"userfaultfd write-protect on shmem 5.19, on unpopulated "
		"pages 6.4; missing features fall back to copying");
	ZCL_SET(it->fix, "a 6.4 or newer kernel");
}

static void zcl_doctor_print_text(const zcl_doctor_t *doc)
{
	printf("zcsock doctor: zcsock %s\n", ZCSOCK_VERSION);
	for (int i = 0; i < doc->count; i++) {
		const zcl_item_t *it = &doc->items[i];

		printf("%-4s  %-19s %s -> %s%s%s\n", zcl_status_names[it->status],
		       it->name, it->value, it->meaning,
		       it->fix[0] ? "; fix: " : "", it->fix);
	}
}

static void zcl_json_string(const char *key, const char *s, const char *sep)
{
	printf("\"%s\": \"", key);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	printf("\"%s", sep);
}

static void zcl_doctor_print_json(const zcl_doctor_t *doc)
{
	printf("{\"version\": \"%s\", \"items\": [\n", ZCSOCK_VERSION);
	for (int i = 0; i < doc->count; i++) {
		const zcl_item_t *it = &doc->items[i];

		printf("  {");
		zcl_json_string("name", it->name, ", ");
		zcl_json_string("status", zcl_status_names[it->status], ", ");
		zcl_json_string("value", it->value, ", ");
		zcl_json_string("meaning", it->meaning, ", ");
		zcl_json_string("fix", it->fix, "");
		printf("}%s\n", i + 1 < doc->count ? "," : "");
	}
	printf("]}\n");
}

int zcl_cmd_doctor(int argc, char **argv)
{
	static zcl_doctor_t doc;
	int json = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(zcl_doctor_usage, stdout);
			return ZCL_EXIT_OK;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (!zcl_opt_value(argc, argv, &i, "--lib", &doc.lib_opt)) {
			zcl_usage_fail("doctor: unexpected argument '%s'", argv[i]);
		}
	}
	zcl_check_kernel(&doc);
	zcl_check_uring(&doc);
	zcl_check_zerocopy(&doc);
	zcl_check_uffd(&doc);
	zcl_check_thp(&doc);
	zcl_check_hugetlb(&doc);
	zcl_check_balloon(&doc);
	zcl_check_memlock(&doc);
	zcl_check_ptrace(&doc);
	zcl_check_memfd(&doc);
	zcl_check_library(&doc);
	fflush(stdout);
	if (json)
		zcl_doctor_print_json(&doc);
	else
		zcl_doctor_print_text(&doc);
	return ZCL_EXIT_OK;
}
