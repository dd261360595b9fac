/* volume import's brick conversion (src/mgmt/import.c) on hand-made
 * GlusterFS bricks: ids, pending marks, times, link files, .glusterfs,
 * orphans and what is refused, a second run, and the link-to files of a
 * distributed volume. Needs root (trusted.* xattrs); skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../src/client/distribute.h"
#include "../../src/mgmt/import.h"
#include "check.h"

static char top[] = "/tmp/cairn-import-XXXXXX";

static const uint8_t VOLID[16] = {0x52, 0x18, 0xd9, 0x6e, 0xfb, 0x5a, 0x42, 0x3b,
                                  0x96, 0x8d, 0x5b, 0x1d, 0xb8, 0x1b, 0x91, 0x79};

static void path(char *out, const char *brick, const char *rel)
{
    snprintf(out, PATH_MAX, "%s/%s/%s", top, brick, rel);
}

static void gfid_of(uint8_t g[16], int n)
{
    memset(g, 0, 16);
    g[0] = 0xab;
    g[15] = (uint8_t)n;
}

/* A GlusterFS object: gfid n (0: none) and its .glusterfs handle. */
static void object(const char *brick, const char *rel, int n)
{
    char p[PATH_MAX];
    path(p, brick, rel);
    if (!n)
        return;
    uint8_t g[16];
    gfid_of(g, n);
    CHECK(lsetxattr(p, "trusted.gfid", g, 16, 0) == 0);
    lsetxattr(p, "trusted.gfid2path.0123456789abcdef", "x/y", 3, 0);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
        char h[PATH_MAX + 64], d[PATH_MAX];
        path(d, brick, ".glusterfs/ab");
        mkdir(d, 0700);
        path(d, brick, ".glusterfs/ab/00");
        mkdir(d, 0700);
        snprintf(h, sizeof(h), "%s/ab000000-0000-0000-0000-0000000000%02x", d, n);
        CHECK(link(p, h) == 0);
    }
}

static void file(const char *brick, const char *rel, const char *data, int n)
{
    char p[PATH_MAX];
    path(p, brick, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, data, strlen(data)) == (ssize_t)strlen(data));
    close(fd);
    object(brick, rel, n);
}

static void dir(const char *brick, const char *rel, int n)
{
    char p[PATH_MAX];
    path(p, brick, rel);
    CHECK(mkdir(p, 0755) == 0);
    object(brick, rel, n);
}

static void afr(const char *brick, const char *rel, const char *name, uint32_t data)
{
    char p[PATH_MAX];
    uint8_t v[12] = {0};
    v[0] = (uint8_t)(data >> 24);
    v[3] = (uint8_t)data;
    path(p, brick, rel);
    CHECK(lsetxattr(p, name, v, 12, 0) == 0);
}

static void brick(const char *b)
{
    char p[PATH_MAX];
    path(p, b, "");
    CHECK(mkdir(p, 0755) == 0);
    CHECK(setxattr(p, "trusted.glusterfs.volume-id", VOLID, 16, 0) == 0);
    uint8_t root[16] = {0};
    root[15] = 1;
    CHECK(setxattr(p, "trusted.gfid", root, 16, 0) == 0);
    path(p, b, ".glusterfs");
    CHECK(mkdir(p, 0700) == 0);
}

