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


/* MARK: - Server trust evaluation (OpenSSL, looked up at run time)
 *
 * libcurl's OpenSSL backend hands each new connection's SSL_CTX to CURLOPT_SSL_CTX_FUNCTION.
 * Courier installs a certificate check there (SSL_CTX_set_cert_verify_callback) that runs
 * OpenSSL's own verification and then asks Courier's evaluator. OpenSSL's functions are found
 * with dlsym in the library libcurl brought into the process: no OpenSSL headers or link-time
 * dependency, and nothing at all when libcurl uses another TLS library. The types are opaque
 * here; only functions whose signatures are the same in OpenSSL 1.1.1 and 3 are used. */

typedef struct {
    int (*set_cert_verify_callback)(void *ctx, int (*cb)(void *, void *), void *arg);
    uint64_t (*ctx_set_options)(void *ctx, uint64_t options);
    int (*verify_cert)(void *store);
    int (*store_get_error)(void *store);
    void (*store_set_error)(void *store, int error);
    void *(*store_get0_cert)(void *store);
    void *(*store_get0_untrusted)(void *store);
    void *(*store_get0_param)(void *store);
    int (*param_set1_host)(void *param, const char *name, size_t length);
    int (*param_set1_ip_asc)(void *param, const char *address);
    int (*sk_num)(const void *stack);
    void *(*sk_value)(const void *stack, int index);
    int (*i2d_x509)(void *certificate, unsigned char **out);
    const char *(*error_string)(long error);
    int (*ctx_get_ex_new_index)(int class_index, long argl, void *argp, void *new_func, void *dup_func,
                                void (*free_func)(void *, void *, void *, int, long, void *));
    int (*ctx_set_ex_data)(void *ctx, int index, void *data);
    int (*digest)(const void *data, size_t count, unsigned char *md, unsigned int *size, const void *type,
                  void *engine);
    const void *(*sha256)(void);
} courier_openssl_functions;

static courier_openssl_functions courier_openssl;
static int courier_trust_ex_index = -1;
static courier_trust_hooks courier_trust;
static pthread_once_t courier_trust_once = PTHREAD_ONCE_INIT;

/* The context's reference, taken for as long as the SSL_CTX lives (its ex-data's free). */
static void courier_trust_context_free(void *parent, void *pointer, void *data, int index, long argl, void *argp) {
    (void)parent, (void)data, (void)index, (void)argl, (void)argp;
    if (pointer && courier_trust.release) courier_trust.release(pointer);
}

/* Whether every function of a table filled by dlsym was found; a table with one missing is
 * cleared whole (its first entry NULL then says "unavailable"). */
static bool courier_all_found(void *table, size_t size) {
    void **slots = (void **)table;
    for (size_t i = 0; i < size / sizeof(void *); i++) {
        if (!slots[i]) {
            memset(table, 0, size);
            return false;
        }
    }
    return true;
}

static void courier_trust_load(void) {
#define COURIER_FIND(field, name) *(void **)(&courier_openssl.field) = dlsym(RTLD_DEFAULT, name)
    COURIER_FIND(set_cert_verify_callback, "SSL_CTX_set_cert_verify_callback");
    COURIER_FIND(ctx_set_options, "SSL_CTX_set_options");
    COURIER_FIND(verify_cert, "X509_verify_cert");
    COURIER_FIND(store_get_error, "X509_STORE_CTX_get_error");
    COURIER_FIND(store_set_error, "X509_STORE_CTX_set_error");
    COURIER_FIND(store_get0_cert, "X509_STORE_CTX_get0_cert");
    COURIER_FIND(store_get0_untrusted, "X509_STORE_CTX_get0_untrusted");
    COURIER_FIND(store_get0_param, "X509_STORE_CTX_get0_param");
    COURIER_FIND(param_set1_host, "X509_VERIFY_PARAM_set1_host");
    COURIER_FIND(param_set1_ip_asc, "X509_VERIFY_PARAM_set1_ip_asc");
    COURIER_FIND(sk_num, "OPENSSL_sk_num");
    COURIER_FIND(sk_value, "OPENSSL_sk_value");
    COURIER_FIND(i2d_x509, "i2d_X509");
    COURIER_FIND(error_string, "X509_verify_cert_error_string");
    COURIER_FIND(ctx_get_ex_new_index, "CRYPTO_get_ex_new_index");
    COURIER_FIND(ctx_set_ex_data, "SSL_CTX_set_ex_data");
    COURIER_FIND(digest, "EVP_Digest");
    COURIER_FIND(sha256, "EVP_sha256");
#undef COURIER_FIND
    if (!courier_all_found(&courier_openssl, sizeof courier_openssl)) return;
    /* CRYPTO_EX_INDEX_SSL_CTX is 1 in OpenSSL 1.1 and 3 (0 is SSL, 2 SSL_SESSION): the free
     * function must be registered for the class whose objects hold the context, or freeing an
     * SSL_CTX never releases it. */
    courier_trust_ex_index = courier_openssl.ctx_get_ex_new_index(1, 0, NULL, NULL, NULL, courier_trust_context_free);
    if (courier_trust_ex_index < 0) memset(&courier_openssl, 0, sizeof courier_openssl);
}

