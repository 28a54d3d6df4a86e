# shim/: interposition, per-fd state, configuration, logging, statistics.
SHIM_SRCS := $(wildcard shim/*.c)
LIB_OBJS  += $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)
EXPORTS   += shim/exports.txt
