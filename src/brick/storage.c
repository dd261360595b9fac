/* brick_vfs_posix: the storage interface on Linux system calls. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "storage.h"

/* Evaluates x once: -errno on failure, else its value. */
#define RET(x)                                                                                     \
    do {                                                                                           \
        __typeof__(x) ret_ = (x);                                                                  \
        return ret_ < 0 ? -errno : ret_;                                                           \
    } while (0)

static int p_resolve(int rootfd, const char *path, int flags)
{
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd;
    do
        fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
    while (fd < 0 && errno == EAGAIN); /* a concurrent rename; try again */
    RET((int)fd);
}

static int p_openat(int dirfd, const char *name, int flags, mode_t mode)
{
    int fd = openat(dirfd, name, flags | O_CLOEXEC, mode);
    RET(fd);
}

static int p_close(int fd)
{
    RET(close(fd));
}

static int p_mkdirat(int dirfd, const char *name, mode_t mode)
{
    RET(mkdirat(dirfd, name, mode));
}

static int p_mknodat(int dirfd, const char *name, mode_t mode, dev_t rdev)
{
    RET(mknodat(dirfd, name, mode, rdev));
}

static int p_symlinkat(const char *target, int dirfd, const char *name)
{
    RET(symlinkat(target, dirfd, name));
}

static int p_linkat(int olddir, const char *oldname, int newdir, const char *newname)
{
    RET(linkat(olddir, oldname, newdir, newname, 0));
}

static int p_unlinkat(int dirfd, const char *name, int flags)
{
    RET(unlinkat(dirfd, name, flags));
}

static int p_renameat2(int olddir, const char *oldname, int newdir, const char *newname,
                       unsigned flags)
{
    RET(renameat2(olddir, oldname, newdir, newname, flags));
}

static long p_readlinkat(int dirfd, const char *name, char *buf, size_t len)
{
    RET(readlinkat(dirfd, name, buf, len));
}

static int p_fstatat(int dirfd, const char *name, struct stat *st)
{
    int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
    RET(fstatat(dirfd, name, st, flags));
}

static int p_fchownat(int dirfd, const char *name, uid_t uid, gid_t gid)
{
    int flags = AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
    RET(fchownat(dirfd, name, uid, gid, flags));
}

static int p_fchmodat(int dirfd, const char *name, mode_t mode)
{
    /* Never through a symlink (EOPNOTSUPP on one): a planted link must not
     * change the mode of a file outside the brick. */
    RET(fchmodat(dirfd, name, mode, AT_SYMLINK_NOFOLLOW));
}

static int p_utimensat(int dirfd, const char *name, const struct timespec ts[2])
{
    RET(utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW));
}

static int p_fchown(int fd, uid_t uid, gid_t gid)
{
    RET(fchown(fd, uid, gid));
}

static int p_fchmod(int fd, mode_t mode)
{
    RET(fchmod(fd, mode));
}

static int p_futimens(int fd, const struct timespec ts[2])
{
    RET(futimens(fd, ts));
}

static long p_pread(int fd, void *buf, size_t len, off_t off)
{
    RET(pread(fd, buf, len, off));
}

static long p_pwrite(int fd, const void *buf, size_t len, off_t off)
{
    RET(pwrite(fd, buf, len, off));
}

static int p_fsync(int fd, int datasync)
{
    RET(datasync ? fdatasync(fd) : fsync(fd));
}

static int p_fallocate(int fd, int mode, off_t off, off_t len)
{
    RET(fallocate(fd, mode, off, len));
}

static int p_ftruncate(int fd, off_t len)
{
    RET(ftruncate(fd, len));
}

static off_t p_lseek(int fd, off_t off, int whence)
{
    RET(lseek(fd, off, whence));
}

static long p_getdents(int fd, void *buf, size_t len)
{
    RET(syscall(SYS_getdents64, fd, buf, len));
}

static int p_fstatfs(int fd, struct statfs *st)
{
    RET(fstatfs(fd, st));
}

/* Extended attributes of the object dirfd/name ("" or "." for the
 * directory itself), never following a final symlink.
 *
 * Linux 6.13 and later have *xattrat calls that take the directory fd.
 * Before them the only way was a path through the directory's magic link,
 * /proc/self/fd/N/name, and walking it costs procfs lookups and
 * revalidations on every call: half of a brick's CPU time while listing a
 * directory went there. The first ENOSYS switches to the magic link for
 * good. */
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#define SYS_getxattrat 464
#define SYS_listxattrat 465
#define SYS_removexattrat 466
#endif

struct xattr_args_v0 { /* struct xattr_args, include/uapi/linux/xattr.h */
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};

static int xattrat_missing; /* atomic: the kernel lacks the *xattrat calls */

static const char *at_name(const char *name)
{
    return *name ? name : ".";
}

/* Whether the *xattrat call that returned rc (errno set) settled it, so
 * its result stands; else the kernel lacks the calls. */
void brick_vfs_posix_xattr_by_path(void)
{
    __atomic_store_n(&xattrat_missing, 1, __ATOMIC_RELAXED);
}