static uint32_t pending(const char *b, const char *rel)
{
    char p[PATH_MAX];
    uint8_t v[4];
    path(p, b, rel);
    if (lgetxattr(p, "trusted.cairn.pending", v, 4) != 4)
        return 0;
    return (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
}

static int exists(const char *b, const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    path(p, b, rel);
    return lstat(p, &st) == 0;
}

static int has_xattr(const char *b, const char *rel, const char *x)
{
    char p[PATH_MAX];
    path(p, b, rel);
    return lgetxattr(p, x, NULL, 0) >= 0;
}

static char *slurp(const char *b, const char *rel)
{
    static char text[8192];
    char p[PATH_MAX];
    path(p, b, rel);
    int fd = open(p, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    if (fd >= 0)
        close(fd);
    text[n > 0 ? n : 0] = 0;
    return text;
}

static struct mgmt_import_brick ib_of(const char *b, int index, int replica, int n, int force)
{
    static char p[8][PATH_MAX];
    path(p[index % 8], b, "");
    p[index % 8][strlen(p[index % 8]) - 1] = 0; /* no trailing '/' */
    return (struct mgmt_import_brick){p[index % 8], index, replica, n, force, 0};
}

static void test_convert(void)
{
    brick("b0");
    file("b0", "f", "data of f", 1);
    afr("b0", "f", "trusted.afr.gv-client-1", 1); /* brick 1 missed a write */
    afr("b0", "f", "trusted.afr.gv-client-2", 0); /* all zero: nothing */
    char p[PATH_MAX], h[PATH_MAX];
    path(p, "b0", "f");
    path(h, "b0", "hard");
    CHECK(link(p, h) == 0);
    struct stat before;
    CHECK(stat(p, &before) == 0);
    dir("b0", "d", 2);
    afr("b0", "d", "trusted.afr.dirty", 3);
    /* a DHT link file, and its handle in .glusterfs */
    file("b0", "d/linked", "", 3);
    path(p, "b0", "d/linked");
    CHECK(chmod(p, S_ISVTX) == 0);
    CHECK(lsetxattr(p, "trusted.glusterfs.dht.linkto", "gv-replicate-1", 14, 0) == 0);
    /* GlusterFS's times: mtime 1700000000.5 */
    file("b0", "t", "times", 4);
    uint8_t md[57] = {1};
    uint64_t mt = 1700000000, mn = 500000000, at = 1600000000;
    for (int i = 0; i < 8; i++) {
        md[25 + i] = (uint8_t)(mt >> (56 - 8 * i));
        md[33 + i] = (uint8_t)(mn >> (56 - 8 * i));
        md[41 + i] = (uint8_t)(at >> (56 - 8 * i));
    }
    path(p, "b0", "t");
    CHECK(lsetxattr(p, "trusted.glusterfs.mdata", md, sizeof(md), 0) == 0);
    /* an object without any id, an orphan, an empty anonymous-inode dir */
    file("b0", "noid", "?", 0);
    path(p, "b0", ".glusterfs/ab/00/orphan-gfid");
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0 && write(fd, "lost", 4) == 4);
    close(fd);
    dir("b0", ".glusterfs-anonymous-inode-5218d96e", 0);

    struct mgmt_import_brick ib = ib_of("b0", 0, 3, 3, 0);
    char volid[GFID_STRLEN], err[PATH_MAX + 1024], sum[PATH_MAX + 256];
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_STR(volid, "5218d96e-fb5a-423b-968d-5b1db81b9179");
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK(strstr(sum, "1 link files dropped") != NULL);
    CHECK(strstr(sum, "objects to heal") != NULL);

    uint8_t g[16], want[16];
    path(p, "b0", "f");
    gfid_of(want, 1);
    CHECK(lgetxattr(p, "trusted.cairn.gfid", g, 16) == 16 && memcmp(g, want, 16) == 0);
    path(p, "b0", "");
    uint8_t root[16] = {0};
    root[15] = 1;
    CHECK(lgetxattr(p, "trusted.cairn.gfid", g, 16) == 16 && memcmp(g, root, 16) == 0);
    CHECK_EQ(pending("b0", "f"), 1u << 1);
    CHECK_EQ(pending("b0", "hard"), 1u << 1);
    CHECK_EQ(pending("b0", "d"), 1u << 31);
    CHECK_STR(slurp("b0", ".cairn/index/ab000000-0000-0000-0000-000000000001"), "/f");
    CHECK_STR(slurp("b0", ".cairn/index/ab000000-0000-0000-0000-000000000002"), "/d");
    CHECK(!exists("b0", "d/linked"));
    CHECK(!exists("b0", ".glusterfs"));
    CHECK(!exists("b0", ".glusterfs-anonymous-inode-5218d96e"));
    CHECK(exists("b0", ".cairn/glusterfs-orphans/orphan-gfid"));
    CHECK(exists("b0", "noid") && !has_xattr("b0", "noid", "trusted.cairn.gfid"));
    struct stat st;
    path(p, "b0", "t");
    CHECK(lstat(p, &st) == 0 && st.st_mtim.tv_sec == 1700000000 &&
          st.st_mtim.tv_nsec == 500000000 && st.st_atim.tv_sec == 1600000000);
    path(p, "b0", "f");
    CHECK(stat(p, &st) == 0 && st.st_ino == before.st_ino && st.st_nlink == 2);
    const char *gone[] = {"trusted.gfid", "trusted.afr.gv-client-1", "trusted.afr.gv-client-2",
                          "trusted.gfid2path.0123456789abcdef", "trusted.glusterfs.mdata"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        CHECK(!has_xattr("b0", "f", gone[i]) && !has_xattr("b0", "t", gone[i]));
    CHECK(!has_xattr("b0", "", "trusted.glusterfs.volume-id"));
    char *report = slurp("b0", ".cairn/import-report");
    CHECK(strstr(report, "glusterfs-volume-id=5218d96e-fb5a-423b-968d-5b1db81b9179\n") != NULL);
    CHECK(strstr(report, "link-files-dropped=1\n") != NULL);
    CHECK(strstr(report, "orphans=1\n") != NULL);
    CHECK(strstr(report, "objects-without-id=1\n") != NULL);
    CHECK(strstr(report, "heal /f\n") != NULL);

    /* A second run finds the volume id in the report and changes nothing. */
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_STR(volid, "5218d96e-fb5a-423b-968d-5b1db81b9179");
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK_EQ(pending("b0", "f"), 1u << 1);
    path(p, "b0", "f");
    CHECK(lgetxattr(p, "trusted.cairn.gfid", g, 16) == 16 && memcmp(g, want, 16) == 0);
}

static void test_refusals(void)
{
    char volid[GFID_STRLEN], err[PATH_MAX + 1024], sum[PATH_MAX + 256], p[PATH_MAX];
    /* a mark naming brick 5 of a volume of 3, on brick 1 */
    brick("r1");
    file("r1", "x", "x", 7);
    afr("r1", "x", "trusted.afr.gv-client-5", 1);
    struct mgmt_import_brick ib = ib_of("r1", 1, 3, 3, 0);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0);
    CHECK(strstr(err, "/x (trusted.afr.gv-client-5)") != NULL);
    CHECK(strstr(err, "force") != NULL);
    CHECK(exists("r1", ".glusterfs") && !exists("r1", ".cairn"));
    ib.force = 1; /* then imported as dirty */
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK_EQ(pending("r1", "x"), 1u << 31);
    CHECK(strstr(sum, "(1 unmapped)") != NULL);

    /* a mark of brick 4 in a 2 x 3 volume, on brick 0: another set */
    brick("r2");
    file("r2", "y", "y", 8);
    afr("r2", "y", "trusted.afr.gv-client-4", 1);
    ib = ib_of("r2", 0, 3, 6, 0);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0);
    /* ... while brick 1 of the same set maps (bit 1), and a brick's mark
     * against itself is dirty */
    afr("r2", "y", "trusted.afr.gv-client-4", 0);
    afr("r2", "y", "trusted.afr.gv-client-1", 1);
    afr("r2", "y", "trusted.afr.gv-client-0", 1);
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK_EQ(pending("r2", "y"), (1u << 1) | (1u << 31));

    /* sharded: refused even with force */
    brick("r3");
    dir("r3", ".shard", 9);
    ib = ib_of("r3", 0, 3, 3, 1);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0 && strstr(err, "shard"));
    /* dispersed */
    brick("r4");
    file("r4", "z", "z", 10);
    path(p, "r4", "z");
    CHECK(lsetxattr(p, "trusted.ec.version", "12345678", 8, 0) == 0);
    ib = ib_of("r4", 0, 3, 3, 1);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0 && strstr(err, "dispersed"));
    /* not a GlusterFS brick */
    path(p, "r5", "");
    CHECK(mkdir(p, 0755) == 0);
    ib = ib_of("r5", 0, 3, 3, 1);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0 &&
          strstr(err, "not a GlusterFS brick"));
    /* an unfinished entry heal: refused without force, kept aside with it */
    brick("r6");
    dir("r6", ".glusterfs-anonymous-inode-1", 0);
    file("r6", ".glusterfs-anonymous-inode-1/pending", "p", 11);
    ib = ib_of("r6", 0, 3, 3, 0);
    CHECK(mgmt_import_check(&ib, volid, err, sizeof(err)) < 0 &&
          strstr(err, "unfinished GlusterFS entry heal"));
    ib.force = 1;
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK(exists("r6", ".cairn/.glusterfs-anonymous-inode-1/pending"));
    /* keep-glusterfs */
    brick("r7");
    file("r7", "k", "k", 12);
    ib = ib_of("r7", 0, 3, 3, 0);
    ib.keep = 1;
    CHECK_EQ(mgmt_import_check(&ib, volid, err, sizeof(err)), 0);
    CHECK_EQ(mgmt_import_convert(&ib, volid, sum, sizeof(sum), err, sizeof(err)), 0);
    CHECK(!exists("r7", ".glusterfs") && exists("r7", ".cairn/glusterfs/ab/00"));
}

