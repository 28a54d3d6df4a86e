/* mpi_pingpong: what an MPI job sees of its transport, OSU-style, between
 * two ranks (make bench runs it over TCP with and without the library, and
 * over the MPI library's own shared memory, the peer to beat).
 *
 *   latency    median round trip of 1 B and 4 KiB messages (us)
 *   bandwidth  a window of 16 MPI_Isend of one size, then a 1-byte ack;
 *              MB/s of the sender's whole timed loop (64 KiB, 1 MiB, 8 MiB)
 *
 * Rank 0 prints one line per figure: "lat SIZE US" and "bw SIZE MBPS".
 * usage: mpi_pingpong [seconds per figure] (default 0.5) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The same iteration count on both ranks: rank 0 decides, broadcasts. */
static int iters_for(double per_iter_s, double secs, int lo, int hi)
{
    int n = per_iter_s > 0 ? (int)(secs / per_iter_s) : hi;

    if (n < lo)
        n = lo;
    if (n > hi)
        n = hi;
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return n;
}

/* One round trip of size bytes: rank 0 sends first. */
static void round_trip(char *buf, size_t size, int rank, int tag)
{
    int peer = !rank;

    if (rank == 0) {
        MPI_Send(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
    }
}

static void latency(int rank, size_t size, double secs)
{
    char *buf = calloc(1, size);
    double t0, *t;
    int n;

    /* warm-up and calibration: 100 round trips */
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < 100; i++)
        round_trip(buf, size, rank, 1);
    n = iters_for((MPI_Wtime() - t0) / 100, secs, 100, 200000);
    t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        double a = MPI_Wtime();

        round_trip(buf, size, rank, 2);
        t[i] = MPI_Wtime() - a;
    }
    qsort(t, (size_t)n, sizeof(double), cmp_d);
    if (rank == 0)
        printf("lat %zu %.2f\n", size, t[n / 2] * 1e6);
    free(t);
    free(buf);
}

#define WINDOW 16

static void bandwidth(int rank, size_t size, double secs)
{
    char *buf = malloc(size * WINDOW), ack = 0;
    MPI_Request q[WINDOW];
    MPI_Status st[WINDOW];
    double t0, t;
    int n, peer = !rank;

    memset(buf, rank + 1, size * WINDOW);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 calibrates with 2 windows; pass 1 is timed */
        n = pass ? n : 2;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            for (int w = 0; w < WINDOW; w++) {
                if (rank == 0)
                    MPI_Isend(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                              &q[w]);
                else
                    MPI_Irecv(buf + (size_t)w * size, (int)size, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                              &q[w]);
            }
            MPI_Waitall(WINDOW, q, st);
            if (rank == 0)
                MPI_Recv(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(&ack, 1, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
        }
        t = MPI_Wtime() - t0;
        if (!pass)
            n = iters_for(t / 2, secs, 3, 100000);
    }
    if (rank == 0)
        printf("bw %zu %.1f\n", size, (double)size * WINDOW * n / t / 1e6);
    free(buf);
}

int main(int argc, char **argv)
{
    static const size_t bw_sizes[] = { 64u << 10, 1u << 20, 8u << 20 };
    double secs;
    int rank, size;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    secs = argc > 1 ? atof(argv[1]) : 0.5;
    latency(rank, 1, secs);
    latency(rank, 4096, secs);
    for (size_t i = 0; i < sizeof(bw_sizes) / sizeof(bw_sizes[0]); i++)
        bandwidth(rank, bw_sizes[i], secs);
    MPI_Finalize();
    return 0;
}
