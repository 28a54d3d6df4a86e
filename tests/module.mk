# Test tiers. Each tier is a make target that runs a script using
# tests/lib/harness.sh; `make test` runs them all, then tests/summary.sh.
# Modules add unit test binaries to UNIT_TESTS and tiers to TEST_TIERS.

TEST_ENV = ZC_BUILD=$(BUILD) ZC_LIB=$(abspath $(LIB)) TEST_TIMEOUT=$(TEST_TIMEOUT) QUICK=$(QUICK)

test-unit: $(UNIT_TESTS)
	$(Q)$(TEST_ENV) tests/unit/run.sh $(UNIT_TESTS)

test-unit-asan:
	$(Q)$(MAKE) --no-print-directory SANITIZE=address test-unit
	$(Q)cp build/san-address/test-results/unit $(BUILD)/test-results/unit-asan

test-unit-ubsan:
	$(Q)$(MAKE) --no-print-directory SANITIZE=undefined test-unit
	$(Q)cp build/san-undefined/test-results/unit $(BUILD)/test-results/unit-ubsan

test-symbols: $(LIB)
	$(Q)$(TEST_ENV) tests/symbols.sh $(EXPORTS)

TEST_TIERS := unit unit-asan unit-ubsan symbols $(TEST_TIERS)

test: all
	$(Q)rm -rf $(BUILD)/test-results
	$(Q)status=0; for t in $(TEST_TIERS); do \
		$(MAKE) --no-print-directory test-$$t || status=1; done; \
	tests/summary.sh $(BUILD) $(TEST_TIERS) || status=1; exit $$status

.PHONY: test-unit test-unit-asan test-unit-ubsan test-symbols
