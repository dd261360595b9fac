/* Self-heal decisions: the good copy (sources, split brain), the
 * favorite-child policies, which blocks a range heal copies, and the
 * brick's CHECKSUM opcode that feeds it. */
#include <errno.h>

#include "../../src/client/heal.h"
#include "test_brick_util.h"

static void test_sources(void)
{
    /* nobody accused: every holder is a source */
    CHECK_EQ(cl_heal_sources(0x7, 0x0, 0x7), 0x7);
    /* brick 1 missed changes (the others blame it) */
    CHECK_EQ(cl_heal_sources(0x7, 0x2, 0x7), 0x5);
    /* each of two blames the other: split brain */
    CHECK_EQ(cl_heal_sources(0x3, 0x3, 0x3), 0);
    /* the arbiter (bit 2) is never a data source */
    CHECK_EQ(cl_heal_sources(0x7, 0x3, 0x3), 0);
    CHECK_EQ(cl_heal_sources(0x7, 0x1, 0x3), 0x2);
    /* a child without the object is no source */
    CHECK_EQ(cl_heal_sources(0x5, 0x0, 0x7), 0x5);
}

static void test_policies(void)
{
    CHECK_EQ(cl_heal_policy_parse("none"), CL_HEAL_POL_NONE);
    CHECK_EQ(cl_heal_policy_parse("size"), CL_HEAL_POL_SIZE);
    CHECK_EQ(cl_heal_policy_parse("mtime"), CL_HEAL_POL_MTIME);
    CHECK_EQ(cl_heal_policy_parse("ctime"), CL_HEAL_POL_CTIME);
    CHECK_EQ(cl_heal_policy_parse("majority"), CL_HEAL_POL_MAJORITY);
    CHECK_EQ(cl_heal_policy_parse("biggest"), -EINVAL);
    CHECK_EQ(cl_heal_policy_parse(NULL), -EINVAL);

    struct cl_heal_copy c[3] = {
        {.size = 10, .mtime = 5, .mtime_ns = 1, .ctime = 7},
        {.size = 30, .mtime = 5, .mtime_ns = 2, .ctime = 7, .ctime_ns = 9},
        {.size = 20, .mtime = 4, .ctime = 8},
    };
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, c, CL_HEAL_POL_NONE), -1);
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, c, CL_HEAL_POL_SIZE), 1);
    CHECK_EQ(cl_heal_policy_pick(3, 0x5, c, CL_HEAL_POL_SIZE), 2);  /* among candidates only */
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, c, CL_HEAL_POL_MTIME), 1); /* nanoseconds decide */
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, c, CL_HEAL_POL_CTIME), 2);
    CHECK_EQ(cl_heal_policy_pick(3, 0x0, c, CL_HEAL_POL_SIZE), -1);
    /* ties leave the split brain alone */
    c[0].size = 30;
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, c, CL_HEAL_POL_SIZE), -1);
    CHECK_EQ(cl_heal_policy_pick(3, 0x6, c, CL_HEAL_POL_SIZE), 1);
    /* majority: more than half of the set share size and mtime */
    struct cl_heal_copy m[3] = {
        {.size = 1, .mtime = 3}, {.size = 2, .mtime = 3}, {.size = 2, .mtime = 3}};
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, m, CL_HEAL_POL_MAJORITY), 1);
    m[2].mtime_ns = 1;
    CHECK_EQ(cl_heal_policy_pick(3, 0x7, m, CL_HEAL_POL_MAJORITY), -1);
    /* two of a set of two agree; one of two is no majority */
    CHECK_EQ(cl_heal_policy_pick(2, 0x3, m + 1, CL_HEAL_POL_MAJORITY), -1);
    m[2].mtime_ns = 0;
    CHECK_EQ(cl_heal_policy_pick(2, 0x3, m + 1, CL_HEAL_POL_MAJORITY), 0);
    CHECK_EQ(cl_heal_policy_pick(3, 0x3, m, CL_HEAL_POL_MAJORITY), -1); /* 1 of 3 */
}

