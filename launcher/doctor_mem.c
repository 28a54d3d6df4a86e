/* doctor checks about memory: transparent huge pages (anonymous and shmem),
 * the hugetlb pool, RLIMIT_MEMLOCK and memfd_create.  Page exchange moves
 * whole pages between processes and pays off with 2 MiB pages; io_uring
 * buffer registration is about 20x cheaper per MiB on huge pages; the
 * pin-down cache may keep at most RLIMIT_MEMLOCK pinned. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "zcl.h"

#define ZCL_THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define ZCL_MIB (1024UL * 1024UL)
#define ZCL_MEMLOCK_GOOD (64UL * ZCL_MIB)
#define ZCL_CAP_IPC_LOCK 14

/* Copy the [selected] word of a sysfs choice file into out; "" if none. */
static int zcl_choice_read(const char *path, char *out, size_t len)
{
	char buf[256], *open_br, *close_br;
	int ret = zcl_file_read(path, buf, sizeof(buf));

	out[0] = '\0';
	if (ret < 0)
		return ret;
	open_br = strchr(buf, '[');
	close_br = open_br ? strchr(open_br, ']') : NULL;
	if (!close_br)
		return -EINVAL;
	*close_br = '\0';
	snprintf(out, len, "%s", open_br + 1);
	return 0;
}

static void zcl_check_thp_anon(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "THP anon");
	char mode[32];

	if (zcl_choice_read(ZCL_THP_DIR "/enabled", mode, sizeof(mode)) < 0) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "not available (" ZCL_THP_DIR "/enabled)");
		ZCL_SET(it->meaning, "buffers stay on 4 KiB pages: io_uring "
			"registration costs about 20 us/MiB instead of 1 us/MiB");
		ZCL_SET(it->fix, "a kernel with CONFIG_TRANSPARENT_HUGEPAGE");
		return;
	}
	ZCL_SET(it->value, "%s", mode);
	if (strcmp(mode, "never") != 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "large buffers can sit on 2 MiB pages: "
			"io_uring registration about 1 us/MiB");
		return;
	}
	it->status = ZCL_ST_WARN;
	ZCL_SET(it->meaning, "buffers stay on 4 KiB pages: io_uring "
		"registration costs about 20 us/MiB instead of 1 us/MiB");
	ZCL_SET(it->fix, "echo madvise > " ZCL_THP_DIR "/enabled");
}

/* The shmem THP mode that applies to PMD-sized pages: the per-size file
 * (kernels >= 6.11) overrides the global one unless it says "inherit". */
static void zcl_shmem_mode(char *mode, size_t len, char *detail, size_t dlen,
			   char *size_path, size_t plen)
{
	char pmd[32], size_mode[32];
	long pmd_kb = 2048;

	if (zcl_file_read(ZCL_THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd)) > 0)
		pmd_kb = strtol(pmd, NULL, 10) / 1024;
	snprintf(size_path, plen, ZCL_THP_DIR "/hugepages-%ldkB/shmem_enabled",
		 pmd_kb);
	detail[0] = '\0';
	if (zcl_choice_read(size_path, size_mode, sizeof(size_mode)) < 0) {
		size_path[0] = '\0';
		return;
	}
	snprintf(detail, dlen, " (hugepages-%ldkB: %s)", pmd_kb, size_mode);
	if (strcmp(size_mode, "inherit") != 0)
		snprintf(mode, len, "%s", size_mode);
}

/* Free, unreserved 2 MiB hugetlb pages (what a new arena could take). */
static long zcl_hugetlb_free(void)
{
	char f[32], r[32];

	if (zcl_file_read("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", f,
			  sizeof(f)) < 0 ||
	    zcl_file_read("/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages", r,
			  sizeof(r)) < 0)
		return 0;
	return strtol(f, NULL, 10) - strtol(r, NULL, 10);
}

