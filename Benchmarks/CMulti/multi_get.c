/*
 * multi_get: the limit for a libcurl-based client.
 *
 *   multi_get URL TOTAL CONCURRENCY [poll|socket]
 *
 * GETs URL TOTAL times over libcurl's multi interface, keeping exactly
 * CONCURRENCY transfers in flight (one reused easy handle per slot; a slot
 * that finishes is refilled at once until TOTAL have been started). Every
 * response must be status 200 with a body of EXPECTED_BYTES bytes
 * (environment, default 500); the body is appended into the slot's buffer
 * and then discarded. Keep-alive: connections stay in the multi handle's
 * cache, at most CONCURRENCY of them to the host.
 *
 * Two loop styles, chosen by the optional fourth argument:
 *   poll    curl_multi_perform + curl_multi_poll (the default: the fastest
 *           here, 64 transfers on loopback, 2 cores: about 0.5 s of CPU for
 *           20,000 GETs against 0.55 to 0.85 s for socket)
 *   socket  curl_multi_socket_action driven by epoll, with real
 *           CURL_CSELECT_* bits and the timer callback (libcurl 7.88 removes
 *           and re-adds a keep-alive socket around each transfer, so this
 *           style pays several epoll_ctl calls per request)
 *
 * HTTPS, chosen by two optional environment variables (unset: plain HTTP/1.1
 * as above, nothing else changes):
 *   CAINFO=PATH        CURLOPT_CAINFO: a PEM file of CAs to trust (the bench
 *                      server's self-signed certificate)
 *   CAPATH_NONE=1      CURLOPT_CAPATH NULL: no CA directory (libcurl's
 *                      built-in one stays set otherwise), so that libcurl
 *                      keeps the parsed CAINFO store for new connections
 *                      (CURLOPT_CA_CACHE_TIMEOUT) instead of parsing it again
 *   HTTP_VERSION=1.1   HTTP/1.1 forced (CURL_HTTP_VERSION_1_1); every
 *                      response must be HTTP/1.1 (CURLINFO_HTTP_VERSION)
 *   HTTP_VERSION=2     HTTP/2 over TLS (CURL_HTTP_VERSION_2TLS, ALPN), the
 *                      multi handle set to CURLPIPE_MULTIPLEX and every easy
 *                      handle to CURLOPT_PIPEWAIT, so that transfers share
 *                      connections rather than open one each (libcurl puts at
 *                      most CURLMOPT_MAX_CONCURRENT_STREAMS, 100 by default,
 *                      on one connection); every response must be HTTP/2
 *
 * Set up as Courier sets up its handles, chosen by one more variable (the
 * c-as-courier client of scripts/bench, which also takes the socket loop, as
 * Courier's engine does):
 *   AS_COURIER=1       the three header fields a default Courier session
 *                      sends (User-Agent: Courier/1.0.0 (Linux) libcurl/X,
 *                      Accept-Language: en, Accept-Encoding: gzip, deflate,
 *                      br, zstd) in CURLOPT_HTTPHEADER; the idle timeout as
 *                      CURLOPT_LOW_SPEED_LIMIT 1 and _TIME 60, a 30 s connect
 *                      timeout and CURLOPT_MAXAGE_CONN 60; libcurl's cookie
 *                      engine (CURLOPT_COOKIEFILE "") with cookies, DNS and
 *                      TLS sessions in a share; a header callback; content
 *                      decoding and redirects off. So the distance between
 *                      this client and Courier is Courier's own, and between
 *                      c and this one what libcurl does for those settings.
 *
 * Prints one line on stdout, the format scripts/bench parses:
 *   RESULT client=c seconds=<s> requests=<n> maxrss_kb=<ru_maxrss>
 * followed, when HTTP_VERSION is set, by " http=<1.1|2> connections=<n>"
 * (the version every response had; the connections libcurl opened,
 * the sum of CURLINFO_NUM_CONNECTS).
 * Exits 1 on any failed transfer, wrong status, wrong length or (with
 * HTTP_VERSION) wrong HTTP version.
 *
 * Build: gcc -O2 -o multi_get multi_get.c -lcurl
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct transfer {
    CURL *easy;
    char *buf;
    size_t len;
    size_t cap;
};

static long total, started, completed, failures;
static size_t expected_bytes = 500;
static long expected_version;      /* CURL_HTTP_VERSION_1_1 or _2_0 with HTTP_VERSION; 0: unchecked */
static long connections;           /* sum of CURLINFO_NUM_CONNECTS, with HTTP_VERSION */
static CURLM *multi;

