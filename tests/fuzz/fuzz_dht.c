/* Fuzz target: the distribute layer's decoders of what bricks store: a
 * directory's layout xattr and a link-to file's xattr, and readdir cookies
 * coming back from the kernel. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/distribute.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int n = data[0] % CL_DHT_MAX + 1;
    struct cl_dht_layout l;
    if (cl_dht_layout_decode(data + 1, size - 1, n, &l) == 0) {
        /* a valid layout assigns every hash */
        for (uint32_t h = 0; h < 64; h++)
            if (cl_dht_layout_pick(&l, h * 0x4000000u + (uint32_t)size) < 0)
                abort();
    }
    int t = cl_dht_linkto_parse(data + 1, size - 1, n);
    if (t >= n)
        abort();
    if (size >= 9) {
        uint64_t c;
        memcpy(&c, data + 1, 8);
        int s;
        uint64_t bc;
        int bits = cl_dht_cookie_bits(n);
        if (cl_dht_cookie_unpack(c, bits, n, &s, &bc) == 0 && (s < 0 || s >= n))
            abort();
    }
    return 0;
}
