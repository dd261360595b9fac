/* INDEX with PENDING (the members the caller knows are down) leaves out the
 * entries that wait only for those members (version.c, brick_op_index;
 * accused.c, brick_accused_waits_for) and counts them in WAITING, so that
 * a self-heal crawl with a server down does not look up every object its
 * absence made differ. An entry that also accuses an up member, or that
 * is dirty, is still listed; without PENDING every entry is. Paging by
 * OFFSET counts listed entries only, so the pages add up to the listing. */
#include "test_brick_util.h"

#define DOWN (1u << 2)

static int mark(struct tb *t, const char *path, uint32_t bits)
{
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, flags, RPC_T_FLAGS, RPC_OP_WRITE);
    RPC_SET(&m, pending, RPC_T_PENDING, bits);
    return tb_do(t, RPC_OP_MARK, &m);
}

/* Every page of INDEX with down (0: none sent) and budget, concatenated
 * into out; *waiting sums WAITING. Returns the number of pages. */
static int list(struct tb *t, uint32_t down, uint64_t budget, char *out, size_t cap,
                uint64_t *waiting)
{
    size_t used = 0;
    uint64_t skip = 0;
    int pages = 0;
    *waiting = 0;
    out[0] = 0;
    for (;;) {
        struct rpc_msg m = tb_msg(NULL);
        RPC_SET(&m, offset, RPC_T_OFFSET, skip);
        RPC_SET(&m, size, RPC_T_SIZE, budget);
        if (down)
            RPC_SET(&m, pending, RPC_T_PENDING, down);
        struct tb_reply r;
        if (tb_call(t, RPC_OP_INDEX, &m, &r) < 0) {
            tb_free(&r);
            return -1;
        }
        pages++;
        CHECK_EQ(!!rpc_has(&r.m, RPC_T_WAITING), !!down);
        *waiting += r.m.waiting;
        struct rpc_bytes d = r.m.data;
        if (used + d.len < cap) {
            memcpy(out + used, d.p, d.len);
            used += d.len;
            out[used] = 0;
        }
        for (uint32_t i = 0; i < d.len; i++)
            skip += d.p[i] == '\n';
        int eof = r.m.eof;
        tb_free(&r);
        if (eof || d.len == 0 || pages > 50)
            return pages;
    }
}

static int listed(const char *text, const gfid_t *g)
{
    char s[GFID_STRLEN];
    gfid_format(g, s);
    int n = 0;
    for (const char *p = text; (p = strstr(p, s)); p++)
        n++;
    return n;
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    static const char *names[] = {"/only-down", "/down-and-up", "/down-dirty", "/only-up",
                                  "/dirty"};
    static const uint32_t bits[] = {DOWN, DOWN | 2u, DOWN | RPC_PENDING_DIRTY, 2u,
                                    RPC_PENDING_DIRTY};
    enum { N = 5 };
    gfid_t g[N];
    for (int i = 0; i < N; i++) {
        uint64_t fh = 0;
        CHECK_EQ(tb_create(&t, names[i], 0644, &fh, &g[i]), 0);
        CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
        CHECK_EQ(mark(&t, names[i], bits[i]), 0);
    }
    /* many more that wait for the down member only, to page through */
    enum { MANY = 40 };
    gfid_t many[MANY];
    for (int i = 0; i < MANY; i++) {
        char p[64];
        uint64_t fh = 0;
        snprintf(p, sizeof(p), "/many-%02d", i);
        CHECK_EQ(tb_create(&t, p, 0644, &fh, &many[i]), 0);
        CHECK_EQ(tb_fh_op(&t, RPC_OP_RELEASE, fh), 0);
        CHECK_EQ(mark(&t, p, DOWN), 0);
    }
    static char text[65536];
    uint64_t waiting;

    /* nothing named down: every entry */
    CHECK(list(&t, 0, 65536, text, sizeof(text), &waiting) == 1);
    for (int i = 0; i < N; i++)
        CHECK_EQ(listed(text, &g[i]), 1);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ(listed(text, &many[i]), 1);

    /* member 2 down: what waits only for it is left out and counted */
    CHECK(list(&t, DOWN, 65536, text, sizeof(text), &waiting) == 1);
    CHECK_EQ(listed(text, &g[0]), 0);
    for (int i = 1; i < N; i++)
        CHECK_EQ(listed(text, &g[i]), 1);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ(listed(text, &many[i]), 0);
    CHECK_EQ(waiting, 1 + MANY);

    /* members 1 and 2 down: only the dirty ones are listed */
    CHECK(list(&t, DOWN | 2u, 65536, text, sizeof(text), &waiting) == 1);
    CHECK_EQ(listed(text, &g[0]) + listed(text, &g[1]) + listed(text, &g[3]), 0);
    CHECK_EQ(listed(text, &g[2]), 1);
    CHECK_EQ(listed(text, &g[4]), 1);
    CHECK_EQ(waiting, 3 + MANY);

    /* small pages: each listed entry exactly once, the left-out ones never */
    int pages = list(&t, DOWN, 60, text, sizeof(text), &waiting);
    CHECK(pages > 2);
    CHECK_EQ(listed(text, &g[0]), 0);
    for (int i = 1; i < N; i++)
        CHECK_EQ(listed(text, &g[i]), 1);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ(listed(text, &many[i]), 0);

    /* a mark against an up member makes the entry listed again */
    CHECK_EQ(mark(&t, "/only-down", 1u), 0);
    CHECK(list(&t, DOWN, 65536, text, sizeof(text), &waiting) == 1);
    CHECK_EQ(listed(text, &g[0]), 1);
    CHECK_EQ(waiting, MANY);

    /* a brick opened again rebuilds what it knows from the index */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", t.dir);
    tb_close(&t, 0);
    CHECK_EQ(tb_open_at(&t, dir, "testvol", NULL), 0);
    snprintf(t.dir, sizeof(t.dir), "%s", dir);
    CHECK(list(&t, DOWN, 65536, text, sizeof(text), &waiting) == 1);
    CHECK_EQ(listed(text, &g[0]), 1);
    CHECK_EQ(listed(text, &g[2]), 1);
    for (int i = 0; i < MANY; i++)
        CHECK_EQ(listed(text, &many[i]), 0);
    CHECK_EQ(waiting, MANY);

    tb_close(&t, 1);
    return check_summary("test_brick_index_waiting");
}
