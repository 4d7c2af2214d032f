// Decoders for HTTP's content and transfer codings (RFC 9110 section 8.4.1): gzip and deflate
// with zlib, which Courier links; br and zstd with libbrotlidec and libzstd, loaded at run time
// from the libraries the system's libcurl links (so that building Courier needs neither's
// headers, and a system without them decodes gzip and deflate only).

#define _GNU_SOURCE
#include "CCourierSystem.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

// MARK: - brotli and zstd, loaded at run time

/* The few functions of libbrotlidec (1.0 and later) and libzstd (1.4 and later) used here,
 * declared by their stable ABI. */
typedef struct {
    void *(*create)(void *alloc, void *free, void *opaque);
    int (*decompress)(void *state, size_t *available_in, const uint8_t **next_in, size_t *available_out,
                      uint8_t **next_out, size_t *total_out);
    void (*destroy)(void *state);
} courier_brotli_api;

typedef struct {
    const void *source;
    size_t size;
    size_t position;
} courier_zstd_in;

typedef struct {
    void *destination;
    size_t size;
    size_t position;
} courier_zstd_out;

typedef struct {
    void *(*create)(void);
    size_t (*decompress)(void *stream, courier_zstd_out *output, courier_zstd_in *input);
    size_t (*free)(void *stream);
    unsigned (*is_error)(size_t code);
} courier_zstd_api;

static courier_brotli_api courier_brotli;
static courier_zstd_api courier_zstd;
static pthread_once_t courier_decoders_once = PTHREAD_ONCE_INIT;

static void courier_decoders_load(void) {
    void *brotli = dlopen("libbrotlidec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (brotli) {
        courier_brotli_api api = {
            (void *(*)(void *, void *, void *))dlsym(brotli, "BrotliDecoderCreateInstance"),
            (int (*)(void *, size_t *, const uint8_t **, size_t *, uint8_t **, size_t *))dlsym(
                brotli, "BrotliDecoderDecompressStream"),
            (void (*)(void *))dlsym(brotli, "BrotliDecoderDestroyInstance"),
        };
        if (api.create && api.decompress && api.destroy) courier_brotli = api;
    }
    void *zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (zstd) {
        courier_zstd_api api = {
            (void *(*)(void))dlsym(zstd, "ZSTD_createDStream"),
            (size_t (*)(void *, courier_zstd_out *, courier_zstd_in *))dlsym(zstd, "ZSTD_decompressStream"),
            (size_t (*)(void *))dlsym(zstd, "ZSTD_freeDStream"),
            (unsigned (*)(size_t))dlsym(zstd, "ZSTD_isError"),
        };
        if (api.create && api.decompress && api.free && api.is_error) courier_zstd = api;
    }
}

int courier_decoder_available(int coding) {
    pthread_once(&courier_decoders_once, courier_decoders_load);
    switch (coding) {
    case courier_coding_gzip:
    case courier_coding_deflate: return 1;
    case courier_coding_brotli: return courier_brotli.create != NULL;
    case courier_coding_zstd: return courier_zstd.create != NULL;
    default: return 0;
    }
}

// MARK: - One decoder

struct courier_decoder {
    int coding;
    bool ended;
    /* deflate: whether the zlib wrapper was given up for raw deflate (servers send both under
     * that name), and whether any output came yet (only then may it still be given up). */
    bool raw;
    bool produced_any;
    /* deflate: the bytes taken before it was known whether they start a zlib wrapper (at most
     * its two header bytes), given to the raw decoder too if they do not. */
    uint8_t head[2];
    size_t head_length;
    z_stream zlib;
    void *state; /* brotli's or zstd's */
};

static int courier_zlib_init(courier_decoder *decoder) {
    /* gzip: 15 + 32 reads a gzip or a zlib wrapper; deflate: the zlib wrapper (RFC 9110),
     * else raw deflate (see courier_decoder_step). */
    int bits = decoder->coding == courier_coding_gzip ? 15 + 32 : (decoder->raw ? -15 : 15);
    memset(&decoder->zlib, 0, sizeof decoder->zlib);
    return inflateInit2(&decoder->zlib, bits) == Z_OK ? 0 : -1;
}

courier_decoder *courier_decoder_create(int coding) {
    if (!courier_decoder_available(coding)) return NULL;
    courier_decoder *decoder = calloc(1, sizeof *decoder);
    if (!decoder) return NULL;
    decoder->coding = coding;
    switch (coding) {
    case courier_coding_gzip:
    case courier_coding_deflate:
        if (courier_zlib_init(decoder) != 0) {
            free(decoder);
            return NULL;
        }
        break;
    case courier_coding_brotli: decoder->state = courier_brotli.create(NULL, NULL, NULL); break;
    case courier_coding_zstd: decoder->state = courier_zstd.create(); break;
    }
    if ((coding == courier_coding_brotli || coding == courier_coding_zstd) && !decoder->state) {
        free(decoder);
        return NULL;
    }
    return decoder;
}

