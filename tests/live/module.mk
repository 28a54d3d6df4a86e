# tests/live/: `zcsock stat` reads running programs under the library
# (issue 34: live statistics).  Included from tests/module.mk.
TEST_TIERS += live
# t_advise: a program for each page-exchange advice rule (cases xchg and
# advise_pages)
LIVE_ADVISE := $(BUILD)/tests/live/t_advise

$(LIVE_ADVISE): tests/live/t_advise.c
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -o $@ $< -lpthread

# (case mpi: the MPI ping-pong of make bench, for each MPI installed)
test-live: $(LIB) $(BUILD)/zcsock $(BENCH_MPI) $(LIVE_ADVISE)
	$(Q)$(TEST_ENV) tests/live/run.sh

.PHONY: test-live
