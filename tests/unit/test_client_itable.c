/* The client inode table: lookup counts, forget, paths across renames,
 * hard links, unlink of open files. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/client/itable.h"
#include "check.h"

static gfid_t mkgfid(int n)
{
    gfid_t g;
    memset(&g, 0, sizeof(g));
    g.b[0] = 0xaa;
    g.b[15] = (uint8_t)n;
    g.b[14] = (uint8_t)(n >> 8);
    return g;
}

static const char *path_of(struct cl_itable *t, uint64_t id, const char *name)
{
    static char buf[4096];
    int rc = cl_itable_path(t, id, name, buf, sizeof(buf));
    return rc < 0 ? "(err)" : buf;
}

static void test_open_handles(void)
{
    struct cl_itable *t = cl_itable_new();
    gfid_t g;
    int err;
    uint64_t fh = 0;
    gfid_generate(&g);
    uint64_t id = cl_itable_link(t, CL_ROOT_ID, "f", &g, 0, &err);
    CHECK_EQ(cl_itable_any_fh(t, id, &fh), -ENOENT);
    CHECK_EQ(cl_itable_open_fh(t, id, 7), 0);
    CHECK_EQ(cl_itable_open_fh(t, id, 9), 0);
    CHECK_EQ(cl_itable_open_fh(t, id, 11), 0);
    cl_itable_unlink(t, CL_ROOT_ID, "f");
    char path[64];
    CHECK_EQ(cl_itable_path(t, id, NULL, path, sizeof(path)), -ENOENT);
    CHECK_EQ(cl_itable_any_fh(t, id, &fh), 0);
    CHECK(fh == 7 || fh == 9 || fh == 11);
    cl_itable_close_fh(t, id, 11);
    cl_itable_close_fh(t, id, 7);
    CHECK_EQ(cl_itable_any_fh(t, id, &fh), 0);
    CHECK_EQ(fh, 9);
    cl_itable_close_fh(t, id, 9);
    CHECK_EQ(cl_itable_any_fh(t, id, &fh), -ENOENT);
    CHECK_EQ(cl_itable_open_fh(t, 424242, 1), -ENOENT);
    cl_itable_forget(t, id, 1);
    cl_itable_free(t);
}

/* A held node keeps its id and path after the kernel forgets it, and a
 * new lookup of the same object gets the same id. */
static void test_hold(void)
{
    struct cl_itable *t = cl_itable_new();
    gfid_t g = mkgfid(77);
    int err;
    uint64_t d = cl_itable_link(t, CL_ROOT_ID, "d", &g, 0, &err);
    CHECK_EQ(cl_itable_hold(t, d), 0);
    cl_itable_forget(t, d, 1); /* the kernel's lookup */
    CHECK_EQ(cl_itable_resolve(t, "/d"), d);
    CHECK_STR(path_of(t, d, "x"), "/d/x");
    CHECK_EQ(cl_itable_link(t, CL_ROOT_ID, "d", &g, 0, &err), d);
    cl_itable_forget(t, d, 1);
    cl_itable_forget(t, d, 1); /* the hold */
    CHECK_EQ(cl_itable_resolve(t, "/d"), 0);
    CHECK_EQ(cl_itable_count(t), 1);
    CHECK_EQ(cl_itable_hold(t, 424242), -ENOENT);
    cl_itable_free(t);
}

