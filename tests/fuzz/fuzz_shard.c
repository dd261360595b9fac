/* Fuzz target: the shard record (trusted.cairn.shard, shard.c) as read
 * from a brick. What decodes must encode to the same bytes (the flags
 * word aside, which is written 0) and describe blocks the layer can
 * split a range by. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cl_shard_meta m;
    uint8_t out[CL_SHARD_XATTR_LEN];
    if (cl_shard_meta_decode(data, size, &m) != 0)
        return 0;
    if (size != CL_SHARD_XATTR_LEN || m.block_size < CL_SHARD_BLOCK_MIN || m.size > INT64_MAX)
        abort();
    cl_shard_meta_encode(&m, out);
    if (memcmp(out, data, 4) != 0 || memcmp(out + 8, data + 8, size - 8) != 0)
        abort();
    /* the pieces of the whole file cover it, each within its block */
    uint64_t len = m.size < (1ull << 40) ? m.size : 1ull << 40, done = 0;
    for (int i = 0; done < len && i < 4; i++) {
        uint64_t n, in, piece = cl_shard_piece(done, len - done, m.block_size, &n, &in);
        if (piece == 0 || in + piece > m.block_size || n * m.block_size + in != done)
            abort();
        done += piece;
    }
    if (cl_shard_blocks_of(m.size, m.block_size) * m.block_size < m.size)
        abort();
    return 0;
}
