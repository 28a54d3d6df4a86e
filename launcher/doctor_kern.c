/* doctor checks about kernel interfaces: io_uring (ring, SEND_ZC, registered
 * buffers), MSG_ZEROCOPY, userfaultfd and its write-protect mode, and
 * whether one process may read another's memory (Yama ptrace scope,
 * process_vm_readv).  Every probe works on private objects it creates and
 * releases before returning. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zcl.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

#define ZCL_URING_BUF_LEN (1024 * 1024)

static void zcl_uring_fail(zcl_item_t *it, int err, const char *disabled)
{
	it->status = ZCL_ST_NO;
	ZCL_SET(it->value, "io_uring_queue_init fails: %s (io_uring_disabled: "
		"%s)", strerror(err), disabled[0] ? disabled : "not available");
	ZCL_SET(it->meaning, "no io_uring on the wire path: MSG_ZEROCOPY or "
		"plain send instead");
	if (err == ENOSYS)
		ZCL_SET(it->fix, "a kernel with CONFIG_IO_URING");
	else if (strcmp(disabled, "1") == 0)
		ZCL_SET(it->fix, "add the user to the group in "
			"/proc/sys/kernel/io_uring_group, or echo 0 > "
			"/proc/sys/kernel/io_uring_disabled");
	else if (strcmp(disabled, "2") == 0)
		ZCL_SET(it->fix, "echo 0 > /proc/sys/kernel/io_uring_disabled");
	else
		ZCL_SET(it->fix, "check seccomp filters (containers often block "
			"io_uring)");
}

static void zcl_uring_send_zc(struct io_uring *ring, zcl_item_t *it)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
	int send_zc, sendmsg_zc;

	if (!probe) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "not available (io_uring_get_probe fails)");
		ZCL_SET(it->meaning, "the wire path uses MSG_ZEROCOPY or copies");
		ZCL_SET(it->fix, "a 6.0 or newer kernel");
		return;
	}
	send_zc = io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);
	sendmsg_zc = io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
	io_uring_free_probe(probe);
	ZCL_SET(it->value, "IORING_OP_SEND_ZC %s, IORING_OP_SENDMSG_ZC %s",
		send_zc ? "supported" : "not supported",
		sendmsg_zc ? "supported" : "not supported");
	if (send_zc) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "the wire path can send registered buffers "
			"to remote peers without a copy (loopback and veth "
			"peers are always copied by the kernel)");
		return;
	}
	it->status = ZCL_ST_NO;
	ZCL_SET(it->meaning, "the wire path uses MSG_ZEROCOPY or copies");
	ZCL_SET(it->fix, "a 6.0 or newer kernel");
}

static void zcl_uring_buffers(struct io_uring *ring, zcl_item_t *it)
{
	struct iovec iov = { .iov_len = ZCL_URING_BUF_LEN };
	int ret;

	iov.iov_base = mmap(NULL, iov.iov_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (iov.iov_base == MAP_FAILED) {
		ZCL_SET(it->value, "not tested (mmap: %s)", strerror(errno));
		return;
	}
	ret = io_uring_register_buffers(ring, &iov, 1);
	if (ret == 0)
		io_uring_unregister_buffers(ring);
	munmap(iov.iov_base, iov.iov_len);
	if (ret == 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->value, "registering 1 MiB works");
		ZCL_SET(it->meaning, "the pin-down cache can keep fixed buffers "
			"for SEND_ZC (budget: see memlock)");
		return;
	}
	it->status = ZCL_ST_NO;
	ZCL_SET(it->value, "registering 1 MiB fails: %s", strerror(-ret));
	ZCL_SET(it->meaning, "no fixed buffers: SEND_ZC pins pages per send, "
		"or the wire path copies");
	ZCL_SET(it->fix, ret == -ENOMEM ? "raise RLIMIT_MEMLOCK (see memlock)" :
		"a 5.1 or newer kernel");
}

void zcl_check_uring(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "io_uring");
	zcl_item_t *send_zc = zcl_item_add(doc, "io_uring SEND_ZC");
	zcl_item_t *buffers = zcl_item_add(doc, "io_uring buffers");
	struct io_uring ring;
	char disabled[16];
	int ret;

	zcl_file_read("/proc/sys/kernel/io_uring_disabled", disabled,
		      sizeof(disabled));
	ret = io_uring_queue_init(8, &ring, 0);
	if (ret < 0) {
		zcl_uring_fail(it, -ret, disabled);
		send_zc->status = buffers->status = ZCL_ST_NO;
		ZCL_SET(send_zc->value, "not available (no io_uring)");
		ZCL_SET(buffers->value, "not available (no io_uring)");
		ZCL_SET(send_zc->meaning, "see io_uring");
		ZCL_SET(buffers->meaning, "see io_uring");
		return;
	}
	it->status = ZCL_ST_OK;
	ZCL_SET(it->value, "works (io_uring_disabled: %s)",
		disabled[0] ? disabled : "not available");
	ZCL_SET(it->meaning, "rings for the wire path can be created");
	zcl_uring_send_zc(&ring, send_zc);
	zcl_uring_buffers(&ring, buffers);
	io_uring_queue_exit(&ring);
}

void zcl_check_zerocopy(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "MSG_ZEROCOPY");
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ret, err;

	if (fd < 0) {
		ZCL_SET(it->value, "not tested (socket: %s)", strerror(errno));
		return;
	}
	ret = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one));
	err = errno;
	close(fd);
	if (ret == 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->value, "SO_ZEROCOPY accepted on a TCP socket");
		ZCL_SET(it->meaning, "fallback zero-copy send for remote peers "
			"(loopback and veth peers are always copied)");
		return;
	}
	it->status = ZCL_ST_NO;
	ZCL_SET(it->value, "SO_ZEROCOPY refused: %s", strerror(err));
	ZCL_SET(it->meaning, "without io_uring SEND_ZC the wire path copies");
	ZCL_SET(it->fix, "a 4.14 or newer kernel");
}

enum { ZCL_UFFD_SYSCALL, ZCL_UFFD_DEV, ZCL_UFFD_USER_ONLY };

static const char *const zcl_uffd_how[] = {
	[ZCL_UFFD_SYSCALL] = "userfaultfd(2)",
	[ZCL_UFFD_DEV] = "/dev/userfaultfd",
	[ZCL_UFFD_USER_ONLY] = "userfaultfd(2) with UFFD_USER_MODE_ONLY",
};

/* Open a userfaultfd the best way allowed.  Returns the fd with *how_p set,
 * or -errno of the plain syscall. */
