// The few system facilities Courier's layers above the engine need from C: the monotonic
// clock, copies that avoid glibc's slow distances, an atomic rename, gzip (zlib) for request
// bodies, and the public suffix list. Nothing here knows libcurl: only the engine imports
// CCurlShim.

#ifndef COURIER_CCOURIERSYSTEM_H
#define COURIER_CCOURIERSYSTEM_H

#include <stddef.h>
#include <stdint.h>

/// Monotonic clock in nanoseconds.
uint64_t courier_monotonic_nanoseconds(void);

/// The processors this process may run on (`sched_getaffinity`), at least 1.
int courier_available_processors(void);

/// `renameat2(RENAME_NOREPLACE)`: moves `from` to `to` unless `to` exists. 0 or -1 (errno).
int courier_rename_noreplace(const char *from, const char *to);

// MARK: - Copies

/// The distances (destination minus source, modulo 4096) at which one large `memcpy` is slow
/// on CPUs with fast short `rep movsb` (FSRM; measured on AMD EPYC with glibc 2.36: 15 to 20
/// times slower for a 256 KiB copy). The kernel's copies to and from user space use the same
/// instruction, so file reads are placed with this in mind too (`courier_copy_distance`).
static const size_t courier_slow_copy_distance_limit = 64;

/// `(destination - source) mod 4096`: the distance that decides whether a large copy between
/// the two addresses is slow (below `courier_slow_copy_distance_limit`, but not 0).
static inline size_t courier_copy_distance(const void *destination, const void *source) {
    return ((uintptr_t)destination - (uintptr_t)source) & 4095;
}

/// `memcpy(destination, source, count)`, in pieces below glibc's `rep movsb` threshold when
/// the two addresses are at a distance where one large `rep movsb` is slow.
void courier_copy_bytes(void *destination, const void *source, size_t count);

// MARK: - gzip (zlib) for request bodies

typedef struct courier_gzip courier_gzip;
/// A gzip compressor (zlib deflate with a gzip header, RFC 1952) at the given level (1-9).
courier_gzip *courier_gzip_create(int level);
/// Compresses from `input` into `output`. `finish` marks the end of the input. Sets how much was
/// consumed and produced; returns 1 when the stream is complete, 0 when more calls are needed,
/// -1 on error.
int courier_gzip_step(courier_gzip *gzip, const void *input, size_t input_length, int finish,
                      void *output, size_t output_capacity, size_t *consumed, size_t *produced);
void courier_gzip_free(courier_gzip *gzip);

// MARK: - Raw deflate (zlib) for WebSocket messages (RFC 7692)

typedef struct courier_raw_zlib courier_raw_zlib;
/// A raw deflate (no zlib or gzip wrapper) compressor (`compress` 1) with a window of
/// 2^window_bits bytes (9 to 15), or a decompressor (`compress` 0; its window is always 15
/// bits, which reads any smaller one). NULL when zlib cannot make one.
courier_raw_zlib *courier_raw_zlib_create(int compress, int window_bits);
/// Compresses or decompresses from `input` into `output`, with Z_SYNC_FLUSH when `flush`.
/// Sets how much was consumed and produced; returns 0, or -1 when the data is not deflate.
int courier_raw_zlib_step(courier_raw_zlib *zlib, const void *input, size_t input_length, int flush,
                          void *output, size_t output_capacity, size_t *consumed, size_t *produced);
/// Forgets the window (no context takeover).
void courier_raw_zlib_reset(courier_raw_zlib *zlib);
void courier_raw_zlib_free(courier_raw_zlib *zlib);

// MARK: - Decoding content and transfer codings (decoding.c)

/// The codings Courier decodes (RFC 9110 section 8.4.1).
enum {
    courier_coding_gzip = 1,    // gzip, x-gzip: zlib's inflate, a gzip or zlib wrapper
    courier_coding_deflate = 2, // deflate: the zlib wrapper, or raw deflate as some servers send
    courier_coding_brotli = 3,  // br: libbrotlidec, loaded at run time
    courier_coding_zstd = 4     // zstd: libzstd, loaded at run time
};

typedef struct courier_decoder courier_decoder;
/// Whether this process can decode `coding`: gzip and deflate always, br and zstd when their
/// libraries load.
int courier_decoder_available(int coding);
/// A decoder for `coding`; NULL when it is not available or cannot be made.
courier_decoder *courier_decoder_create(int coding);
/// Decodes from `input` into `output`; sets how much was consumed and produced. Returns 1 when
/// the coded stream has ended (bytes after it are consumed and ignored), 0 when more may come,
/// -1 when the input is not in the coding.
int courier_decoder_step(courier_decoder *decoder, const void *input, size_t input_length, void *output,
                         size_t output_capacity, size_t *consumed, size_t *produced);
void courier_decoder_free(courier_decoder *decoder);

// MARK: - The public suffix list (libpsl, loaded at run time)

/// Whether a cookie for `domain` may be set by `host`, by the public suffix list libcurl uses
/// (libpsl, loaded at run time from the library libcurl links): 1 yes, 0 no (the domain is a
/// public suffix, or not the host or a parent of it), -1 when libpsl cannot be loaded.
int courier_cookie_domain_acceptable(const char *host, const char *domain);
/// Whether `domain` is a public suffix (`com`, `co.uk`, `github.io`): 1 yes, 0 no, -1 when
/// libpsl cannot be loaded.
int courier_is_public_suffix(const char *domain);

// MARK: - Network paths (rtnetlink)

/// A netlink route socket that receives the kernel's link, address and route changes (IPv4
/// and IPv6) of the calling thread's network namespace. The descriptor, or -errno.
int courier_path_events_open(void);
/// Blocks until the kernel reports a change on `fd`, then reads every report waiting: the
/// number of messages read (at least 1), or -errno.
int courier_path_events_wait(int fd);
/// The route the kernel would take to `address` (4 bytes for `family` AF_INET, 16 for
/// AF_INET6), asked over rtnetlink (RTM_GETROUTE): 0 and the outgoing interface's index, or
/// -errno (-ENETUNREACH, -EHOSTUNREACH when there is none).
int courier_route_lookup(int family, const void *address, int *interface_index);

/// Bytes malloc has handed out and not had back (glibc's mallinfo2 `uordblks`): what the
/// tests measure memory per connection with.
size_t courier_heap_bytes_in_use(void);

#endif