static void die(const char *what) {
    fprintf(stderr, "multi_get: %s\n", what);
    exit(1);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp) {
    struct transfer *t = userp;
    size_t n = size * nmemb;
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (cap < t->len + n) cap *= 2;
        char *buf = realloc(t->buf, cap);
        if (!buf) return 0; /* makes curl fail the transfer */
        t->buf = buf;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, data, n);
    t->len += n;
    return n;
}

static void start(struct transfer *t) {
    t->len = 0;
    started++;
    CURLMcode mc = curl_multi_add_handle(multi, t->easy);
    if (mc != CURLM_OK) die(curl_multi_strerror(mc));
}

/* The header callback of AS_COURIER: libcurl calls it once per header line. */
static size_t on_header(char *line, size_t size, size_t count, void *data) {
    (void)line;
    (void)data;
    return size * count;
}

/* Reaps finished transfers, checks each, and refills its slot. */
static void reap(void) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL *easy = msg->easy_handle;
        CURLcode result = msg->data.result;
        struct transfer *t = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (result != CURLE_OK) {
            fprintf(stderr, "multi_get: transfer failed: %s\n", curl_easy_strerror(result));
            failures++;
        } else if (status != 200 || t->len != expected_bytes) {
            fprintf(stderr, "multi_get: status %ld, %zu bytes (expected 200, %zu)\n", status, t->len,
                    expected_bytes);
            failures++;
        } else if (expected_version) {
            long version = 0, connects = 0;
            curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
            curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
            connections += connects;
            if (version != expected_version) {
                fprintf(stderr, "multi_get: response over HTTP version code %ld (expected %ld)\n", version,
                        expected_version);
                failures++;
            }
        }
        completed++;
        curl_multi_remove_handle(multi, easy);
        t->len = 0; /* discard the body */
        if (started < total && failures == 0) start(t);
    }
}

static int done(void) { return completed >= started && (started >= total || failures); }

/* ---- loop style 1: curl_multi_perform + curl_multi_poll ---- */

static void run_poll(void) {
    int running = 0;
    while (!done()) {
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) die(curl_multi_strerror(mc));
        reap();
        if (done()) break;
        /* Re-run perform at once if reaping added handles (running < in flight). */
        if (running < started - completed) continue;
        mc = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (mc != CURLM_OK) die(curl_multi_strerror(mc));
    }
}

/* ---- loop style 2: curl_multi_socket_action + epoll ---- */

static int epfd;
static long timeout_ms = -1;

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
    (void)easy;
    (void)userp;
    struct epoll_event ev = {0};
    ev.data.fd = fd;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
        curl_multi_assign(multi, fd, NULL);
        return 0;
    }
    if (what & CURL_POLL_IN) ev.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) ev.events |= EPOLLOUT;
    if (socketp) {
        if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0) die("epoll_ctl MOD");
    } else {
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            if (errno != EEXIST || epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) != 0) die("epoll_ctl ADD");
        }
        curl_multi_assign(multi, fd, (void *)1); /* marks the fd as registered */
    }
    return 0;
}

static int on_timer(CURLM *m, long ms, void *userp) {
    (void)m;
    (void)userp;
    timeout_ms = ms;
    return 0;
}

static void setup_socket(void) {
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
}

