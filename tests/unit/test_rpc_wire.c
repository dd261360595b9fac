/* Frame header, CRC-32C and body codec. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/rpc/conn.h"
#include "../../src/rpc/msg.h"
#include "../../src/rpc/wire.h"
#include "check.h"

static void test_crc(void)
{
    CHECK_EQ(rpc_crc32c(0, "123456789", 9), 0xe3069283u);
    CHECK_EQ(rpc_crc32c(0, "", 0), 0);
    /* incremental equals one-shot */
    uint32_t c = rpc_crc32c(0, "12345", 5);
    CHECK_EQ(rpc_crc32c(c, "6789", 4), 0xe3069283u);
    CHECK_EQ(rpc_crc32c_table(0, "123456789", 9), 0xe3069283u);
    /* the instruction and the table agree at every length and alignment */
    static unsigned char buf[4096 + 16];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 131u + 7u);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 300; len += 1 + len / 16) {
            CHECK_EQ(rpc_crc32c(0x1234u, buf + off, len),
                     rpc_crc32c_table(0x1234u, buf + off, len));
        }
    CHECK_EQ(rpc_crc32c(0, buf, 4096), rpc_crc32c_table(0, buf, 4096));
}

static void test_header(void)
{
    struct rpc_hdr h = {.magic = RPC_MAGIC,
                        .version = RPC_VERSION,
                        .kind = RPC_KIND_REPLY,
                        .opcode = RPC_OP_LOOKUP,
                        .reqid = 0x0102030405060708ull,
                        .body_len = 77,
                        .body_crc = 0xdeadbeef,
                        .status = -ENOENT};
    uint8_t buf[RPC_HDR_LEN];
    struct rpc_hdr d;
    const char *why;
    rpc_hdr_encode(&h, buf);
    CHECK_EQ(rpc_hdr_decode(buf, sizeof(buf), &d, &why), 0);
    CHECK_EQ(d.reqid, h.reqid);
    CHECK_EQ(d.status, -ENOENT);
    CHECK_EQ(d.body_crc, 0xdeadbeef);
    CHECK_EQ(buf[0], 'C'); /* the magic reads "CARN" in memory */

    CHECK_EQ(rpc_hdr_decode(buf, RPC_HDR_LEN - 1, &d, &why), -EPROTO);
    uint8_t bad[RPC_HDR_LEN];
    memcpy(bad, buf, sizeof(bad));
    bad[0] ^= 1;
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EPROTO);
    CHECK_STR(why, "bad magic");
    memcpy(bad, buf, sizeof(bad));
    bad[4] = 9;
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EPROTO);
    memcpy(bad, buf, sizeof(bad));
    bad[6] = 7;
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EPROTO);
    memcpy(bad, buf, sizeof(bad));
    bad[7] = 1;
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EPROTO);
    h.body_len = RPC_MAX_BODY + 1;
    rpc_hdr_encode(&h, bad);
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EMSGSIZE);
    h.body_len = 0;
    h.status = 5;
    rpc_hdr_encode(&h, bad);
    CHECK_EQ(rpc_hdr_decode(bad, sizeof(bad), &d, &why), -EPROTO);
}

static void test_msg_roundtrip(void)
{
    struct rpc_msg m = {0}, d;
    struct rpc_buf b;
    gfid_t g;
    gfid_generate(&g);
    RPC_SET(&m, op, RPC_T_OP, RPC_OP_CREATE);
    rpc_set_str(&m, RPC_T_PATH, &m.path, "/dir/file");
    RPC_SET(&m, mode, RPC_T_MODE, 0644);
    RPC_SET(&m, uid, RPC_T_UID, 1000);
    RPC_SET(&m, offset, RPC_T_OFFSET, 5ull << 30);
    RPC_SET(&m, gfid, RPC_T_GFID, g);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "a\0b", 3);
    m.atime.sec = -5;
    m.atime.nsec = 999999999;
    m.present |= 1ull << RPC_T_ATIME;
    m.groups[0] = 10;
    m.groups[1] = 2000;
    m.n_group = 2;
    m.present |= 1ull << RPC_T_GROUP;
    m.attr.mode = 0100644;
    m.attr.size = 12345;
    m.attr.mtime_ns = 7;
    m.present |= 1ull << RPC_T_ATTR;
    rpc_buf_init(&b);
    rpc_msg_encode(&m, &b);
    CHECK_EQ(b.err, 0);
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, NULL), 0);
    CHECK_EQ(d.present, m.present);
    CHECK_EQ(d.op, RPC_OP_CREATE);
    CHECK_EQ(d.path.len, 9);
    CHECK(memcmp(d.path.p, "/dir/file", 9) == 0);
    CHECK_EQ(d.mode, 0644);
    CHECK_EQ(d.offset, 5ull << 30);
    CHECK(gfid_equal(&d.gfid, &g));
    CHECK_EQ(d.data.len, 3);
    CHECK_EQ(d.atime.sec, -5);
    CHECK_EQ(d.atime.nsec, 999999999);
    CHECK_EQ(d.n_group, 2);
    CHECK_EQ(d.groups[1], 2000);
    CHECK_EQ(d.attr.size, 12345);
    CHECK_EQ(d.attr.mtime_ns, 7);

    /* every truncation of a valid body is rejected, never read past */
    for (size_t cut = 1; cut < b.len; cut++) {
        uint8_t *copy = malloc(b.len - cut);
        memcpy(copy, b.data, b.len - cut);
        int rc = rpc_msg_decode(copy, b.len - cut, &d, NULL);
        /* a cut exactly at a field boundary is a valid shorter body */
        CHECK(rc == 0 || rc == -EPROTO);
        free(copy);
    }
    rpc_buf_free(&b);
}

