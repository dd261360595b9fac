/* READDIR in chunks over a 100,000-entry directory while entries are added
 * and removed between (and during) chunks: every entry present at the start
 * and never removed is returned exactly once, nothing is returned twice, and
 * the listing ends with EOF. Also readdirplus attributes and budgets. */
#include "test_brick_util.h"

#define N_FILES 100000

static unsigned char seen[N_FILES];
static unsigned char removed[N_FILES];

struct churn {
    struct tb *t;
    volatile int stop;
    int made;
};

/* Adds and removes names behind the listing's back while it runs. */
static void *churn_main(void *arg)
{
    struct churn *c = arg;
    char p[PATH_MAX];
    unsigned seed = 12345;
    while (!c->stop) {
        snprintf(p, sizeof(p), "%s/big/new-%d", c->t->dir, c->made++);
        int fd = open(p, O_CREAT | O_WRONLY, 0644);
        if (fd >= 0)
            close(fd);
        int k = (int)(rand_r(&seed) % N_FILES);
        if (k % 3 == 0) { /* only these may go: the rest must all be seen */
            snprintf(p, sizeof(p), "%s/big/f%06d", c->t->dir, k);
            if (unlink(p) == 0)
                removed[k] = 1;
        }
        usleep(200);
    }
    return NULL;
}

static void test_big_dir(struct tb *t)
{
    char p[PATH_MAX];
    CHECK_EQ(tb_mkdir(t, "/big", 0755), 0);
    for (int i = 0; i < N_FILES; i++) {
        snprintf(p, sizeof(p), "%s/big/f%06d", t->dir, i);
        int fd = open(p, O_CREAT | O_WRONLY, 0644);
        if (fd < 0) {
            CHECK(fd >= 0);
            return;
        }
        close(fd);
    }
    struct rpc_msg m = tb_msg("/big");
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_OPENDIR, &m, &rep), 0);
    uint64_t fh = rep.m.fh;
    tb_free(&rep);

    struct churn c = {.t = t};
    pthread_t th;
    pthread_create(&th, NULL, churn_main, &c);
    uint64_t cookie = 0;
    int eof = 0, chunks = 0, dup = 0, bad = 0, empty = 0;
    while (!eof && chunks < 100000) {
        m = tb_msg(NULL);
        RPC_SET(&m, fh, RPC_T_FH, fh);
        RPC_SET(&m, offset, RPC_T_OFFSET, cookie);
        RPC_SET(&m, size, RPC_T_SIZE, 8192);
        RPC_SET(&m, flags, RPC_T_FLAGS, 0);
        if (tb_call(t, RPC_OP_READDIR, &m, &rep) != 0) {
            bad++;
            break;
        }
        chunks++;
        eof = rpc_has(&rep.m, RPC_T_EOF) && rep.m.eof;
        struct rpc_iter it;
        struct rpc_field f;
        int n = 0;
        rpc_iter_init(&it, rep.buf.data, rep.buf.len);
        while (rpc_iter_next(&it, &f) > 0) {
            struct rpc_msg d;
            if (f.tag != RPC_T_DIRENT)
                continue;
            if (rpc_msg_decode(f.val, f.len, &d, NULL) < 0 || !rpc_has(&d, RPC_T_OFFSET)) {
                bad++;
                continue;
            }
            n++;
            cookie = d.offset;
            if (!S_ISREG(d.mode))
                bad++;
            char name[300];
            rpc_bytes_str(&d.name, name, sizeof(name));
            if (name[0] == 'f') {
                int k = atoi(name + 1);
                if (seen[k]++)
                    dup++;
            }
        }
        if (!n && !eof)
            empty++;
        tb_free(&rep);
        if (empty)
            break;
    }
    c.stop = 1;
    pthread_join(th, NULL);
    CHECK(eof);
    CHECK_EQ(bad, 0);
    CHECK_EQ(dup, 0);
    CHECK_EQ(empty, 0);
    int missing = 0, n_removed = 0;
    for (int i = 0; i < N_FILES; i++) {
        n_removed += removed[i];
        if (!removed[i] && seen[i] != 1)
            missing++;
    }
    CHECK_EQ(missing, 0);
    CHECK(chunks > 100); /* really read in chunks */
    CHECK(c.made > 0);
    printf("readdir: %d chunks, %d added and %d removed meanwhile\n", chunks, c.made, n_removed);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, fh), 0);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, fh), -EBADF);
}

