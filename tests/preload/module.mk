# Preload integration tests: one program per intercepted call family, each
# run without the library, with it, and from another library's constructor.
PRELOAD_TESTS := t_connect t_sendrecv t_msg t_rw t_dup t_poll t_sendfile t_proc t_threads
PRELOAD_DIR   := $(BUILD)/tests/preload
PRELOAD_CFLAGS = -std=gnu11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 $(CFLAGS)
PRELOAD_BINS  := $(foreach t,$(PRELOAD_TESTS),$(PRELOAD_DIR)/$(t) $(PRELOAD_DIR)/$(t)_ctor)
PRELOAD_HDRS  := tests/preload/t_common.h tests/preload/t_net.h

$(PRELOAD_DIR)/t_%: tests/preload/t_%.c tests/preload/t_main.c $(PRELOAD_HDRS)
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(PRELOAD_CFLAGS) $(LDFLAGS) -o $@ $< tests/preload/t_main.c -ldl -lpthread

$(PRELOAD_DIR)/libt_%.so: tests/preload/t_%.c tests/preload/t_ctor_lib.c $(PRELOAD_HDRS)
	@mkdir -p $(@D)
	$(Q)$(CC) $(PRELOAD_CFLAGS) -fPIC -shared $(LDFLAGS) -o $@ $< tests/preload/t_ctor_lib.c -ldl -lpthread

$(PRELOAD_DIR)/t_%_ctor: tests/preload/t_ctor_host.c $(PRELOAD_DIR)/libt_%.so
	$(Q)$(CC) $(PRELOAD_CFLAGS) $(LDFLAGS) -o $@ $< -L$(PRELOAD_DIR) -lt_$* \
		-Wl,-rpath,'$$ORIGIN' -ldl

.SECONDARY: $(PRELOAD_TESTS:%=$(PRELOAD_DIR)/lib%.so)

test-preload: $(LIB) $(PRELOAD_BINS)
	$(Q)$(TEST_ENV) tests/preload/run.sh $(PRELOAD_DIR) $(PRELOAD_TESTS)

TEST_TIERS += preload
.PHONY: test-preload