static void test_msg_rejects(void)
{
    struct rpc_buf b;
    struct rpc_msg d;
    const char *why;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_PATH, "/a");
    rpc_put_str(&b, RPC_T_PATH, "/b");
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);
    CHECK_STR(why, "duplicated field");

    rpc_buf_reset(&b);
    rpc_put_bytes(&b, RPC_T_PATH, "/a\0b", 4);
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);
    CHECK_STR(why, "NUL inside string");

    rpc_buf_reset(&b);
    rpc_put_u64(&b, 999, 1);
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);
    CHECK_STR(why, "unknown field tag");

    /* Tags past the first mask word are unknown until they are given a
     * kind, and stay so: 64 and 127 as much as 999. */
    for (unsigned tag = 64; tag < RPC_T_MAX; tag += 63) {
        rpc_buf_reset(&b);
        rpc_put_u64(&b, (uint16_t)tag, 1);
        CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);
        CHECK_STR(why, "unknown field tag");
    }

    rpc_buf_reset(&b);
    rpc_put_bytes(&b, RPC_T_MODE, "abc", 3);
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);

    rpc_buf_reset(&b);
    rpc_put_bytes(&b, RPC_T_GFID, "short", 5);
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);

    rpc_buf_reset(&b);
    uint8_t t[12] = {0};
    rpc_le32(t + 8, 1000000000u);
    rpc_put_bytes(&b, RPC_T_MTIME, t, sizeof(t));
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), -EPROTO);

    /* a length that runs past the end */
    uint8_t raw[8] = {2, 0, 0xff, 0xff, 0xff, 0x7f, 'x', 'y'};
    CHECK_EQ(rpc_msg_decode(raw, sizeof(raw), &d, &why), -EPROTO);
    CHECK_EQ(rpc_msg_decode(raw, 3, &d, &why), -EPROTO);

    /* repeated fields are counted; nested bodies decode on their own */
    rpc_buf_reset(&b);
    for (int i = 0; i < 3; i++) {
        size_t mark = rpc_put_begin(&b, RPC_T_DIRENT);
        rpc_put_u64(&b, RPC_T_OFFSET, (uint64_t)i + 100);
        rpc_put_str(&b, RPC_T_NAME, "n");
        rpc_put_end(&b, mark);
    }
    CHECK_EQ(rpc_msg_decode(b.data, b.len, &d, &why), 0);
    CHECK_EQ(d.n_dirent, 3);
    struct rpc_iter it;
    struct rpc_field f;
    int seen = 0;
    rpc_iter_init(&it, b.data, b.len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg e;
        CHECK_EQ(rpc_msg_decode(f.val, f.len, &e, NULL), 0);
        CHECK_EQ(e.offset, 100 + seen);
        seen++;
    }
    CHECK_EQ(seen, 3);
    rpc_buf_free(&b);
}

/* RMDIR trees: well-formed lists are counted, anything else refused. */
static int tree(const char *p, size_t len)
{
    struct rpc_bytes b = {(const uint8_t *)p, (uint32_t)len};
    return rpc_tree_check(&b, NULL);
}

