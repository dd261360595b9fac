/* libcairn: the Cairn client stack as a C library (docs/libcairn.md).
 *
 * A program opens a volume by "HOST[:PORT]:/VOLNAME[/DIR]", the way mount names
 * it, and calls the file operations below on paths inside the volume. The
 * library talks to the bricks through the same client stack as the FUSE
 * mount (protocol -> replicate -> distribute), so other clients' leases are
 * recalled when the library changes something, and it sees their changes
 * at once. This version keeps no caches and writes nothing back: every call
 * is one or more requests to the bricks.
 *
 * Conventions, for every call unless it says otherwise:
 * - Returns 0 (or, for I/O, the byte count) on success, a negative errno on
 *   failure, as a local file system would give it (-ENOENT, -EEXIST,
 *   -ENOTDIR, -EISDIR, ...). A brick set that cannot be reached is
 *   -ENOTCONN. errno is not set.
 * - Paths name objects from the volume's root: "/a/b" and "a/b" are the
 *   same; "." and ".." components are resolved by name, and repeated
 *   slashes collapse. Symbolic links are not followed inside a path (a
 *   path through one fails); only cairn_stat follows a final one.
 * - Thread-safety: every call may be made from any thread at once, on one
 *   volume and on one file handle, except where noted (a cairn_dir_t is
 *   used by one thread at a time; nothing may use a handle once its close
 *   has been called).
 * - Objects are created with the calling process's effective uid and gid
 *   and the volume handle's umask (cairn_umask). The bricks do not check
 *   permissions against the caller: the program acts as its owner does.
 * - Asynchronous calls (*_async) return at once: 0 when the request is on
 *   its way, and then the callback runs exactly once, or a negative errno
 *   when it could not be issued, and then the callback never runs. A
 *   callback runs on one of the library's threads (or, for a request that
 *   fails before reaching the network, inside the call); it may issue
 *   further asynchronous calls but must not make synchronous ones or block
 *   long: it holds up other replies. Buffers given to an asynchronous call
 *   belong to the library until its callback has run.
 *
 * Symbols are versioned CAIRN_1.0; calls are only ever added. */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden symbols; these are its interface. */
#pragma GCC visibility push(default)

#define CAIRN_VERSION_MAJOR 1
#define CAIRN_VERSION_MINOR 0

/* An open volume; a file opened on it; a directory being listed. Opaque. */
typedef struct cairn_vol cairn_vol_t;
typedef struct cairn_fd cairn_fd_t;
typedef struct cairn_dir cairn_dir_t;

/* "MAJOR.MINOR" of the library loaded. Static string. */
const char *cairn_version(void);

/* ---- volumes ---- */

/* Opens the volume spec names ("HOST[:PORT]:/VOLNAME"; "HOST:/VOLNAME/DIR":
 * directory DIR of it, which every path is then relative to, the bricks
 * keeping the handle inside it as for a mount): its layout is asked
 * of cairnd on HOST (then of each backup server), connections to its bricks
 * are made, and a management connection stays open so that volume option
 * changes apply live. options: NULL, or comma-separated:
 *   backup-servers=HOST[:PORT]:HOST[:PORT]...  cairnd servers to ask when
 *                          HOST does not answer (as mount's option)
 *   ping-timeout=SEC       brick liveness timeout (default: the volume's
 *                          network.ping-timeout)
 *   timeout=SEC            bound on reaching cairnd at open (default 10)
 *   log-file=PATH          where the library logs (default: stderr)
 *   log-level=LEVEL        error|warning|info|debug|trace (default warning;
 *                          logging settings are process-wide)
 *   ssl-key=PATH, ssl-cert=PATH, ssl-ca=PATH   the TLS key, certificate and
 *                          CA certificates for volumes with client.ssl on
 *                          (default /etc/ssl/cairn.key, .pem, .ca; process-
 *                          wide: the last ones given apply)
 *   mgmt-ssl=on|off        fetch the layout from cairnd over TLS (default:
 *                          on when /var/lib/cairnd/secure-access exists)
 * On success *vol is the new handle. On failure returns -errno (-EINVAL: a
 * bad spec or option; -ENOENT: no such volume or it is not started, or no
 * directory DIR; -EACCES: auth.allow does not let this host open DIR, or
 * a brick refused this client's TLS (auth.ssl-allow, certificate, CA);
 * -EPROTONOSUPPORT: the bricks take TLS only and client.ssl is off;
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH: no server answered) and, when
 * err is not NULL, writes the reason (at most errlen bytes, NUL-terminated)
 * there. A brick that cannot be reached yet does not fail the open: calls
 * needing it wait up to the ping timeout for it, then fail with -ENOTCONN.
 * Ownership: the caller closes *vol with cairn_vol_close. */
