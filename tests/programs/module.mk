# Tier programs: real programs (Node.js, mosquitto, OpenSSH, socat, git
# daemon, rsync, inetd, PostgreSQL, memcached, Open MPI, MPICH, and small
# programs of our own) with the library on both ends, one end and none; sha256 of every byte,
# pairing judged from the statistics (tests/programs/expect.txt).
# `make test-programs` leaves out the entries marked known-fail;
# `make test-programs-all` runs them too.  One case: PROGRAMS_CASES=ssh
# (or ssh/both).  QUICK=1 repeats less.

TEST_TIERS += programs programs-xchg programs-xchg-hugetlb
PROGRAMS_CASES ?=
PROGRAMS_BINS := $(BUILD)/tests/programs/fdopen_lines $(BUILD)/tests/programs/uring_recv \
		 $(BUILD)/tests/programs/uring_recv_static $(BUILD)/tests/programs/uring_recv_so

$(BUILD)/tests/programs/fdopen_lines: tests/programs/fdopen_lines.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $<

$(BUILD)/tests/programs/uring_recv: tests/programs/uring_recv.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $< -luring

# the same with liburing linked statically (its system calls inline in the program)
$(BUILD)/tests/programs/uring_recv_static: tests/programs/uring_recv.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $< -Wl,-Bstatic -luring -Wl,-Bdynamic

# the same again with the code and liburing (statically) in a shared library
# the program needs: the inline io_uring_setup call is in that library
$(BUILD)/tests/programs/liburing_recv.so: tests/programs/uring_recv.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -fPIC -shared -Dmain=uring_recv_main -o $@ $< \
		-Wl,-Bstatic -luring -Wl,-Bdynamic

$(BUILD)/tests/programs/uring_recv_so: tests/programs/uring_recv_so.c $(BUILD)/tests/programs/liburing_recv.so
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -o $@ $< -L$(@D) -l:liburing_recv.so -Wl,-rpath,'$$ORIGIN'

# MPI cases: built with each installed implementation's compiler wrapper
# (MPI_IMPLS; the cases skip, saying why, when the binary is missing)
PROGRAMS_BINS += $(MPI_IMPLS:%=$(BUILD)/tests/programs/mpi_check_%)
$(BUILD)/tests/programs/mpi_check_%: tests/programs/mpi_check.c
	@mkdir -p $(@D)
	$(quiet) MPICC $@
	$(Q)mpicc.$* -O2 -Wall -o $@ $<

test-programs: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) tests/programs/run.sh $(PROGRAMS_CASES)

# the same with page exchange on (ZCSOCK_EXCHANGE=1, shmem THP advise as root)
test-programs-xchg: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) tests/programs/run_xchg.sh $(PROGRAMS_CASES)
test-programs-xchg-hugetlb: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) XCHG_PAGES=hugetlb tests/programs/run_xchg.sh $(PROGRAMS_CASES)
# on 4 KiB pages (ZCSOCK_EXCHANGE_4K=1): not in make test (2.6 min)
test-programs-xchg-4k: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) XCHG_PAGES=4k tests/programs/run_xchg.sh $(PROGRAMS_CASES)

test-programs-all: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) PROGRAMS_ALL=1 tests/programs/run.sh $(PROGRAMS_CASES)

.PHONY: test-programs test-programs-xchg test-programs-xchg-hugetlb test-programs-xchg-4k test-programs-all
