/* Fuzz target: a client decoding a volume layout (a GETVOL reply or a
 * layout notification from cairnd): bricks, options, replica geometry. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rpc_frame f;
    memset(&f, 0, sizeof(f));
    f.body = malloc(size ? size : 1);
    if (!f.body)
        return 0;
    memcpy(f.body, data, size);
    f.hdr.body_len = (uint32_t)size;
    if (rpc_msg_decode(f.body, size, &f.msg, NULL) == 0) {
        struct cl_volinfo v;
        memset(&v, 0, sizeof(v));
        if (cl_volinfo_parse(&f, &v) == 0) {
            if (v.n_bricks < 0)
                abort();
            cl_volinfo_free(&v);
        }
    }
    free(f.body);
    return 0;
}
