# launcher/: the `zcsock` command (run, doctor, version).

LAUNCHER_SRCS := $(wildcard launcher/*.c) common/zc_advise.c
LAUNCHER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(LAUNCHER_SRCS))
LAUNCHER_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
LAUNCHER_DEFS := -DZCSOCK_LIBDIR='"$(LIBDIR)"' -DZCSOCK_MULTIARCH='"$(LAUNCHER_MULTIARCH)"'

# Rebuild the launcher when the install paths change.
$(BUILD)/.launcher-flags: FORCE
	@mkdir -p $(@D)
	@echo '$(LAUNCHER_DEFS)' | cmp -s - $@ || echo '$(LAUNCHER_DEFS)' > $@

# Doctor report lines are cut to their buffers on purpose.
$(LAUNCHER_OBJS): OBJ_EXTRA += $(LAUNCHER_DEFS) -Wno-format-truncation
$(LAUNCHER_OBJS): $(BUILD)/.launcher-flags

$(BUILD)/zcsock: $(LAUNCHER_OBJS)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_LDFLAGS) -o $@ $(LAUNCHER_OBJS) -luring

all: $(BUILD)/zcsock

test-launcher: $(BUILD)/zcsock
	$(Q)$(TEST_ENV) launcher/test.sh

TEST_TIERS += launcher
INSTALL_EXTRA += install -m 755 $(BUILD)/zcsock $(DESTDIR)$(BINDIR)/zcsock;

.PHONY: test-launcher
