/* Fuzz target: a byte stream as a peer would send it, parsed frame by frame
 * the way a connection's reader does, with every nested body (compound
 * sub-requests, directory entries, layout entries) decoded too. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/rpc/conn.h"
#include "../../src/rpc/msg.h"

static void decode_nested(const struct rpc_msg *m, int depth)
{
    struct rpc_iter it;
    struct rpc_field f;
    if (depth > 4)
        return;
    rpc_iter_init(&it, m->body, m->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        if (f.tag != RPC_T_SUB && f.tag != RPC_T_DIRENT && f.tag != RPC_T_BRICK &&
            f.tag != RPC_T_OPTION)
            continue;
        struct rpc_msg sub;
        if (rpc_msg_decode(f.val, f.len, &sub, NULL) == 0)
            decode_nested(&sub, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size > 0) {
        struct rpc_frame f = {0};
        const char *why;
        long n = rpc_frame_parse(data, size, &f, &why);
        if (n <= 0)
            break;
        decode_nested(&f.msg, 0);
        free(f.body);
        data += n;
        size -= (size_t)n;
    }
    return 0;
}
