# tests/localpath/: the local path end to end (shim/path_local.c); the cases
# are listed in tests/README.md.  static_echo is linked statically on purpose
# (case exec_static: a program LD_PRELOAD cannot reach).
TEST_TIERS += localpath
LOCALPATH_STATIC_ECHO := $(BUILD)/tests/localpath/static_echo
$(LOCALPATH_STATIC_ECHO): tests/localpath/static_echo.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -static -o $@ $<

test-localpath: $(LIB) $(LOCALPATH_STATIC_ECHO)
	$(Q)$(TEST_ENV) T_STATIC_ECHO=$(abspath $(LOCALPATH_STATIC_ECHO)) tests/localpath/run.sh

.PHONY: test-localpath
