/* Fuzz target: the wire form of a volume's placement (dht_place.c). What
 * decodes must encode to the same bytes and place every key on an active
 * set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/distribute.h"

static struct cl_place p;
static uint8_t out[16 + 16 * CL_PLACE_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&p, 0, sizeof(p));
    if (cl_place_decode(data, size, &p) != 0)
        return 0;
    if (cl_place_encode(&p, out) != size || memcmp(out, data, size) != 0)
        abort();
    for (uint64_t k = 0; k < 64; k++) {
        int i = cl_place_pick(&p, k * 0x9e3779b97f4a7c15ull);
        if (i < 0 || i >= p.n || p.set[i].state != CL_PLACE_ACTIVE)
            abort();
    }
    return 0;
}
