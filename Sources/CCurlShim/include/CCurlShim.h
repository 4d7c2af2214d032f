// Typed wrappers for libcurl's variadic functions, and the few C facilities (epoll with its
// packed event struct, eventfd, sockets, libcurl's allocator) that Courier's engine uses. Only
// the engine imports this module; what the other layers need from C is CCourierSystem.
// Swift cannot call C variadic functions, so every curl_*_setopt/getinfo call
// shape Courier needs has a typed, non-variadic wrapper here.

#ifndef COURIER_CCURLSHIM_H
#define COURIER_CCURLSHIM_H

#include <curl/curl.h>
#include "CCourierSystem.h"
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

// MARK: - curl_easy_setopt

static inline CURLcode courier_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode courier_easy_setopt_off_t(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

/// For string options libcurl copies the string (all CURLOPTTYPE_STRINGPOINT options since 7.17).
static inline CURLcode courier_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode courier_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode courier_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode courier_easy_setopt_write_function(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_header_function(CURL *easy, curl_write_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_read_function(CURL *easy, curl_read_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_READFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_seek_function(CURL *easy, curl_seek_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_xferinfo_function(CURL *easy, curl_xferinfo_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_ssl_ctx_function(CURL *easy, curl_ssl_ctx_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_opensocket_function(CURL *easy, curl_opensocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_closesocket_function(CURL *easy, curl_closesocket_callback callback) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, callback);
}

static inline CURLcode courier_easy_setopt_share(CURL *easy, CURLSH *share) {
    return curl_easy_setopt(easy, CURLOPT_SHARE, share);
}

// MARK: - curl_easy_getinfo

static inline CURLcode courier_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode courier_easy_getinfo_off_t(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode courier_easy_getinfo_string(CURL *easy, CURLINFO info, const char **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode courier_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode courier_easy_getinfo_slist(CURL *easy, CURLINFO info, struct curl_slist **value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode courier_easy_getinfo_socket(CURL *easy, CURLINFO info, curl_socket_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

// MARK: - curl_multi_setopt

static inline CURLMcode courier_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode courier_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode courier_multi_setopt_socket_function(CURLM *multi, curl_socket_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
}

static inline CURLMcode courier_multi_setopt_timer_function(CURLM *multi, curl_multi_timer_callback callback) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
}

// MARK: - curl_share_setopt

static inline CURLSHcode courier_share_setopt_long(CURLSH *share, CURLSHoption option, long value) {
    return curl_share_setopt(share, option, value);
}

static inline CURLSHcode courier_share_setopt_pointer(CURLSH *share, CURLSHoption option, void *value) {
    return curl_share_setopt(share, option, value);
}

static inline CURLSHcode courier_share_setopt_lock_function(CURLSH *share, curl_lock_function callback) {
    return curl_share_setopt(share, CURLSHOPT_LOCKFUNC, callback);
}

static inline CURLSHcode courier_share_setopt_unlock_function(CURLSH *share, curl_unlock_function callback) {
    return curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, callback);
}

// MARK: - Constants Swift cannot import (macros with casts)

static const unsigned long courier_auth_basic = CURLAUTH_BASIC;
static const unsigned long courier_auth_digest = CURLAUTH_DIGEST;
static const unsigned long courier_auth_ntlm = CURLAUTH_NTLM;
static const unsigned long courier_auth_any = CURLAUTH_ANY;
static const unsigned long courier_auth_anysafe = CURLAUTH_ANYSAFE;

static const int courier_socket_timeout = (int)CURL_SOCKET_TIMEOUT;
static const size_t courier_write_func_pause = CURL_WRITEFUNC_PAUSE;
static const size_t courier_readfunc_pause = CURL_READFUNC_PAUSE;
static const size_t courier_readfunc_abort = CURL_READFUNC_ABORT;

/// libcurl's version string, e.g. "7.88.1".
static inline const char *courier_libcurl_version(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
}

// MARK: - What depends on libcurl's version
//
// Courier supports libcurl 7.76 and newer. A name that a later version introduced is used
// only behind LIBCURL_VERSION_NUM (the headers compiled against) and, because a binary built
// on new headers may run with an older library, only when the library loaded is new enough
// (curl_version_info's version_num). Everything else in the engine names what 7.76 has.

/// The loaded libcurl's version as 0xXXYYZZ (e.g. 0x075801 for 7.88.1).
static inline unsigned int courier_libcurl_version_num(void) {
    return curl_version_info(CURLVERSION_NOW)->version_num;
}

/// Whether the loaded libcurl is `version` (0xXXYYZZ) or newer.
static inline bool courier_libcurl_at_least(unsigned int version) {
    return courier_libcurl_version_num() >= version;
}

/// Lets `easy` speak http and https only, for requests and redirects: the scheme names
/// (CURLOPT_PROTOCOLS_STR, 7.85.0) where the library has them, the bitmask before (deprecated
/// from 7.85.0 but still honoured).
static inline void courier_easy_allow_http_only(CURL *easy) {
#if LIBCURL_VERSION_NUM >= 0x075500
    if (courier_libcurl_at_least(0x075500)) {
        curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        return;
    }
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#pragma GCC diagnostic pop
}

/// libcurl's built-in CA bundle file (CURLINFO_CAINFO, 7.84.0); NULL when the library is
/// older or has none.
static inline const char *courier_builtin_ca_file(CURL *easy) {
#if LIBCURL_VERSION_NUM >= 0x075400
    if (courier_libcurl_at_least(0x075400)) {
        const char *path = NULL;
        if (curl_easy_getinfo(easy, CURLINFO_CAINFO, &path) == CURLE_OK) return path;
    }
#endif
    (void)easy;
    return NULL;
}

/// libcurl's built-in CA directory (CURLINFO_CAPATH, 7.84.0); NULL when it has none. Whether
/// it could say: false before 7.84.
static inline bool courier_builtin_ca_path(CURL *easy, const char **path) {
    *path = NULL;
#if LIBCURL_VERSION_NUM >= 0x075400
    if (courier_libcurl_at_least(0x075400)) {
        return curl_easy_getinfo(easy, CURLINFO_CAPATH, path) == CURLE_OK;
    }
#endif
    (void)easy;
    return false;
}

/// CURLOPT_MAXLIFETIME_CONN (7.80.0): an idle connection opened more than `seconds` ago is
/// not reused. Whether the library has it (before 7.80 nothing is set).
static inline bool courier_easy_set_maximum_connection_lifetime(CURL *easy, long seconds) {
#if LIBCURL_VERSION_NUM >= 0x075000
    if (courier_libcurl_at_least(0x075000)) {
        return curl_easy_setopt(easy, CURLOPT_MAXLIFETIME_CONN, seconds) == CURLE_OK;
    }
#endif
    (void)easy;
    (void)seconds;
    return false;
}

/// Whether `code` is CURLE_SSL_CLIENTCERT (98, 7.77.0: the server wanted a client certificate
/// and got none it took). Compared by number: codes never change meaning.
static inline bool courier_is_client_certificate_error(CURLcode code) {
    return (int)code == 98;
}

/// Whether `code` is CURLE_TOO_LARGE (100, 8.6.0: a value or data field, a header line among
/// them, grew past libcurl's limit; older versions said CURLE_OUT_OF_MEMORY).
static inline bool courier_is_too_large_error(CURLcode code) {
    return (int)code == 100;
}

// MARK: - HTTP/3

/// What the loaded libcurl says of itself: curl_version(), e.g. "libcurl/8.21.0 GnuTLS/3.7.9
/// zlib/1.2.13 nghttp2/1.52.0 ngtcp2/1.23.0 nghttp3/1.16.0".
static inline const char *courier_libcurl_description(void) {
    return curl_version();
}

/// The loaded libcurl's TLS library and its version, e.g. "OpenSSL/3.0.19" or "GnuTLS/3.7.9";
/// "" without TLS.
static inline const char *courier_libcurl_ssl_version(void) {
    const char *text = curl_version_info(CURLVERSION_NOW)->ssl_version;
    return text ? text : "";
}

/// The loaded libcurl's feature bits (curl_version_info's `features`, CURL_VERSION_*).
static inline int courier_libcurl_features(void) {
    return curl_version_info(CURLVERSION_NOW)->features;
}

/// Whether the loaded libcurl speaks HTTP/3 (CURL_VERSION_HTTP3: built with a QUIC stack).
static inline bool courier_libcurl_has_http3(void) {
    return (courier_libcurl_features() & CURL_VERSION_HTTP3) != 0;
}

/// Whether CURL_HTTP_VERSION_3 falls back to HTTP/2 or 1.1 over TCP when QUIC fails (7.88.0:
/// QUIC and TCP "happy eyeballs"; before, it meant HTTP/3 only).
static inline bool courier_http3_falls_back(void) {
    return courier_libcurl_at_least(0x075800);
}

/// CURLOPT_HTTP_VERSION for HTTP/3 with no fallback: CURL_HTTP_VERSION_3ONLY (7.88.0) where
/// the headers and the library have it, CURL_HTTP_VERSION_3 before (which did not fall back).
static inline long courier_http_version_3_only(void) {
#if LIBCURL_VERSION_NUM >= 0x075800
    if (courier_http3_falls_back()) return CURL_HTTP_VERSION_3ONLY;
#endif
    return CURL_HTTP_VERSION_3;
}

/// A parsed URL for `CURLOPT_CURLU`, with the flags libcurl uses for `CURLOPT_URL`; NULL when
/// libcurl does not accept the URL (the transfer then sets `CURLOPT_URL` only, and libcurl
/// reports why).
static inline CURLU *courier_url_parse(const char *url) {
    CURLU *handle = curl_url();
    if (!handle) return NULL;
    if (curl_url_set(handle, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
        curl_url_cleanup(handle);
        return NULL;
    }
    return handle;
}

static inline CURLcode courier_easy_setopt_curlu(CURL *easy, CURLU *url) {
    return curl_easy_setopt(easy, CURLOPT_CURLU, url);
}

static inline CURLcode courier_easy_setopt_read_data(CURL *easy, void *data) {
    return curl_easy_setopt(easy, CURLOPT_READDATA, data);
}

static const int courier_seekfunc_ok = CURL_SEEKFUNC_OK;
static const int courier_seekfunc_cantseek = CURL_SEEKFUNC_CANTSEEK;

// MARK: - Event loop primitives

/// One readiness event, unpacked from `struct epoll_event` (packed on x86_64).
typedef struct {
    int fd;
    uint32_t events;
} courier_event;

/// `socket(2)` for the address libcurl is about to connect to, close-on-exec; -1 on failure.
int courier_open_socket(const struct curl_sockaddr *address);
/// A TCP socket for `address` as a Multipath TCP one (IPPROTO_MPTCP) where the kernel has it,
/// a plain one otherwise (an old kernel, MPTCP turned off, or not TCP); like
/// `courier_open_socket` in every other respect.
int courier_open_multipath_socket(const struct curl_sockaddr *address);
/// TCP_USER_TIMEOUT: sent data unacknowledged for this long ends the connection. 0 on success.
int courier_socket_set_user_timeout(int fd, unsigned int milliseconds);

/// Retires an idle keep-alive connection that received bytes nobody asked for: reads and drops
/// what is waiting (256 KiB at most) and shuts the socket down both ways, so that libcurl finds
/// it dead (end of input) when it next considers reusing it, and a send on it fails. The
/// descriptor stays open: libcurl closes it, so its number cannot be reused under libcurl.
void courier_socket_retire(int fd);
/// The local port a connected TCP socket is bound to (getsockname), or 0 (not TCP, or an error).
int courier_socket_local_port(int fd);

/// `epoll_create1(EPOLL_CLOEXEC)`.
int courier_epoll_create(void);
/// Registers `fd` for the `CURL_POLL_*` interest `what`: `EPOLL_CTL_ADD` when `add`, else `EPOLL_CTL_MOD`.
int courier_epoll_set(int epfd, int fd, int what, int add);
/// Removes `fd` from `epfd`; errors (the fd may already be closed) are ignored.
void courier_epoll_unwatch(int epfd, int fd);
/// `epoll_wait`, translating each event to `CURL_CSELECT_*` bits. Returns the count or -1.
int courier_epoll_wait(int epfd, courier_event *events, int max_events, int timeout_ms);
/// An `eventfd` (non-blocking, close-on-exec) registered for reading in `epfd`. Returns the fd or -1.
int courier_wakeup_create(int epfd);
/// Makes the wakeup fd readable.
void courier_wakeup_signal(int fd);
/// Drains the wakeup fd.
void courier_wakeup_drain(int fd);

/// Names the calling thread (shown by `top -H`, `perf` and debuggers); at most 15 bytes.
void courier_set_thread_name(const char *name);

/// Marks the calling thread as the thread of the engine `owner` (NULL: of none), and blocks
/// SIGPIPE on an engine's thread (see shim.c).
void courier_engine_thread_enter(const void *owner);

/// The engine whose thread calls, or NULL.
const void *courier_engine_thread_owner(void);

// MARK: - Initialisation and libcurl's allocator

/// `curl_global_init(CURL_GLOBAL_DEFAULT)` with libcurl's allocations going through
/// `courier_curl_malloc` and its companions: the C library's functions, except that blocks of
/// `courier_page_aligned_minimum` bytes or more start on a page boundary. A no-op for the
/// allocator when libcurl was initialised already (by another library in the process).
CURLcode courier_global_init(void);

/// Whether `courier_global_init` told OpenSSL to keep its global state at exit
/// (`OPENSSL_INIT_NO_ATEXIT`), so that an engine thread still inside OpenSSL when the program
/// exits does not crash; false when libcurl uses another TLS library.
bool courier_openssl_kept_at_exit_state(void);

/// Allocations of this size or more made by libcurl start on a page boundary: its receive
/// and send buffers (256 KiB for Courier's large transfers). The kernel copies data between
/// them and page-aligned memory (the page cache, pages of socket buffers filled by
/// `sendfile`), and with glibc's `malloc` they start 16 bytes past a page boundary, a
/// distance at which those copies are several times slower (`courier_slow_copy_distance_limit`).
static const size_t courier_page_aligned_minimum = 64 * 1024;

/// libcurl's allocator (`courier_global_init`): `malloc`, `realloc` and `calloc` that return
/// blocks of `courier_page_aligned_minimum` bytes or more on a page boundary; every block can
/// be released with `free`.
void *courier_curl_malloc(size_t size);
void *courier_curl_realloc(void *pointer, size_t size);
void *courier_curl_calloc(size_t count, size_t size);
void courier_curl_free(void *pointer);
char *courier_curl_strdup(const char *string);

// MARK: - Server trust evaluation (shim.c; OpenSSL's functions found at run time)

/// What the certificate check calls back into: `decide` gets the verification's X509_STORE_CTX
/// and the transfer's context, and returns 1 to accept the chain, 0 to refuse it; `retain` and
/// `release` keep the context alive as long as a connection's SSL_CTX holds it; `ca_store`
/// names the shared CA store (`courier_ca_store_new`) the connection verifies against, or NULL
/// for libcurl's own.
typedef struct {
    int (*decide)(void *store, void *context);
    void (*retain)(void *context);
    void (*release)(void *context);
    void *(*ca_store)(void *context);
} courier_trust_hooks;

/// Whether the process's libcurl does TLS with OpenSSL (1.1.1 or later) and every function the
/// check needs was found.
bool courier_trust_available(void);

/// Sets the functions the check calls (once, before any transfer uses a trust context).
void courier_trust_set_hooks(courier_trust_hooks hooks);

/// Installs the check for the connections `easy` opens from now on (CURLOPT_SSL_CTX_FUNCTION,
/// with `context` as its data), or removes it (NULL).
CURLcode courier_easy_set_trust_context(CURL *easy, void *context);

/// OpenSSL's own verification of the chain in `store`, the host (a name, or an IP address when
/// `host_is_address`) checked too: 0 when it passes, OpenSSL's error code otherwise.
int courier_trust_default_verdict(void *store, const char *host, bool host_is_address);

/// OpenSSL's words for a verification error code.
const char *courier_trust_error_text(int error);

/// Sets the verification's result (0: the chain is accepted), which libcurl reads after the
/// handshake.
void courier_trust_set_verdict(void *store, int error);

/// The certificates the server sent (leaf first).
int courier_trust_certificate_count(void *store);

/// Writes certificate `index`'s DER into `buffer` when it fits; returns its length (-1: none).
int courier_trust_certificate(void *store, int index, unsigned char *buffer, int capacity);

/// SHA-256 of `count` bytes, with the OpenSSL libcurl uses; false without it.
bool courier_trust_sha256(const void *data, size_t count, unsigned char digest[32]);

// MARK: - Shared CA stores (shim.c; OpenSSL's functions found at run time)

/// A CA store (an OpenSSL `X509_STORE`) with the certificates of `file` and the directory
/// lookup of `directory` (either may be NULL, not both) and, when `revocation_list` is not
/// NULL, its CRLs, with the flags libcurl sets on its own stores; `name`, the CURLOPT_CAPATH
/// libcurl gets for it, is added as a directory lookup too. The files are parsed by the first
/// connection that takes the store (a file that does not parse then fails every connection
/// with CURLE_SSL_CACERT_BADFILE or CURLE_SSL_CRL_BADFILE, as libcurl would). NULL when
/// OpenSSL's functions are not in the process or a file cannot be read.
void *courier_ca_store_new(const char *file, const char *directory, const char *revocation_list, const char *name);

/// Releases the caller's reference to a store from `courier_ca_store_new` (connections that
/// hold it keep theirs).
void courier_ca_store_free(void *store);

/// Makes every connection `easy` opens from now on use `store` in place of the one libcurl
/// builds (CURLOPT_SSL_CTX_FUNCTION); fails with a libcurl whose TLS library has no SSL_CTX.
CURLcode courier_easy_set_ca_store(CURL *easy, void *store);

/// Sets a CA blob (CURLOPT_CAINFO_BLOB, 7.77.0) of one certificate that no one holds the key of,
/// for libcurl to load in place of its built-in CA file where Courier means "no CA file" (a
/// shared store replaces libcurl's, or the system's CAs are not trusted); CURLE_NOT_BUILT_IN
/// before 7.77.
CURLcode courier_easy_set_placeholder_ca(CURL *easy);

#endif
