/* Fuzz target: the body decoder. Whatever decodes must re-encode to a body
 * that decodes to the same fields (the codec is its own oracle). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/rpc/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rpc_msg m, again;
    if (rpc_msg_decode(data, size, &m, NULL) < 0)
        return 0;
    if (rpc_has(&m, RPC_T_XATTRS)) {
        /* MAKE_FILE's nested extended attributes */
        struct rpc_iter it;
        struct rpc_bytes n, v;
        int rc;
        rpc_iter_init(&it, m.xattrs.p, m.xattrs.len);
        while ((rc = rpc_xattrs_next(&it, &n, &v)) > 0)
            if (n.len == 0 || n.len > 255 || v.p < m.xattrs.p ||
                v.p + v.len > m.xattrs.p + m.xattrs.len)
                abort();
    }
    if (rpc_has(&m, RPC_T_EXTENTS)) {
        /* WRITE's extents: a list that passes the check covers DATA exactly */
        int n = rpc_extents_check(&m, NULL);
        uint64_t sum = 0;
        for (int i = 0; i < n; i++) {
            uint64_t off;
            uint32_t len;
            rpc_extent_get(&m.extents, (uint32_t)i, &off, &len);
            if (len == 0 || off + len > (uint64_t)INT64_MAX)
                abort();
            sum += len;
        }
        if (n > RPC_EXTENTS_MAX || (n > 0 && sum != m.data.len))
            abort();
    }
    if (rpc_has(&m, RPC_T_DATA)) {
        /* an RMDIR's tree: a list that passes the check is whole entries of
         * proper components */
        int n = rpc_tree_check(&m.data, NULL);
        if (n > RPC_TREE_MAX)
            abort();
        for (uint32_t o = 0; n > 0 && o < m.data.len;) {
            const char *e = (const char *)m.data.p + o;
            size_t l = strnlen(e, m.data.len - o);
            if (l == 0 || o + l >= m.data.len || e[0] == '/' || e[l - 1] == '/' ||
                strstr(e, "//") || strstr(e, "/../") || !strcmp(e, "..") || !strncmp(e, "../", 3) ||
                (l >= 3 && !strcmp(e + l - 3, "/..")))
                abort();
            o += (uint32_t)l + 1;
        }
    }
    /* repeated fields other than GROUP are not re-encoded by rpc_msg_encode */
    m.present &= ~((1ull << RPC_T_DIRENT) | (1ull << RPC_T_ARG) | (1ull << RPC_T_SUB) |
                   (1ull << RPC_T_BRICK) | (1ull << RPC_T_OPTION) | (1ull << RPC_T_OPSTAT) |
                   (1ull << RPC_T_BUCKET) | (1ull << RPC_T_ERRSTAT) | (1ull << RPC_T_COUNTER) |
                   (1ull << RPC_T_TOPENTRY) | (1ull << RPC_T_CLIENT) | (1ull << RPC_T_QUOTA));
    if (m.n_group > 32)
        m.n_group = 32;
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_msg_encode(&m, &b);
    if (b.err == 0) {
        if (rpc_msg_decode(b.data, b.len, &again, NULL) != 0)
            abort();
        if (again.present != m.present || again.present_hi != m.present_hi ||
            again.size != m.size || again.offset != m.offset || again.path.len != m.path.len ||
            (m.path.len && memcmp(again.path.p, m.path.p, m.path.len) != 0) ||
            again.attr.size != m.attr.size || again.n_group != m.n_group)
            abort();
    }
    rpc_buf_free(&b);
    return 0;
}
