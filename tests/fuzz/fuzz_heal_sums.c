/* Fuzz target: a heal reading two CHECKSUM replies (op 73) and deciding
 * which blocks to copy. The input is a reply body (its DATA is the source's
 * checksums); the raw input after the first byte stands in for the sink's
 * checksums, cut at the length the first byte names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/heal.h"

#define MAX_BLOCKS 128

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cut = (size_t)data[0] * 8;
    const uint8_t *rest = data + 1;
    size_t rlen = size - 1, dlen = cut < rlen ? cut : rlen;
    uint64_t bits[(MAX_BLOCKS + 63) / 64];
    struct rpc_msg m;
    if (rpc_msg_decode(rest, rlen, &m, NULL) == 0 && rpc_has(&m, RPC_T_DATA)) {
        int k = cl_heal_diff_sums(m.data.p, m.data.len, rest, dlen, bits, MAX_BLOCKS);
        if (k > MAX_BLOCKS || (k >= 0 && m.data.len % 8))
            abort();
    }
    int k = cl_heal_diff_sums(rest, rlen, rest, dlen, bits, MAX_BLOCKS);
    if (k > MAX_BLOCKS)
        abort();
    return 0;
}