static int courier_zlib_step(courier_decoder *decoder, const void *input, size_t input_length, void *output,
                             size_t output_capacity, size_t *consumed, size_t *produced) {
    decoder->zlib.next_in = (Bytef *)input;
    decoder->zlib.avail_in = (uInt)(input_length > UINT32_MAX ? UINT32_MAX : input_length);
    decoder->zlib.next_out = (Bytef *)output;
    decoder->zlib.avail_out = (uInt)(output_capacity > UINT32_MAX ? UINT32_MAX : output_capacity);
    uInt offered = decoder->zlib.avail_in;
    bool deciding = decoder->coding == courier_coding_deflate && !decoder->raw && !decoder->produced_any;
    uLong before = decoder->zlib.total_in;
    int result = inflate(&decoder->zlib, Z_NO_FLUSH);
    if (result == Z_DATA_ERROR && deciding && decoder->zlib.total_in <= 2) {
        /* Not a zlib stream: raw deflate, as many servers send under this name. Start over
         * with the bytes taken so far and this input (none of it was taken as output). */
        inflateEnd(&decoder->zlib);
        decoder->raw = true;
        if (courier_zlib_init(decoder) != 0) return -1;
        size_t saved = decoder->head_length;
        uint8_t *joined = malloc(saved + input_length + 1);
        if (!joined) return -1;
        memcpy(joined, decoder->head, saved);
        if (input_length) memcpy(joined + saved, input, input_length);
        size_t taken = 0;
        int again = courier_zlib_step(decoder, joined, saved + input_length, output, output_capacity, &taken, produced);
        free(joined);
        *consumed = taken > saved ? taken - saved : 0;
        return again;
    }
    if (deciding) {
        /* Keep what the header check has taken (zlib takes nothing more before it decides). */
        size_t taken = (size_t)(decoder->zlib.total_in - before);
        for (size_t i = 0; i < taken && decoder->head_length < sizeof decoder->head; i++) {
            decoder->head[decoder->head_length++] = ((const uint8_t *)input)[i];
        }
    }
    *consumed = offered - decoder->zlib.avail_in;
    *produced = (output_capacity > UINT32_MAX ? UINT32_MAX : output_capacity) - decoder->zlib.avail_out;
    if (*produced > 0) decoder->produced_any = true;
    if (result == Z_STREAM_END) return 1;
    if (result == Z_OK || result == Z_BUF_ERROR) return 0;
    return -1;
}

int courier_decoder_step(courier_decoder *decoder, const void *input, size_t input_length, void *output,
                         size_t output_capacity, size_t *consumed, size_t *produced) {
    *consumed = 0;
    *produced = 0;
    if (decoder->ended) {
        /* Bytes after the end of the stream (what a gzip member is followed by, say): ignored,
         * as libcurl ignores them. */
        *consumed = input_length;
        return 1;
    }
    int result = -1;
    switch (decoder->coding) {
    case courier_coding_gzip:
    case courier_coding_deflate:
        result = courier_zlib_step(decoder, input, input_length, output, output_capacity, consumed, produced);
        break;
    case courier_coding_brotli: {
        size_t available_in = input_length, available_out = output_capacity;
        const uint8_t *next_in = input;
        uint8_t *next_out = output;
        /* 0 error, 1 success (the stream ended), 2 needs more input, 3 needs more output. */
        int status =
            courier_brotli.decompress(decoder->state, &available_in, &next_in, &available_out, &next_out, NULL);
        *consumed = input_length - available_in;
        *produced = output_capacity - available_out;
        result = status == 0 ? -1 : (status == 1 ? 1 : 0);
        break;
    }
    case courier_coding_zstd: {
        courier_zstd_in in = {input, input_length, 0};
        courier_zstd_out out = {output, output_capacity, 0};
        size_t code = courier_zstd.decompress(decoder->state, &out, &in);
        *consumed = in.position;
        *produced = out.position;
        /* 0: a frame ended and everything it decoded was written. A response may hold several
         * frames: the decoder takes the next one as it comes. */
        result = courier_zstd.is_error(code) ? -1 : 0;
        break;
    }
    }
    if (result == 1) decoder->ended = true;
    return result;
}

void courier_decoder_free(courier_decoder *decoder) {
    if (!decoder) return;
    switch (decoder->coding) {
    case courier_coding_gzip:
    case courier_coding_deflate: inflateEnd(&decoder->zlib); break;
    case courier_coding_brotli: courier_brotli.destroy(decoder->state); break;
    case courier_coding_zstd: courier_zstd.free(decoder->state); break;
    }
    free(decoder);
}
