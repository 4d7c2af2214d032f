/*
 * stream_get: the limit for a libcurl-based client streaming one large body.
 *
 *   stream_get URL [BUFFER]
 *
 * GETs URL once over libcurl's multi interface (curl_multi_perform +
 * curl_multi_poll, the loop multi_get uses) and discards the body in the
 * write callback, counting its bytes. The response must be status 200 with
 * a body of EXPECTED_BYTES bytes (environment; when unset, any length).
 *
 * BUFFER sets CURLOPT_BUFFERSIZE, libcurl's receive buffer, which is also the
 * largest chunk the write callback gets: 0 (the default) leaves libcurl's
 * default (16 KiB, CURL_MAX_WRITE_SIZE); the curl command line tool uses
 * 102400; libcurl 7.88 accepts 1024 to 524288. The size is reported.
 *
 * Prints one line on stdout, the format scripts/bench parses:
 *   RESULT client=c seconds=<s> requests=1 maxrss_kb=<ru_maxrss> bytes=<n> buffer=<b> chunks=<n>
 * Exits 1 on a failed transfer, a wrong status or a wrong length.
 *
 * Build: gcc -O2 -o stream_get stream_get.c -lcurl
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct sink {
    unsigned long long bytes;
    unsigned long long chunks;
};

static void die(const char *what) {
    fprintf(stderr, "stream_get: %s\n", what);
    exit(1);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp) {
    (void)data;
    struct sink *s = userp;
    size_t n = size * nmemb;
    s->bytes += n;
    s->chunks++;
    return n; /* discarded */
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [BUFFER]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1];
    long buffer = argc == 3 ? atol(argv[2]) : 0;
    if (buffer != 0 && (buffer < 1024 || buffer > CURL_MAX_READ_SIZE)) die("BUFFER must be 0 or 1024 to 524288");
    long long expected = -1;
    if (getenv("EXPECTED_BYTES")) expected = atoll(getenv("EXPECTED_BYTES"));

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init");
    CURLM *multi = curl_multi_init();
    CURL *easy = curl_easy_init();
    if (!multi || !easy) die("curl init");
    struct sink sink = {0, 0};
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    if (buffer) curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, buffer);
    long effective_buffer = buffer ? buffer : CURL_MAX_WRITE_SIZE;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CURLMcode mc = curl_multi_add_handle(multi, easy);
    if (mc != CURLM_OK) die(curl_multi_strerror(mc));
    int running = 1;
    CURLcode result = CURLE_OK;
    while (running) {
        mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) die(curl_multi_strerror(mc));
        if (!running) break;
        mc = curl_multi_poll(multi, NULL, 0, 1000, NULL);
        if (mc != CURLM_OK) die(curl_multi_strerror(mc));
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left)))
        if (msg->msg == CURLMSG_DONE) result = msg->data.result;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    int failed = 0;
    if (result != CURLE_OK) {
        fprintf(stderr, "stream_get: transfer failed: %s\n", curl_easy_strerror(result));
        failed = 1;
    } else if (status != 200 || (expected >= 0 && sink.bytes != (unsigned long long)expected)) {
        fprintf(stderr, "stream_get: status %ld, %llu bytes (expected 200, %lld)\n", status, sink.bytes, expected);
        failed = 1;
    }

    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    if (!failed) {
        printf("RESULT client=c seconds=%.4f requests=1 maxrss_kb=%ld bytes=%llu buffer=%ld chunks=%llu\n", seconds,
               usage.ru_maxrss, sink.bytes, effective_buffer, sink.chunks);
        fflush(stdout);
    }
    curl_multi_remove_handle(multi, easy);
    curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failed;
}
