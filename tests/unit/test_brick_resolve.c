/* Path safety: request paths are checked component by component, the
 * brick's private .cairn directory is hidden, and symlinks planted inside
 * the brick never lead outside it. */
#include <sys/xattr.h>

#include "test_brick_util.h"

static int check_path(const char *p)
{
    return brick_path_check((const uint8_t *)p, strlen(p));
}

static void test_path_check(void)
{
    CHECK_EQ(check_path("/"), 0);
    CHECK_EQ(check_path("/a"), 0);
    CHECK_EQ(check_path("/a/b/c"), 0);
    CHECK_EQ(check_path("/.hidden/..x/x.."), 0);
    CHECK_EQ(check_path(""), -EINVAL);
    CHECK_EQ(check_path("a"), -EINVAL);
    CHECK_EQ(check_path("etc/passwd"), -EINVAL);
    CHECK_EQ(check_path("//etc"), -EINVAL);
    CHECK_EQ(check_path("/a//b"), -EINVAL);
    CHECK_EQ(check_path("/a/"), -EINVAL);
    CHECK_EQ(check_path("/."), -EINVAL);
    CHECK_EQ(check_path("/.."), -EINVAL);
    CHECK_EQ(check_path("/a/../.."), -EINVAL);
    CHECK_EQ(check_path("/a/./b"), -EINVAL);
    CHECK_EQ(check_path("/a/.."), -EINVAL);
    CHECK_EQ(brick_path_check((const uint8_t *)"/a\0b", 4), -EINVAL);
    char longname[300];
    longname[0] = '/';
    memset(longname + 1, 'x', 256);
    longname[257] = 0;
    CHECK_EQ(check_path(longname), -ENAMETOOLONG);
    longname[256] = 0; /* 255 bytes: fine */
    CHECK_EQ(check_path(longname), 0);
    static char huge[PATH_MAX + 10];
    for (int i = 0; i < PATH_MAX + 8; i += 2) {
        huge[i] = '/';
        huge[i + 1] = 'a';
    }
    CHECK_EQ(check_path(huge), -ENAMETOOLONG);
    /* the longest volume path, RPC_PATH_MAX - 1 bytes, is a path; one more
     * byte is too long */
    huge[RPC_PATH_MAX - 2] = 'a'; /* ".../aa" */
    huge[RPC_PATH_MAX - 1] = 0;
    CHECK_EQ(strlen(huge), 4095);
    CHECK_EQ(check_path(huge), 0);
    huge[RPC_PATH_MAX - 1] = 'a'; /* ".../aaa" */
    huge[RPC_PATH_MAX] = 0;
    CHECK_EQ(check_path(huge), -ENAMETOOLONG);
}

static void test_private_hidden(struct tb *t)
{
    CHECK_EQ(tb_lookup(t, "/.cairn", NULL), -ENOENT);
    CHECK_EQ(tb_lookup(t, "/.cairn/brick.info", NULL), -ENOENT);
    CHECK_EQ(tb_mkdir(t, "/.cairn", 0755), -EPERM);
    CHECK(tb_create(t, "/.cairn/planted", 0644, NULL, NULL) < 0);
    CHECK(access(tb_path(t, "/.cairn/planted"), F_OK) < 0);
    struct rpc_msg m = tb_msg("/.cairn");
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDONLY);
    CHECK(tb_do(t, RPC_OP_OPENDIR, &m) < 0);
    m = tb_msg("/x");
    CHECK_EQ(tb_mkdir(t, "/x", 0755), 0);
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/.cairn");
    CHECK_EQ(tb_do(t, RPC_OP_RENAME, &m), -EPERM);
    /* below the root, the name is an ordinary one */
    CHECK_EQ(tb_mkdir(t, "/x/.cairn", 0755), 0);
    CHECK_EQ(tb_lookup(t, "/x/.cairn", NULL), 0);

    /* the root's listing leaves it out */
    m = tb_msg("/");
    struct tb_reply rep;
    CHECK_EQ(tb_call(t, RPC_OP_OPENDIR, &m, &rep), 0);
    uint64_t fh = rep.m.fh;
    tb_free(&rep);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, size, RPC_T_SIZE, 65536);
    RPC_SET(&m, flags, RPC_T_FLAGS, 1);
    CHECK_EQ(tb_call(t, RPC_OP_READDIR, &m, &rep), 0);
    struct rpc_iter it;
    struct rpc_field f;
    int seen_x = 0, seen_private = 0, seen_dots = 0;
    rpc_iter_init(&it, rep.buf.data, rep.buf.len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg d;
        if (f.tag != RPC_T_DIRENT || rpc_msg_decode(f.val, f.len, &d, NULL) < 0)
            continue;
        if (d.name.len == 1 && d.name.p[0] == 'x')
            seen_x++;
        if (d.name.len == 6 && !memcmp(d.name.p, ".cairn", 6))
            seen_private++;
        if (d.name.p[0] == '.' && (d.name.len == 1 || (d.name.len == 2 && d.name.p[1] == '.')))
            seen_dots++;
    }
    CHECK_EQ(seen_x, 1);
    CHECK_EQ(seen_private, 0);
    CHECK_EQ(seen_dots, 0);
    CHECK(rep.m.eof == 1);
    tb_free(&rep);
    CHECK_EQ(tb_fh_op(t, RPC_OP_RELEASEDIR, fh), 0);
}

