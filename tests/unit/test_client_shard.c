/* The shard layer's arithmetic and on-disk meta (src/client/shard.h):
 * which block an offset falls in, how a range splits at block
 * boundaries, how many blocks a size spans, the names of shard files,
 * the paths hidden from users, and the xattr's wire form. */
#include <errno.h>
#include <string.h>

#include "../../src/client/shard.h"
#include "check.h"

#define MB (1ull << 20)

static void test_pieces(void)
{
    uint64_t bs = 4 * MB, n, in;
    /* within the first block */
    CHECK_EQ(cl_shard_piece(0, 10, bs, &n, &in), 10);
    CHECK_EQ(n, 0);
    CHECK_EQ(in, 0);
    /* the last byte of block 0, then the first of block 1 */
    CHECK_EQ(cl_shard_piece(bs - 1, 2, bs, &n, &in), 1);
    CHECK_EQ(n, 0);
    CHECK_EQ(in, bs - 1);
    CHECK_EQ(cl_shard_piece(bs, 1, bs, &n, &in), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(in, 0);
    /* a range over three blocks splits in three */
    uint64_t off = bs - 5, len = bs + 10, got[4] = {0}, blk[4] = {0};
    int k = 0;
    for (uint64_t done = 0; done < len && k < 4; k++) {
        got[k] = cl_shard_piece(off + done, len - done, bs, &blk[k], &in);
        done += got[k];
    }
    CHECK_EQ(k, 3);
    CHECK_EQ(got[0], 5);
    CHECK_EQ(got[1], bs);
    CHECK_EQ(got[2], 5);
    CHECK_EQ(blk[0], 0);
    CHECK_EQ(blk[1], 1);
    CHECK_EQ(blk[2], 2);
    /* far out: a sparse write at 1 TiB */
    CHECK_EQ(cl_shard_piece(1ull << 40, 4096, bs, &n, &in), 4096);
    CHECK_EQ(n, (1ull << 40) / bs);
    CHECK_EQ(in, 0);
    /* an odd block size */
    CHECK_EQ(cl_shard_piece(5 * MB + 3, 10 * MB, 5 * MB, &n, &in), 5 * MB - 3);
    CHECK_EQ(n, 1);
    CHECK_EQ(in, 3);
}

static void test_counts(void)
{
    uint64_t bs = 4 * MB;
    CHECK_EQ(cl_shard_blocks_of(0, bs), 0);
    CHECK_EQ(cl_shard_blocks_of(1, bs), 1);
    CHECK_EQ(cl_shard_blocks_of(bs - 1, bs), 1);
    CHECK_EQ(cl_shard_blocks_of(bs, bs), 1);
    CHECK_EQ(cl_shard_blocks_of(bs + 1, bs), 2);
    CHECK_EQ(cl_shard_blocks_of(3 * bs + 5, bs), 4);
}

static void test_names(void)
{
    gfid_t g;
    CHECK_EQ(gfid_parse("0a1b2c3d-0000-4000-8000-00000000abcd", &g), 0);
    char p[128];
    cl_shard_path(&g, 1, p, sizeof(p));
    CHECK_STR(p, "/.shard/0a1b2c3d-0000-4000-8000-00000000abcd.1");
    cl_shard_path(&g, 262144, p, sizeof(p));
    CHECK_STR(p, "/.shard/0a1b2c3d-0000-4000-8000-00000000abcd.262144");
    const char *hidden[] = {"/.shard", "/.shard/", "/.shard/x.1"};
    const char *shown[] = {"/", "/.shardx", "/a/.shard", "/.shar", "/x/.shard/y"};
    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
        CHECK(cl_shard_hidden(hidden[i], strlen(hidden[i])));
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
        CHECK(!cl_shard_hidden(shown[i], strlen(shown[i])));
}

static void test_meta(void)
{
    struct cl_shard_meta m = {.block_size = 64 * MB, .size = 3 * 64 * MB + 5, .shard_blocks = 77},
                         d;
    uint8_t v[CL_SHARD_XATTR_LEN];
    cl_shard_meta_encode(&m, v);
    /* little-endian: version 1 first, then the block size */
    CHECK_EQ(v[0], 1);
    CHECK_EQ(v[4], 0);
    CHECK_EQ(v[8 + 3], 4); /* 64 MiB = 0x04000000 */
    CHECK_EQ(cl_shard_meta_decode(v, sizeof(v), &d), 0);
    CHECK_EQ(d.block_size, m.block_size);
    CHECK_EQ(d.size, m.size);
    CHECK_EQ(d.shard_blocks, m.shard_blocks);
    CHECK_EQ(cl_shard_meta_decode(v, sizeof(v) - 1, &d), -EPROTO);
    v[0] = 2;
    CHECK_EQ(cl_shard_meta_decode(v, sizeof(v), &d), -EPROTO);
    m.block_size = 1 * MB; /* below the minimum: not one of ours */
    cl_shard_meta_encode(&m, v);
    CHECK_EQ(cl_shard_meta_decode(v, sizeof(v), &d), -EPROTO);
}

int main(void)
{
    test_pieces();
    test_counts();
    test_names();
    test_meta();
    return check_summary("test_client_shard");
}
