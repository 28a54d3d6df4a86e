/* Threads: each with its own connection, and several sharing one socket;
 * every byte accounted for, counters consistent. */
#include <pthread.h>

#include "t_common.h"
#include "t_net.h"

#define T_NTHREADS 4
#define T_ROUNDS 2000
#define T_MSG 256

static int t_shared_c, t_shared_s;

static void *t_own_conn(void *arg)
{
    int c, s, i;
    unsigned char out[T_MSG], in[T_MSG];

    (void)arg;
    if (t_tcp_pair(AF_INET, &c, &s))
        return (void *)1;
    for (i = 0; i < T_ROUNDS; i++) {
        t_fill(out, T_MSG, (unsigned)i);
        if (send(c, out, T_MSG, 0) != T_MSG || recv(s, in, T_MSG, MSG_WAITALL) != T_MSG ||
            memcmp(in, out, T_MSG))
            return (void *)1;
    }
    close(c);
    close(s);
    return NULL;
}

/* Messages of T_MSG bytes, all bytes equal to the thread index: a reader
 * can tell that no write was torn or lost. */
static void *t_shared_writer(void *arg)
{
    unsigned char out[T_MSG];
    int i;

    memset(out, (int)(intptr_t)arg, sizeof(out));
    for (i = 0; i < T_ROUNDS / 4; i++)
        if (send(t_shared_c, out, T_MSG, 0) != T_MSG)
            return (void *)1;
    return NULL;
}

int t_main(void)
{
    pthread_t th[T_NTHREADS];
    void *ret;
    int i, counts[T_NTHREADS] = { 0 };
    unsigned char in[T_MSG];
    uint64_t sends = t_stat("calls.send");

    for (i = 0; i < T_NTHREADS; i++)
        T_CHECK(pthread_create(&th[i], NULL, t_own_conn, NULL) == 0);
    for (i = 0; i < T_NTHREADS; i++) {
        T_CHECK(pthread_join(th[i], &ret) == 0);
        T_CHECK(ret == NULL);
    }
    T_CHECK(!t_preloaded() || t_stat("calls.send") >= sends + T_NTHREADS * T_ROUNDS);

    {
        int sv[2];

        T_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
        t_shared_c = sv[0];
        t_shared_s = sv[1];
    }
    for (i = 0; i < T_NTHREADS; i++)
        T_CHECK(pthread_create(&th[i], NULL, t_shared_writer, (void *)(intptr_t)i) == 0);
    for (i = 0; i < T_NTHREADS * (T_ROUNDS / 4); i++) {
        int j;

        T_CHECK(recv(t_shared_s, in, T_MSG, 0) == T_MSG);
        for (j = 1; j < T_MSG; j++)
            T_CHECK(in[j] == in[0]);
        T_CHECK(in[0] < T_NTHREADS);
        counts[in[0]]++;
    }
    for (i = 0; i < T_NTHREADS; i++) {
        T_CHECK(pthread_join(th[i], &ret) == 0 && ret == NULL);
        T_CHECK(counts[i] == T_ROUNDS / 4);
    }
    close(t_shared_c);
    close(t_shared_s);
    return T_PASS;
}