static void zcl_check_thp_shmem(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "THP shmem");
	char mode[32], detail[64], size_path[128];

	if (zcl_choice_read(ZCL_THP_DIR "/shmem_enabled", mode, sizeof(mode)) < 0) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "not available (" ZCL_THP_DIR "/shmem_enabled)");
		ZCL_SET(it->meaning, "page exchange is off (on 4 KiB pages mapping "
			"costs more than copying): large local transfers go "
			"through the ring");
		ZCL_SET(it->fix, "a kernel with CONFIG_TRANSPARENT_HUGEPAGE");
		return;
	}
	zcl_shmem_mode(mode, sizeof(mode), detail, sizeof(detail), size_path,
		       sizeof(size_path));
	ZCL_SET(it->value, "%s%s", mode, detail);
	if (strcmp(mode, "never") != 0 && strcmp(mode, "deny") != 0) {
		const char *ex = getenv("ZCSOCK_EXCHANGE");

		it->status = ZCL_ST_OK;
		if (ex && (!strcmp(ex, "0") || !strcasecmp(ex, "no") ||
			   !strcasecmp(ex, "off") || !strcasecmp(ex, "false")))
			ZCL_SET(it->meaning, "2 MiB shared pages are there, but "
				"page exchange is off here (ZCSOCK_EXCHANGE=%s): "
				"large local transfers go through the ring", ex);
		else
			ZCL_SET(it->meaning, "page exchange is on (ZCSOCK_EXCHANGE=0 "
				"turns it off): whole 2 MiB units of large sends "
				"are lent, not copied");
		return;
	}
	it->status = ZCL_ST_WARN;
	if (zcl_hugetlb_free() > 0)
		ZCL_SET(it->meaning, "no 2 MiB shared pages, but page exchange "
			"lends from the hugetlb pool (see hugetlb pool); the fix "
			"gives 2 MiB shared pages without a pool");
	else
		ZCL_SET(it->meaning, "page exchange is off (on 4 KiB pages mapping "
			"costs more than copying): large local transfers go through the "
			"ring (make bench: exchange moves reused 2-64 MiB buffers "
			"20-70x faster)");
	if (size_path[0] && strstr(detail, "inherit") == NULL)
		ZCL_SET(it->fix, "echo advise > %s", size_path);
	else
		ZCL_SET(it->fix, "echo advise > " ZCL_THP_DIR "/shmem_enabled");
}

void zcl_check_thp(zcl_doctor_t *doc)
{
	zcl_check_thp_anon(doc);
	zcl_check_thp_shmem(doc);
}

/* Value of "key:" in /proc/meminfo, or -1. */
static long zcl_meminfo_get(const char *meminfo, const char *key)
{
	const char *p = strstr(meminfo, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

void zcl_check_hugetlb(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "hugetlb pool");
	static char meminfo[16384];
	char nr[32];
	long total, free_pages, size_kb;

	if (zcl_file_read("/proc/meminfo", meminfo, sizeof(meminfo)) < 0 ||
	    (total = zcl_meminfo_get(meminfo, "HugePages_Total:")) < 0) {
		ZCL_SET(it->value, "not available (/proc/meminfo)");
		ZCL_SET(it->meaning, "zcsock relies on THP shmem for huge pages");
		return;
	}
	free_pages = zcl_meminfo_get(meminfo, "HugePages_Free:");
	size_kb = zcl_meminfo_get(meminfo, "Hugepagesize:");
	if (zcl_file_read("/proc/sys/vm/nr_hugepages", nr, sizeof(nr)) < 0)
		snprintf(nr, sizeof(nr), "not available");
	ZCL_SET(it->value, "nr_hugepages %s, HugePages_Free %ld of %ld, "
		"%ld kB each", nr, free_pages, total, size_kb);
	if (free_pages > 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "%ld MiB of reserved huge pages: with THP "
			"shmem never, page exchange lends 2 MiB units from them "
			"(each end takes half of the free pages for its buffers; "
			"lent and mapped units take more, and what finds none is "
			"copied, local.xchg.pool_dry)",
			free_pages * size_kb / 1024);
		return;
	}
	ZCL_SET(it->meaning, "no free reserved huge pages: page exchange needs "
		"THP shmem or these (optional)");
	ZCL_SET(it->fix, "echo 1024 > /proc/sys/vm/nr_hugepages "
		"(reserves 1024 pages, 2 GiB with 2 MiB pages)");
}

/* A virtio balloon with free page reporting (feature bit 5) hands freed
 * memory back to the host, which faults it in again on first touch: new
 * 2 MiB pages then cost 0.4-13 ms (measured here), and a unit's first lend
 * makes one (the rent-or-buy rule weighs that against the ring).  hugetlb
 * pages stay with the guest. */
void zcl_check_balloon(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "VM balloon");
	static const char dir[] = "/sys/bus/virtio/drivers/virtio_balloon";
	char path[160], feat[160];
	DIR *d = opendir(dir);
	struct dirent *e;
	int reporting = -1;

	while (d && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "virtio", 6) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/features", dir, e->d_name);
		if (zcl_file_read(path, feat, sizeof(feat)) > 5)
			reporting = feat[5] == '1';
	}
	if (d)
		closedir(d);
	if (reporting < 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->value, "none");
		ZCL_SET(it->meaning, "freed memory stays with this machine");
		return;
	}
	ZCL_SET(it->value, "virtio_balloon, free page reporting %s",
		reporting ? "on" : "off");
	if (!reporting) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "freed memory stays with this guest");
		return;
	}
	it->status = ZCL_ST_INFO;
	ZCL_SET(it->meaning, "freed memory goes back to the host and is faulted "
		"in again on first touch (0.4-13 ms per 2 MiB page seen on a VM): "
		"a unit's first lend on shmem THP pays that, so units go through "
		"the ring until the passes they took add up to it "
		"(ZCSOCK_EXCHANGE_UNIT_US=1 lends at once, for long runs), and "
		"placed buffers' first touch pays it too; hugetlb pages stay "
		"resident (see hugetlb pool)");
}

