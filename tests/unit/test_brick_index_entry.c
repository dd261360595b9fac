/* A heal index entry names its object's path (version.c, index_put): it is
 * written when the object is first marked, left alone while it already
 * names that path (a directory is marked again by every entry made in it
 * while a member is down; rewriting it cost ext4 a write-out each time),
 * and rewritten whole, cut to length, when the path changed. */
#include "test_brick_util.h"

static int mark(struct tb *t, const char *path, uint32_t bits)
{
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, flags, RPC_T_FLAGS, RPC_OP_WRITE);
    RPC_SET(&m, pending, RPC_T_PENDING, bits);
    return tb_do(t, RPC_OP_MARK, &m);
}

static void entry_path(struct tb *t, const gfid_t *g, char *out, size_t len)
{
    char s[GFID_STRLEN];
    gfid_format(g, s);
    snprintf(out, len, "%s/.cairn/index/%s", t->dir, s);
}

/* The entry's bytes (NUL-terminated), or "" when there is none. */
static void entry_text(struct tb *t, const gfid_t *g, char *out, size_t len)
{
    char p[512];
    entry_path(t, g, p, sizeof(p));
    out[0] = 0;
    FILE *f = fopen(p, "rb");
    if (!f)
        return;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    fclose(f);
}

static struct timespec entry_mtime(struct tb *t, const gfid_t *g)
{
    char p[512];
    struct stat st;
    entry_path(t, g, p, sizeof(p));
    if (stat(p, &st) < 0)
        return (struct timespec){0, 0};
    return st.st_mtim;
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    char text[4096];
    gfid_t g;
    uint64_t fh = 0;
    CHECK_EQ(tb_mkdir(&t, "/dir", 0755), 0);
    CHECK_EQ(tb_create(&t, "/dir/a-rather-long-name", 0644, &fh, &g), 0);
    CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);

    /* first mark: the entry names the path */
    CHECK_EQ(mark(&t, "/dir/a-rather-long-name", 1u << 2), 0);
    entry_text(&t, &g, text, sizeof(text));
    CHECK_STR(text, "/dir/a-rather-long-name");

    /* marked again under the same path: the entry is not written again */
    struct timespec before = entry_mtime(&t, &g);
    usleep(20000);
    CHECK_EQ(mark(&t, "/dir/a-rather-long-name", 1u << 2), 0);
    CHECK_EQ(mark(&t, "/dir/a-rather-long-name", 1u << 1), 0);
    struct timespec after = entry_mtime(&t, &g);
    CHECK(before.tv_sec == after.tv_sec && before.tv_nsec == after.tv_nsec);
    entry_text(&t, &g, text, sizeof(text));
    CHECK_STR(text, "/dir/a-rather-long-name");

    /* renamed to a shorter path: the entry holds exactly the new one */
    struct rpc_msg m = tb_msg("/dir/a-rather-long-name");
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/b");
    CHECK_EQ(tb_do(&t, RPC_OP_RENAME, &m), 0);
    CHECK_EQ(mark(&t, "/b", 1u << 2), 0);
    entry_text(&t, &g, text, sizeof(text));
    CHECK_STR(text, "/b");

    /* and to a longer one */
    m = tb_msg("/b");
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/dir/longer-than-before");
    CHECK_EQ(tb_do(&t, RPC_OP_RENAME, &m), 0);
    CHECK_EQ(mark(&t, "/dir/longer-than-before", 1u << 2), 0);
    entry_text(&t, &g, text, sizeof(text));
    CHECK_STR(text, "/dir/longer-than-before");

    /* the directory, marked by every entry made in it, keeps one entry */
    struct rpc_attr a;
    CHECK_EQ(tb_lookup(&t, "/dir", &a), 0);
    for (int i = 0; i < 5; i++) {
        char p[64];
        snprintf(p, sizeof(p), "/dir/f%d", i);
        struct rpc_msg c = tb_msg(p);
        gfid_t gf;
        gfid_generate(&gf);
        tb_set_gfid(&c, &gf);
        RPC_SET(&c, mode, RPC_T_MODE, S_IFREG | 0644);
        RPC_SET(&c, umask, RPC_T_UMASK, 0);
        RPC_SET(&c, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
        RPC_SET(&c, pending, RPC_T_PENDING, 1u << 2);
        struct tb_reply r;
        CHECK_EQ(tb_call(&t, RPC_OP_CREATE, &c, &r), 0);
        uint64_t cfh = r.m.fh;
        tb_free(&r);
        CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, cfh), 0);
        entry_text(&t, &gf, text, sizeof(text));
        CHECK_STR(text, p);
    }
    entry_text(&t, &a.gfid, text, sizeof(text));
    CHECK_STR(text, "/dir");

    tb_close(&t, 1);
    return check_summary("test_brick_index_entry");
}
