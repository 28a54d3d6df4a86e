# Tier "mem": the memory subsystem wired end to end (malloc-hooks events
# invalidating the pin-down cache), in a program linking the library's objects.
MEM_TESTS := $(BUILD)/tests/mem/t_wiring $(BUILD)/tests/mem/t_storm $(BUILD)/tests/mem/t_xu

$(BUILD)/tests/mem/%: tests/mem/%.c $(LIB_OBJS)
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -Ishim -Ishim/paths/local -Ipindown-cache -Imalloc-hooks $(ZC_LDFLAGS) -o $@ $< \
		$(LIB_OBJS) $(LIB_LIBS) -rdynamic

test-mem: $(MEM_TESTS) $(MH_DLLIB)
	$(Q)$(TEST_ENV) MEM_DLLIB=$(abspath $(MH_DLLIB)) tests/mem/run.sh $(MEM_TESTS)

TEST_TIERS += mem
.PHONY: test-mem