/* What a node is follows it through renames; unknown nodes are unknown. */
static void test_kind(void)
{
    struct cl_itable *t = cl_itable_new();
    gfid_t gd = mkgfid(90), gf = mkgfid(91);
    int err;
    gfid_t gl = mkgfid(92);
    uint64_t d = cl_itable_link(t, CL_ROOT_ID, "d", &gd, S_IFDIR, &err);
    uint64_t f = cl_itable_link(t, d, "f", &gf, S_IFREG, &err);
    uint64_t l = cl_itable_link(t, d, "l", &gl, 0, &err);
    CHECK_EQ(cl_itable_is_dir(t, d), 1);
    CHECK_EQ(cl_itable_is_dir(t, f), 0);
    CHECK_EQ(cl_itable_is_dir(t, l), 0);
    CHECK_EQ(cl_itable_type(t, d), S_IFDIR);
    CHECK_EQ(cl_itable_type(t, f), S_IFREG);
    CHECK_EQ(cl_itable_type(t, l), 0); /* not a directory, type unknown */
    /* a later link that does not know the type keeps the one known */
    CHECK_EQ(cl_itable_link(t, d, "f", &gf, 0, &err), f);
    CHECK_EQ(cl_itable_type(t, f), S_IFREG);
    cl_itable_rename(t, d, "f", CL_ROOT_ID, "g", 0);
    uint64_t g = cl_itable_child(t, CL_ROOT_ID, "g");
    CHECK_EQ(cl_itable_is_dir(t, g), 0);
    CHECK_EQ(cl_itable_type(t, g), S_IFREG);
    CHECK_EQ(cl_itable_is_dir(t, 424242), -1);
    CHECK_EQ(cl_itable_type(t, 424242), 0);
    cl_itable_free(t);
}

/* cl_itable_path_len measures what cl_itable_path makes, up to paths of
 * 4,095 bytes and past them (the bridge refuses those names). */
static void test_path_len(void)
{
    struct cl_itable *t = cl_itable_new();
    int err;
    char name[256];
    CHECK_EQ(cl_itable_path_len(t, CL_ROOT_ID, NULL), 1);
    CHECK_EQ(cl_itable_path_len(t, CL_ROOT_ID, "ab"), 3);
    CHECK_EQ(cl_itable_path_len(t, 999, NULL), -ENOENT);
    /* 19 directories of 200 bytes and one of 174: a path of 3,994 bytes */
    uint64_t dir = CL_ROOT_ID;
    for (int i = 0; i < 20; i++) {
        size_t n = i < 19 ? 200 : 174;
        memset(name, 'a' + i, n);
        name[n] = 0;
        gfid_t g = mkgfid(1000 + i);
        dir = cl_itable_link(t, dir, name, &g, S_IFDIR, &err);
        CHECK(dir != 0);
    }
    CHECK_EQ(cl_itable_path_len(t, dir, NULL), 3994);
    static char buf[8192];
    memset(name, 'z', 100);
    name[100] = 0; /* 3994 + 1 + 100 = 4095: the longest */
    CHECK_EQ(cl_itable_path_len(t, dir, name), 4095);
    CHECK_EQ(cl_itable_path(t, dir, name, buf, 4096), 0);
    CHECK_EQ(strlen(buf), 4095);
    name[100] = 'z';
    name[101] = 0;
    CHECK_EQ(cl_itable_path_len(t, dir, name), 4096);
    CHECK_EQ(cl_itable_path(t, dir, name, buf, 4096), -ENAMETOOLONG);
    CHECK_EQ(cl_itable_path(t, dir, name, buf, sizeof(buf)), 0);
    CHECK_EQ(strlen(buf), 4096);
    cl_itable_free(t);
}

/* A file's names are its hard links: removing, renaming or replacing one
 * leaves the others, and the file keeps its node id and a path. */
