# tests/localpath/: the local path end to end (shim/path_local.c); the cases
# are listed in tests/README.md.
TEST_TIERS += localpath
test-localpath: $(LIB)
	$(Q)$(TEST_ENV) tests/localpath/run.sh

.PHONY: test-localpath
