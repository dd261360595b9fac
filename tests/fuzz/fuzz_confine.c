/* Fuzz target: the brick's rewrite of a confined connection's request
 * (src/brick/confine.c). The input is a request body, its first two bytes
 * the opcode; whatever it holds, a rewrite that succeeds must leave a body
 * that decodes, with every PATH and PATH2 (in COMPOUND sub-requests too) a
 * checked path under the directory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/brick/brick.h"

#define DIR "/d/e"

static void check_paths(const uint8_t *body, size_t len, int depth)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, body, len);
    while (rpc_iter_next(&it, &f) > 0) {
        if (f.tag == RPC_T_PATH || f.tag == RPC_T_PATH2) {
            size_t dl = strlen(DIR);
            if (brick_path_check(f.val, f.len) != 0 || f.len < dl || memcmp(f.val, DIR, dl) ||
                (f.len > dl && f.val[dl] != '/'))
                abort();
        } else if (f.tag == RPC_T_SUB) {
            if (depth > 0)
                abort(); /* a compound inside a compound is refused */
            check_paths(f.val, f.len, depth + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct rpc_frame *f = calloc(1, sizeof(*f));
    if (!f)
        return 0;
    f->hdr.opcode = (uint16_t)(data[0] | data[1] << 8);
    f->hdr.body_len = (uint32_t)(size - 2);
    f->body = malloc(size - 2 + 1);
    if (!f->body || rpc_msg_decode(memcpy(f->body, data + 2, size - 2), size - 2, &f->msg, NULL)) {
        rpc_frame_free(f);
        return 0;
    }
    if (brick_confine_frame(DIR, f) == 0) {
        struct rpc_msg m;
        if (rpc_msg_decode(f->body, f->hdr.body_len, &m, NULL) != 0)
            abort();
        check_paths(f->body, f->hdr.body_len, 0);
    }
    rpc_frame_free(f);
    return 0;
}
