/* libcairn without a cluster: path normalization and the argument checks
 * every call makes before it sends anything. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../src/libcairn/internal.h"
#include "check.h"

static const char *norm(const char *in)
{
    static char out[RPC_PATH_MAX];
    int rc = cairn__path_norm(in, out, sizeof(out));
    if (rc < 0)
        snprintf(out, sizeof(out), "%d", rc);
    return out;
}

static void test_path_norm(void)
{
    CHECK_STR(norm("/"), "/");
    CHECK_STR(norm("a"), "/a");
    CHECK_STR(norm("/a/b"), "/a/b");
    CHECK_STR(norm("//a///b//"), "/a/b");
    CHECK_STR(norm("/./a/./b/."), "/a/b");
    CHECK_STR(norm("/a/b/../c"), "/a/c");
    CHECK_STR(norm("/.."), "/");
    CHECK_STR(norm("../../x"), "/x");
    CHECK_STR(norm("/a/.."), "/");
    CHECK_STR(norm("/a/..b/.c"), "/a/..b/.c");
    CHECK_STR(norm("."), "/");
    char e[16];
    snprintf(e, sizeof(e), "%d", -ENOENT);
    CHECK_STR(norm(""), e);
    CHECK_EQ(cairn__path_norm(NULL, e, sizeof(e)), -EINVAL);
    /* a component of 255 bytes is fine, 256 is not */
    char name[300] = "/";
    memset(name + 1, 'x', 255);
    name[256] = 0;
    CHECK_EQ(cairn__path_norm(name, e, sizeof(e)), -ENAMETOOLONG); /* out too small */
    char out[RPC_PATH_MAX];
    CHECK_EQ(cairn__path_norm(name, out, sizeof(out)), 0);
    name[256] = 'x';
    name[257] = 0;
    CHECK_EQ(cairn__path_norm(name, out, sizeof(out)), -ENAMETOOLONG);
    /* the whole path stays below RPC_PATH_MAX */
    static char deep[2 * RPC_PATH_MAX];
    size_t n = 0;
    while (n + 4 < sizeof(deep) - 1) {
        memcpy(deep + n, "/abc", 4);
        n += 4;
    }
    deep[n] = 0;
    CHECK_EQ(cairn__path_norm(deep, out, sizeof(out)), -ENAMETOOLONG);
    deep[RPC_PATH_MAX - 4] = 0; /* 4092 bytes: fits */
    CHECK_EQ(cairn__path_norm(deep, out, sizeof(out)), 0);
    /* ".." may bring a long spelling back under the limit */
    memcpy(deep, "/a/../", 6);
    CHECK_EQ(cairn__path_norm(deep, out, sizeof(out)), 0);

    char p[64];
    cairn__path_parent("/a/b", p, sizeof(p));
    CHECK_STR(p, "/a");
    cairn__path_parent("/a", p, sizeof(p));
    CHECK_STR(p, "/");
}

static void test_args(void)
{
    char err[256];
    cairn_vol_t *vol = (cairn_vol_t *)1;
    CHECK_EQ(cairn_vol_open("nohost", NULL, &vol, err, sizeof(err)), -EINVAL);
    CHECK(vol == NULL);
    CHECK(strstr(err, "HOST[:PORT]:/VOLNAME") != NULL);
    /* a directory of the volume is taken (h:/v/w), a malformed one is not */
    CHECK_EQ(cairn_vol_open("h:/v/w/../x", NULL, &vol, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "bad directory") != NULL);
    CHECK_EQ(cairn_vol_open("h:/v//w", NULL, &vol, err, sizeof(err)), -EINVAL);
    CHECK_EQ(cairn_vol_open(NULL, NULL, &vol, NULL, 0), -EINVAL);
    CHECK_EQ(cairn_vol_open("h:/v", NULL, NULL, err, sizeof(err)), -EINVAL);
    CHECK_EQ(cairn_vol_open("h:/v", "bogus=1", &vol, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "bogus") != NULL);
    CHECK_EQ(cairn_vol_open("h:/v", "ping-timeout=0", &vol, err, sizeof(err)), -EINVAL);
    CHECK_EQ(cairn_vol_open("h:/v", "backup-servers=", &vol, err, sizeof(err)), -EINVAL);
    CHECK_EQ(cairn_vol_open("h:/v", "log-level=loud", &vol, err, sizeof(err)), -EINVAL);

    char buf[8];
    struct stat st;
    CHECK_EQ(cairn_pread(NULL, buf, sizeof(buf), 0), -EBADF);
    CHECK_EQ(cairn_pwrite(NULL, buf, sizeof(buf), 0), -EBADF);
    CHECK_EQ(cairn_fsync(NULL, 0), -EBADF);
    CHECK_EQ(cairn_fstat(NULL, &st), -EBADF);
    CHECK_EQ(cairn_close(NULL), -EBADF);
    CHECK_EQ(cairn_flock(NULL, LOCK_EX), -EBADF);
    cairn_fd_t *fd;
    CHECK_EQ(cairn_open(NULL, "/a", O_RDONLY, 0, &fd), -EINVAL);
    CHECK_EQ(cairn_lstat(NULL, "/a", &st), -EINVAL);
    CHECK_EQ(cairn_mkdir(NULL, "/a", 0755), -EINVAL);
    CHECK_EQ(cairn_unlink(NULL, "/a"), -EINVAL);
    CHECK_EQ(cairn_rename(NULL, "/a", "/b", 0), -EINVAL);
    CHECK_EQ(cairn_getxattr(NULL, "/a", "user.x", buf, sizeof(buf)), -EINVAL);
    cairn_dir_t *d;
    CHECK_EQ(cairn_opendir(NULL, "/", 0, &d), -EINVAL);
    CHECK_EQ(cairn_readdir(NULL, NULL), -EINVAL);
    CHECK_STR(cairn_version(), "1.0");
}

int main(void)
{
    test_path_norm();
    test_args();
    return check_summary("test_libcairn");
}