static void test_hard_links(void)
{
    struct cl_itable *t = cl_itable_new();
    gfid_t gd = mkgfid(200), gd2 = mkgfid(201), gf = mkgfid(202), gz = mkgfid(203);
    int err;
    uint64_t d = cl_itable_link(t, CL_ROOT_ID, "d", &gd, S_IFDIR, &err);
    uint64_t g = cl_itable_link(t, d, "g", &gf, S_IFREG, &err);
    CHECK_EQ(cl_itable_nlink(t, g), 0); /* no reply said */
    cl_itable_set_nlink(t, g, 1);
    CHECK_EQ(cl_itable_nlink(t, g), 1);
    /* link g h: the reply names h, paths go through it */
    CHECK_EQ(cl_itable_link(t, d, "h", &gf, S_IFREG, &err), g);
    CHECK_EQ(cl_itable_nlink(t, g), 2); /* two names, whatever the last reply said */
    CHECK_STR(path_of(t, g, NULL), "/d/h");
    CHECK_EQ(cl_itable_child(t, d, "g"), g);
    CHECK_EQ(cl_itable_child(t, d, "h"), g);
    CHECK_EQ(cl_itable_resolve(t, "/d/g"), g);
    struct cl_itable_name *v;
    size_t n = cl_itable_names(t, d, &v);
    CHECK_EQ(n, 2);
    cl_itable_names_free(v, n);
    /* unlink h: g stays, with its path */
    cl_itable_unlink(t, d, "h");
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    CHECK_EQ(cl_itable_child(t, d, "h"), 0);
    /* a lookup of g again: no new name */
    CHECK_EQ(cl_itable_link(t, d, "g", &gf, S_IFREG, &err), g);
    n = cl_itable_names(t, d, &v);
    CHECK_EQ(n, 1);
    cl_itable_names_free(v, n);

    /* three names, two removed */
    CHECK_EQ(cl_itable_link(t, d, "h", &gf, S_IFREG, &err), g);
    CHECK_EQ(cl_itable_link(t, d, "i", &gf, S_IFREG, &err), g);
    cl_itable_unlink(t, d, "i");
    CHECK_STR(path_of(t, g, NULL), "/d/h");
    cl_itable_unlink(t, d, "h");
    CHECK_STR(path_of(t, g, NULL), "/d/g");

    /* rename z over x, x a name of g (g, x): g keeps its name g */
    CHECK_EQ(cl_itable_link(t, d, "x", &gf, S_IFREG, &err), g);
    uint64_t z = cl_itable_link(t, d, "z", &gz, S_IFREG, &err);
    cl_itable_rename(t, d, "z", d, "x", 0);
    CHECK_EQ(cl_itable_child(t, d, "x"), z);
    CHECK_EQ(cl_itable_child(t, d, "z"), 0);
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    CHECK_STR(path_of(t, z, NULL), "/d/x");

    /* rename of a link: the other name stays; two names of one file:
     * nothing moves */
    CHECK_EQ(cl_itable_link(t, d, "h", &gf, S_IFREG, &err), g);
    cl_itable_rename(t, d, "h", d, "k", 0);
    CHECK_EQ(cl_itable_child(t, d, "k"), g);
    CHECK_EQ(cl_itable_child(t, d, "g"), g);
    CHECK_EQ(cl_itable_child(t, d, "h"), 0);
    cl_itable_rename(t, d, "k", d, "g", 0);
    CHECK_EQ(cl_itable_child(t, d, "k"), g);
    CHECK_EQ(cl_itable_child(t, d, "g"), g);

    /* a name another client removed: dropped while the file has others,
     * kept when it is the only one, and a directory's always */
    CHECK_EQ(cl_itable_forget_alias(t, d, "k"), 1);
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    CHECK_EQ(cl_itable_forget_alias(t, d, "g"), 0);
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    CHECK_EQ(cl_itable_forget_alias(t, CL_ROOT_ID, "d"), 0);
    CHECK_EQ(cl_itable_forget_alias(t, d, "nosuch"), 0);
    /* a request by the path of a name removed elsewhere failed: paths
     * take the file's other name when that one is still the one they use;
     * the name stays known, and a lookup of it puts it first again */
    CHECK_EQ(cl_itable_link(t, d, "k", &gf, S_IFREG, &err), g);
    CHECK_EQ(cl_itable_demote_path(t, g, "/d/g"), 0); /* not the path used */
    CHECK_EQ(cl_itable_demote_path(t, g, "/d/k"), 1);
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    CHECK_EQ(cl_itable_child(t, d, "k"), g);
    CHECK_EQ(cl_itable_demote_path(t, g, "/d/g"), 1);
    CHECK_STR(path_of(t, g, NULL), "/d/k");
    CHECK_EQ(cl_itable_link(t, d, "g", &gf, S_IFREG, &err), g);
    CHECK_STR(path_of(t, g, NULL), "/d/g");
    cl_itable_unlink(t, d, "k");
    CHECK_EQ(cl_itable_demote_path(t, g, "/d/g"), 0); /* its only name */
    CHECK_EQ(cl_itable_demote_path(t, d, "/d"), 0);

    /* names in two directories; the directories, forgotten by the kernel,
     * live while the file does, and go with it */
    uint64_t d2 = cl_itable_link(t, CL_ROOT_ID, "d2", &gd2, S_IFDIR, &err);
    CHECK_EQ(cl_itable_link(t, d2, "h", &gf, S_IFREG, &err), g);
    CHECK_STR(path_of(t, g, NULL), "/d2/h");
    cl_itable_forget(t, d, 1);
    cl_itable_forget(t, d2, 1);
    CHECK_EQ(cl_itable_resolve(t, "/d/g"), g);
    CHECK_EQ(cl_itable_resolve(t, "/d2/h"), g);
    cl_itable_forget(t, z, 1);
    cl_itable_forget(t, g, 1000); /* every lookup counted above */
    CHECK_EQ(cl_itable_count(t), 1);
    CHECK_EQ(cl_itable_resolve(t, "/d"), 0);

    /* a directory has one name: another client renamed it */
    uint64_t e = cl_itable_link(t, CL_ROOT_ID, "e", &gd, S_IFDIR, &err);
    CHECK_EQ(cl_itable_link(t, CL_ROOT_ID, "e2", &gd, S_IFDIR, &err), e);
    CHECK_EQ(cl_itable_child(t, CL_ROOT_ID, "e"), 0);
    CHECK_STR(path_of(t, e, NULL), "/e2");
    cl_itable_free(t);
}

