/* mpi_check ROUND: every byte MPI moves between ranks arrives as sent.
 * Ranks pair up in phases, partner = rank ^ 1, then rank ^ 2, ... (two
 * ranks: one phase; four ranks on two hosts, two on each: the first phase
 * pairs ranks on one host, the second ranks on different hosts).  Each
 * pair runs a blocking ping-pong (the sender overwrites its buffer the
 * moment MPI_Send returns) and both directions at once with
 * MPI_Isend/MPI_Irecv, at sizes from 1 B to 32 MiB (eager and rendezvous
 * protocols, odd sizes); then every rank joins MPI_Allreduce and MPI_Bcast
 * of 1 .. 512 Ki doubles.  Every received byte is compared with the
 * pattern the sender wrote (a function of the round, the message, the
 * sender's rank and the offset).  Rank 0 prints "mpi_check: ok ..." or
 * "mpi_check: FAIL ..."; the exit status says the same. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int round_no;

static unsigned char pat(size_t i, int msg, int from)
{
    return (unsigned char)(i * 131 + (size_t)msg * 7 + (size_t)from * 29 + (i >> 12) +
                           (size_t)round_no * 101);
}

static void fill(unsigned char *b, size_t n, int msg, int from)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(i, msg, from);
}

/* 0, or 1 after reporting the first wrong byte */
static int check(const unsigned char *b, size_t n, int msg, int from, int rank, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(i, msg, from)) {
            fprintf(stderr, "rank %d: %s of %zu bytes, message %d: byte %zu is %d, sent %d\n",
                    rank, what, n, msg, i, b[i], pat(i, msg, from));
            return 1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 1, 7, 100, 4096, 65536, 65537, 1u << 20,
                                    (8u << 20) + 3, 32u << 20 };
    int rank, size, bad = 0, allbad = 0, msg = 0;

    MPI_Init(&argc, &argv);
    round_no = argc > 1 ? atoi(argv[1]) : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (getenv("MPI_CHECK_PIDS")) {
        /* <dir>/rank.<rank> holds our pid: the test finds each rank's
         * statistics (tests/mpihosts) */
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/rank.%d", getenv("MPI_CHECK_PIDS"), rank);
        if ((f = fopen(path, "w"))) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    if (size < 2) {
        fprintf(stderr, "mpi_check: needs 2 ranks or more, got %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int bit = 1; bit < size; bit <<= 1) {
        int peer = rank ^ bit, first = !(rank & bit);     /* the lower rank sends first */
        int pmsg = msg;

        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            size_t n = sizes[si];
            unsigned char *s = peer < size ? malloc(n) : NULL, *r = peer < size ? malloc(n) : NULL;
            MPI_Request q[2];
            MPI_Status st[2];

            if (peer < size && (!s || !r))
                MPI_Abort(MPI_COMM_WORLD, 3);
            for (int it = 0; it < 4; it++, pmsg += 2) {
                if (peer >= size)
                    continue;               /* no partner in this phase */
                fill(s, n, pmsg, rank);
                if (first) {
                    MPI_Send(s, (int)n, MPI_BYTE, peer, pmsg, MPI_COMM_WORLD);
                    memset(s, 0xee, n);     /* the buffer is ours again */
                    MPI_Recv(r, (int)n, MPI_BYTE, peer, pmsg, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(r, (int)n, MPI_BYTE, peer, pmsg, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(s, (int)n, MPI_BYTE, peer, pmsg, MPI_COMM_WORLD);
                    memset(s, 0xee, n);
                }
                bad += check(r, n, pmsg, peer, rank, "ping-pong");
                fill(s, n, pmsg + 1, rank);
                MPI_Irecv(r, (int)n, MPI_BYTE, peer, pmsg + 1, MPI_COMM_WORLD, &q[0]);
                MPI_Isend(s, (int)n, MPI_BYTE, peer, pmsg + 1, MPI_COMM_WORLD, &q[1]);
                MPI_Waitall(2, q, st);
                bad += check(r, n, pmsg + 1, peer, rank, "exchange");
            }
            free(s);
            free(r);
        }
        msg = pmsg;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    for (int it = 0; it < 20; it++) {
        size_t n = (size_t)1 << it;
        double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));

        if (!a || !b)
            MPI_Abort(MPI_COMM_WORLD, 3);
        for (size_t i = 0; i < n; i++)
            a[i] = (double)(i + (size_t)it + (size_t)rank + (size_t)round_no);
        MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            if (b[i] != (double)((size_t)size * (i + (size_t)it + (size_t)round_no) +
                                 (size_t)size * (size_t)(size - 1) / 2)) {
                fprintf(stderr, "rank %d: allreduce of %zu doubles: element %zu\n", rank, n, i);
                bad++;
                break;
            }
        if (rank == 0)
            for (size_t i = 0; i < n; i++)
                a[i] = (double)(i * 3 + (size_t)it);
        MPI_Bcast(a, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            if (a[i] != (double)(i * 3 + (size_t)it)) {
                fprintf(stderr, "rank %d: bcast of %zu doubles: element %zu\n", rank, n, i);
                bad++;
                break;
            }
        free(a);
        free(b);
    }
    MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi_check: %s (round %d, %d ranks, %d messages each way per pair, %d wrong)\n",
               allbad ? "FAIL" : "ok", round_no, size, msg, allbad);
    MPI_Finalize();
    return allbad ? 1 : 0;
}
