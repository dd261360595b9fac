/* Fuzz target: disperse's erasure code (ec_codec.c). The first bytes pick
 * the code (k data, m redundancy), the chunk size and which fragments are
 * lost; the rest is the data. Whatever is lost, up to m fragments, the
 * decode must give the data back and a rebuild the fragments encoded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/ec_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int k = 2 + data[0] % 7, m = 1 + data[1] % (k - 1);
    size_t chunk = (size_t)8 << (data[2] % 5); /* 8 .. 128 */
    uint32_t lost = 0;
    for (int b = 0; b < 8 && __builtin_popcount(lost) < m; b++)
        if (data[3] >> b & 1)
            lost |= 1u << (b % (k + m));
    data += 4;
    size = size - 4;
    size_t stripe = (size_t)k * chunk, stripes = size / stripe;
    if (!stripes)
        return 0;
    struct cl_ec *ec = cl_ec_new(k, m);
    if (!ec)
        abort();
    int n = k + m;
    size_t flen = stripes * chunk;
    uint8_t *frag[CL_EC_MAX], *copy[CL_EC_MAX], *out = malloc(stripes * stripe);
    for (int j = 0; j < n; j++) {
        frag[j] = malloc(flen);
        copy[j] = calloc(1, flen);
    }
    cl_ec_encode(ec, chunk, stripes, data, frag);
    uint32_t present = ((1u << n) - 1) & ~lost;
    if (cl_ec_decode(ec, chunk, stripes, present, (const uint8_t *const *)frag, out) != 0 ||
        memcmp(out, data, stripes * stripe) != 0)
        abort();
    if (lost) {
        for (int j = 0; j < n; j++)
            if (!(lost >> j & 1))
                memcpy(copy[j], frag[j], flen);
        if (cl_ec_rebuild(ec, chunk, stripes, present, lost, copy) != 0)
            abort();
        for (int j = 0; j < n; j++)
            if (memcmp(copy[j], frag[j], flen) != 0)
                abort();
    }
    for (int j = 0; j < n; j++) {
        free(frag[j]);
        free(copy[j]);
    }
    free(out);
    cl_ec_free(ec);
    return 0;
}
