/* The brick's storage interface: every disk access of the brick goes through
 * one table of function pointers, so tests can inject failures (ENOSPC, EIO,
 * short writes) the way SQLite's test VFS does.
 *
 * Every function returns 0 (or a count / an fd) on success and a negative
 * errno on failure, never -1 with errno. Names are single path components
 * relative to a directory fd, except in resolve(), which walks a relative
 * path beneath a root without following any symbolic link. */
#ifndef CAIRN_BRICK_STORAGE_H
#define CAIRN_BRICK_STORAGE_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>

/* A record of getdents64. */
struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

struct brick_vfs {
    /* openat2(rootfd, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
     * RESOLVE_NO_MAGICLINKS): returns an fd or -errno. */
    int (*resolve)(int rootfd, const char *path, int flags);
    int (*openat)(int dirfd, const char *name, int flags, mode_t mode);
    int (*close)(int fd);
    int (*mkdirat)(int dirfd, const char *name, mode_t mode);
    int (*mknodat)(int dirfd, const char *name, mode_t mode, dev_t rdev);
    int (*symlinkat)(const char *target, int dirfd, const char *name);
    int (*linkat)(int olddir, const char *oldname, int newdir, const char *newname);
    int (*unlinkat)(int dirfd, const char *name, int flags);
    int (*renameat2)(int olddir, const char *oldname, int newdir, const char *newname,
                     unsigned flags);
    long (*readlinkat)(int dirfd, const char *name, char *buf, size_t len);
    /* Never follows a final symlink; name "" stats dirfd itself. */
    int (*fstatat)(int dirfd, const char *name, struct stat *st);
    int (*fchownat)(int dirfd, const char *name, uid_t uid, gid_t gid);
    int (*fchmodat)(int dirfd, const char *name, mode_t mode);
    int (*utimensat)(int dirfd, const char *name, const struct timespec ts[2]);
    int (*fchown)(int fd, uid_t uid, gid_t gid);
    int (*fchmod)(int fd, mode_t mode);
    int (*futimens)(int fd, const struct timespec ts[2]);
    long (*pread)(int fd, void *buf, size_t len, off_t off);
    long (*pwrite)(int fd, const void *buf, size_t len, off_t off);
    int (*fsync)(int fd, int datasync);
    int (*fallocate)(int fd, int mode, off_t off, off_t len);
    int (*ftruncate)(int fd, off_t len);
    off_t (*lseek)(int fd, off_t off, int whence);
    long (*getdents)(int fd, void *buf, size_t len); /* struct linux_dirent64 records */
    int (*fstatfs)(int fd, struct statfs *st);
    /* Extended attributes of the object dirfd/name without following a final
     * symlink (name "." is dirfd itself). */
    long (*getxattr)(int dirfd, const char *name, const char *xname, void *buf, size_t len);
    int (*setxattr)(int dirfd, const char *name, const char *xname, const void *val, size_t len,
                    int flags);
    long (*listxattr)(int dirfd, const char *name, char *buf, size_t len);
    int (*removexattr)(int dirfd, const char *name, const char *xname);
    /* The same on an open fd. */
    long (*fgetxattr)(int fd, const char *xname, void *buf, size_t len);
    int (*fsetxattr)(int fd, const char *xname, const void *val, size_t len, int flags);
    /* fcntl(F_OFD_GETLK / F_OFD_SETLK) and flock(). */
    int (*ofd_lock)(int fd, int cmd, struct flock *l);
    int (*flock)(int fd, int op);
};

/* The real thing: Linux system calls. */
extern const struct brick_vfs brick_vfs_posix;
/* Tests: makes brick_vfs_posix reach xattrs by the magic-link path it
 * falls back to on kernels without the *xattrat calls (before 6.13). */
void brick_vfs_posix_xattr_by_path(void);

/* ---- fault injection (tests) ----
 * brick_vfs_fault forwards every call to brick_vfs_posix unless a fault is
 * armed for that call. Process-wide state: meant for single-brick tests. */
enum brick_vfs_call {
    BVFS_OPENAT,
    BVFS_MKDIRAT,
    BVFS_MKNODAT,
    BVFS_SYMLINKAT,
    BVFS_LINKAT,
    BVFS_UNLINKAT,
    BVFS_RENAMEAT2,
    BVFS_FCHOWNAT,
    BVFS_FCHOWN,
    BVFS_PWRITE,
    BVFS_PREAD,
    BVFS_FSYNC,
    BVFS_FALLOCATE,
    BVFS_FTRUNCATE,
    BVFS_SETXATTR, /* setxattr and fsetxattr */
    BVFS_GETXATTR, /* getxattr and fgetxattr */
    BVFS_GETDENTS,
    BVFS_NCALLS,
};
extern const struct brick_vfs brick_vfs_fault;
/* Arms a fault: the (skip + 1)-th next call of `call` fails with err (a
 * positive errno), and so does every later one while `sticky`. */
void brick_fault_arm(enum brick_vfs_call call, int err, unsigned skip, int sticky);
/* Makes pwrite write at most max bytes per call (0: no limit). */
void brick_fault_short_write(size_t max);
/* A disk that stalls: the (skip + 1)-th next call of `call` (and every
 * later one while sticky) waits ms milliseconds, then runs (or fails, when
 * a fault is armed too). */
void brick_fault_stall(enum brick_vfs_call call, unsigned ms, unsigned skip, int sticky);
/* Disarms everything; returns how many faults fired since the last reset
 * (stalls included). */
unsigned brick_fault_reset(void);

/* Faults by command, for system tests of a running cairn-brickd. One line:
 *   stall CALL MS [SKIP [sticky]]   brick_fault_stall
 *   fail CALL ERRNO [SKIP [sticky]] brick_fault_arm (ERRNO: a number or a
 *                                   name such as EIO, ENOSPC)
 *   short pwrite MAX                brick_fault_short_write (0: off)
 *   reset                           brick_fault_reset
 * CALL is the enum's name in lower case without BVFS_ (pwrite, fsync).
 * 0, or -EINVAL with the reason in err. */
int brick_fault_command(const char *line, char *err, size_t errlen);
/* Tests only, never in production: cairn-brickd runs on brick_vfs_fault
 * when its environment has CAIRN_TEST_FAULTS=1 (cairnd passes its own on),
 * and then takes commands from the file `path` (BRICK/.cairn/test-faults):
 * it checks for the file every 100 ms, runs its lines and removes it, so a
 * test knows the faults are armed once the file is gone. Starts that
 * watcher; 0 or -errno. */
int brick_fault_watch(const char *path);

#endif
