# examples/: the zcbench benchmark tool, `make bench`, `make demo` and the
# `examples` test tier.  zcbench is plain C with no link dependency on the
# library (it finds libzcsock at run time with dlsym), so it runs with and
# without LD_PRELOAD.

ZCBENCH_SRCS := $(wildcard examples/zcbench*.c)
ZCBENCH_OBJS := $(ZCBENCH_SRCS:%.c=$(BUILD)/obj/%.o)

all: $(BUILD)/zcbench

$(BUILD)/zcbench: $(ZCBENCH_OBJS)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_LDFLAGS) -o $@ $(ZCBENCH_OBJS) -ldl

# Small probes make bench runs after zcbench: the wake-up floor of a
# blocking round trip, an event-driven (epoll) ping-pong, and page exchange
# versus one copy.
BENCH_PROBES := $(BUILD)/wake_floor $(BUILD)/epoll_pingpong $(BUILD)/exchange_floor \
	$(BUILD)/conn_rate
all: $(BENCH_PROBES)
$(BENCH_PROBES): $(BUILD)/%: examples/%.c examples/probe.h
	$(quiet) CC $@
	$(Q)$(CC) $(ZC_CFLAGS) $(ZC_LDFLAGS) -o $@ $< -ldl

# MPI over TCP (examples/mpi_pingpong.c), built with each MPI's compiler
# wrapper when it is installed; make bench says so when it is not.
BENCH_MPI := $(MPI_IMPLS:%=$(BUILD)/mpi_pingpong_%)
$(BUILD)/mpi_pingpong_%: examples/mpi_pingpong.c
	$(quiet) MPICC $@
	$(Q)mpicc.$* -O2 -Wall -o $@ $<

# Collectives for make bench-mpi (examples/mpi_coll.c), the same way.
BENCH_MPI_COLL := $(MPI_IMPLS:%=$(BUILD)/mpi_coll_%)
$(BUILD)/mpi_coll_%: examples/mpi_coll.c
	$(quiet) MPICC $@
	$(Q)mpicc.$* -O2 -Wall -o $@ $<

# Kernel and zcsock variants interleaved; QUICK=1 for a short run.
bench: $(LIB) $(BUILD)/zcbench $(BENCH_PROBES) $(BENCH_MPI)
	$(Q)ZC_BUILD=$(BUILD) ZC_LIB=$(abspath $(LIB)) ZC_LIB_BEFORE=$(ZC_LIB_BEFORE) QUICK=$(QUICK) examples/bench.sh

# MPI against MPI's own shared memory: NetPIPE (Debian's netpipe-openmpi and
# netpipe-mpich2) ping-pong and streaming, 8 B to 32 MiB, and mpi_coll on 2
# and 4 ranks; every variant interleaved in one run (examples/bench_mpi.sh).
bench-mpi: $(LIB) $(BENCH_MPI_COLL)
	$(Q)ZC_BUILD=$(BUILD) ZC_LIB=$(abspath $(LIB)) QUICK=$(QUICK) examples/bench_mpi.sh

# The README's first command: the same validated transfers on the kernel and
# under the launcher, side by side with the ratio, and which path carried
# the library's bytes (examples/demo.sh).
demo: $(LIB) $(BUILD)/zcsock $(BUILD)/zcbench
	$(Q)ZC_BUILD=$(BUILD) ZC_LIB=$(abspath $(LIB)) examples/demo.sh

test-examples: $(BUILD)/zcbench
	$(Q)$(TEST_ENV) examples/test.sh

TEST_TIERS += examples
INSTALL_EXTRA += install -m 755 $(BUILD)/zcbench $(DESTDIR)$(BINDIR)/zcbench;

.PHONY: demo test-examples bench-mpi
