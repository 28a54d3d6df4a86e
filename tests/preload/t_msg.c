/* sendmsg and recvmsg with gather/scatter and SCM_RIGHTS, sendmmsg and
 * recvmmsg on datagram and stream sockets. */
#include <sys/uio.h>

#include "t_common.h"
#include "t_net.h"

static int t_scm_rights(void)
{
    int sv[2], pv[2], got = -1;
    char c = 'x', cbuf[CMSG_SPACE(sizeof(int))], r[4];
    struct iovec iov = { &c, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
    struct cmsghdr *cm;

    T_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    T_CHECK(pipe(pv) == 0);
    memset(cbuf, 0, sizeof(cbuf));
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pv[1], sizeof(int));
    T_CHECK(sendmsg(sv[0], &m, 0) == 1);
    memset(cbuf, 0, sizeof(cbuf));
    m.msg_controllen = sizeof(cbuf);
    T_CHECK(recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) == 1);
    cm = CMSG_FIRSTHDR(&m);
    T_CHECK(cm && cm->cmsg_type == SCM_RIGHTS);
    memcpy(&got, CMSG_DATA(cm), sizeof(int));
    T_CHECK(write(got, "abc", 3) == 3);
    T_CHECK(read(pv[0], r, 3) == 3 && !memcmp(r, "abc", 3));
    close(got);
    close(pv[0]);
    close(pv[1]);
    close(sv[0]);
    close(sv[1]);
    return T_PASS;
}

static int t_gather_scatter(void)
{
    int c, s;
    char a[3] = "abc", b[5] = "defgh", out1[4], out2[10];
    struct iovec siov[2] = { { a, 3 }, { b, 5 } }, riov[2] = { { out1, 4 }, { out2, 4 } };
    struct msghdr sm = { .msg_iov = siov, .msg_iovlen = 2 };
    struct msghdr rm = { .msg_iov = riov, .msg_iovlen = 2 };

    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    T_CHECK(sendmsg(c, &sm, 0) == 8);
    memset(a, 0, 3);                      /* reuse right after return */
    T_CHECK(recvmsg(s, &rm, MSG_WAITALL) == 8);
    T_CHECK(!memcmp(out1, "abcd", 4) && !memcmp(out2, "efgh", 4));
    T_CHECK(sendmsg(c, &(struct msghdr){ 0 }, 0) == 0);
    T_CHECK(recvmsg(s, &rm, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    T_CHECK(sendmsg(c, &(struct msghdr){ .msg_iovlen = 2000 }, 0) == -1 && errno == EMSGSIZE);
    close(c);
    close(s);
    return T_PASS;
}

static int t_mmsg(void)
{
    int a, b;
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(addr);
    char d[3][8] = { "one", "two", "three" }, r[3][16];
    struct iovec siov[3], riov[3];
    struct mmsghdr sv[3], rv[3];
    struct timespec tmo = { 5, 0 };
    int i;

    a = socket(AF_INET, SOCK_DGRAM, 0);
    b = socket(AF_INET, SOCK_DGRAM, 0);
    T_CHECK(bind(b, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    T_CHECK(getsockname(b, (struct sockaddr *)&addr, &len) == 0);
    T_CHECK(connect(a, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    memset(sv, 0, sizeof(sv));
    memset(rv, 0, sizeof(rv));
    for (i = 0; i < 3; i++) {
        siov[i] = (struct iovec){ d[i], strlen(d[i]) };
        riov[i] = (struct iovec){ r[i], sizeof(r[i]) };
        sv[i].msg_hdr = (struct msghdr){ .msg_iov = &siov[i], .msg_iovlen = 1 };
        rv[i].msg_hdr = (struct msghdr){ .msg_iov = &riov[i], .msg_iovlen = 1 };
    }
    T_CHECK(sendmmsg(a, sv, 3, 0) == 3);
    T_CHECK(sv[2].msg_len == 5);
    T_CHECK(recvmmsg(b, rv, 3, MSG_WAITFORONE, &tmo) >= 1);
    T_CHECK(rv[0].msg_len == 3 && !memcmp(r[0], "one", 3));
    T_CHECK(recvmmsg(-1, rv, 1, 0, NULL) == -1 && errno == EBADF);
    close(a);
    close(b);
    return T_PASS;
}

int t_main(void)
{
    int rc;
    T_COUNT(sendmsg); T_COUNT(recvmsg); T_COUNT(sendmmsg); T_COUNT(recvmmsg);

    if ((rc = t_scm_rights()) != T_PASS || (rc = t_gather_scatter()) != T_PASS ||
        (rc = t_mmsg()) != T_PASS)
        return rc;
    T_CALLED(sendmsg); T_CALLED(recvmsg); T_CALLED(sendmmsg); T_CALLED(recvmmsg);
    return T_PASS;
}
