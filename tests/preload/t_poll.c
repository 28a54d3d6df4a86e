/* poll, ppoll, select, pselect, epoll_create/_create1/_ctl/_wait/_pwait in
 * level- and edge-triggered modes: readiness says what a read would return. */
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "t_common.h"
#include "t_net.h"

int t_main(void)
{
    int c, s, ep, ep2;
    char buf[8];
    struct pollfd p;
    fd_set r;
    struct timeval tv = { 0, 0 };
    struct timespec ts = { 0, 0 };
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET }, out[4];
    sigset_t mask;
    T_COUNT(poll); T_COUNT(ppoll); T_COUNT(select); T_COUNT(pselect);
    T_COUNT(epoll_create); T_COUNT(epoll_create1); T_COUNT(epoll_ctl);
    T_COUNT(epoll_wait); T_COUNT(epoll_pwait);

    sigemptyset(&mask);
    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    p = (struct pollfd){ .fd = s, .events = POLLIN };
    T_CHECK(poll(&p, 1, 0) == 0);
    T_CHECK(ppoll(&p, 1, &ts, &mask) == 0);
    FD_ZERO(&r);
    FD_SET(s, &r);
    T_CHECK(select(s + 1, &r, NULL, NULL, &tv) == 0);
    ep = epoll_create1(EPOLL_CLOEXEC);
    ep2 = epoll_create(1);
    T_CHECK(ep >= 0 && ep2 >= 0);
    ev.data.fd = s;
    T_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) == 0);
    ev.events = EPOLLIN;    /* level-triggered on the second instance */
    T_CHECK(epoll_ctl(ep2, EPOLL_CTL_ADD, s, &ev) == 0);
    T_CHECK(epoll_wait(ep, out, 4, 0) == 0);

    T_CHECK(write(c, "hi", 2) == 2);
    T_CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
    FD_ZERO(&r);
    FD_SET(s, &r);
    tv.tv_sec = 5;
    T_CHECK(select(s + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(s, &r));
    FD_ZERO(&r);
    FD_SET(s, &r);
    T_CHECK(pselect(s + 1, &r, NULL, NULL, &ts, &mask) == 1);
    /* edge-triggered: one event per arrival; level-triggered: until drained */
    T_CHECK(epoll_wait(ep, out, 4, 5000) == 1 && out[0].data.fd == s);
    T_CHECK(epoll_wait(ep, out, 4, 0) == 0);
    T_CHECK(epoll_pwait(ep2, out, 4, 0, &mask) == 1);
    T_CHECK(epoll_pwait(ep2, out, 4, 0, &mask) == 1);
    T_CHECK(read(s, buf, sizeof(buf)) == 2);
    T_CHECK(epoll_wait(ep2, out, 4, 0) == 0);
    T_CHECK(write(c, "!", 1) == 1);
    T_CHECK(epoll_wait(ep, out, 4, 5000) == 1);
    /* EOF is readable too */
    close(c);
    T_CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
    T_CHECK(read(s, buf, sizeof(buf)) == 1 && read(s, buf, sizeof(buf)) == 0);
    T_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) == 0);
    T_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL) == -1 && errno == ENOENT);
    T_CHECK(epoll_wait(-1, out, 4, 0) == -1 && errno == EBADF);
    close(s);
    close(ep);
    close(ep2);
    T_CALLED(poll); T_CALLED(ppoll); T_CALLED(select); T_CALLED(pselect);
    T_CALLED(epoll_create); T_CALLED(epoll_create1); T_CALLED(epoll_ctl);
    T_CALLED(epoll_wait); T_CALLED(epoll_pwait);
    return T_PASS;
}