static void test_tree_check(void)
{
    CHECK_EQ(tree("a\0b/c\0b\0", 8), 3);
    CHECK_EQ(tree("..a\0.b/c.\0", 10), 2);
    CHECK_EQ(tree("", 0), -EPROTO);
    CHECK_EQ(tree("a", 1), -EPROTO);      /* no NUL at the end */
    CHECK_EQ(tree("\0", 1), -EPROTO);     /* an empty entry */
    CHECK_EQ(tree("a//b\0", 5), -EPROTO); /* an empty component */
    CHECK_EQ(tree("/a\0", 3), -EPROTO);   /* absolute */
    CHECK_EQ(tree("a/\0", 3), -EPROTO);   /* a trailing slash */
    CHECK_EQ(tree("a/../b\0", 7), -EPROTO);
    CHECK_EQ(tree(".\0", 2), -EPROTO);
    char deep[2 * RPC_TREE_DEPTH + 2];
    for (int i = 0; i < RPC_TREE_DEPTH; i++)
        memcpy(deep + 2 * i, "d/", 2);
    deep[2 * RPC_TREE_DEPTH - 1] = 0; /* RPC_TREE_DEPTH components */
    CHECK_EQ(tree(deep, 2 * RPC_TREE_DEPTH), 1);
    deep[2 * RPC_TREE_DEPTH - 1] = '/';
    deep[2 * RPC_TREE_DEPTH] = 'e';
    deep[2 * RPC_TREE_DEPTH + 1] = 0;
    CHECK_EQ(tree(deep, 2 * RPC_TREE_DEPTH + 2), -EPROTO);
    char longname[300];
    memset(longname, 'n', 256);
    longname[256] = 0;
    CHECK_EQ(tree(longname, 257), -EPROTO);
    CHECK_EQ(tree(longname + 1, 256), 1);
}

static void test_frame_parse(void)
{
    struct rpc_buf body;
    rpc_buf_init(&body);
    rpc_put_str(&body, RPC_T_PATH, "/x");
    uint8_t frame[RPC_HDR_LEN + 64];
    struct rpc_hdr h = {.magic = RPC_MAGIC,
                        .version = RPC_VERSION,
                        .kind = RPC_KIND_REQUEST,
                        .opcode = RPC_OP_LOOKUP,
                        .reqid = 9,
                        .body_len = (uint32_t)body.len,
                        .body_crc = rpc_crc32c(0, body.data, body.len)};
    rpc_hdr_encode(&h, frame);
    memcpy(frame + RPC_HDR_LEN, body.data, body.len);
    size_t len = RPC_HDR_LEN + body.len;
    struct rpc_frame f;
    const char *why;
    CHECK_EQ(rpc_frame_parse(frame, len, &f, &why), (long)len);
    CHECK_EQ(f.msg.path.len, 2);
    free(f.body);
    CHECK_EQ(rpc_frame_parse(frame, len - 1, &f, &why), 0); /* needs more */
    CHECK_EQ(rpc_frame_parse(frame, 10, &f, &why), 0);
    frame[RPC_HDR_LEN] ^= 0xff;
    CHECK_EQ(rpc_frame_parse(frame, len, &f, &why), -EPROTO);
    CHECK_STR(why, "body checksum mismatch");
    rpc_buf_free(&body);
}

/* The presence mask spans two words: marks of tags 64..127 land in the
 * second and never touch the first. */
static void test_presence_words(void)
{
    struct rpc_msg m;
    memset(&m, 0, sizeof(m));
    rpc_mark(&m, RPC_T_REDUNDANCY);
    rpc_mark(&m, (enum rpc_tag)64);
    rpc_mark(&m, (enum rpc_tag)127);
    CHECK(rpc_has(&m, RPC_T_REDUNDANCY));
    CHECK(rpc_has(&m, (enum rpc_tag)64));
    CHECK(rpc_has(&m, (enum rpc_tag)127));
    CHECK(!rpc_has(&m, (enum rpc_tag)0));
    CHECK(!rpc_has(&m, (enum rpc_tag)65));
    CHECK_EQ(m.present, 1ull << RPC_T_REDUNDANCY);
    CHECK_EQ(m.present_hi, (1ull << 0) | (1ull << 63));
    rpc_unmark(&m, (enum rpc_tag)64);
    CHECK(!rpc_has(&m, (enum rpc_tag)64));
    CHECK(rpc_has(&m, (enum rpc_tag)127));
    rpc_unmark(&m, RPC_T_REDUNDANCY);
    CHECK_EQ(m.present, 0);
}

int main(void)
{
    test_presence_words();
    test_crc();
    test_header();
    test_msg_roundtrip();
    test_msg_rejects();
    test_tree_check();
    test_frame_parse();
    return check_summary("test_rpc_wire");
}