static void test_plus_and_budget(struct tb *t)
{
    CHECK_EQ(tb_mkdir(t, "/small", 0755), 0);
    CHECK_EQ(tb_mkdir(t, "/small/sub", 0700), 0);
    gfid_t g;
    CHECK_EQ(tb_create(t, "/small/file", 0640, NULL, &g), 0);
    struct rpc_msg m = tb_msg("/small");
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_OPENDIR, &m, &rep), 0);
    uint64_t fh = rep.m.fh;
    tb_free(&rep);
    /* a zero budget still returns one entry (progress) */
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    RPC_SET(&m, size, RPC_T_SIZE, 0);
    RPC_SET(&m, flags, RPC_T_FLAGS, 1);
    CHECK_EQ(tb_call(t, RPC_OP_READDIR, &m, &rep), 0);
    CHECK_EQ(rep.m.n_dirent, 1);
    CHECK(!rep.m.eof);
    tb_free(&rep);
    /* the whole listing with attributes */
    RPC_SET(&m, size, RPC_T_SIZE, (uint64_t)-1);
    CHECK_EQ(tb_call(t, RPC_OP_READDIR, &m, &rep), 0);
    CHECK_EQ(rep.m.n_dirent, 2);
    CHECK_EQ(rep.m.eof, 1);
    struct rpc_iter it;
    struct rpc_field f;
    int ok = 0;
    rpc_iter_init(&it, rep.buf.data, rep.buf.len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg d;
        if (f.tag != RPC_T_DIRENT || rpc_msg_decode(f.val, f.len, &d, NULL) < 0)
            continue;
        CHECK(rpc_has(&d, RPC_T_ATTR));
        if (d.name.len == 4 && !memcmp(d.name.p, "file", 4)) {
            ok += gfid_equal(&d.attr.gfid, &g) && d.attr.mode == (S_IFREG | 0640) &&
                  d.mode == S_IFREG;
        } else if (d.name.len == 3) {
            ok += d.mode == S_IFDIR && d.attr.mode == (S_IFDIR | 0700);
        }
    }
    CHECK_EQ(ok, 2);
    tb_free(&rep);
    /* a file handle is not a directory handle */
    uint64_t ffh;
    CHECK_EQ(tb_create(t, "/small/f2", 0644, &ffh, NULL), 0);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, ffh);
    RPC_SET(&m, size, RPC_T_SIZE, 4096);
    CHECK_EQ(tb_do(t, RPC_OP_READDIR, &m), -EBADF);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, ffh), -EBADF);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASE, ffh), 0);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, fh), 0);
}

/* A listing with attributes queues its subdirectories for warming
 * (warm.c), a plain one does not. */
static void test_warms_subdirs(struct tb *t)
{
    CHECK_EQ(tb_mkdir(t, "/w", 0755), 0);
    CHECK_EQ(tb_mkdir(t, "/w/a", 0755), 0);
    CHECK_EQ(tb_mkdir(t, "/w/b", 0755), 0);
    CHECK_EQ(tb_create(t, "/w/f", 0644, NULL, NULL), 0);
    struct rpc_msg m = tb_msg("/w");
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_OPENDIR, &m, &rep), 0);
    uint64_t fh = rep.m.fh;
    tb_free(&rep);
    uint64_t before = brick_warm_settle(t->b);
    for (int plus = 0; plus < 2; plus++) {
        m = tb_msg(NULL);
        RPC_SET(&m, fh, RPC_T_FH, fh);
        RPC_SET(&m, offset, RPC_T_OFFSET, 0);
        RPC_SET(&m, size, RPC_T_SIZE, 65536);
        RPC_SET(&m, flags, RPC_T_FLAGS, (uint64_t)plus);
        CHECK_EQ(tb_call(t, RPC_OP_READDIR, &m, &rep), 0);
        CHECK_EQ(rep.m.n_dirent, 3);
        tb_free(&rep);
        CHECK_EQ(brick_warm_settle(t->b) - before, plus ? 2 : 0);
    }
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, fh), 0);
}

int main(void)
{
    log_init("test", LOG_WARN);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    test_plus_and_budget(&t);
    test_big_dir(&t);
    test_warms_subdirs(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_readdir");
}