/* The steps run here, as a server runs them for its own bricks. */
static int run_here(void *arg, int brick, int argc, const char *const *argv, char **text)
{
    (void)arg;
    (void)brick;
    return mgmt_import_cmd(argc, argv, text);
}

/* Two single-brick subvolumes: every name on brick 0 that Cairn hashes to
 * subvolume 1 gets a link-to there, and the other way round. */
static void test_place(void)
{
    brick("p0");
    brick("p1");
    dir("p0", "d", 20);
    dir("p1", "d", 20);
    int want = 0;
    struct cl_dht_layout l;
    cl_dht_layout_default(2, &l);
    for (int i = 0; i < 40; i++) {
        char name[32], rel[40];
        snprintf(name, sizeof(name), "n%d", i);
        snprintf(rel, sizeof(rel), "d/%s", name);
        const char *b = i % 2 ? "p1" : "p0";
        file(b, rel, "data", 0);
        want += cl_dht_layout_pick(&l, cl_dht_hash(name, strlen(name))) != (i % 2);
    }
    char p0[PATH_MAX], p1[PATH_MAX], err[PATH_MAX + 1024];
    path(p0, "p0", "");
    path(p1, "p1", "");
    p0[strlen(p0) - 1] = p1[strlen(p1) - 1] = 0;
    char *paths[] = {p0, p1};
    unsigned long made = 0;
    CHECK_EQ(mgmt_import_place(paths, 2, 1, run_here, NULL, &made, err, sizeof(err)), 0);
    CHECK_EQ(made, want);
    CHECK(want > 5);
    for (int i = 0; i < 40; i++) {
        char name[32], rel[40], p[PATH_MAX], v[8];
        snprintf(name, sizeof(name), "n%d", i);
        snprintf(rel, sizeof(rel), "d/%s", name);
        int holder = i % 2, h = cl_dht_layout_pick(&l, cl_dht_hash(name, strlen(name)));
        const char *other = holder ? "p0" : "p1";
        if (h == holder) {
            CHECK(!exists(other, rel));
            continue;
        }
        path(p, other, rel);
        struct stat st;
        ssize_t n = lgetxattr(p, "trusted.cairn.linkto", v, sizeof(v));
        CHECK(lstat(p, &st) == 0 && (st.st_mode & 07777) == S_ISVTX && st.st_size == 0);
        CHECK(n == 1 && v[0] == '0' + holder);
        uint8_t g[16];
        CHECK(lgetxattr(p, "trusted.cairn.gfid", g, sizeof(g)) == 16);
    }
    /* run again: nothing new */
    CHECK_EQ(mgmt_import_place(paths, 2, 1, run_here, NULL, &made, err, sizeof(err)), 0);
    CHECK_EQ(made, 0);
}

