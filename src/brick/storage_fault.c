/* brick_vfs_fault: brick_vfs_posix with failures injected on demand, for
 * tests of the brick's error paths (a full disk in the middle of a create,
 * a short write, a disk that stalls). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "storage.h"

struct fault {
    int err; /* a failure: the positive errno; a stall: the milliseconds */
    unsigned skip;
    int armed, sticky;
};

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fault faults[BVFS_NCALLS], stalls[BVFS_NCALLS];
static size_t short_max;
static unsigned fired;

void brick_fault_arm(enum brick_vfs_call call, int err, unsigned skip, int sticky)
{
    pthread_mutex_lock(&fault_lock);
    faults[call].err = err;
    faults[call].skip = skip;
    faults[call].sticky = sticky;
    faults[call].armed = 1;
    pthread_mutex_unlock(&fault_lock);
}

void brick_fault_stall(enum brick_vfs_call call, unsigned ms, unsigned skip, int sticky)
{
    pthread_mutex_lock(&fault_lock);
    stalls[call] = (struct fault){.err = (int)ms, .skip = skip, .armed = 1, .sticky = sticky};
    pthread_mutex_unlock(&fault_lock);
}

void brick_fault_short_write(size_t max)
{
    pthread_mutex_lock(&fault_lock);
    short_max = max;
    pthread_mutex_unlock(&fault_lock);
}

unsigned brick_fault_reset(void)
{
    pthread_mutex_lock(&fault_lock);
    for (int i = 0; i < BVFS_NCALLS; i++)
        faults[i].armed = stalls[i].armed = 0;
    short_max = 0;
    unsigned n = fired;
    fired = 0;
    pthread_mutex_unlock(&fault_lock);
    return n;
}

/* Whether f fires on this call (it is counted); under fault_lock. */
static int fires(struct fault *f)
{
    if (!f->armed)
        return 0;
    if (f->skip) {
        f->skip--;
        return 0;
    }
    fired++;
    if (!f->sticky)
        f->armed = 0;
    return 1;
}

/* 0, or the negative errno the call must fail with; waits first when a
 * stall fires. */
