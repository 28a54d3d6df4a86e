# common/: utilities shared by the shim, its paths and the modules (the real-
# function table, logging, configuration, statistics, the metadata pool).
# Every compile sees them (-Icommon in ZC_CFLAGS); they link into the library.
COMMON_SRCS := $(wildcard common/*.c)
LIB_OBJS    += $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
