# tests/live/: `zcsock stat` reads running programs under the library
# (issue 34: live statistics).  Included from tests/module.mk.
TEST_TIERS += live
# (case mpi: the MPI ping-pong of make bench, for each MPI installed)
test-live: $(LIB) $(BUILD)/zcsock $(BENCH_MPI)
	$(Q)$(TEST_ENV) tests/live/run.sh

.PHONY: test-live
