# Tier programs: real programs (Node.js, mosquitto, OpenSSH, socat, git
# daemon, rsync, inetd, PostgreSQL, memcached, and three small ones of our
# own) with the library on both ends, one end and none; sha256 of every byte,
# pairing judged from the statistics (tests/programs/expect.txt).
# `make test-programs` leaves out the entries marked known-fail;
# `make test-programs-all` runs them too.  One case: PROGRAMS_CASES=ssh
# (or ssh/both).  QUICK=1 repeats less.

TEST_TIERS += programs
PROGRAMS_CASES ?=
PROGRAMS_BINS := $(BUILD)/tests/programs/fdopen_lines $(BUILD)/tests/programs/uring_recv \
		 $(BUILD)/tests/programs/uring_recv_static

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

test-programs: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) tests/programs/run.sh $(PROGRAMS_CASES)

test-programs-all: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) PROGRAMS_ALL=1 tests/programs/run.sh $(PROGRAMS_CASES)

.PHONY: test-programs test-programs-all
