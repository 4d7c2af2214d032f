#define _GNU_SOURCE
#include "CCourierSystem.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

uint64_t courier_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

int courier_available_processors(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int count = CPU_COUNT(&set);
        if (count > 0) return count;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

/// `memcpy`, called through a volatile pointer so that the compiler cannot merge the pieces
/// below into one large copy again.
static void *(*volatile courier_memcpy)(void *, const void *, size_t) = memcpy;

void courier_copy_bytes(void *destination, const void *source, size_t count) {
    // glibc uses `rep movsb` from 2,113 bytes on FSRM CPUs; 2,048-byte pieces take its vector
    // loop, which has no slow distances.
    const size_t piece = 2048;
    size_t distance = courier_copy_distance(destination, source);
    if (count <= piece || distance == 0 || distance >= courier_slow_copy_distance_limit) {
        memcpy(destination, source, count);
        return;
    }
    unsigned char *to = destination;
    const unsigned char *from = source;
    while (count > 0) {
        size_t n = count < piece ? count : piece;
        courier_memcpy(to, from, n);
        to += n;
        from += n;
        count -= n;
    }
}

int courier_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

struct courier_gzip {
    z_stream stream;
};

courier_gzip *courier_gzip_create(int level) {
    courier_gzip *gzip = calloc(1, sizeof *gzip);
    if (!gzip) return NULL;
    /* windowBits 15 + 16: a gzip wrapper instead of zlib's. */
    if (deflateInit2(&gzip->stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(gzip);
        return NULL;
    }
    return gzip;
}

int courier_gzip_step(courier_gzip *gzip, const void *input, size_t input_length, int finish,
                      void *output, size_t output_capacity, size_t *consumed, size_t *produced) {
    gzip->stream.next_in = (Bytef *)input;
    gzip->stream.avail_in = (uInt)input_length;
    gzip->stream.next_out = (Bytef *)output;
    gzip->stream.avail_out = (uInt)output_capacity;
    int result = deflate(&gzip->stream, finish ? Z_FINISH : Z_NO_FLUSH);
    *consumed = input_length - gzip->stream.avail_in;
    *produced = output_capacity - gzip->stream.avail_out;
    if (result == Z_STREAM_END) return 1;
    if (result == Z_OK || result == Z_BUF_ERROR) return 0;
    return -1;
}

void courier_gzip_free(courier_gzip *gzip) {
    if (!gzip) return;
    deflateEnd(&gzip->stream);
    free(gzip);
}

struct courier_raw_zlib {
    z_stream stream;
    int compress;
};

courier_raw_zlib *courier_raw_zlib_create(int compress, int window_bits) {
    courier_raw_zlib *zlib = calloc(1, sizeof *zlib);
    if (!zlib) return NULL;
    zlib->compress = compress;
    /* Negative window bits: raw deflate, no header or trailer. */
    int result = compress
        ? deflateInit2(&zlib->stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -window_bits, 8, Z_DEFAULT_STRATEGY)
        : inflateInit2(&zlib->stream, -15);
    if (result != Z_OK) {
        free(zlib);
        return NULL;
    }
    return zlib;
}

int courier_raw_zlib_step(courier_raw_zlib *zlib, const void *input, size_t input_length, int flush,
                          void *output, size_t output_capacity, size_t *consumed, size_t *produced) {
    zlib->stream.next_in = (Bytef *)input;
    zlib->stream.avail_in = (uInt)input_length;
    zlib->stream.next_out = (Bytef *)output;
    zlib->stream.avail_out = (uInt)output_capacity;
    int mode = flush ? Z_SYNC_FLUSH : Z_NO_FLUSH;
    int result = zlib->compress ? deflate(&zlib->stream, mode) : inflate(&zlib->stream, mode);
    *consumed = input_length - zlib->stream.avail_in;
    *produced = output_capacity - zlib->stream.avail_out;
    /* A raw stream that ends (a final block) is not an error: later messages start anew. */
    if (result == Z_STREAM_END && !zlib->compress) inflateReset(&zlib->stream);
    if (result == Z_OK || result == Z_BUF_ERROR || result == Z_STREAM_END) return 0;
    return -1;
}

void courier_raw_zlib_reset(courier_raw_zlib *zlib) {
    if (zlib->compress) {
        deflateReset(&zlib->stream);
    } else {
        inflateReset(&zlib->stream);
    }
}

void courier_raw_zlib_free(courier_raw_zlib *zlib) {
    if (!zlib) return;
    if (zlib->compress) {
        deflateEnd(&zlib->stream);
    } else {
        inflateEnd(&zlib->stream);
    }
    free(zlib);
}

// MARK: The public suffix list

// libpsl is what libcurl checks response cookies against (curl_version_info's CURL_VERSION_PSL).
// It is loaded at run time, so that building Courier needs no libpsl headers: libcurl's own
// dependency, libpsl5, is the library loaded. The context is the list on the system
// (psl_latest, as libcurl uses), else the one built into libpsl; made once, never freed.
typedef struct psl_ctx_st psl_ctx_t;

static struct {
    const psl_ctx_t *context;
    int (*acceptable)(const psl_ctx_t *, const char *, const char *);
    int (*is_public_suffix)(const psl_ctx_t *, const char *);
} courier_psl;
static pthread_once_t courier_psl_once = PTHREAD_ONCE_INIT;

static void courier_psl_load(void) {
    void *library = dlopen("libpsl.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    psl_ctx_t *(*latest)(const char *) = (psl_ctx_t * (*)(const char *)) dlsym(library, "psl_latest");
    const psl_ctx_t *(*builtin)(void) = (const psl_ctx_t *(*)(void))dlsym(library, "psl_builtin");
    courier_psl.acceptable =
        (int (*)(const psl_ctx_t *, const char *, const char *))dlsym(library, "psl_is_cookie_domain_acceptable");
    courier_psl.is_public_suffix = (int (*)(const psl_ctx_t *, const char *))dlsym(library, "psl_is_public_suffix");
    const psl_ctx_t *context = latest ? latest(NULL) : NULL;
    if (!context && builtin) context = builtin();
    if (courier_psl.acceptable && courier_psl.is_public_suffix) courier_psl.context = context;
}

int courier_cookie_domain_acceptable(const char *host, const char *domain) {
    pthread_once(&courier_psl_once, courier_psl_load);
    if (!courier_psl.context) return -1;
    return courier_psl.acceptable(courier_psl.context, host, domain) ? 1 : 0;
}

int courier_is_public_suffix(const char *domain) {
    pthread_once(&courier_psl_once, courier_psl_load);
    if (!courier_psl.context) return -1;
    return courier_psl.is_public_suffix(courier_psl.context, domain) ? 1 : 0;
}

// MARK: - Network paths (rtnetlink)

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

int courier_path_events_open(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct sockaddr_nl local = {0};
    local.nl_family = AF_NETLINK;
    local.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
                      RTMGRP_IPV6_ROUTE;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int courier_path_events_wait(int fd) {
    char buffer[8192];
    int messages = 0;
    int flags = 0;  // the first read blocks, the rest take what is waiting
    for (;;) {
        ssize_t count = recv(fd, buffer, sizeof buffer, flags);
        if (count < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return messages;
            // ENOBUFS: reports were dropped; the caller re-reads the state, which is the point.
            if (errno == ENOBUFS) return messages + 1;
            return messages > 0 ? messages : -errno;
        }
        messages += 1;
        flags = MSG_DONTWAIT;
    }
}

int courier_route_lookup(int family, const void *address, int *interface_index) {
    size_t length = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (length == 0) return -EAFNOSUPPORT;
    struct {
        struct nlmsghdr header;
        struct rtmsg route;
        char attributes[64];
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    request.header.nlmsg_type = RTM_GETROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.header.nlmsg_seq = 1;
    request.route.rtm_family = (unsigned char)family;
    request.route.rtm_dst_len = (unsigned char)(length * 8);
    struct rtattr *destination = (struct rtattr *)((char *)&request + NLMSG_ALIGN(request.header.nlmsg_len));
    destination->rta_type = RTA_DST;
    destination->rta_len = (unsigned short)RTA_LENGTH(length);
    memcpy(RTA_DATA(destination), address, length);
    request.header.nlmsg_len = NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(destination->rta_len);

    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct sockaddr_nl kernel = {0};
    kernel.nl_family = AF_NETLINK;
    int result = -EIO;
    if (sendto(fd, &request, request.header.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        result = -errno;
        close(fd);
        return result;
    }
    char buffer[8192];
    ssize_t count;
    do {
        count = recv(fd, buffer, sizeof buffer, 0);
    } while (count < 0 && errno == EINTR);
    if (count < 0) {
        result = -errno;
        close(fd);
        return result;
    }
    for (struct nlmsghdr *message = (struct nlmsghdr *)buffer; NLMSG_OK(message, (unsigned int)count);
         message = NLMSG_NEXT(message, count)) {
        if (message->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *error = NLMSG_DATA(message);
            result = error->error < 0 ? error->error : -EIO;
            break;
        }
        if (message->nlmsg_type != RTM_NEWROUTE) continue;
        struct rtmsg *route = NLMSG_DATA(message);
        if (route->rtm_type == RTN_UNREACHABLE || route->rtm_type == RTN_PROHIBIT ||
            route->rtm_type == RTN_BLACKHOLE) {
            result = -ENETUNREACH;
            break;
        }
        int attributes_length = (int)RTM_PAYLOAD(message);
        *interface_index = 0;
        for (struct rtattr *attribute = RTM_RTA(route); RTA_OK(attribute, attributes_length);
             attribute = RTA_NEXT(attribute, attributes_length)) {
            if (attribute->rta_type == RTA_OIF) *interface_index = *(int *)RTA_DATA(attribute);
        }
        result = 0;
        break;
    }
    close(fd);
    return result;
}

size_t courier_heap_bytes_in_use(void) {
    return mallinfo2().uordblks;
}