int cairn_vol_open(const char *spec, const char *options, cairn_vol_t **vol, char *err,
                   size_t errlen);

/* Waits for the volume's requests in flight (their callbacks run), closes
 * file and directory handles still open (they become invalid), closes the
 * connections and frees vol. Must not be called from a callback, nor while
 * another thread may still call with vol. NULL is ignored. */
void cairn_vol_close(cairn_vol_t *vol);

/* The volume's name, valid until cairn_vol_close. */
const char *cairn_vol_name(const cairn_vol_t *vol);

/* Sets the mask applied to the modes of objects created from now on and
 * returns the previous one. The initial mask is the process's umask when
 * the volume was opened. */
mode_t cairn_umask(cairn_vol_t *vol, mode_t mask);

/* ---- file handles ---- */

/* Opens path with open(2) flags (O_RDONLY, O_WRONLY, O_RDWR, O_CREAT,
 * O_EXCL, O_TRUNC, O_APPEND, O_SYNC, O_DSYNC, O_NOATIME; O_DIRECTORY and
 * O_NOFOLLOW are accepted; O_CREAT takes mode). A final symbolic link is
 * not followed (-ELOOP). On success *fd is the handle; the caller closes it
 * with cairn_close. */
int cairn_open(cairn_vol_t *vol, const char *path, int flags, mode_t mode, cairn_fd_t **fd);
/* The same, asynchronously; cb gets the result and, on success, the handle
 * (the caller's to close). path is copied before the call returns. */
typedef void (*cairn_open_cb)(int result, cairn_fd_t *fd, void *arg);
int cairn_open_async(cairn_vol_t *vol, const char *path, int flags, mode_t mode, cairn_open_cb cb,
                     void *arg);

/* Closes fd: its locks are released and the handle freed, whatever the
 * result. Returns 0, or the error of closing on the bricks (the file's
 * data written before is not affected; use cairn_fsync for durability). */
int cairn_close(cairn_fd_t *fd);

/* Completion of an asynchronous call: result as the synchronous call
 * returns it (bytes for I/O). */
typedef void (*cairn_cb)(ssize_t result, void *arg);
/* fd is invalid once the call is made; cb (may be NULL) runs when the
 * bricks closed it. */
int cairn_close_async(cairn_fd_t *fd, cairn_cb cb, void *arg);

/* ---- data ---- */

/* Reads up to count bytes at offset; returns the bytes read (fewer at the
 * end of the file, 0 beyond it). Large reads are split into requests of at
 * most 1 MiB, sent together. */
ssize_t cairn_pread(cairn_fd_t *fd, void *buf, size_t count, off_t offset);
/* Writes count bytes at offset; returns the bytes written (all, or an
 * error: -ENOSPC, -EDQUOT, ...). Large writes are split as reads are. */
ssize_t cairn_pwrite(cairn_fd_t *fd, const void *buf, size_t count, off_t offset);
/* Asynchronous pread / pwrite: buf must stay valid until cb has run. */
int cairn_pread_async(cairn_fd_t *fd, void *buf, size_t count, off_t offset, cairn_cb cb,
                      void *arg);
int cairn_pwrite_async(cairn_fd_t *fd, const void *buf, size_t count, off_t offset, cairn_cb cb,
                       void *arg);
