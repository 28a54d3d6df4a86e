# docs/: the manual pages.  zcsock.1 (the launcher) is written by hand and
# checked by the docs tier against the commands and options it documents;
# zcsock.7 (the library) is generated from the configuration and counter
# tables (docs/gen_man7.c): `make man` writes it, the docs tier fails when the
# committed page differs from a fresh one.
GEN_MAN7 := $(BUILD)/gen_man7

$(GEN_MAN7): docs/gen_man7.c common/zc_config_list.h common/zc_stats.h common/zc_real.h
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) -O1 -Wall -D_GNU_SOURCE -Icommon -Iinclude -o $@ $<

man: $(GEN_MAN7)
	$(Q)$(GEN_MAN7) > docs/zcsock.7

INSTALL_EXTRA += install -d $(DESTDIR)$(MANDIR)/man7; install -m 644 docs/zcsock.7 $(DESTDIR)$(MANDIR)/man7/zcsock.7;

.PHONY: man
