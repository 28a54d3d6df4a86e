# common/: utilities shared by the shim, its paths and the modules (the real-
# function table, logging, configuration, statistics, the metadata pool).
# Every compile sees them (-Icommon in ZC_CFLAGS); they link into the library.
# (zc_fork.c first: its page-aligned anchor starts the fork data, zc_real.h)
COMMON_SRCS := common/zc_fork.c $(filter-out common/zc_fork.c,$(wildcard common/*.c))
LIB_OBJS    += $(COMMON_SRCS:%.c=$(BUILD)/obj/%.o)