static int zcl_uffd_open(int *how_p)
{
	int flags = O_CLOEXEC | O_NONBLOCK;
	int fd = (int)syscall(SYS_userfaultfd, flags), err = errno, dev;

	*how_p = ZCL_UFFD_SYSCALL;
	if (fd >= 0)
		return fd;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev >= 0) {
		fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
		close(dev);
		*how_p = ZCL_UFFD_DEV;
		if (fd >= 0)
			return fd;
	}
	*how_p = ZCL_UFFD_USER_ONLY;
	fd = (int)syscall(SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY);
	return fd >= 0 ? fd : -err;
}

/* Supported features (UFFDIO_API handshake with features 0), or -errno. */
static long long zcl_uffd_features(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int how, fd = zcl_uffd_open(&how);
	int ret;

	if (fd < 0)
		return fd;
	ret = ioctl(fd, UFFDIO_API, &api);
	close(fd);
	return ret < 0 ? -errno : (long long)api.features;
}

/* Register one populated page of fd (or anonymous memory when fd < 0) for
 * write-protect and protect it.  Returns 0 or -errno. */
static int zcl_uffd_wp_try(int fd, unsigned long long features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	long page = sysconf(_SC_PAGESIZE);
	int how, ret = 0, uffd = zcl_uffd_open(&how);
	char *p;

	if (uffd < 0)
		return uffd;
	p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto out_close;
	}
	p[0] = 1;
	struct uffdio_register reg = {
		.range = { (unsigned long)p, page },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	struct uffdio_writeprotect wp = {
		.range = { (unsigned long)p, page },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	if (ioctl(uffd, UFFDIO_API, &api) < 0 ||
	    ioctl(uffd, UFFDIO_REGISTER, &reg) < 0 ||
	    ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
		ret = -errno;
	munmap(p, page);
out_close:
	close(uffd);
	return ret;
}

static int zcl_uffd_wp_shmem(unsigned long long features)
{
	int ret, fd = memfd_create("zcsock-doctor-uffd", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	ret = ftruncate(fd, sysconf(_SC_PAGESIZE)) < 0 ? -errno :
	      zcl_uffd_wp_try(fd, features);
	close(fd);
	return ret;
}

static void zcl_check_uffd_open(zcl_doctor_t *doc, char *unpriv)
{
	zcl_item_t *it = zcl_item_add(doc, "userfaultfd");
	int how, fd = zcl_uffd_open(&how);

	if (fd < 0) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "fails: %s (unprivileged_userfaultfd: %s)",
			strerror(-fd), unpriv);
		ZCL_SET(it->meaning, "pages in flight are protected with "
			"mprotect, which costs more, or copied");
		ZCL_SET(it->fix, fd == -ENOSYS ? "a kernel with CONFIG_USERFAULTFD" :
			"echo 1 > /proc/sys/vm/unprivileged_userfaultfd");
		return;
	}
	close(fd);
	ZCL_SET(it->value, "works through %s (unprivileged_userfaultfd: %s)",
		zcl_uffd_how[how], unpriv);
	if (how != ZCL_UFFD_USER_ONLY) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "a kernel write into a protected page "
			"(recv into an in-flight buffer) waits for zcsock instead "
			"of failing");
		return;
	}
	it->status = ZCL_ST_WARN;
	ZCL_SET(it->meaning, "user-mode faults only: a recv() into a protected "
		"page would fail with EFAULT, so zcsock must intercept every "
		"kernel write or copy");
	ZCL_SET(it->fix, "echo 1 > /proc/sys/vm/unprivileged_userfaultfd, or "
		"give the user read-write access to /dev/userfaultfd");
}

