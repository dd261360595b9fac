/* The brick's cache of open parent directories (dircache.c): a request must
 * never reach a directory through a name it no longer has, after renames,
 * exchanges, rmdir and re-creation, past the cache's size bound, and with
 * requests racing with renames. */
#include <dirent.h>

#include "test_brick_util.h"

static int rename_flags(struct tb *t, const char *from, const char *to, unsigned flags)
{
    struct rpc_msg m = tb_msg(from);
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, to);
    if (flags)
        RPC_SET(&m, flags, RPC_T_FLAGS, flags);
    return tb_do(t, RPC_OP_RENAME, &m);
}

/* CREATE then RELEASE. */
static int make_file(struct tb *t, const char *path)
{
    uint64_t fh;
    int rc = tb_create(t, path, 0644, &fh, NULL);
    if (rc == 0)
        tb_fh_op(t, RPC_OP_RELEASE, fh);
    return rc;
}

/* Whether path exists on the brick's disk (relative to its root). */
static int on_disk(struct tb *t, const char *rel)
{
    char p[600];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", t->dir, rel);
    return lstat(p, &st) == 0;
}

static void test_rename_moves_cached_parent(void)
{
    struct tb t;
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/a", 0755), 0);
    CHECK_EQ(tb_mkdir(&t, "/a/b", 0755), 0);
    CHECK_EQ(make_file(&t, "/a/b/f1"), 0); /* caches "a" and "a/b" */
    CHECK_EQ(rename_flags(&t, "/a", "/x", 0), 0);
    /* The old names are gone: nothing may land in the moved directory. */
    CHECK_EQ(make_file(&t, "/a/b/f2"), -ENOENT);
    CHECK_EQ(tb_lookup(&t, "/a/b/f1", NULL), -ENOENT);
    CHECK_EQ(tb_lookup(&t, "/x/b/f1", NULL), 0);
    CHECK(!on_disk(&t, "x/b/f2"));
    /* A new directory under the old name is a different one. */
    CHECK_EQ(tb_mkdir(&t, "/a", 0755), 0);
    CHECK_EQ(tb_mkdir(&t, "/a/b", 0755), 0);
    CHECK_EQ(make_file(&t, "/a/b/f3"), 0);
    CHECK(on_disk(&t, "a/b/f3"));
    CHECK(!on_disk(&t, "x/b/f3"));
    /* Renaming the inner directory alone. */
    CHECK_EQ(rename_flags(&t, "/x/b", "/x/c", 0), 0);
    CHECK_EQ(make_file(&t, "/x/b/f4"), -ENOENT);
    CHECK_EQ(make_file(&t, "/x/c/f4"), 0);
    CHECK(on_disk(&t, "x/c/f4"));
    tb_close(&t, 1);
}

static void test_exchange_and_replace(void)
{
    struct tb t;
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/p", 0755), 0);
    CHECK_EQ(tb_mkdir(&t, "/q", 0755), 0);
    CHECK_EQ(make_file(&t, "/p/in_p"), 0);
    CHECK_EQ(make_file(&t, "/q/in_q"), 0);
    CHECK_EQ(rename_flags(&t, "/p", "/q", RENAME_EXCHANGE), 0);
    CHECK_EQ(make_file(&t, "/p/new"), 0);
    CHECK(on_disk(&t, "p/in_q") && on_disk(&t, "p/new") && !on_disk(&t, "q/new"));
    CHECK_EQ(tb_lookup(&t, "/q/in_p", NULL), 0);
    /* Rename over an empty directory replaces it. */
    CHECK_EQ(tb_mkdir(&t, "/e", 0755), 0);
    CHECK_EQ(make_file(&t, "/e/tmp"), 0);
    CHECK_EQ(tb_dop(&t, RPC_OP_UNLINK, "/e/tmp"), 0);
    CHECK_EQ(rename_flags(&t, "/q", "/e", 0), 0);
    CHECK_EQ(make_file(&t, "/e/after"), 0);
    CHECK(on_disk(&t, "e/in_p") && on_disk(&t, "e/after"));
    tb_close(&t, 1);
}

static void test_rmdir_and_recreate(void)
{
    struct tb t;
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/d", 0755), 0);
    CHECK_EQ(tb_mkdir(&t, "/d/e", 0755), 0);
    CHECK_EQ(make_file(&t, "/d/e/f"), 0);
    CHECK_EQ(tb_dop(&t, RPC_OP_UNLINK, "/d/e/f"), 0);
    CHECK_EQ(tb_dop(&t, RPC_OP_RMDIR, "/d/e"), 0);
    CHECK_EQ(make_file(&t, "/d/e/g"), -ENOENT);
    CHECK_EQ(tb_mkdir(&t, "/d/e", 0755), 0);
    CHECK_EQ(make_file(&t, "/d/e/g"), 0);
    CHECK(on_disk(&t, "d/e/g"));
    tb_close(&t, 1);
}

/* More directories than the cache holds, visited twice. */
static void test_many_directories(void)
{
    struct tb t;
    char p[64];
    CHECK_EQ(tb_open(&t, NULL), 0);
    int ok = 1;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 600; i++) {
            snprintf(p, sizeof(p), "/m%d", i);
            if (round == 0 && tb_mkdir(&t, p, 0755) != 0)
                ok = 0;
            snprintf(p, sizeof(p), "/m%d/f%d", i, round);
            if (make_file(&t, p) != 0)
                ok = 0;
        }
    }
    CHECK(ok);
    CHECK(on_disk(&t, "m0/f1") && on_disk(&t, "m599/f0"));
    tb_close(&t, 1);
}

/* Creates racing with renames of their parent: every file must end up in
 * the directory that had the requested name at some moment, never in a
 * directory through a stale name after the rename was answered. */
struct race {
    struct tb *t;
    int stop;
    int created;
};

static void *creator_main(void *arg)
{
    struct race *r = arg;
    char p[64];
    for (int i = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
        snprintf(p, sizeof(p), "/r/s/f%d", i);
        if (make_file(r->t, p) == 0)
            __atomic_add_fetch(&r->created, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_race_with_renames(void)
{
    struct tb t;
    CHECK_EQ(tb_open(&t, NULL), 0);
    CHECK_EQ(tb_mkdir(&t, "/r", 0755), 0);
    CHECK_EQ(tb_mkdir(&t, "/r/s", 0755), 0);
    struct race r = {.t = &t};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, creator_main, &r);
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        char to[64];
        snprintf(to, sizeof(to), "/old%d", i);
        if (rename_flags(&t, "/r", to, 0) != 0)
            bad++;
        /* Once the rename is answered, no create may go through the old
         * name: it does not exist now. */
        if (make_file(&t, "/r/s/probe") != -ENOENT)
            bad++;
        if (tb_mkdir(&t, "/r", 0755) != 0 || tb_mkdir(&t, "/r/s", 0755) != 0)
            bad++;
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(bad, 0);
    CHECK(r.created > 0);
    tb_close(&t, 1);
}

int main(void)
{
    log_init("test_brick_dircache", LOG_WARN);
    test_rename_moves_cached_parent();
    test_exchange_and_replace();
    test_rmdir_and_recreate();
    test_many_directories();
    test_race_with_renames();
    return check_summary("test_brick_dircache");
}