/* Waits until the file's data (and, unless datasync, its metadata) is on
 * stable storage on the bricks. */
int cairn_fsync(cairn_fd_t *fd, int datasync);
int cairn_fsync_async(cairn_fd_t *fd, int datasync, cairn_cb cb, void *arg);
int cairn_ftruncate(cairn_fd_t *fd, off_t length);
/* fallocate(2) on the bricks' files: mode 0 allocates (and extends),
 * FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_ZERO_RANGE as the bricks' file system supports them
 * (-EOPNOTSUPP otherwise). */
int cairn_fallocate(cairn_fd_t *fd, int mode, off_t offset, off_t length);
/* Frees the range (a hole that reads as zeros), keeping the size. */
int cairn_discard(cairn_fd_t *fd, off_t offset, off_t length);
/* lseek(2)'s SEEK_DATA or SEEK_HOLE from offset, answered by the bricks'
 * file system: the start of the next data or hole at or after offset (the
 * end of the file counts as a hole), -ENXIO at or past the end. A
 * cairn_fd_t has no position: other whence values give -EINVAL. Since
 * libcairn 1.1. */
off_t cairn_lseek(cairn_fd_t *fd, off_t offset, int whence);
int cairn_fstat(cairn_fd_t *fd, struct stat *st);

/* ---- attributes ---- */

/* Which fields of attr cairn_setattr / cairn_fsetattr change. */
#define CAIRN_SET_MODE (1u << 0)  /* st_mode's permission bits */
#define CAIRN_SET_UID (1u << 1)   /* st_uid */
#define CAIRN_SET_GID (1u << 2)   /* st_gid */
#define CAIRN_SET_SIZE (1u << 3)  /* st_size (truncate or extend) */
#define CAIRN_SET_ATIME (1u << 4) /* st_atim */
#define CAIRN_SET_MTIME (1u << 5) /* st_mtim */
#define CAIRN_SET_ATIME_NOW (1u << 6)
#define CAIRN_SET_MTIME_NOW (1u << 7)
#define CAIRN_SET_ALL 0xffu

/* Changes the fields of path's attributes that valid names, in one request
 * (a symbolic link's own, not its target's); with st not NULL, writes the
 * attributes after the change there. */
int cairn_setattr(cairn_vol_t *vol, const char *path, const struct stat *attr, unsigned valid,
                  struct stat *st);
int cairn_fsetattr(cairn_fd_t *fd, const struct stat *attr, unsigned valid, struct stat *st);
/* Asynchronous setattr; attr is copied before the call returns. */
int cairn_setattr_async(cairn_vol_t *vol, const char *path, const struct stat *attr, unsigned valid,
                        cairn_cb cb, void *arg);
int cairn_fsetattr_async(cairn_fd_t *fd, const struct stat *attr, unsigned valid, cairn_cb cb,
                         void *arg);
/* Shorthands of cairn_setattr. times: [0] atime, [1] mtime; tv_nsec may be
 * UTIME_NOW or UTIME_OMIT; NULL sets both to now. */
int cairn_chmod(cairn_vol_t *vol, const char *path, mode_t mode);
int cairn_chown(cairn_vol_t *vol, const char *path, uid_t uid, gid_t gid);
int cairn_utimens(cairn_vol_t *vol, const char *path, const struct timespec times[2]);
int cairn_truncate(cairn_vol_t *vol, const char *path, off_t length);

/* Attributes of path: cairn_lstat of a symbolic link describes the link,
 * cairn_stat follows it (-ELOOP after 40 links). */
int cairn_stat(cairn_vol_t *vol, const char *path, struct stat *st);
int cairn_lstat(cairn_vol_t *vol, const char *path, struct stat *st);

/* ---- namespace ---- */

