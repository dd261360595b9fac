/* The brick's accusation mask (accused.c): the union of the marks of the
 * objects in its heal index, grown by changes that carry PENDING and by
 * MARK, shrunk by UNMARK (with or without the object), the dirty bit
 * accusing nobody, and rebuilt from the index when the brick opens again. */
#include <unistd.h>

#include "test_brick_util.h"

static int mark(struct tb *t, const char *path, uint16_t missed, uint32_t bits)
{
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, flags, RPC_T_FLAGS, missed);
    RPC_SET(&m, pending, RPC_T_PENDING, bits);
    return tb_do(t, RPC_OP_MARK, &m);
}

static int unmark(struct tb *t, const char *path, const gfid_t *g, uint32_t bits)
{
    struct rpc_msg m = tb_msg(path);
    tb_set_gfid(&m, g);
    RPC_SET(&m, pending, RPC_T_PENDING, bits);
    return tb_do(t, RPC_OP_UNMARK, &m);
}

/* A SETATTR of path's mode that members bits miss (PENDING). */
static int chmod_missed(struct tb *t, const char *path, uint32_t bits)
{
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MODE);
    RPC_SET(&m, mode, RPC_T_MODE, 0600);
    RPC_SET(&m, pending, RPC_T_PENDING, bits);
    return tb_do(t, RPC_OP_SETATTR, &m);
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    gfid_t ga, gb, gc;
    uint64_t fh;
    CHECK_EQ(tb_create(&t, "/a", 0644, &fh, &ga), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(tb_create(&t, "/b", 0644, &fh, &gb), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(tb_create(&t, "/c", 0644, &fh, &gc), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(brick_accused_mask(t.b), 0u);

    /* a change member 2 missed, and a MARK for member 1 */
    CHECK_EQ(chmod_missed(&t, "/a", 1u << 2), 0);
    CHECK_EQ(brick_accused_mask(t.b), 1u << 2);
    CHECK_EQ(mark(&t, "/b", RPC_OP_WRITE, 1u << 1), 0);
    CHECK_EQ(mark(&t, "/c", RPC_OP_WRITE, (1u << 1) | RPC_PENDING_DIRTY), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 1));

    /* the dirty bit alone accuses nobody */
    gfid_t gd;
    CHECK_EQ(tb_create(&t, "/d", 0644, &fh, &gd), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
    CHECK_EQ(mark(&t, "/d", RPC_OP_WRITE, RPC_PENDING_DIRTY), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 1));

    /* member 1 stays accused while one object still carries its bit */
    CHECK_EQ(unmark(&t, "/b", &gb, 1u << 1), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 1));

    /* the mask survives a restart: rebuilt from the index */
    struct tb_reply rep;
    tb_close(&t, 0);
    CHECK_EQ(tb_open_at(&t, t.dir, "testvol", NULL), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 1));

    /* /c removed: its index entry dropped without the object */
    CHECK_EQ(tb_dop(&t, RPC_OP_UNLINK, "/c"), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 1));
    struct rpc_msg m = tb_msg(NULL);
    tb_set_gfid(&m, &gc);
    RPC_SET(&m, pending, RPC_T_PENDING, (1u << 1) | RPC_PENDING_DIRTY);
    CHECK_EQ(tb_call(&t, RPC_OP_UNMARK, &m, &rep), 0);
    tb_free(&rep);
    CHECK_EQ(brick_accused_mask(t.b), 1u << 2);

    /* part of a mark cleared keeps the rest */
    CHECK_EQ(mark(&t, "/a", RPC_OP_WRITE, 1u << 0), 0);
    CHECK_EQ(brick_accused_mask(t.b), (1u << 2) | (1u << 0));
    CHECK_EQ(unmark(&t, "/a", &ga, 1u << 2), 0);
    CHECK_EQ(brick_accused_mask(t.b), 1u << 0);
    CHECK_EQ(unmark(&t, "/a", &ga, 1u << 0), 0);
    CHECK_EQ(brick_accused_mask(t.b), 0u);

    /* a clean restart is clean */
    tb_close(&t, 0);
    CHECK_EQ(tb_open_at(&t, t.dir, "testvol", NULL), 0);
    CHECK_EQ(brick_accused_mask(t.b), 0u);
    tb_close(&t, 1);

    /* a new copy (docs/elastic.md): BRICK/.cairn/fill makes the brick
     * accuse itself at open, its root in the index, and goes */
    struct tb f;
    CHECK_EQ(tb_open(&f, NULL), 0);
    tb_close(&f, 0);
    char fill[512];
    snprintf(fill, sizeof(fill), "%s/.cairn/fill", f.dir);
    FILE *ff = fopen(fill, "w");
    CHECK(ff != NULL);
    if (ff) {
        fputs("member=2\n", ff);
        fclose(ff);
    }
    CHECK_EQ(tb_open_at(&f, f.dir, "testvol", NULL), 0);
    CHECK_EQ(brick_accused_mask(f.b), 1u << 2);
    CHECK(access(fill, F_OK) < 0);
    CHECK_EQ(brick_index_count(f.b), 1);
    /* kept across a restart (the mark, not the file), cleared by UNMARK */
    tb_close(&f, 0);
    CHECK_EQ(tb_open_at(&f, f.dir, "testvol", NULL), 0);
    CHECK_EQ(brick_accused_mask(f.b), 1u << 2);
    gfid_t root;
    gfid_root(&root);
    CHECK_EQ(unmark(&f, "/", &root, 1u << 2), 0);
    CHECK_EQ(brick_accused_mask(f.b), 0u);
    /* a malformed file: the brick does not start (an empty copy must not
     * be served as a full one) */
    tb_close(&f, 0);
    ff = fopen(fill, "w");
    if (ff) {
        fputs("member=x\n", ff);
        fclose(ff);
    }
    CHECK(tb_open_at(&f, f.dir, "testvol", NULL) < 0);
    unlink(fill);
    CHECK_EQ(tb_open_at(&f, f.dir, "testvol", NULL), 0);
    tb_close(&f, 1);
    return check_summary("test_brick_accused");
}
