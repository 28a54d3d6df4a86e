# tests/mpihosts/: MPI jobs across two hosts made of network namespaces
# (issue 33; tests/mpihosts/run.sh).  Included from tests/module.mk.
TEST_TIERS += mpihosts

test-mpihosts: $(LIB) $(MPI_IMPLS:%=$(BUILD)/tests/programs/mpi_check_%)
	$(Q)$(TEST_ENV) tests/mpihosts/run.sh

.PHONY: test-mpihosts
