/* mpi_coll: what collectives cost an MPI job (make bench-mpi runs it on 2
 * and 4 ranks, over TCP with and without the library and over the MPI
 * library's own shared memory).
 *
 *   allreduce  MPI_SUM over doubles: 8 B, 64 KiB, 1 MiB
 *   alltoall   bytes per peer: 8 B, 64 KiB
 *   bcast      from rank 0: 8 B, 64 KiB, 1 MiB
 *
 * Each figure: a calibrated loop of about [seconds] (default 0.3), the mean
 * time of one call in microseconds; the result of the last call is checked
 * on every rank (a wrong byte ends the job with exit 1).  Rank 0 prints one
 * line per figure: "coll OP BYTES US".
 * usage: mpi_coll [seconds per figure] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_ALLREDUCE, OP_ALLTOALL, OP_BCAST };

static int rank, nranks;

static void fail(const char *what, size_t bytes, size_t at)
{
    fprintf(stderr, "mpi_coll: rank %d: %s of %zu bytes: wrong result at %zu\n", rank, what,
            bytes, at);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One call of op over bytes (per peer for alltoall); seed varies the data. */
static void call(int op, size_t bytes, char *in, char *out, int seed)
{
    size_t i;

    switch (op) {
    case OP_ALLREDUCE:
        for (i = 0; i < bytes / sizeof(double); i++)
            ((double *)in)[i] = (double)(rank + seed) + (double)i;
        MPI_Allreduce(in, out, (int)(bytes / sizeof(double)), MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
        break;
    case OP_ALLTOALL:
        for (i = 0; i < bytes * (size_t)nranks; i++)
            in[i] = (char)(rank * 31 + (int)(i / bytes) * 7 + seed + (int)i);
        MPI_Alltoall(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
        break;
    default:
        if (rank == 0)
            for (i = 0; i < bytes; i++)
                out[i] = (char)(seed + (int)i * 13);
        MPI_Bcast(out, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
    }
}

/* The last call's result, every byte. */
static void check(int op, size_t bytes, const char *out, int seed)
{
    size_t i;

    switch (op) {
    case OP_ALLREDUCE: {
        double ranks = (double)nranks * (nranks - 1) / 2;

        for (i = 0; i < bytes / sizeof(double); i++)
            if (((const double *)out)[i] != ranks + (double)nranks * ((double)seed + (double)i))
                fail("allreduce", bytes, i);
        break;
    }
    case OP_ALLTOALL:
        for (i = 0; i < bytes * (size_t)nranks; i++) {
            int from = (int)(i / bytes);
            size_t at = (size_t)rank * bytes + i % bytes;   /* in the sender's buffer */

            if (out[i] != (char)(from * 31 + rank * 7 + seed + (int)at))
                fail("alltoall", bytes, i);
        }
        break;
    default:
        for (i = 0; i < bytes; i++)
            if (out[i] != (char)(seed + (int)i * 13))
                fail("bcast", bytes, i);
        break;
    }
}

static void figure(int op, const char *name, size_t bytes, double secs)
{
    size_t room = bytes * (size_t)(op == OP_ALLTOALL ? nranks : 1);
    char *in = malloc(room), *out = malloc(room);
    double t0, per;
    int n, i;

    if (!in || !out)
        MPI_Abort(MPI_COMM_WORLD, 2);
    /* warm-up and calibration: 10 calls */
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < 10; i++)
        call(op, bytes, in, out, i);
    per = (MPI_Wtime() - t0) / 10;
    n = per > 0 ? (int)(secs / per) : 1000;
    n = n < 5 ? 5 : n > 200000 ? 200000 : n;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < n; i++)
        call(op, bytes, in, out, i);
    per = (MPI_Wtime() - t0) / n;
    check(op, bytes, out, n - 1);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &per, &per, 1, MPI_DOUBLE, MPI_MAX, 0,
               MPI_COMM_WORLD);
    if (rank == 0)
        printf("coll %s %zu %.2f\n", name, bytes, per * 1e6);
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.3;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    figure(OP_ALLREDUCE, "allreduce", 8, secs);
    figure(OP_ALLREDUCE, "allreduce", 64 << 10, secs);
    figure(OP_ALLREDUCE, "allreduce", 1 << 20, secs);
    figure(OP_ALLTOALL, "alltoall", 8, secs);
    figure(OP_ALLTOALL, "alltoall", 64 << 10, secs);
    figure(OP_BCAST, "bcast", 8, secs);
    figure(OP_BCAST, "bcast", 64 << 10, secs);
    figure(OP_BCAST, "bcast", 1 << 20, secs);
    MPI_Finalize();
    return 0;
}