static int xattrat_done(long rc)
{
    if (rc >= 0 || errno != ENOSYS)
        return 1;
    brick_vfs_posix_xattr_by_path();
    return 0;
}

static int use_xattrat(void)
{
    return !__atomic_load_n(&xattrat_missing, __ATOMIC_RELAXED);
}

/* The object dirfd/name as a path the l*xattr calls accept: the magic link
 * of the already-resolved directory, then one plain component (or "." for
 * the directory itself: the link must not be the final component, or the
 * l*xattr calls would act on the link). */
static int xpath(char *out, size_t len, int dirfd, const char *name)
{
    int n;
    if (!*name || !strcmp(name, "."))
        n = snprintf(out, len, "/proc/self/fd/%d/.", dirfd);
    else
        n = snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static long p_getxattr(int dirfd, const char *name, const char *xname, void *buf, size_t len)
{
    if (use_xattrat()) {
        struct xattr_args_v0 a = {.value = (uintptr_t)buf,
                                  .size = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len};
        long n = syscall(SYS_getxattrat, dirfd, at_name(name), AT_SYMLINK_NOFOLLOW, xname, &a,
                         sizeof(a));
        if (xattrat_done(n))
            return n < 0 ? -errno : n;
    }
    char p[300];
    int rc = xpath(p, sizeof(p), dirfd, name);
    if (rc < 0)
        return rc;
    RET(lgetxattr(p, xname, buf, len));
}

static int p_setxattr(int dirfd, const char *name, const char *xname, const void *val, size_t len,
                      int flags)
{
    if (use_xattrat()) {
        if (len > UINT32_MAX)
            return -E2BIG;
        struct xattr_args_v0 a = {
            .value = (uintptr_t)val, .size = (uint32_t)len, .flags = (uint32_t)flags};
        long n = syscall(SYS_setxattrat, dirfd, at_name(name), AT_SYMLINK_NOFOLLOW, xname, &a,
                         sizeof(a));
        if (xattrat_done(n))
            return n < 0 ? -errno : 0;
    }
    char p[300];
    int rc = xpath(p, sizeof(p), dirfd, name);
    if (rc < 0)
        return rc;
    RET(lsetxattr(p, xname, val, len, flags));
}

static long p_listxattr(int dirfd, const char *name, char *buf, size_t len)
{
    if (use_xattrat()) {
        long n = syscall(SYS_listxattrat, dirfd, at_name(name), AT_SYMLINK_NOFOLLOW, buf, len);
        if (xattrat_done(n))
            return n < 0 ? -errno : n;
    }
    char p[300];
    int rc = xpath(p, sizeof(p), dirfd, name);
    if (rc < 0)
        return rc;
    RET(llistxattr(p, buf, len));
}

static int p_removexattr(int dirfd, const char *name, const char *xname)
{
    if (use_xattrat()) {
        long n = syscall(SYS_removexattrat, dirfd, at_name(name), AT_SYMLINK_NOFOLLOW, xname);
        if (xattrat_done(n))
            return n < 0 ? -errno : 0;
    }
    char p[300];
    int rc = xpath(p, sizeof(p), dirfd, name);
    if (rc < 0)
        return rc;
    RET(lremovexattr(p, xname));
}

static long p_fgetxattr(int fd, const char *xname, void *buf, size_t len)
{
    RET(fgetxattr(fd, xname, buf, len));
}

static int p_fsetxattr(int fd, const char *xname, const void *val, size_t len, int flags)
{
    RET(fsetxattr(fd, xname, val, len, flags));
}

static int p_ofd_lock(int fd, int cmd, struct flock *l)
{
    RET(fcntl(fd, cmd, l));
}

static int p_flock(int fd, int op)
{
    RET(flock(fd, op));
}

const struct brick_vfs brick_vfs_posix = {
    .resolve = p_resolve,
    .openat = p_openat,
    .close = p_close,
    .mkdirat = p_mkdirat,
    .mknodat = p_mknodat,
    .symlinkat = p_symlinkat,
    .linkat = p_linkat,
    .unlinkat = p_unlinkat,
    .renameat2 = p_renameat2,
    .readlinkat = p_readlinkat,
    .fstatat = p_fstatat,
    .fchownat = p_fchownat,
    .fchmodat = p_fchmodat,
    .utimensat = p_utimensat,
    .fchown = p_fchown,
    .fchmod = p_fchmod,
    .futimens = p_futimens,
    .pread = p_pread,
    .pwrite = p_pwrite,
    .fsync = p_fsync,
    .fallocate = p_fallocate,
    .ftruncate = p_ftruncate,
    .lseek = p_lseek,
    .getdents = p_getdents,
    .fstatfs = p_fstatfs,
    .getxattr = p_getxattr,
    .setxattr = p_setxattr,
    .listxattr = p_listxattr,
    .removexattr = p_removexattr,
    .fgetxattr = p_fgetxattr,
    .fsetxattr = p_fsetxattr,
    .ofd_lock = p_ofd_lock,
    .flock = p_flock,
};