bool courier_trust_available(void) {
    pthread_once(&courier_trust_once, courier_trust_load);
    return courier_openssl.verify_cert != NULL;
}

void courier_trust_set_hooks(courier_trust_hooks hooks) { courier_trust = hooks; }

static int courier_trust_verify(void *store, void *context) {
    return courier_trust.decide ? courier_trust.decide(store, context) : 0;
}

static CURLcode courier_ca_store_ssl_ctx(CURL *easy, void *ssl_ctx, void *store);

/* CURLOPT_SSL_CTX_FUNCTION: the connection's SSL_CTX gets the check, and keeps the context;
 * it gets the session's shared CA store too when the context names one. */
static CURLcode courier_trust_ssl_ctx(CURL *easy, void *ssl_ctx, void *context) {
    if (!context || !courier_trust_available()) return CURLE_SSL_CERTPROBLEM;
    courier_trust.retain(context);
    if (courier_openssl.ctx_set_ex_data(ssl_ctx, courier_trust_ex_index, context) != 1) {
        courier_trust.release(context);
        return CURLE_SSL_CERTPROBLEM;
    }
    void *store = courier_trust.ca_store ? courier_trust.ca_store(context) : NULL;
    if (store) {
        CURLcode code = courier_ca_store_ssl_ctx(easy, ssl_ctx, store);
        if (code != CURLE_OK) return code;
    }
    courier_openssl.set_cert_verify_callback(ssl_ctx, courier_trust_verify, context);
    /* The context names the host of the transfer that opened the connection: no
     * renegotiation later, when another transfer may be using it (SSL_OP_NO_RENEGOTIATION). */
    courier_openssl.ctx_set_options(ssl_ctx, (uint64_t)1 << 30);
    return CURLE_OK;
}

CURLcode courier_easy_set_trust_context(CURL *easy, void *context) {
    if (!context) {
        curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, NULL);
        return curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, NULL);
    }
    CURLcode code = curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, courier_trust_ssl_ctx);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, context);
}

int courier_trust_default_verdict(void *store, const char *host, bool host_is_address) {
    void *param = courier_openssl.store_get0_param(store);
    if (host && *host) {
        if (host_is_address) {
            courier_openssl.param_set1_ip_asc(param, host);
        } else {
            courier_openssl.param_set1_host(param, host, strlen(host));
        }
    }
    if (courier_openssl.verify_cert(store) == 1) return 0;
    int error = courier_openssl.store_get_error(store);
    return error == 0 ? -1 : error;
}

const char *courier_trust_error_text(int error) { return courier_openssl.error_string(error); }

void courier_trust_set_verdict(void *store, int error) { courier_openssl.store_set_error(store, error); }

int courier_trust_certificate_count(void *store) {
    void *chain = courier_openssl.store_get0_untrusted(store);
    if (chain) return courier_openssl.sk_num(chain);
    return courier_openssl.store_get0_cert(store) ? 1 : 0;
}

int courier_trust_certificate(void *store, int index, unsigned char *buffer, int capacity) {
    void *chain = courier_openssl.store_get0_untrusted(store);
    void *certificate = chain ? courier_openssl.sk_value(chain, index)
                              : (index == 0 ? courier_openssl.store_get0_cert(store) : NULL);
    if (!certificate) return -1;
    int length = courier_openssl.i2d_x509(certificate, NULL);
    if (length <= 0 || !buffer || length > capacity) return length;
    unsigned char *out = buffer;
    return courier_openssl.i2d_x509(certificate, &out);
}

bool courier_trust_sha256(const void *data, size_t count, unsigned char digest[32]) {
    if (!courier_trust_available()) return false;
    unsigned int size = 0;
    return courier_openssl.digest(data, count, digest, &size, courier_openssl.sha256(), NULL) == 1 && size == 32;
}