/* 2 x 2: every copy of a set is walked (a file only one copy has is
 * linked too), both copies of the target set get one id, a name on two
 * sets is left alone, and a second run changes nothing. */
static void test_place_replicated(void)
{
    static const char *const b[] = {"q0", "q1", "q2", "q3"};
    struct cl_dht_layout l;
    cl_dht_layout_default(2, &l);
    const char *to1 = NULL, *to1b = NULL;
    static char names[64][16];
    int n = 0;
    for (int i = 0; i < 64 && (!to1 || !to1b); i++) {
        snprintf(names[n], sizeof(names[n]), "m%d", i);
        if (cl_dht_layout_pick(&l, cl_dht_hash(names[n], strlen(names[n]))) == 1) {
            if (!to1)
                to1 = names[n];
            else
                to1b = names[n];
        }
        n++;
    }
    CHECK(to1 && to1b);
    for (int i = 0; i < 4; i++) {
        brick(b[i]);
        dir(b[i], "d", 30);
    }
    char rel[64], rel2[64];
    snprintf(rel, sizeof(rel), "d/%s", to1);
    snprintf(rel2, sizeof(rel2), "d/%s", to1b);
    file("q1", rel, "only on the second copy", 31); /* q0 missed it */
    file("q0", rel2, "on set 0", 32);
    file("q1", rel2, "on set 0", 32);
    file("q2", rel2, "and on set 1", 33); /* on two sets */
    char p[4][PATH_MAX], err[PATH_MAX + 1024];
    char *paths[4];
    for (int i = 0; i < 4; i++) {
        path(p[i], b[i], "");
        p[i][strlen(p[i]) - 1] = 0;
        paths[i] = p[i];
    }
    unsigned long made = 0;
    CHECK_EQ(mgmt_import_place(paths, 4, 2, run_here, NULL, &made, err, sizeof(err)), 0);
    CHECK_EQ(made, 1);
    uint8_t g2[16], g3[16];
    char a[PATH_MAX], c[PATH_MAX], v[8];
    path(a, "q2", rel);
    path(c, "q3", rel);
    CHECK(lgetxattr(a, "trusted.cairn.gfid", g2, 16) == 16);
    CHECK(lgetxattr(c, "trusted.cairn.gfid", g3, 16) == 16 && memcmp(g2, g3, 16) == 0);
    CHECK(lgetxattr(c, "trusted.cairn.linkto", v, sizeof(v)) == 1 && v[0] == '0');
    CHECK(!exists("q3", rel2)); /* left alone: no link-to beside the other copy */
    CHECK(!has_xattr("q2", rel2, "trusted.cairn.linkto"));
    CHECK(!exists("q0", ".cairn/import-names") && !exists("q3", ".cairn/import-names"));
    CHECK(!exists("q3", ".cairn/import-linkto.tmp"));
    /* cut short: a copy without its link-to is finished with the same id */
    CHECK(unlink(c) == 0);
    CHECK_EQ(mgmt_import_place(paths, 4, 2, run_here, NULL, &made, err, sizeof(err)), 0);
    CHECK_EQ(made, 1);
    CHECK(lgetxattr(c, "trusted.cairn.gfid", g3, 16) == 16 && memcmp(g2, g3, 16) == 0);
    CHECK_EQ(mgmt_import_place(paths, 4, 2, run_here, NULL, &made, err, sizeof(err)), 0);
    CHECK_EQ(made, 0);
    /* a step refuses a line for another set */
    char *text = NULL;
    const char *argv[] = {"place-make", "0", "2", p[0],
                          "1 0 6ba7b810-9dad-41d1-80b4-00c04fd430c8 /d/x\n"};
    CHECK(mgmt_import_cmd(5, argv, &text) == -EPROTO && text && strstr(text, "line 1"));
    free(text);
}

