# tests/localpath/: the local path end to end (shim/paths/local/); the cases
# are listed in tests/README.md.  static_echo is linked statically on purpose
# (case exec_static: a program LD_PRELOAD cannot reach).
TEST_TIERS += localpath
LOCALPATH_STATIC_ECHO := $(BUILD)/tests/localpath/static_echo
$(LOCALPATH_STATIC_ECHO): tests/localpath/static_echo.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -static -o $@ $<

# ready_chk: fortified poll/ppoll (__poll_chk, __ppoll_chk) and epoll_pwait2
LOCALPATH_READY_CHK := $(BUILD)/tests/localpath/ready_chk
$(LOCALPATH_READY_CHK): tests/localpath/ready_chk.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -D_FORTIFY_SOURCE=2 -Wall -o $@ $< -ldl

# seccomp_exec: a program started under an inherited seccomp filter never pairs
LOCALPATH_SECCOMP_EXEC := $(BUILD)/tests/localpath/seccomp_exec
$(LOCALPATH_SECCOMP_EXEC): tests/localpath/seccomp_exec.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $< -ldl

# needs_uring: a library that links liburing, dlopen'ed by case uring_dlopen
LOCALPATH_NEEDS_URING := $(BUILD)/tests/localpath/libneeds_uring.so
$(LOCALPATH_NEEDS_URING): tests/localpath/needs_uring.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -shared -fPIC -o $@ $< -Wl,--no-as-needed -luring

# sig_io: a signal handler's sends beside the sends it interrupts (SIGDEFER)
LOCALPATH_SIG_IO := $(BUILD)/tests/localpath/sig_io
$(LOCALPATH_SIG_IO): tests/localpath/sig_io.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $< -ldl -lpthread

LOCALPATH_BINS := $(LOCALPATH_STATIC_ECHO) $(LOCALPATH_READY_CHK) $(LOCALPATH_SECCOMP_EXEC) \
		  $(LOCALPATH_NEEDS_URING) $(LOCALPATH_SIG_IO)
LOCALPATH_ENV = $(TEST_ENV) T_STATIC_ECHO=$(abspath $(LOCALPATH_STATIC_ECHO)) \
		T_SIG_IO=$(abspath $(LOCALPATH_SIG_IO)) \
		T_READY_CHK=$(abspath $(LOCALPATH_READY_CHK)) \
		T_SECCOMP_EXEC=$(abspath $(LOCALPATH_SECCOMP_EXEC)) \
		T_NEEDS_URING=$(abspath $(LOCALPATH_NEEDS_URING))

test-localpath: $(LIB) $(LOCALPATH_BINS)
	$(Q)$(LOCALPATH_ENV) tests/localpath/run.sh

# Every case again with page exchange on (run_xchg.sh).
TEST_TIERS += localpath-xchg localpath-xchg-hugetlb localpath-xchg-4k
test-localpath-xchg: $(LIB) $(LOCALPATH_BINS)
	$(Q)$(LOCALPATH_ENV) tests/localpath/run_xchg.sh
# ... and on hugetlb pages (shmem THP never, a hugetlb pool)
test-localpath-xchg-hugetlb: $(LIB) $(LOCALPATH_BINS)
	$(Q)$(LOCALPATH_ENV) XCHG_PAGES=hugetlb tests/localpath/run_xchg.sh
# ... and on 4 KiB pages (ZCSOCK_EXCHANGE_4K=1, shmem THP never)
test-localpath-xchg-4k: $(LIB) $(LOCALPATH_BINS)
	$(Q)$(LOCALPATH_ENV) XCHG_PAGES=4k tests/localpath/run_xchg.sh

# The same under AddressSanitizer (a subset: run_asan.sh).
TEST_TIERS += localpath-asan
test-localpath-asan: $(LIB)
	$(Q)$(MAKE) --no-print-directory SANITIZE=address build/san-address/libzcsock.so
	$(Q)$(TEST_ENV) ZC_ASAN_LIB=$(abspath build/san-address/libzcsock.so) \
		tests/localpath/run_asan.sh

.PHONY: test-localpath test-localpath-xchg test-localpath-xchg-hugetlb test-localpath-xchg-4k test-localpath-asan