/* MARK: - One CA store per trust configuration (OpenSSL, looked up at run time)
 *
 * libcurl's OpenSSL backend builds a new X509_STORE for every new connection, parsing its CA
 * file again, except where it keeps one for a multi handle (7.87 on, a file and no directory,
 * and not in every release). Courier parses each file once and hands the store to every
 * connection's SSL_CTX from CURLOPT_SSL_CTX_FUNCTION. The functions below have the same
 * signatures in OpenSSL 1.1.1 and 3. */

typedef struct {
    void *(*store_new)(void);
    void (*store_free)(void *store);
    int (*store_up_ref)(void *store);
    int (*store_load_locations)(void *store, const char *file, const char *directory);
    int (*store_set_flags)(void *store, unsigned long flags);
    void (*ctx_set_cert_store)(void *ctx, void *store);
    void (*clear_error)(void);
} courier_store_functions;

static courier_store_functions courier_stores;
static pthread_once_t courier_stores_once = PTHREAD_ONCE_INIT;

static void courier_stores_load(void) {
#define COURIER_FIND(field, name) *(void **)(&courier_stores.field) = dlsym(RTLD_DEFAULT, name)
    COURIER_FIND(store_new, "X509_STORE_new");
    COURIER_FIND(store_free, "X509_STORE_free");
    COURIER_FIND(store_up_ref, "X509_STORE_up_ref");
    COURIER_FIND(store_load_locations, "X509_STORE_load_locations");
    COURIER_FIND(store_set_flags, "X509_STORE_set_flags");
    COURIER_FIND(ctx_set_cert_store, "SSL_CTX_set_cert_store");
    COURIER_FIND(clear_error, "ERR_clear_error");
#undef COURIER_FIND
    courier_all_found(&courier_stores, sizeof courier_stores);
}

/* A shared store and what it still has to load. The X509_STORE (its directory lookups and
 * flags) is made with the handle's options, which costs microseconds; its file and CRLs
 * (tens of milliseconds for a system bundle) are parsed by the first connection that takes
 * it, so a session that never does TLS parses nothing. */
typedef struct {
    void *store;
    char *file;
    char *revocation_list;
    pthread_mutex_t lock;
    /* 0 until the files are parsed, then 1, or the CURLcode every connection fails with. */
    int loaded;
} courier_ca_store;

void *courier_ca_store_new(const char *file, const char *directory, const char *revocation_list, const char *name) {
    pthread_once(&courier_stores_once, courier_stores_load);
    if (!courier_stores.store_new || (!file && !directory)) return NULL;
    /* A file that cannot be read is libcurl's to report (it is given the file then). */
    if ((file && access(file, R_OK) != 0) || (revocation_list && access(revocation_list, R_OK) != 0)) return NULL;
    courier_ca_store *shared = calloc(1, sizeof *shared);
    if (!shared) return NULL;
    pthread_mutex_init(&shared->lock, NULL);
    shared->store = courier_stores.store_new();
    shared->file = file ? strdup(file) : NULL;
    shared->revocation_list = revocation_list ? strdup(revocation_list) : NULL;
    /* The name, as a directory lookup, is there before libcurl 7.88 to 8.2 adds it: they set a
     * connection's store up after the SSL_CTX callback, so into this one, and then find the
     * lookup present and change nothing (it names no directory that can exist). */
    if (!shared->store || (file && !shared->file) || (revocation_list && !shared->revocation_list)
        || (directory && courier_stores.store_load_locations(shared->store, NULL, directory) != 1)
        || courier_stores.store_load_locations(shared->store, NULL, name) != 1) {
        courier_ca_store_free(shared);
        courier_stores.clear_error();
        return NULL;
    }
    /* The flags libcurl sets on the stores it builds (7.68 on): the trusted store's issuers
     * first (X509_V_FLAG_TRUSTED_FIRST); with a revocation list, every certificate of the chain
     * checked against it (X509_V_FLAG_CRL_CHECK, X509_V_FLAG_CRL_CHECK_ALL); without one, a
     * trusted certificate that is not a root ends the chain (X509_V_FLAG_PARTIAL_CHAIN). */
    courier_stores.store_set_flags(shared->store, revocation_list ? 0x8000UL | 0x4UL | 0x8UL : 0x8000UL | 0x80000UL);
    return shared;
}

