#define _GNU_SOURCE
#include "CCurlShim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <time.h>

void *courier_curl_malloc(size_t size) {
    if (size < courier_page_aligned_minimum) return malloc(size);
    void *block = NULL;
    return posix_memalign(&block, 4096, size) == 0 ? block : NULL;
}

void *courier_curl_realloc(void *pointer, size_t size) {
    void *block = realloc(pointer, size);
    if (!block || size < courier_page_aligned_minimum || ((uintptr_t)block & 4095) == 0) return block;
    // glibc's realloc does not keep the alignment: move the block to a page boundary.
    void *aligned = NULL;
    if (posix_memalign(&aligned, 4096, size) != 0) return block;
    memcpy(aligned, block, size);
    free(block);
    return aligned;
}

void *courier_curl_calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    if (count * size < courier_page_aligned_minimum) return calloc(count, size);
    void *block = courier_curl_malloc(count * size);
    if (block) memset(block, 0, count * size);
    return block;
}

void courier_curl_free(void *pointer) { free(pointer); }

char *courier_curl_strdup(const char *string) { return strdup(string); }

/* Whether OpenSSL was told to leave its state in place at exit (see courier_global_init). */
static bool courier_openssl_kept_at_exit;

/* OpenSSL frees its global state (locks, providers) in an atexit handler, unless the first
 * initialisation in the process asks it not to. A program that returns from main while an
 * engine thread is still inside OpenSSL (closing the connections of its last requests, after
 * the program has its responses) would then crash there, in a lock already destroyed:
 * seen in two of 150 exits after a thousand new HTTPS connections each. The process's memory
 * goes at exit anyway. Looked up at run time: libcurl brought OpenSSL into the process (a
 * libcurl built on another TLS library has no such symbol, and nothing is done). */
static void courier_keep_openssl_at_exit(void) {
    typedef int (*courier_init_crypto)(uint64_t options, const void *settings);
    courier_init_crypto init = (courier_init_crypto)dlsym(RTLD_DEFAULT, "OPENSSL_init_crypto");
    const uint64_t no_atexit = 0x00080000L; /* OPENSSL_INIT_NO_ATEXIT, OpenSSL 1.1.1 and later */
    courier_openssl_kept_at_exit = init != NULL && init(no_atexit, NULL) == 1;
}

bool courier_openssl_kept_at_exit_state(void) {
    return courier_openssl_kept_at_exit;
}

CURLcode courier_global_init(void) {
    courier_keep_openssl_at_exit();
    return curl_global_init_mem(CURL_GLOBAL_DEFAULT, courier_curl_malloc, courier_curl_free, courier_curl_realloc,
                                courier_curl_strdup, courier_curl_calloc);
}

void courier_set_thread_name(const char *name) {
    pthread_setname_np(pthread_self(), name);
}

/* The engine whose thread this is (NULL on every other thread), for debug-build checks. */
static _Thread_local const void *courier_engine_owner;

void courier_engine_thread_enter(const void *owner) {
    courier_engine_owner = owner;
    if (owner != NULL) {
        /* A write to a connection the peer has closed raises SIGPIPE, which ends the process
           unless it is ignored or blocked. libcurl sends with MSG_NOSIGNAL, but before 7.87 its
           OpenSSL connections write through OpenSSL's socket BIO, with write(2); with
           CURLOPT_NOSIGNAL set libcurl does not ignore the signal around its calls either.
           Blocked on the engine thread (a write's SIGPIPE goes to the thread that wrote), the
           write fails with EPIPE and libcurl reports a send error; the process's own
           disposition of SIGPIPE is left as the application set it. TLSTests'
           theServersStreamLimitCountsByDefault ended the test process so on 7.76.1. */
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    }
}

const void *courier_engine_thread_owner(void) {
    return courier_engine_owner;
}

int courier_open_socket(const struct curl_sockaddr *address) {
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

int courier_open_multipath_socket(const struct curl_sockaddr *address) {
    if ((address->socktype & 0xF) == SOCK_STREAM && (address->protocol == IPPROTO_TCP || address->protocol == 0)
        && (address->family == AF_INET || address->family == AF_INET6)) {
        int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, IPPROTO_MPTCP);
        if (fd >= 0) return fd;
    }
    return courier_open_socket(address);
}

int courier_socket_set_user_timeout(int fd, unsigned int milliseconds) {
    return setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &milliseconds, sizeof milliseconds);
}

int courier_socket_local_port(int fd) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0) return 0;
    if (address.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&address)->sin6_port);
    return 0;
}

void courier_socket_retire(int fd) {
    char buffer[4096];
    for (int i = 0; i < 64; i++) {
        if (recv(fd, buffer, sizeof buffer, MSG_DONTWAIT) <= 0) break;
    }
    (void)shutdown(fd, SHUT_RDWR);
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