/* Every operation through a planted symlink fails, and nothing outside the
 * brick changes. */
static void test_symlink_escape(struct tb *t)
{
    char outside[300];
    snprintf(outside, sizeof(outside), "%s-outside", t->dir);
    CHECK_EQ(mkdir(outside, 0755), 0);
    char victim[340];
    snprintf(victim, sizeof(victim), "%s/victim", outside);
    int fd = open(victim, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK_EQ(write(fd, "secret", 6), 6);
    close(fd);
    /* planted behind the brick's back: to the outside dir, to the victim,
     * and a relative one climbing out */
    CHECK_EQ(symlink(outside, tb_path(t, "/toout")), 0);
    CHECK_EQ(symlink(victim, tb_path(t, "/tovictim")), 0);
    CHECK_EQ(symlink("../..", tb_path(t, "/up")), 0);
    CHECK_EQ(symlink("/", tb_path(t, "/toroot")), 0);

    CHECK(tb_lookup(t, "/toout/victim", NULL) < 0);
    CHECK(tb_lookup(t, "/up/etc", NULL) < 0);
    CHECK(tb_lookup(t, "/toroot/etc/passwd", NULL) < 0);
    /* the link itself is an ordinary object */
    struct rpc_attr a;
    CHECK_EQ(tb_lookup(t, "/tovictim", &a), 0);
    CHECK(S_ISLNK(a.mode));

    struct rpc_msg m = tb_msg("/tovictim");
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_TRUNC);
    CHECK(tb_do(t, RPC_OP_OPEN, &m) < 0);
    m = tb_msg("/toout/victim");
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDONLY);
    CHECK(tb_do(t, RPC_OP_OPEN, &m) < 0);
    CHECK(tb_create(t, "/toout/new", 0644, NULL, NULL) < 0);
    CHECK(tb_mkdir(t, "/toout/newdir", 0755) < 0);
    CHECK(tb_dop(t, RPC_OP_UNLINK, "/toout/victim") < 0);
    m = tb_msg("/toout");
    CHECK(tb_do(t, RPC_OP_OPENDIR, &m) < 0);
    m = tb_msg("/tovictim");
    CHECK(tb_do(t, RPC_OP_OPENDIR, &m) < 0);
    m = tb_msg("/toout/victim");
    rpc_set_str(&m, RPC_T_NAME, &m.name, "user.x");
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, "1", 1);
    CHECK(tb_do(t, RPC_OP_SETXATTR, &m) < 0);
    /* setattr of the link never reaches the victim */
    m = tb_msg("/tovictim");
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_MODE);
    RPC_SET(&m, mode, RPC_T_MODE, 0777);
    tb_do(t, RPC_OP_SETATTR, &m);
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_SIZE);
    RPC_SET(&m, size, RPC_T_SIZE, 0);
    CHECK(tb_do(t, RPC_OP_SETATTR, &m) < 0);
    RPC_SET(&m, valid, RPC_T_VALID, RPC_SET_UID);
    RPC_SET(&m, uid, RPC_T_UID, 4321);
    tb_do(t, RPC_OP_SETATTR, &m);
    /* as a second path */
    CHECK_EQ(tb_create(t, "/src", 0644, NULL, NULL), 0);
    m = tb_msg("/src");
    rpc_set_str(&m, RPC_T_PATH2, &m.path2, "/toout/linked");
    CHECK(tb_do(t, RPC_OP_LINK, &m) < 0);
    CHECK(tb_do(t, RPC_OP_RENAME, &m) < 0);
    m = tb_msg("/toout/sym");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    rpc_set_str(&m, RPC_T_NAME, &m.name, "x");
    CHECK(tb_do(t, RPC_OP_SYMLINK, &m) < 0);

    struct stat st;
    CHECK_EQ(stat(victim, &st), 0);
    CHECK_EQ(st.st_mode & 07777, 0600);
    CHECK_EQ(st.st_size, 6);
    CHECK_EQ(st.st_uid, 0);
    char xv[8];
    CHECK(getxattr(victim, "user.x", xv, sizeof(xv)) < 0);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", outside);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", outside);
    CHECK_EQ(system(cmd), 0);
}

int main(void)
{
    log_init("test", LOG_WARN);
    test_path_check();
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    test_private_hidden(&t);
    test_symlink_escape(&t);
    tb_close(&t, 1);
    return check_summary("test_brick_resolve");
}