void courier_ca_store_free(void *store) {
    courier_ca_store *shared = store;
    if (!shared) return;
    if (shared->store && courier_stores.store_free) courier_stores.store_free(shared->store);
    free(shared->file);
    free(shared->revocation_list);
    pthread_mutex_destroy(&shared->lock);
    free(shared);
}

/* The store's file and CRLs, parsed once (a PEM file's certificates and CRLs both load,
 * X509_load_cert_crl_file); CURLE_OK, or what libcurl would fail with for the same file. */
static CURLcode courier_ca_store_load(courier_ca_store *shared) {
    pthread_mutex_lock(&shared->lock);
    if (!shared->loaded) {
        if (shared->file && courier_stores.store_load_locations(shared->store, shared->file, NULL) != 1) {
            shared->loaded = CURLE_SSL_CACERT_BADFILE;
        } else if (shared->revocation_list
                   && courier_stores.store_load_locations(shared->store, shared->revocation_list, NULL) != 1) {
            shared->loaded = CURLE_SSL_CRL_BADFILE;
        } else {
            shared->loaded = 1;
        }
        if (shared->loaded != 1) courier_stores.clear_error();
    }
    int loaded = shared->loaded;
    pthread_mutex_unlock(&shared->lock);
    return loaded == 1 ? CURLE_OK : (CURLcode)loaded;
}

/* CURLOPT_SSL_CTX_FUNCTION: the connection's SSL_CTX takes a reference to the shared store in
 * place of the one libcurl made. */
static CURLcode courier_ca_store_ssl_ctx(CURL *easy, void *ssl_ctx, void *store) {
    (void)easy;
    courier_ca_store *shared = store;
    if (!shared) return CURLE_SSL_CACERT_BADFILE;
    CURLcode code = courier_ca_store_load(shared);
    if (code != CURLE_OK) return code;
    if (courier_stores.store_up_ref(shared->store) != 1) return CURLE_SSL_CACERT_BADFILE;
    courier_stores.ctx_set_cert_store(ssl_ctx, shared->store);
    return CURLE_OK;
}

CURLcode courier_easy_set_ca_store(CURL *easy, void *store) {
    CURLcode code = curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, courier_ca_store_ssl_ctx);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, store);
}

/* A certificate nobody holds the key of (it was made and its key thrown away): the only CA
 * libcurl loads where Courier means "no CA file", with the shared store in place of libcurl's
 * or without the system's trust. 8.21 (not 8.14) puts its built-in CA file back at the start
 * of each transfer when CURLOPT_CAINFO is NULL, and a CA blob is what takes the file's place
 * then. Were the store not installed, nothing would verify. */
static const char courier_placeholder_ca[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBwzCCAWmgAwIBAgIUJFQTqB7yfs80ZCxiq0W8boPD83AwCgYIKoZIzj0EAwIw\n"
    "NjE0MDIGA1UEAwwrQ291cmllciBwbGFjZWhvbGRlciAobm8gcHJpdmF0ZSBrZXkg\n"
    "ZXhpc3RzKTAgFw0yNjExMjkxNTM3MzJaGA8yMTI2MTEwNTE1MzczMlowNjE0MDIG\n"
    "A1UEAwwrQ291cmllciBwbGFjZWhvbGRlciAobm8gcHJpdmF0ZSBrZXkgZXhpc3Rz\n"
    "KTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABNNRfEjgGHUV8hkjdl0X3dEz0A43\n"
    "8w4jhmghrQCUtgrJtAmf7IAE00i0h+GbQN595709e/kHc1G+r6LlPyb1zT+jUzBR\n"
    "MB0GA1UdDgQWBBSwk7amSHLfYw/6aIHNytzs9PBZ4TAfBgNVHSMEGDAWgBSwk7am\n"
    "SHLfYw/6aIHNytzs9PBZ4TAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gA\n"
    "MEUCIQCG0cWnVAOpH1d1iOpOPgHrXhN6PNrRWkhPxkeZQ9jLYQIgCJ8Pt+c3NpIp\n"
    "CNplMl5BGNMpwwNCBhU8K/ghvK7RQ5k=\n"
    "-----END CERTIFICATE-----\n";

CURLcode courier_easy_set_placeholder_ca(CURL *easy) {
#if LIBCURL_VERSION_NUM >= 0x074d00
    if (courier_libcurl_at_least(0x074d00)) {
        struct curl_blob blob = {(void *)courier_placeholder_ca, sizeof courier_placeholder_ca - 1, CURL_BLOB_NOCOPY};
        return curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &blob);
    }
#endif
    (void)easy;
    return CURLE_NOT_BUILT_IN;
}
