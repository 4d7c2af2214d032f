#include "CCurlShim.h"

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int courier_epoll_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

static uint32_t interest_for(int what) {
    switch (what) {
    case CURL_POLL_IN: return EPOLLIN;
    case CURL_POLL_OUT: return EPOLLOUT;
    case CURL_POLL_INOUT: return EPOLLIN | EPOLLOUT;
    default: return 0;
    }
}

int courier_epoll_watch(int epfd, int fd, int curl_poll_what) {
    struct epoll_event event = {0};
    event.events = interest_for(curl_poll_what);
    event.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event) == 0) {
        return 0;
    }
    if (errno == ENOENT) {
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
    }
    return -1;
}

void courier_epoll_unwatch(int epfd, int fd) {
    struct epoll_event event = {0};
    (void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event);
}

int courier_epoll_wait(int epfd, courier_event *events, int max_events, int timeout_ms) {
    struct epoll_event raw[256];
    if (max_events > 256) {
        max_events = 256;
    }
    int count = epoll_wait(epfd, raw, max_events, timeout_ms);
    for (int i = 0; i < count; i++) {
        uint32_t bits = 0;
        if (raw[i].events & (EPOLLIN | EPOLLRDHUP)) bits |= CURL_CSELECT_IN;
        if (raw[i].events & EPOLLOUT) bits |= CURL_CSELECT_OUT;
        if (raw[i].events & (EPOLLERR | EPOLLHUP)) bits |= CURL_CSELECT_ERR;
        events[i].fd = raw[i].data.fd;
        events[i].events = bits;
    }
    return count;
}

int courier_wakeup_create(int epfd) {
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
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

uint64_t courier_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}
