# shim/: interposition, per-fd state, configuration, logging, statistics.
SHIM_SRCS := $(wildcard shim/*.c)
LIB_OBJS  += $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)
# shim_mem.c wires malloc-hooks and pindown-cache together.
$(BUILD)/obj/shim/%.o: OBJ_EXTRA = -Imalloc-hooks -Ipindown-cache
EXPORTS   += shim/exports.txt
