# Test tiers. Each tier is a make target that runs a script using
# tests/lib/harness.sh; `make test` runs them all, then tests/summary.sh.
# Modules add unit test binaries to UNIT_TESTS and tiers to TEST_TIERS.

-include tests/preload/module.mk
-include tests/e2e/module.mk
-include tests/mem/module.mk

# --- shim unit tests: each links the shim's objects, so the binary's own libc
# calls run through the hooks. ---
SHIM_UNIT := test_zc_log test_zc_config test_zc_stats test_zc_pool test_zc_spin test_zc_copy test_zc_rent test_zc_key test_lp_state \
             test_shim_hooks
SHIM_UNIT_BINS := $(SHIM_UNIT:%=$(BUILD)/tests/unit/%)
UNIT_TESTS += $(SHIM_UNIT_BINS)

# Without shim_mem.o and shim_xu.o (and so without malloc-hooks and the caches),
# with the memory subsystem's table that does nothing instead: see shim_mem.h.
SHIM_UNIT_OBJS := $(filter-out %/shim_mem.o %/shim_xu.o,$(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)) \
                  $(BUILD)/obj/tests/unit/mem_none.o
$(BUILD)/obj/tests/unit/mem_none.o: OBJ_EXTRA = -Ishim
$(BUILD)/tests/unit/%: tests/unit/%.c $(SHIM_UNIT_OBJS)
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -Ishim -Ishim/paths/local $(ZC_LDFLAGS) -o $@ $< $(SHIM_UNIT_OBJS) -lcmocka -ldl -lpthread

-include tests/local/module.mk
-include tests/pair/module.mk
-include tests/localpath/module.mk
-include tests/pathtest/module.mk
-include tests/programs/module.mk
-include tests/fds/module.mk
-include tests/xchg/module.mk
-include tests/robust/module.mk
-include tests/live/module.mk
-include tests/mpihosts/module.mk

# The tiers that test the local path's mechanisms assert pairing after one
# or two exchanges: they run with immediate pairing.  The programs tiers
# (real programs as users run them) and the defer/* cases unset it and run
# with the default, pair when it pays (ZCSOCK_LOCAL_PAIR_AFTER=2).
TEST_ENV = ZC_BUILD=$(BUILD) ZC_LIB=$(abspath $(LIB)) TEST_TIMEOUT=$(TEST_TIMEOUT) \
	QUICK=$(filter-out 0,$(QUICK)) \
	ZCSOCK_LOCAL_PAIR_AFTER=0

UNIT_TIER ?= unit
UNIT_TESTS_RUN = $(filter-out $(UNIT_TESTS_FILTER),$(UNIT_TESTS))
test-unit: $(UNIT_TESTS_RUN)
	$(Q)$(TEST_ENV) tests/unit/run.sh $(UNIT_TIER) $(UNIT_TESTS_RUN)

test-unit-asan:
	$(Q)$(MAKE) --no-print-directory SANITIZE=address UNIT_TIER=unit-asan test-unit; \
	rc=$$?; mkdir -p $(BUILD)/test-results; \
	cp build/san-address/test-results/unit-asan $(BUILD)/test-results/ 2>/dev/null; exit $$rc

test-unit-ubsan:
	$(Q)$(MAKE) --no-print-directory SANITIZE=undefined UNIT_TIER=unit-ubsan test-unit; \
	rc=$$?; mkdir -p $(BUILD)/test-results; \
	cp build/san-undefined/test-results/unit-ubsan $(BUILD)/test-results/ 2>/dev/null; exit $$rc

# ThreadSanitizer: every unit binary but the 1.5 GiB two-process stream test
# (two minutes under TSan; it runs plain, with ASan and with UBSan).
test-unit-tsan:
	$(Q)$(MAKE) --no-print-directory SANITIZE=thread UNIT_TIER=unit-tsan \
		UNIT_TESTS_FILTER=%/test_local_stream test-unit; \
	rc=$$?; mkdir -p $(BUILD)/test-results; \
	cp build/san-thread/test-results/unit-tsan $(BUILD)/test-results/ 2>/dev/null; exit $$rc

test-symbols: $(LIB)
	$(Q)$(TEST_ENV) tests/symbols.sh $(EXPORTS)

test-docs: $(LIB) $(GEN_MAN7)
	$(Q)$(TEST_ENV) GEN_MAN7=$(GEN_MAN7) tests/docs.sh

test-install: all
	$(Q)$(TEST_ENV) tests/install.sh

TEST_TIERS := unit unit-asan unit-ubsan unit-tsan symbols docs install $(TEST_TIERS)

# `make test`, the default run (what CI runs; 21 minutes on this 2-core
# machine): every tier but the variants of LONG_TIERS, at QUICK=1's sizes and
# repetitions (QUICK=0 for full ones).  `make test-full`: every tier, full
# sizes and repetitions (about an hour here).  Longer still: `make soak`,
# `make soak-programs`.  LONG_TIERS are page exchange's variants on other
# page kinds: the same cases that tiers localpath-xchg and programs-xchg
# run on the default kind.
LONG_TIERS := localpath-xchg-hugetlb localpath-xchg-4k programs-xchg-hugetlb
TEST_QUICK = $(if $(QUICK),$(filter-out 0,$(QUICK)),1)

# run-tiers QUICK TIERS
define run-tiers
	$(Q)rm -rf $(BUILD)/test-results
	$(Q)status=0; for t in $(2); do \
		$(MAKE) --no-print-directory QUICK=$(1) test-$$t || status=1; done; \
	tests/summary.sh $(BUILD) $(2) || status=1; exit $$status
endef

test: all
	$(call run-tiers,$(TEST_QUICK),$(filter-out $(LONG_TIERS),$(TEST_TIERS)))

test-full: all
	$(call run-tiers,$(filter-out 0,$(QUICK)),$(TEST_TIERS))

.PHONY: test test-full test-unit test-unit-asan test-unit-ubsan test-unit-tsan test-symbols test-docs test-install

# Long runs kept out of `make test` (tests/soak/run.sh): two-way sha256-checked
# streams of SOAK_GIB (32) GiB each way, and SOAK_MPI_REPS (100) rounds of each
# MPI case.
soak: $(LIB) $(PROGRAMS_BINS)
	$(Q)$(TEST_ENV) tests/soak/run.sh

# The real programs whose failures came and went (issue 29), 20 times each
# with both ends under the library (SOAK_PROGRAMS_REPS, SOAK_PROGRAMS_CASES).
soak-programs: $(LIB) $(PROGRAMS_BINS) $(ROBUST_BINS)
	$(Q)$(TEST_ENV) tests/soak/run_programs.sh
.PHONY: soak soak-programs