static void zcl_check_uffd_wp(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "uffd write-protect");
	long long features = zcl_uffd_features();
	unsigned long long want = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	int anon, shmem;

	if (features < 0 || !(features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
		it->status = ZCL_ST_NO;
		ZCL_SET(it->value, "not available (%s)", features < 0 ?
			strerror((int)-features) : "no UFFD_FEATURE_PAGEFAULT_FLAG_WP");
		ZCL_SET(it->meaning, "pages in flight are protected with mprotect "
			"(43 us/MiB on 4 KiB pages) or copied");
		ZCL_SET(it->fix, "a 5.19 or newer kernel and userfaultfd access");
		return;
	}
	if (features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)
		want |= UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
	anon = zcl_uffd_wp_try(-1, want);
	shmem = (want & UFFD_FEATURE_WP_HUGETLBFS_SHMEM) ?
		zcl_uffd_wp_shmem(want) : -EOPNOTSUPP;
	ZCL_SET(it->value, "anonymous %s, shmem %s, unpopulated pages %s",
		anon == 0 ? "works" : strerror(-anon),
		shmem == 0 ? "works" : strerror(-shmem),
		features & UFFD_FEATURE_WP_UNPOPULATED ? "yes" : "no");
	it->status = anon == 0 && shmem == 0 ? ZCL_ST_OK :
		     anon == 0 || shmem == 0 ? ZCL_ST_WARN : ZCL_ST_NO;
	if (it->status == ZCL_ST_OK) {
		ZCL_SET(it->meaning, "send buffers in flight are write-protected "
			"for about 2 us per 4 KiB, copy-on-write only if written");
		return;
	}
	ZCL_SET(it->meaning, "where write-protect fails, pages in flight are "
		"protected with mprotect or copied");
	ZCL_SET(it->fix, "a 5.19 or newer kernel (write-protect on shmem)");
}

void zcl_check_uffd(zcl_doctor_t *doc)
{
	char unpriv[16];

	if (zcl_file_read("/proc/sys/vm/unprivileged_userfaultfd", unpriv,
			  sizeof(unpriv)) < 0)
		snprintf(unpriv, sizeof(unpriv), "not available");
	zcl_check_uffd_open(doc, unpriv);
	zcl_check_uffd_wp(doc);
}

/* Fork a child that reads this process's memory with process_vm_readv, the
 * direction Yama scope 1 forbids.  Returns 0 or -errno of the child. */
static int zcl_vm_read_test(void)
{
	static volatile char probe[64] = "zcsock";
	pid_t parent = getpid(), child;
	int status;

	fflush(NULL);
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		char buf[sizeof(probe)];
		struct iovec local = { buf, sizeof(buf) };
		struct iovec remote = { (void *)probe, sizeof(probe) };
		ssize_t n = process_vm_readv(parent, &local, 1, &remote, 1, 0);

		_exit(n == (ssize_t)sizeof(buf) ? 0 : (errno & 0x7f) ?: 0x7f);
	}
	if (waitpid(child, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status))
		return -ECHILD;
	return -WEXITSTATUS(status);
}

static const char *const zcl_yama_names[] = {
	"0 (classic)", "1 (restricted to descendants)", "2 (admin only)",
	"3 (no attach)",
};

void zcl_check_ptrace(zcl_doctor_t *doc)
{
	zcl_item_t *it = zcl_item_add(doc, "ptrace scope");
	char scope[16];
	int yama = -1, ret = zcl_vm_read_test();

	if (zcl_file_read("/proc/sys/kernel/yama/ptrace_scope", scope,
			  sizeof(scope)) > 0 && scope[0] >= '0' && scope[0] <= '3')
		yama = scope[0] - '0';
	ZCL_SET(it->value, "yama ptrace_scope %s; process_vm_readv between "
		"processes: %s", yama < 0 ? "not available (classic rules)" :
		zcl_yama_names[yama], ret == 0 ? "works" : strerror(-ret));
	if (ret == 0) {
		it->status = ZCL_ST_OK;
		ZCL_SET(it->meaning, "local peers of the same user can copy "
			"straight from each other's memory (one copy)");
		return;
	}
	it->status = ZCL_ST_WARN;
	ZCL_SET(it->meaning, "local peers cannot read each other's memory: "
		"the shared ring (two copies) is used instead");
	if (yama == 3)
		ZCL_SET(it->fix, "scope 3 holds until reboot; boot without "
			"kernel.yama.ptrace_scope=3");
	else if (yama >= 1)
		ZCL_SET(it->fix, "echo 0 > /proc/sys/kernel/yama/ptrace_scope, or "
			"run with CAP_SYS_PTRACE");
	else
		ZCL_SET(it->fix, "check seccomp or LSM policy for "
			"process_vm_readv");
}