static void zcl_size_format(rlim_t v, char *out, size_t len)
{
	if (v == RLIM_INFINITY)
		snprintf(out, len, "unlimited");
	else if (v >= ZCL_MIB && v % ZCL_MIB == 0)
		snprintf(out, len, "%lu MiB", (unsigned long)(v / ZCL_MIB));
	else
		snprintf(out, len, "%lu KiB", (unsigned long)(v / 1024));
}

/* 1 when the effective capability set holds cap, 0 when not, -1 unknown. */
static int zcl_cap_effective(int cap)
{
	static char status[8192];
	const char *p;

	if (zcl_file_read("/proc/self/status", status, sizeof(status)) < 0 ||
	    !(p = strstr(status, "CapEff:")))
		return -1;
	return (int)((strtoull(p + 7, NULL, 16) >> cap) & 1);
}

void zcl_check_memlock(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "memlock");
	char soft[32], hard[32];
	struct rlimit rl;
	int cap = zcl_cap_effective(ZCL_CAP_IPC_LOCK);

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		ZCL_SET(it->value, "not available (getrlimit: %s)", strerror(errno));
		return;
	}
	zcl_size_format(rl.rlim_cur, soft, sizeof(soft));
	zcl_size_format(rl.rlim_max, hard, sizeof(hard));
	ZCL_SET(it->value, "RLIMIT_MEMLOCK soft %s, hard %s%s", soft, hard,
		cap == 1 ? ", CAP_IPC_LOCK held" : "");
	if (cap == 1 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= ZCL_MEMLOCK_GOOD) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "pin-down cache budget for registered "
			"buffers: %s", cap == 1 ? "not limited" : soft);
		return;
	}
	it->status = ZCL_ST_WARN;
	ZCL_SET(it->meaning, "pin-down cache budget only %s: buffers beyond it "
		"are evicted and re-registered, or sent by copying", soft);
	if (rl.rlim_max == RLIM_INFINITY)
		ZCL_SET(it->fix, "ulimit -l unlimited before starting the program");
	else if (rl.rlim_max > rl.rlim_cur)
		ZCL_SET(it->fix, "ulimit -l %lu before starting the program",
			(unsigned long)(rl.rlim_max / 1024));
	else
		ZCL_SET(it->fix, "raise the hard limit: 'memlock' in "
			"/etc/security/limits.conf or LimitMEMLOCK= for systemd "
			"services, e.g. 1 GiB");
}

/* 1 when a PMD-sized huge page backs a fresh memfd mapping, 0 when not,
 * -errno when the test could not run. */
static int zcl_memfd_huge_test(int fd)
{
	static char rollup[4096];
	size_t len = 4 * ZCL_MIB;
	long pmd_kb;
	char *p;
	int ret;

	if (ftruncate(fd, (off_t)len) < 0)
		return -errno;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, len, MADV_HUGEPAGE);
	for (size_t off = 0; off < len; off += 4096)
		p[off] = 1;
	ret = zcl_file_read("/proc/self/smaps_rollup", rollup, sizeof(rollup));
	munmap(p, len);
	if (ret < 0)
		return ret;
	pmd_kb = zcl_meminfo_get(rollup, "ShmemPmdMapped:");
	return pmd_kb < 0 ? -ENOENT : pmd_kb > 0;
}

void zcl_check_memfd(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "memfd_create");
	int fd = memfd_create("zcsock-doctor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int sealing, huge;

	if (fd < 0) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "fails: %s", strerror(errno));
		ZCL_SET(it->meaning, "no shared rings or page exchange: local "
			"peers talk through the kernel socket, copying");
		ZCL_SET(it->fix, "a kernel with memfd_create (3.17+) and no "
			"seccomp filter blocking it");
		return;
	}
	sealing = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0;
	huge = zcl_memfd_huge_test(fd);
	close(fd);
	it->status = ZCL_ST_OK;
	ZCL_SET(it->value, "works, sealing %s, 2 MiB pages on a fresh memfd: %s",
		sealing ? "yes" : "no",
		huge == 1 ? "yes" : huge == 0 ? "no" : "unknown");
	ZCL_SET(it->meaning, "shared rings and page exchange between local "
		"peers are possible%s", huge == 0 ?
		", but on 4 KiB pages (see THP shmem and hugetlb pool)" : "");
}