int main(void)
{
    test_open_handles();
    test_path_len();
    test_hard_links();
    test_hold();
    test_kind();
    struct cl_itable *t = cl_itable_new();
    CHECK(t != NULL);
    int err;
    CHECK_STR(path_of(t, CL_ROOT_ID, NULL), "/");
    CHECK_STR(path_of(t, CL_ROOT_ID, "x"), "/x");

    /* lookup counting: same gfid twice -> same id, freed after both forgets */
    gfid_t ga = mkgfid(1), gb = mkgfid(2), gc = mkgfid(3), gd = mkgfid(4);
    uint64_t a = cl_itable_link(t, CL_ROOT_ID, "a", &ga, 0, &err);
    CHECK(a > CL_ROOT_ID);
    CHECK_EQ(cl_itable_link(t, CL_ROOT_ID, "a", &ga, 0, &err), a);
    CHECK_EQ(cl_itable_count(t), 2);
    cl_itable_forget(t, a, 1);
    CHECK_STR(path_of(t, a, NULL), "/a");
    cl_itable_forget(t, a, 1);
    CHECK_EQ(cl_itable_count(t), 1);
    CHECK_EQ(cl_itable_path(t, a, NULL, (char[8]){0}, 8), -ENOENT);

    /* a subtree: /d/e/f; a child keeps its forgotten parent alive */
    uint64_t d = cl_itable_link(t, CL_ROOT_ID, "d", &ga, 0, &err);
    uint64_t e = cl_itable_link(t, d, "e", &gb, 0, &err);
    uint64_t f = cl_itable_link(t, e, "f", &gc, 0, &err);
    CHECK_STR(path_of(t, f, NULL), "/d/e/f");
    CHECK_STR(path_of(t, f, "g"), "/d/e/f/g");
    cl_itable_forget(t, d, 1);
    cl_itable_forget(t, e, 1);
    CHECK_EQ(cl_itable_count(t), 4);
    CHECK_STR(path_of(t, f, NULL), "/d/e/f");

    /* rename of a directory moves the subtree */
    cl_itable_rename(t, CL_ROOT_ID, "d", CL_ROOT_ID, "D", 0);
    CHECK_STR(path_of(t, f, NULL), "/D/e/f");
    uint64_t x = cl_itable_link(t, CL_ROOT_ID, "x", &gd, 0, &err);
    cl_itable_rename(t, d, "e", x, "E", 0);
    CHECK_STR(path_of(t, f, NULL), "/x/E/f");
    /* d lost its only child and was forgotten: freed */
    CHECK_EQ(cl_itable_count(t), 4);
    CHECK_EQ(cl_itable_child(t, CL_ROOT_ID, "D"), 0);

    /* rename over an existing name detaches the target */
    gfid_t g5 = mkgfid(5), g6 = mkgfid(6);
    uint64_t p = cl_itable_link(t, CL_ROOT_ID, "p", &g5, 0, &err);
    uint64_t q = cl_itable_link(t, CL_ROOT_ID, "q", &g6, 0, &err);
    cl_itable_rename(t, CL_ROOT_ID, "p", CL_ROOT_ID, "q", 0);
    CHECK_STR(path_of(t, p, NULL), "/q");
    CHECK_EQ(cl_itable_path(t, q, NULL, (char[64]){0}, 64), -ENOENT);
    CHECK_EQ(cl_itable_child(t, CL_ROOT_ID, "q"), p);
    cl_itable_forget(t, q, 1); /* freed now */
    CHECK_EQ(cl_itable_path(t, q, NULL, (char[64]){0}, 64), -ENOENT);

    /* exchange swaps */
    gfid_t g7 = mkgfid(7);
    uint64_t r = cl_itable_link(t, x, "r", &g7, 0, &err);
    cl_itable_rename(t, CL_ROOT_ID, "q", x, "r", 1);
    CHECK_STR(path_of(t, p, NULL), "/x/r");
    CHECK_STR(path_of(t, r, NULL), "/q");

    /* hard links: one node id, paths through the latest name; unlink of
     * the other name keeps it (test_hard_links has more) */
    gfid_t g8 = mkgfid(8);
    uint64_t h1 = cl_itable_link(t, CL_ROOT_ID, "h1", &g8, 0, &err);
    uint64_t h2 = cl_itable_link(t, x, "h2", &g8, 0, &err);
    CHECK_EQ(h1, h2);
    CHECK_STR(path_of(t, h1, NULL), "/x/h2");
    cl_itable_unlink(t, CL_ROOT_ID, "h1"); /* not the name paths use: no change */
    CHECK_STR(path_of(t, h1, NULL), "/x/h2");
    cl_itable_unlink(t, x, "h2");
    CHECK_EQ(cl_itable_path(t, h1, NULL, (char[64]){0}, 64), -ENOENT);
    gfid_t gg;
    CHECK_EQ(cl_itable_gfid(t, h1, &gg), 0); /* still known until forgotten */
    CHECK(gfid_equal(&gg, &g8));
    cl_itable_forget(t, h1, 2);
    CHECK_EQ(cl_itable_gfid(t, h1, &gg), -ENOENT);

    /* a name reused by another object */
    gfid_t g9 = mkgfid(9);
    uint64_t n1 = cl_itable_link(t, CL_ROOT_ID, "n", &g9, 0, &err);
    gfid_t g10 = mkgfid(10);
    uint64_t n2 = cl_itable_link(t, CL_ROOT_ID, "n", &g10, 0, &err);
    CHECK(n1 != n2);
    CHECK_EQ(cl_itable_child(t, CL_ROOT_ID, "n"), n2);
    CHECK_EQ(cl_itable_path(t, n1, NULL, (char[64]){0}, 64), -ENOENT);

    /* unknown parent, too long a path */
    CHECK_EQ(cl_itable_link(t, 999999, "z", &g9, 0, &err), 0);
    CHECK_EQ(err, -ENOENT);
    char small[4];
    CHECK_EQ(cl_itable_path(t, f, NULL, small, sizeof(small)), -ENAMETOOLONG);

    /* many entries: growth keeps every one findable */
    uint64_t ids[5000];
    char nm[32];
    for (int i = 0; i < 5000; i++) {
        gfid_t g = mkgfid(1000 + i);
        g.b[1] = 1;
        snprintf(nm, sizeof(nm), "f%d", i);
        ids[i] = cl_itable_link(t, x, nm, &g, 0, &err);
    }
    int ok = 1;
    for (int i = 0; i < 5000; i++) {
        snprintf(nm, sizeof(nm), "/x/f%d", i);
        ok &= strcmp(path_of(t, ids[i], NULL), nm) == 0;
    }
    CHECK(ok);
    size_t before = cl_itable_count(t);
    for (int i = 0; i < 5000; i++)
        cl_itable_forget(t, ids[i], 1);
    CHECK_EQ(cl_itable_count(t), before - 5000);

    cl_itable_free(t);
    return check_summary("test_client_itable");
}