static int fault(enum brick_vfs_call call)
{
    pthread_mutex_lock(&fault_lock);
    unsigned ms = fires(&stalls[call]) ? (unsigned)stalls[call].err : 0;
    int rc = fires(&faults[call]) ? -faults[call].err : 0;
    pthread_mutex_unlock(&fault_lock);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (ms && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return rc;
}

static const char *const call_names[BVFS_NCALLS] = {
    [BVFS_OPENAT] = "openat",       [BVFS_MKDIRAT] = "mkdirat",     [BVFS_MKNODAT] = "mknodat",
    [BVFS_SYMLINKAT] = "symlinkat", [BVFS_LINKAT] = "linkat",       [BVFS_UNLINKAT] = "unlinkat",
    [BVFS_RENAMEAT2] = "renameat2", [BVFS_FCHOWNAT] = "fchownat",   [BVFS_FCHOWN] = "fchown",
    [BVFS_PWRITE] = "pwrite",       [BVFS_PREAD] = "pread",         [BVFS_FSYNC] = "fsync",
    [BVFS_FALLOCATE] = "fallocate", [BVFS_FTRUNCATE] = "ftruncate", [BVFS_SETXATTR] = "setxattr",
    [BVFS_GETXATTR] = "getxattr",   [BVFS_GETDENTS] = "getdents",
};

static const struct {
    const char *name;
    int err;
} errno_names[] = {
    {"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS},
    {"ENOMEM", ENOMEM}, {"EACCES", EACCES}, {"EPERM", EPERM},   {"ENOENT", ENOENT},
};

/* A whole decimal number in [0, max]; -1 otherwise. */
static long number(const char *s, long max)
{
    char *end;
    errno = 0;
    long n = s && *s ? strtol(s, &end, 10) : -1;
    return n < 0 || n > max || errno || *end ? -1 : n;
}

int brick_fault_command(const char *line, char *err, size_t errlen)
{
    char buf[256], *save = NULL;
    char *w[6] = {0};
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    for (char *t = strtok_r(buf, " \t\r\n", &save); t && n < 6;
         t = strtok_r(NULL, " \t\r\n", &save))
        w[n++] = t;
    if (n == 0)
        return 0;
    if (!strcmp(w[0], "reset") && n == 1) {
        brick_fault_reset();
        return 0;
    }
    if (!strcmp(w[0], "short") && n == 3 && !strcmp(w[1], "pwrite")) {
        long max = number(w[2], 1l << 30);
        if (max < 0) {
            snprintf(err, errlen, "bad fault command: %s", line);
            return -EINVAL;
        }
        brick_fault_short_write((size_t)max);
        return 0;
    }
    int stall = !strcmp(w[0], "stall");
    if ((!stall && strcmp(w[0], "fail")) || n < 3 || n > 5) {
        snprintf(err, errlen, "not a fault command: %s", line);
        return -EINVAL;
    }
    int call = -1;
    for (int i = 0; i < BVFS_NCALLS; i++)
        if (call_names[i] && !strcmp(w[1], call_names[i]))
            call = i;
    long arg = number(w[2], stall ? 3600000 : 4095);
    for (size_t i = 0; !stall && arg < 0 && i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
        if (!strcmp(w[2], errno_names[i].name))
            arg = errno_names[i].err;
    long skip = n > 3 ? number(w[3], 1000000) : 0;
    int sticky = n > 4 && !strcmp(w[4], "sticky");
    if (call < 0 || arg <= 0 || skip < 0 || (n > 4 && !sticky)) {
        snprintf(err, errlen, "bad fault command: %s", line);
        return -EINVAL;
    }
    if (stall)
        brick_fault_stall((enum brick_vfs_call)call, (unsigned)arg, (unsigned)skip, sticky);
    else
        brick_fault_arm((enum brick_vfs_call)call, (int)arg, (unsigned)skip, sticky);
    return 0;
}

/* The watcher of brick_fault_watch. The file is read with libc, not the
 * table: a stall armed on pread must not stall the commands. */
static void *watch_main(void *arg)
{
    char *path = arg;
    for (;;) {
        FILE *f = fopen(path, "re");
        if (f) {
            char line[256], err[320];
            while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\r\n")] = 0;
                if (brick_fault_command(line, err, sizeof(err)) < 0)
                    log_warn("%s: %s", path, err);
                else if (line[strspn(line, " \t")])
                    log_warn("test fault armed: %s", line);
            }
            fclose(f);
            unlink(path);
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int brick_fault_watch(const char *path)
{
    char *p = strdup(path);
    pthread_t t;
    if (!p)
        return -ENOMEM;
    int rc = pthread_create(&t, NULL, watch_main, p);
    if (rc) {
        free(p);
        return -rc;
    }
    pthread_detach(t);
    return 0;
}

#define P brick_vfs_posix
#define CHECKED(call)                                                                              \
    do {                                                                                           \
        int f_ = fault(call);                                                                      \
        if (f_)                                                                                    \
            return f_;                                                                             \
    } while (0)

static int f_openat(int dirfd, const char *name, int flags, mode_t mode)
{
    CHECKED(BVFS_OPENAT);
    return P.openat(dirfd, name, flags, mode);
}

static int f_mkdirat(int dirfd, const char *name, mode_t mode)
{
    CHECKED(BVFS_MKDIRAT);
    return P.mkdirat(dirfd, name, mode);
}

static int f_mknodat(int dirfd, const char *name, mode_t mode, dev_t rdev)
{
    CHECKED(BVFS_MKNODAT);
    return P.mknodat(dirfd, name, mode, rdev);
}

static int f_symlinkat(const char *target, int dirfd, const char *name)
{
    CHECKED(BVFS_SYMLINKAT);
    return P.symlinkat(target, dirfd, name);
}

static int f_linkat(int od, const char *on, int nd, const char *nn)
{
    CHECKED(BVFS_LINKAT);
    return P.linkat(od, on, nd, nn);
}

static int f_unlinkat(int dirfd, const char *name, int flags)
{
    CHECKED(BVFS_UNLINKAT);
    return P.unlinkat(dirfd, name, flags);
}

static int f_renameat2(int od, const char *on, int nd, const char *nn, unsigned flags)
{
    CHECKED(BVFS_RENAMEAT2);
    return P.renameat2(od, on, nd, nn, flags);
}

static int f_fchownat(int dirfd, const char *name, uid_t uid, gid_t gid)
{
    CHECKED(BVFS_FCHOWNAT);
    return P.fchownat(dirfd, name, uid, gid);
}

static int f_fchown(int fd, uid_t uid, gid_t gid)
{
    CHECKED(BVFS_FCHOWN);
    return P.fchown(fd, uid, gid);
}

static long f_pread(int fd, void *buf, size_t len, off_t off)
{
    CHECKED(BVFS_PREAD);
    return P.pread(fd, buf, len, off);
}

static long f_pwrite(int fd, const void *buf, size_t len, off_t off)
{
    CHECKED(BVFS_PWRITE);
    pthread_mutex_lock(&fault_lock);
    if (short_max && len > short_max)
        len = short_max;
    pthread_mutex_unlock(&fault_lock);
    return P.pwrite(fd, buf, len, off);
}

static int f_fsync(int fd, int datasync)
{
    CHECKED(BVFS_FSYNC);
    return P.fsync(fd, datasync);
}

static int f_fallocate(int fd, int mode, off_t off, off_t len)
{
    CHECKED(BVFS_FALLOCATE);
    return P.fallocate(fd, mode, off, len);
}

static int f_ftruncate(int fd, off_t len)
{
    CHECKED(BVFS_FTRUNCATE);
    return P.ftruncate(fd, len);
}

static long f_getdents(int fd, void *buf, size_t len)
{
    CHECKED(BVFS_GETDENTS);
    return P.getdents(fd, buf, len);
}

static long f_getxattr(int dirfd, const char *name, const char *xname, void *buf, size_t len)
{
    CHECKED(BVFS_GETXATTR);
    return P.getxattr(dirfd, name, xname, buf, len);
}

static int f_setxattr(int dirfd, const char *name, const char *xname, const void *val, size_t len,
                      int flags)
{
    CHECKED(BVFS_SETXATTR);
    return P.setxattr(dirfd, name, xname, val, len, flags);
}

static long f_fgetxattr(int fd, const char *xname, void *buf, size_t len)
{
    CHECKED(BVFS_GETXATTR);
    return P.fgetxattr(fd, xname, buf, len);
}

static int f_fsetxattr(int fd, const char *xname, const void *val, size_t len, int flags)
{
    CHECKED(BVFS_SETXATTR);
    return P.fsetxattr(fd, xname, val, len, flags);
}

/* Calls without a fault point: thin wrappers, since a constant table cannot
 * copy another table's members. */
static int f_resolve(int rootfd, const char *path, int flags)
{
    return P.resolve(rootfd, path, flags);
}
static int f_close(int fd)
{
    return P.close(fd);
}
static long f_readlinkat(int dirfd, const char *name, char *buf, size_t len)
{
    return P.readlinkat(dirfd, name, buf, len);
}
static int f_fstatat(int dirfd, const char *name, struct stat *st)
{
    return P.fstatat(dirfd, name, st);
}
static int f_fchmodat(int dirfd, const char *name, mode_t mode)
{
    return P.fchmodat(dirfd, name, mode);
}
static int f_utimensat(int dirfd, const char *name, const struct timespec ts[2])
{
    return P.utimensat(dirfd, name, ts);
}
static int f_fchmod(int fd, mode_t mode)
{
    return P.fchmod(fd, mode);
}
static int f_futimens(int fd, const struct timespec ts[2])
{
    return P.futimens(fd, ts);
}
static off_t f_lseek(int fd, off_t off, int whence)
{
    return P.lseek(fd, off, whence);
}
static int f_fstatfs(int fd, struct statfs *st)
{
    return P.fstatfs(fd, st);
}
static long f_listxattr(int dirfd, const char *name, char *buf, size_t len)
{
    return P.listxattr(dirfd, name, buf, len);
}
static int f_removexattr(int dirfd, const char *name, const char *xname)
{
    return P.removexattr(dirfd, name, xname);
}
static int f_ofd_lock(int fd, int cmd, struct flock *l)
{
    return P.ofd_lock(fd, cmd, l);
}
static int f_flock(int fd, int op)
{
    return P.flock(fd, op);
}

const struct brick_vfs brick_vfs_fault = {
    .resolve = f_resolve,
    .openat = f_openat,
    .close = f_close,
    .mkdirat = f_mkdirat,
    .mknodat = f_mknodat,
    .symlinkat = f_symlinkat,
    .linkat = f_linkat,
    .unlinkat = f_unlinkat,
    .renameat2 = f_renameat2,
    .readlinkat = f_readlinkat,
    .fstatat = f_fstatat,
    .fchownat = f_fchownat,
    .fchmodat = f_fchmodat,
    .utimensat = f_utimensat,
    .fchown = f_fchown,
    .fchmod = f_fchmod,
    .futimens = f_futimens,
    .pread = f_pread,
    .pwrite = f_pwrite,
    .fsync = f_fsync,
    .fallocate = f_fallocate,
    .ftruncate = f_ftruncate,
    .lseek = f_lseek,
    .getdents = f_getdents,
    .fstatfs = f_fstatfs,
    .getxattr = f_getxattr,
    .setxattr = f_setxattr,
    .listxattr = f_listxattr,
    .removexattr = f_removexattr,
    .fgetxattr = f_fgetxattr,
    .fsetxattr = f_fsetxattr,
    .ofd_lock = f_ofd_lock,
    .flock = f_flock,
};
