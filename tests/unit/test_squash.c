/* Root squash's mapping and permission decisions (src/lib/squash.c), which
 * the bricks and the mount share. */
#include <errno.h>
#include <string.h>

#include "../../src/lib/options.h"
#include "../../src/lib/squash.h"
#include "check.h"

static struct stat obj(mode_t mode, uid_t uid, gid_t gid)
{
    struct stat st;
    memset(&st, 0, sizeof(st));
    st.st_mode = mode;
    st.st_uid = uid;
    st.st_gid = gid;
    return st;
}

static void test_ids(void)
{
    struct squash off = {0, 0, 65534, 65534}, root = {1, 0, 65534, 65534}, all = {0, 1, 4321, 4322};
    uid_t u = 0;
    gid_t g = 0;
    CHECK_EQ(squash_ids(&off, &u, &g), 0);
    CHECK_EQ(u, 0);
    CHECK_EQ(squash_ids(&root, &u, &g), 1);
    CHECK_EQ(u, 65534);
    CHECK_EQ(g, 65534);
    /* uid and gid each on its own */
    u = 1000, g = 0;
    CHECK_EQ(squash_ids(&root, &u, &g), 1);
    CHECK_EQ(u, 1000);
    CHECK_EQ(g, 65534);
    u = 1000, g = 1000;
    CHECK_EQ(squash_ids(&root, &u, &g), 0);
    CHECK_EQ(squash_ids(&all, &u, &g), 1);
    CHECK_EQ(u, 4321);
    CHECK_EQ(g, 4322);

    /* credentials: groups mapped under root squash, none under all squash,
     * and squashing to root is no squashing */
    struct squash_cred c;
    gid_t groups[] = {0, 10, 2000};
    CHECK_EQ(squash_cred(&root, 0, 0, groups, 3, &c), 1);
    CHECK_EQ(c.n, 3);
    CHECK_EQ(c.groups[0], 65534);
    CHECK(squash_in_group(&c, 10));
    CHECK(!squash_in_group(&c, 0));
    CHECK_EQ(squash_cred(&all, 1000, 1000, groups, 3, &c), 1);
    CHECK_EQ(c.n, 0);
    CHECK(!squash_in_group(&c, 2000));
    CHECK_EQ(squash_cred(&root, 1000, 1000, groups, 3, &c), 0);
    struct squash to_root = {1, 0, 0, 0};
    CHECK_EQ(squash_cred(&to_root, 0, 0, groups, 3, &c), 0);

    struct opt_set o = {0};
    struct squash s;
    squash_from_options(&s, &o);
    CHECK(!s.root && !s.all && s.anonuid == 65534 && s.anongid == 65534);
    CHECK_EQ(opt_set_put(&o, "server.root-squash", "on"), 0);
    CHECK_EQ(opt_set_put(&o, "server.anonuid", "99"), 0);
    squash_from_options(&s, &o);
    CHECK(s.root && !s.all && s.anonuid == 99 && s.anongid == 65534);
    opt_set_free(&o);
}

static void test_permissions(void)
{
    struct squash root = {1, 0, 65534, 65534};
    struct squash_cred c;
    gid_t groups[] = {0, 50};
    CHECK_EQ(squash_cred(&root, 0, 0, groups, 2, &c), 1);
    struct stat rootfile = obj(S_IFREG | 0644, 0, 0), rootdir = obj(S_IFDIR | 0755, 0, 0);
    struct stat pub = obj(S_IFDIR | 0777, 0, 0), mine = obj(S_IFREG | 0600, 65534, 65534);
    struct stat grp = obj(S_IFREG | 0060, 0, 50), tmp = obj(S_IFDIR | 01777, 0, 0);
    CHECK_EQ(squash_may(&c, &rootfile, SQUASH_R), 0);
    CHECK_EQ(squash_may(&c, &rootfile, SQUASH_W), -EACCES);
    CHECK_EQ(squash_may(&c, &rootdir, SQUASH_W | SQUASH_X), -EACCES);
    CHECK_EQ(squash_may(&c, &rootdir, SQUASH_X), 0);
    CHECK_EQ(squash_may(&c, &pub, SQUASH_W | SQUASH_X), 0);
    CHECK_EQ(squash_may(&c, &mine, SQUASH_R | SQUASH_W), 0);
    /* a group kept from the caller's supplementary ones; group 0 not */
    CHECK_EQ(squash_may(&c, &grp, SQUASH_R | SQUASH_W), 0);
    grp.st_gid = 0;
    CHECK_EQ(squash_may(&c, &grp, SQUASH_R), -EACCES);

    struct squash_change chmod = {.mode = 1};
    CHECK_EQ(squash_setattr(&c, &rootfile, &chmod), -EPERM);
    CHECK_EQ(squash_setattr(&c, &mine, &chmod), 0);
    struct squash_change chown_same = {.uid_set = 1, .uid = 0};
    CHECK_EQ(squash_setattr(&c, &rootfile, &chown_same), -EPERM);
    struct squash_change give = {.uid_set = 1, .uid = 0};
    CHECK_EQ(squash_setattr(&c, &mine, &give), -EPERM);
    struct squash_change keep = {.uid_set = 1, .uid = 65534, .gid_set = 1, .gid = 50};
    CHECK_EQ(squash_setattr(&c, &mine, &keep), 0);
    keep.gid = 0; /* not a group of the squashed caller any more */
    CHECK_EQ(squash_setattr(&c, &mine, &keep), -EPERM);
    struct squash_change trunc = {.size = 1};
    CHECK_EQ(squash_setattr(&c, &rootfile, &trunc), -EACCES);
    struct squash_change touch = {.times = 1, .times_now = 1}, utime = {.times = 1};
    CHECK_EQ(squash_setattr(&c, &rootfile, &touch), -EACCES);
    CHECK_EQ(squash_setattr(&c, &rootfile, &utime), -EPERM);
    struct stat open = obj(S_IFREG | 0666, 0, 0);
    CHECK_EQ(squash_setattr(&c, &open, &touch), 0);
    CHECK_EQ(squash_setattr(&c, &open, &utime), -EPERM);
    CHECK_EQ(squash_setattr(&c, &mine, &utime), 0);

    CHECK_EQ(squash_xattr(&c, &mine, "trusted.x"), -EPERM);
    CHECK_EQ(squash_xattr(&c, &mine, "security.selinux"), -EPERM);
    CHECK_EQ(squash_xattr(&c, &mine, "user.x"), 0);
    CHECK_EQ(squash_xattr(&c, &rootfile, "user.x"), -EACCES);
    CHECK_EQ(squash_xattr(&c, &open, "system.posix_acl_access"), -EPERM);
    CHECK_EQ(squash_xattr(&c, &mine, "system.posix_acl_access"), 0);

    CHECK_EQ(squash_remove(&c, &rootdir, &mine), -EACCES);
    CHECK_EQ(squash_remove(&c, &pub, &rootfile), 0);
    CHECK_EQ(squash_remove(&c, &tmp, &rootfile), -EPERM); /* sticky */
    CHECK_EQ(squash_remove(&c, &tmp, &mine), 0);
    CHECK_EQ(squash_remove(&c, &tmp, NULL), 0);
}

int main(void)
{
    test_ids();
    test_permissions();
    return check_summary("test_squash");
}
