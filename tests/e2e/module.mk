# End-to-end transparency tier: real programs (CPython's socket and network
# tests, socat, nginx + curl, an asyncio echo, python's http.server, redis)
# without and with the library preloaded in every process; zero added
# failures.  QUICK=1 shortens it.  Cases alone: make test-e2e E2E_CASES=socat

TEST_TIERS += e2e
E2E_CASES ?=

test-e2e: $(LIB)
	$(Q)$(TEST_ENV) tests/e2e/run.sh $(E2E_CASES)

.PHONY: test-e2e
