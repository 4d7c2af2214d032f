#define _GNU_SOURCE
#include "CCurlShim.h"

#include <errno.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

uint64_t courier_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

void courier_set_thread_name(const char *name) {
    pthread_setname_np(pthread_self(), name);
}

int courier_open_socket(const struct curl_sockaddr *address) {
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

int courier_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int courier_epoll_set(int epfd, int fd, int what, int add) {
    struct epoll_event event = {0};
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    event.data.fd = fd;
    return epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
}

void courier_epoll_unwatch(int epfd, int fd) {
    struct epoll_event event = {0};
    (void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event);
}

int courier_epoll_wait(int epfd, courier_event *events, int max_events, int timeout_ms) {
    struct epoll_event raw[256];
    if (max_events > 256) max_events = 256;
    int count = epoll_wait(epfd, raw, max_events, timeout_ms);
    for (int i = 0; i < count; i++) {
        uint32_t bits = 0;
        if (raw[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) bits |= CURL_CSELECT_IN;
        if (raw[i].events & EPOLLOUT) bits |= CURL_CSELECT_OUT;
        if (raw[i].events & EPOLLERR) bits |= CURL_CSELECT_ERR;
        events[i].fd = raw[i].data.fd;
        events[i].events = bits;
    }
    return count;
}

int courier_wakeup_create(int epfd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -1;
    struct epoll_event event = {0};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void courier_wakeup_signal(int fd) {
    uint64_t one = 1;
    ssize_t written;
    do {
        written = write(fd, &one, sizeof one);
    } while (written < 0 && errno == EINTR);
}

void courier_wakeup_drain(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof value) > 0) {
    }
}