int cairn_mkdir(cairn_vol_t *vol, const char *path, mode_t mode);
int cairn_mkdir_async(cairn_vol_t *vol, const char *path, mode_t mode, cairn_cb cb, void *arg);
int cairn_rmdir(cairn_vol_t *vol, const char *path);
int cairn_unlink(cairn_vol_t *vol, const char *path);
int cairn_unlink_async(cairn_vol_t *vol, const char *path, cairn_cb cb, void *arg);
/* flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE (as renameat2(2)). */
int cairn_rename(cairn_vol_t *vol, const char *oldpath, const char *newpath, unsigned flags);
/* A symbolic link at linkpath whose content is target (any string). */
int cairn_symlink(cairn_vol_t *vol, const char *target, const char *linkpath);
int cairn_symlink_async(cairn_vol_t *vol, const char *target, const char *linkpath, cairn_cb cb,
                        void *arg);
/* Copies the link's target into buf, not NUL-terminated, truncated to
 * size; returns the bytes copied. */
ssize_t cairn_readlink(cairn_vol_t *vol, const char *path, char *buf, size_t size);
/* A hard link newpath to the file oldpath. */
int cairn_link(cairn_vol_t *vol, const char *oldpath, const char *newpath);
/* mknod(2): S_IFREG, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK in mode. */
int cairn_mknod(cairn_vol_t *vol, const char *path, mode_t mode, dev_t dev);
/* statvfs of the volume (path names any object in it; its share of a
 * distributed volume is the whole volume's). */
int cairn_statvfs(cairn_vol_t *vol, const char *path, struct statvfs *buf);

/* ---- directories ---- */

/* One entry; "." and ".." are not listed. */
struct cairn_dirent {
    char d_name[256];
    unsigned char d_type; /* DT_REG, DT_DIR, DT_LNK, ... */
    uint64_t d_ino;       /* the object's inode number as stat gives it (0: unknown) */
    int has_stat;         /* st is filled (the directory was opened with CAIRN_DIR_STAT) */
    struct stat st;
};

/* cairn_opendir flags: fetch every entry's attributes with the listing. */
#define CAIRN_DIR_STAT 1u

/* Opens the directory path for listing; *dir is the caller's to close
 * with cairn_closedir. One thread at a time may use *dir. */
int cairn_opendir(cairn_vol_t *vol, const char *path, unsigned flags, cairn_dir_t **dir);
/* The next entry: 1 with *ent filled, 0 at the end, or -errno. Entries
 * added or removed while listing may or may not be listed, as readdir(3)
 * says. */
int cairn_readdir(cairn_dir_t *dir, struct cairn_dirent *ent);
/* Starts the listing over. */
void cairn_rewinddir(cairn_dir_t *dir);
int cairn_closedir(cairn_dir_t *dir);

/* ---- extended attributes ---- */

/* As getxattr(2)/lgetxattr(2) (a link's own): size 0 returns the size
 * needed; -ERANGE when size is too small; -ENODATA when absent. */
ssize_t cairn_getxattr(cairn_vol_t *vol, const char *path, const char *name, void *value,
                       size_t size);
/* flags: 0, XATTR_CREATE or XATTR_REPLACE. */
int cairn_setxattr(cairn_vol_t *vol, const char *path, const char *name, const void *value,
                   size_t size, int flags);
/* The names, each NUL-terminated, one after another; size 0: the size. */
ssize_t cairn_listxattr(cairn_vol_t *vol, const char *path, char *list, size_t size);
int cairn_removexattr(cairn_vol_t *vol, const char *path, const char *name);

/* ---- locks ---- */

/* POSIX record locks held by the open handle, as Linux's open file
 * description locks (F_OFD_*) are: two handles conflict even in one
 * process, and closing a handle releases its locks only. cmd: F_GETLK,
 * F_SETLK (-EAGAIN on conflict), F_SETLKW (waits; the calling thread
 * blocks). lock->l_whence must be SEEK_SET. */
int cairn_lock(cairn_fd_t *fd, int cmd, struct flock *lock);
/* flock(2) on the handle: LOCK_SH, LOCK_EX, LOCK_UN, with LOCK_NB. */
int cairn_flock(cairn_fd_t *fd, int operation);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