static void put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_diff(void)
{
    uint8_t a[8 * 70], b[8 * 70];
    uint64_t bits[2];
    for (int i = 0; i < 70; i++) {
        put(a + 8 * i, (uint64_t)i * 7919);
        put(b + 8 * i, (uint64_t)i * 7919);
    }
    CHECK_EQ(cl_heal_diff_sums(a, sizeof(a), b, sizeof(b), bits, 70), 0);
    put(b + 8 * 3, 1);
    put(b + 8 * 65, 1);
    CHECK_EQ(cl_heal_diff_sums(a, sizeof(a), b, sizeof(b), bits, 70), 2);
    CHECK(bits[0] == 1ull << 3 && bits[1] == 1ull << 1);
    /* the sink is shorter: its missing blocks are copied */
    CHECK_EQ(cl_heal_diff_sums(a, 8 * 10, b, 8 * 8, bits, 70), 3);
    CHECK(bits[0] == (1ull << 3 | 1ull << 8 | 1ull << 9));
    /* the sink is longer: only the source's blocks matter */
    CHECK_EQ(cl_heal_diff_sums(a, 8 * 2, b, 8 * 70, bits, 70), 0);
    /* malformed replies */
    CHECK_EQ(cl_heal_diff_sums(a, 7, b, 8, bits, 70), -EPROTO);
    CHECK_EQ(cl_heal_diff_sums(a, 8 * 70, b, 8, bits, 69), -EPROTO);
    CHECK_EQ(cl_heal_diff_sums(NULL, 0, NULL, 0, bits, 70), 0);
}

static void test_checksum_op(void)
{
    struct tb tb, *t = &tb;
    CHECK_EQ(tb_open(t, NULL), 0);
    uint64_t fh = 0;
    CHECK_EQ(tb_create(t, "/img", 0644, &fh, NULL), 0);
    static uint8_t data[300 << 10];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 31 + i / 4096);
    CHECK_EQ(tb_write(t, fh, 0, data, sizeof(data)), (int)sizeof(data));
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    RPC_SET(&m, size, RPC_T_SIZE, 1 << 20);
    RPC_SET(&m, flags, RPC_T_FLAGS, 128 << 10);
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_CHECKSUM, &m, &rep), 0);
    /* 300 KiB in 128 KiB blocks: three checksums, the last of a short block */
    CHECK_EQ(rep.m.data.len, 24);
    CHECK_EQ(rep.m.size, sizeof(data));
    uint8_t first[24];
    memcpy(first, rep.m.data.p, 24);
    uint64_t s0 = 0;
    for (int i = 7; i >= 0; i--)
        s0 = s0 << 8 | first[i];
    CHECK(s0 == brick_block_sum(data, 128 << 10));
    tb_free(&rep);
    /* one byte changed in the second block: only its checksum changes */
    uint8_t x = data[200 << 10] ^ 0xff;
    CHECK_EQ(tb_write(t, fh, 200 << 10, &x, 1), 1);
    CHECK_EQ(tb_call(t, RPC_OP_CHECKSUM, &m, &rep), 0);
    uint64_t bits[1];
    CHECK_EQ(cl_heal_diff_sums(first, 24, rep.m.data.p, rep.m.data.len, bits, 64), 1);
    CHECK(bits[0] == 2);
    tb_free(&rep);
    /* an offset past the end: no checksums */
    RPC_SET(&m, offset, RPC_T_OFFSET, 1 << 20);
    CHECK_EQ(tb_call(t, RPC_OP_CHECKSUM, &m, &rep), 0);
    CHECK_EQ(rep.m.data.len, 0);
    tb_free(&rep);
    /* bad block sizes and unaligned offsets are refused */
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    RPC_SET(&m, flags, RPC_T_FLAGS, 3000);
    CHECK_EQ(tb_do(t, RPC_OP_CHECKSUM, &m), -EINVAL);
    RPC_SET(&m, flags, RPC_T_FLAGS, 1u << 30);
    CHECK_EQ(tb_do(t, RPC_OP_CHECKSUM, &m), -EINVAL);
    RPC_SET(&m, flags, RPC_T_FLAGS, 4096);
    RPC_SET(&m, offset, RPC_T_OFFSET, 100);
    CHECK_EQ(tb_do(t, RPC_OP_CHECKSUM, &m), -EINVAL);
    /* without a handle */
    struct rpc_msg nofh = tb_msg(NULL);
    CHECK_EQ(tb_do(t, RPC_OP_CHECKSUM, &nofh), -EBADF);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, fh), 0);
    tb_close(t, 1);
    /* the hash: equal input, equal sum; any change, another sum */
    CHECK(brick_block_sum(data, 4096) == brick_block_sum(data, 4096));
    CHECK(brick_block_sum(data, 4096) != brick_block_sum(data, 4095));
    CHECK(brick_block_sum(data, 0) != brick_block_sum(data, 1));
}

int main(void)
{
    log_init("test", LOG_ERROR);
    test_sources();
    test_policies();
    test_diff();
    test_checksum_op();
    return check_summary("test_heal_logic");
}