static void run_socket(void) {
    int running = 0;
    struct epoll_event events[256];
    /* The first handles were added with a 0 ms timeout: serve it. */
    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    reap();
    while (!done()) {
        int n = epoll_wait(epfd, events, 256, timeout_ms < 0 ? 1000 : (int)timeout_ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        if (n == 0) {
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        } else {
            for (int i = 0; i < n; i++) {
                int bits = 0;
                if (events[i].events & (EPOLLIN | EPOLLHUP)) bits |= CURL_CSELECT_IN;
                if (events[i].events & EPOLLOUT) bits |= CURL_CSELECT_OUT;
                if (events[i].events & EPOLLERR) bits |= CURL_CSELECT_ERR;
                curl_multi_socket_action(multi, events[i].data.fd, bits, &running);
            }
        }
        reap();
        /* Newly added handles set a 0 ms timeout; libcurl expects it served. */
        if (timeout_ms == 0) {
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
            reap();
        }
    }
    close(epfd);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s URL TOTAL CONCURRENCY [poll|socket]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    total = atol(argv[2]);
    long concurrency = atol(argv[3]);
    const char *mode = argc == 5 ? argv[4] : "poll";
    if (total <= 0 || concurrency <= 0) die("TOTAL and CONCURRENCY must be positive");
    if (strcmp(mode, "poll") != 0 && strcmp(mode, "socket") != 0) die("mode must be poll or socket");
    if (getenv("EXPECTED_BYTES")) expected_bytes = (size_t)atol(getenv("EXPECTED_BYTES"));
    const char *cainfo = getenv("CAINFO");
    if (cainfo && !*cainfo) cainfo = NULL;
    const char *capath_none = getenv("CAPATH_NONE");
    int no_capath = capath_none && strcmp(capath_none, "1") == 0;
    const char *http_version = getenv("HTTP_VERSION");
    long curl_version = CURL_HTTP_VERSION_1_1;
    int multiplex = 0;
    if (http_version && *http_version) {
        if (strcmp(http_version, "1.1") == 0) {
            expected_version = CURL_HTTP_VERSION_1_1;
        } else if (strcmp(http_version, "2") == 0) {
            curl_version = CURL_HTTP_VERSION_2TLS;
            expected_version = CURL_HTTP_VERSION_2_0;
            multiplex = 1;
        } else {
            die("HTTP_VERSION must be 1.1 or 2");
        }
    }
    if (concurrency > total) concurrency = total;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init");
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, concurrency);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, concurrency);
    /* A cap on connections, not on transfers: with PIPEWAIT, HTTP/2 transfers
       wait for a connection that can multiplex rather than open their own. */
    if (multiplex) curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);

    const char *as_courier_value = getenv("AS_COURIER");
    int as_courier = as_courier_value && strcmp(as_courier_value, "1") == 0;
    struct curl_slist *courier_fields = NULL;
    CURLSH *share = NULL;
    if (as_courier) {
        char agent[128];
        snprintf(agent, sizeof agent, "User-Agent: Courier/1.0.0 (Linux) libcurl/%s",
                 curl_version_info(CURLVERSION_NOW)->version);
        courier_fields = curl_slist_append(courier_fields, agent);
        courier_fields = curl_slist_append(courier_fields, "Accept-Language: en");
        courier_fields = curl_slist_append(courier_fields, "Accept-Encoding: gzip, deflate, br, zstd");
        share = curl_share_init();
        if (!courier_fields || !share) die("out of memory");
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }

    struct transfer *slots = calloc((size_t)concurrency, sizeof *slots);
    if (!slots) die("out of memory");
    for (long i = 0; i < concurrency; i++) {
        struct transfer *t = &slots[i];
        t->easy = curl_easy_init();
        if (!t->easy) die("curl_easy_init");
        t->cap = 4096;
        t->buf = malloc(t->cap);
        curl_easy_setopt(t->easy, CURLOPT_URL, url);
        curl_easy_setopt(t->easy, CURLOPT_HTTP_VERSION, curl_version);
        if (multiplex) curl_easy_setopt(t->easy, CURLOPT_PIPEWAIT, 1L);
        if (cainfo) curl_easy_setopt(t->easy, CURLOPT_CAINFO, cainfo);
        if (no_capath) curl_easy_setopt(t->easy, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
        curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
        curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(t->easy, CURLOPT_TCP_NODELAY, 1L);
        if (as_courier) {
            curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, courier_fields);
            curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
            curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, 60L);
            curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
            curl_easy_setopt(t->easy, CURLOPT_MAXAGE_CONN, 60L);
            curl_easy_setopt(t->easy, CURLOPT_SHARE, share);
            curl_easy_setopt(t->easy, CURLOPT_COOKIEFILE, "");
            curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, on_header);
            curl_easy_setopt(t->easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
            curl_easy_setopt(t->easy, CURLOPT_FOLLOWLOCATION, 0L);
        }
    }

    int socket_mode = strcmp(mode, "socket") == 0;
    if (socket_mode) setup_socket();

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < concurrency; i++) start(&slots[i]);
    if (socket_mode)
        run_socket();
    else
        run_poll();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    long ok = completed - failures;
    printf("RESULT client=c seconds=%.4f requests=%ld maxrss_kb=%ld", seconds, ok, usage.ru_maxrss);
    if (expected_version) printf(" http=%s connections=%ld", http_version, connections);
    printf("\n");
    fflush(stdout);

    for (long i = 0; i < concurrency; i++) {
        curl_easy_cleanup(slots[i].easy);
        free(slots[i].buf);
    }
    free(slots);
    curl_multi_cleanup(multi);
    if (share) curl_share_cleanup(share);
    curl_slist_free_all(courier_fields);
    curl_global_cleanup();
    if (failures) {
        fprintf(stderr, "multi_get: %ld of %ld requests failed\n", failures, completed);
        return 1;
    }
    if (ok != total) {
        fprintf(stderr, "multi_get: %ld requests done, expected %ld\n", ok, total);
        return 1;
    }
    return 0;
}
