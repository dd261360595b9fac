/* Volume paths up to RPC_PATH_MAX - 1 bytes on a brick whose own path is
 * long: every request works, and a change some replica misses is indexed
 * for heal under the object's whole volume path (also when it comes
 * through a handle, whose path the kernel cannot name with the brick's
 * path in front). One byte more is ENAMETOOLONG. */
#include "test_brick_util.h"

#define DEEP 1300 /* bytes of the brick's own path, about */

static char root[PATH_MAX];

/* The index entry of g: the path it names, or "" when there is none. */
static const char *index_path(const gfid_t *g)
{
    static char buf[RPC_PATH_MAX + 1];
    char p[PATH_MAX + 64], s[GFID_STRLEN];
    gfid_format(g, s);
    snprintf(p, sizeof(p), "%s/.cairn/index/%s", root, s);
    buf[0] = 0;
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return "(none)";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static int write_pending(struct tb *t, uint64_t fh, uint32_t pending)
{
    struct rpc_msg m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    RPC_SET(&m, pending, RPC_T_PENDING, pending);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "abc", 3);
    return tb_do(t, RPC_OP_WRITE, &m);
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    snprintf(t.dir, sizeof(t.dir), "/tmp/cairn-brick-long-XXXXXX");
    if (!mkdtemp(t.dir))
        return 1;
    snprintf(root, sizeof(root), "%s", t.dir);
    while (strlen(root) < DEEP) {
        size_t l = strlen(root);
        root[l] = '/';
        memset(root + l + 1, 'r', 250);
        root[l + 251] = 0;
        CHECK_EQ(mkdir(root, 0755), 0);
    }
    if (tb_open_at(&t, root, "testvol", NULL) < 0)
        return 1;

    /* /a..., /b..., ...: 19 directories of 200 bytes, one of 174 */
    static char dir[RPC_PATH_MAX + 300], path[RPC_PATH_MAX + 300];
    size_t dl = 0;
    for (int i = 0; i < 20; i++) {
        size_t n = i < 19 ? 200 : 174;
        dir[dl] = '/';
        memset(dir + dl + 1, 'a' + i, n);
        dl += 1 + n;
        dir[dl] = 0;
        CHECK_EQ(tb_mkdir(&t, dir, 0755), 0);
    }
    CHECK_EQ(dl, 3994);
    memcpy(path, dir, dl);
    path[dl] = '/';
    memset(path + dl + 1, 'f', 100);
    path[dl + 101] = 0; /* the longest volume path */
    CHECK_EQ(strlen(path), RPC_PATH_MAX - 1);

    uint64_t fh;
    gfid_t g;
    CHECK_EQ(tb_create(&t, path, 0644, &fh, &g), 0);
    CHECK_EQ(tb_lookup(&t, path, NULL), 0);
    /* a write some replica misses, through the handle */
    CHECK_EQ(write_pending(&t, fh, 0x2), 0);
    CHECK_STR(index_path(&g), path);
    /* and by path */
    struct rpc_msg m = tb_msg(path);
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MODE);
    RPC_SET(&m, mode, RPC_T_MODE, 0600);
    RPC_SET(&m, pending, RPC_T_PENDING, 0x4);
    CHECK_EQ(tb_do(&t, RPC_OP_SETATTR, &m), 0);
    CHECK_STR(index_path(&g), path);

    /* renamed to where the kernel names it with the brick's path: the
     * handle's changes are indexed under the new name */
    m = tb_msg(path);
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/short");
    CHECK_EQ(tb_do(&t, RPC_OP_RENAME, &m), 0);
    CHECK_EQ(write_pending(&t, fh, 0x2), 0);
    CHECK_STR(index_path(&g), "/short");
    m = tb_msg("/short");
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, path);
    CHECK_EQ(tb_do(&t, RPC_OP_RENAME, &m), 0);

    /* the connection ends with the handle unreleased: marked dirty, indexed
     * under its whole path */
    CHECK_EQ(write_pending(&t, fh, 0), 0);
    struct brick_conn *old = t.bc;
    brick_conn_shutdown(old);
    brick_conn_put(old);
    t.bc = brick_conn_new(t.b, NULL, "again");
    t.bc->handshaken = 1;
    CHECK_STR(index_path(&g), path);

    /* one byte more: refused, nothing made */
    path[dl + 101] = 'f';
    path[dl + 102] = 0;
    CHECK_EQ(strlen(path), RPC_PATH_MAX);
    CHECK_EQ(tb_create(&t, path, 0644, NULL, NULL), -ENAMETOOLONG);
    CHECK_EQ(tb_mkdir(&t, path, 0755), -ENAMETOOLONG);
    CHECK_EQ(tb_lookup(&t, path, NULL), -ENAMETOOLONG);
    char name[128];
    memset(name, 'f', 101);
    name[101] = 0;
    int dfd = open(root, O_RDONLY | O_DIRECTORY);
    for (const char *p = dir + 1, *s; dfd >= 0 && *p; p = *s ? s + 1 : s) {
        s = strchr(p, '/');
        s = s ? s : p + strlen(p);
        char c[256];
        memcpy(c, p, (size_t)(s - p));
        c[s - p] = 0;
        int nfd = openat(dfd, c, O_RDONLY | O_DIRECTORY);
        close(dfd);
        dfd = nfd;
    }
    CHECK(dfd >= 0);
    CHECK(faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
    name[100] = 0;
    CHECK_EQ(faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW), 0);
    close(dfd);

    tb_close(&t, 1);
    return check_summary("test_brick_long_paths");
}