static void test_line_parse(void)
{
    struct mgmt_import_line l;
    const char *id = "6ba7b810-9dad-41d1-80b4-00c04fd430c8";
    char ok[128];
    snprintf(ok, sizeof(ok), "1 0 %s /a/b\\nc\\\\d", id);
    CHECK_EQ(mgmt_import_line_parse(ok, strlen(ok), 2, &l), 0);
    CHECK(l.to == 1 && l.at == 0 && strcmp(l.path, "/a/b\nc\\d") == 0);
    static const char *const bad[] = {
        "2 0 %s /a",  "1 1 %s /a",    "01 0 %s /a",       "1 0 %s a",     "1 0 %s /a/../b",
        "1 0 %s /",   "1 0 %s /a//b", "1 0 %s /.cairn/x", "1 0 %s /a\\x", "1 0 %s /a\\",
        "1 0 %s /a/", "1  0 %s /a",   "1 0 %s",           "-1 0 %s /a",   "1 0 %s /.glusterfs",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char line[128];
        snprintf(line, sizeof(line), bad[i], id);
        CHECK_EQ(mgmt_import_line_parse(line, strlen(line), 2, &l), -EPROTO);
    }
    CHECK_EQ(mgmt_import_line_parse("1 0 xyz /a", 10, 2, &l), -EPROTO);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("test_mgmt_import: skipped (needs root for trusted.* xattrs)\n");
        return 0;
    }
    if (!mkdtemp(top)) {
        perror("mkdtemp");
        return 1;
    }
    test_convert();
    test_refusals();
    test_place();
    test_place_replicated();
    test_line_parse();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", top);
    return check_summary("test_mgmt_import");
}
