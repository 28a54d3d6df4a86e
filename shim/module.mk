# shim/: interposition, per-fd state, the readiness engine, and the data
# paths (shim/paths/<name>/, each registering itself through shim_path.h).
SHIM_SRCS := $(COMMON_SRCS) $(wildcard shim/*.c) $(wildcard shim/paths/local/*.c)
LIB_OBJS  += $(filter-out $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o),$(SHIM_SRCS:%.c=$(BUILD)/obj/%.o))
# shim_mem.c wires malloc-hooks and pindown-cache together.
$(BUILD)/obj/shim/%.o: OBJ_EXTRA = -Ishim -Imalloc-hooks -Ipindown-cache
# A path sees the shim; the shim never sees a path.
$(BUILD)/obj/shim/paths/local/%.o: OBJ_EXTRA = -Ishim -Ishim/paths/local
EXPORTS   += shim/exports.txt
