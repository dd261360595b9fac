/* Opening a brick: the root directory, its private .cairn directory and
 * brick.info marker, the root's id; and the brick's live options. */
#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/options.h"
#include "../rpc/tls.h"
#include "brick.h"

#define INFO_NAME "brick.info"

/* Reads key=value lines of .cairn/brick.info into volume and id (empty when
 * absent); other lines (cairnd's volume-id) go to extra, to be kept.
 * Returns 0, -ENOENT when there is no file, or -errno. */
static int info_read(struct brick *b, int privfd, char *volume, size_t vlen, char *id, size_t idlen,
                     char *extra, size_t elen)
{
    char text[2048];
    size_t epos = 0;
    volume[0] = id[0] = extra[0] = 0;
    int fd = b->vfs->openat(privfd, INFO_NAME, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0)
        return fd;
    long n = b->vfs->pread(fd, text, sizeof(text) - 1, 0);
    b->vfs->close(fd);
    if (n < 0)
        return (int)n;
    text[n] = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(l, "volume=", 7))
            snprintf(volume, vlen, "%s", l + 7);
        else if (!strncmp(l, "brick-id=", 9))
            snprintf(id, idlen, "%s", l + 9);
        else if (epos + strlen(l) + 2 < elen)
            epos += (size_t)snprintf(extra + epos, elen - epos, "%s\n", l);
    }
    return 0;
}

/* Writes brick.info atomically (temporary file, fsync, rename). */
static int info_write(struct brick *b, int privfd, const char *volume, const char *id,
                      const char *extra)
{
    char text[4096];
    int n = snprintf(text, sizeof(text), "volume=%s\n%sbrick-id=%s\n", volume, extra, id);
    if (n < 0 || (size_t)n >= sizeof(text))
        return -ENAMETOOLONG;
    int fd =
        b->vfs->openat(privfd, INFO_NAME ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fd;
    long w = b->vfs->pwrite(fd, text, (size_t)n, 0);
    int rc = w < 0 ? (int)w : w != n ? -EIO : b->vfs->fsync(fd, 0);
    b->vfs->close(fd);
    if (rc == 0)
        rc = b->vfs->renameat2(privfd, INFO_NAME ".tmp", privfd, INFO_NAME, 0);
    if (rc < 0)
        b->vfs->unlinkat(privfd, INFO_NAME ".tmp", 0);
    return rc;
}

/* Unlinks the files in directory fd, and with dirs its (empty)
 * directories too: what a crash left in .cairn/tmp was never named. */
static void empty_dir(struct brick *b, int fd, int dirs)
{
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_type != DT_DIR)
            b->vfs->unlinkat(fd, e->d_name, 0);
        else if (dirs && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            b->vfs->unlinkat(fd, e->d_name, AT_REMOVEDIR);
    closedir(d);
}

/* .cairn/tmp and its BRICK_TMP_DIRS subdirectories, emptied. Without it
 * MAKE_FILE names files first (tmp_fd -1).
 *
 * Why many directories: ext4 allocates a new file's inode in its
 * directory's block group and skips inodes freed in the last few seconds,
 * one by one. Had every MAKE_FILE created its file in one directory, a
 * `tar x` right after an `rm -rf` would scan the same freed inodes again
 * for every file (the brick's CPU time grew threefold). Marked as a "top"
 * directory (chattr +T), .cairn/tmp gets its subdirectories spread over
 * block groups, and the files with them. Other file systems ignore it. */
static void open_tmp(struct brick *b)
{
    for (int i = 0; i < BRICK_TMP_DIRS; i++)
        b->tmp_fds[i] = -1;
    int rc = b->vfs->mkdirat(b->root_fd, BRICK_PRIVATE "/tmp", 0700);
    if (rc < 0 && rc != -EEXIST)
        return;
    b->tmp_fd =
        b->vfs->openat(b->root_fd, BRICK_PRIVATE "/tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (b->tmp_fd < 0)
        return;
    int fl = 0;
    if (ioctl(b->tmp_fd, FS_IOC_GETFLAGS, &fl) == 0 && !(fl & FS_TOPDIR_FL)) {
        fl |= FS_TOPDIR_FL;
        (void)ioctl(b->tmp_fd, FS_IOC_SETFLAGS, &fl);
    }
    empty_dir(b, b->tmp_fd, 0);
    for (int i = 0; i < BRICK_TMP_DIRS; i++) {
        char name[8];
        snprintf(name, sizeof(name), "%02x", i);
        rc = b->vfs->mkdirat(b->tmp_fd, name, 0700);
        if (rc < 0 && rc != -EEXIST)
            continue;
        int fd = b->vfs->openat(b->tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd >= 0)
            empty_dir(b, fd, 1);
        b->tmp_fds[i] = fd;
    }
}

int brick_tmp_dir(struct brick *b, const gfid_t *g, char name[GFID_STRLEN])
{
    gfid_format(g, name);
    int d = b->tmp_fds[g->b[GFID_LEN - 1] % BRICK_TMP_DIRS];
    return d >= 0 ? d : b->tmp_fd;
}

static int init_private(struct brick *b, const char *id, char *err, size_t errlen)
{
    int rc = b->vfs->mkdirat(b->root_fd, BRICK_PRIVATE, 0700);
    if (rc < 0 && rc != -EEXIST) {
        snprintf(err, errlen, "cannot create %s/%s: %s", b->path, BRICK_PRIVATE, strerror(-rc));
        return rc;
    }
    int privfd = b->vfs->openat(b->root_fd, BRICK_PRIVATE, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    if (privfd < 0) {
        snprintf(err, errlen, "cannot open %s/%s: %s", b->path, BRICK_PRIVATE, strerror(-privfd));
        return privfd;
    }
    char vol[512], oldid[512], extra[2048];
    rc = info_read(b, privfd, vol, sizeof(vol), oldid, sizeof(oldid), extra, sizeof(extra));
    if (rc == 0 && vol[0] && strcmp(vol, b->volume) != 0) {
        snprintf(err, errlen, "%s belongs to volume %s, not %s", b->path, vol, b->volume);
        rc = -EEXIST;
        goto out;
    }
    if (rc < 0 && rc != -ENOENT) {
        snprintf(err, errlen, "cannot read %s/%s/%s: %s", b->path, BRICK_PRIVATE, INFO_NAME,
                 strerror(-rc));
        goto out;
    }
    if (id && *id) {
        if (oldid[0] && strcmp(oldid, id) != 0)
            log_warn("brick %s was brick %s, now serving as %s", b->path, oldid, id);
        b->id = strdup(id);
    } else if (oldid[0]) {
        b->id = strdup(oldid);
    } else {
        gfid_t g;
        char s[GFID_STRLEN];
        gfid_generate(&g);
        gfid_format(&g, s);
        b->id = strdup(s);
    }
    if (!b->id) {
        rc = -ENOMEM;
        goto out;
    }
    /* Written when missing (cairnd's volume create usually wrote it) or
     * when it lacks our id; other keys are kept. */
    if (rc == -ENOENT || !vol[0] || strcmp(oldid, b->id) != 0) {
        rc = info_write(b, privfd, b->volume, b->id, extra);
        if (rc < 0) {
            snprintf(err, errlen, "cannot write %s/%s/%s: %s", b->path, BRICK_PRIVATE, INFO_NAME,
                     strerror(-rc));
            goto out;
        }
    }
    rc = 0;
out:
    b->vfs->close(privfd);
    return rc;
}

int brick_open(struct brick **out, const char *path, const char *volume, const char *id,
               const struct brick_vfs *vfs, char *err, size_t errlen)
{
    struct brick *b = calloc(1, sizeof(*b));
    int rc = -ENOMEM;
    err[0] = 0;
    if (!b)
        goto fail;
    b->vfs = vfs ? vfs : &brick_vfs_posix;
    b->root_fd = -1;
    b->tmp_fd = -1;
    pthread_mutex_init(&b->opt_lock, NULL);
    brick_space_init(b);
    brick_quota_init(b);
    if (brick_top_init(b) < 0)
        log_warn("out of memory: volume top counts nothing on this brick");
    pthread_mutex_init(&b->conns_lock, NULL);
    struct opt_set defaults = {0};
    b->stall_ms = (int)opt_int(&defaults, "network.ping-timeout") * 1000;
    b->anonuid = (uint32_t)opt_int(&defaults, "server.anonuid");
    b->anongid = (uint32_t)opt_int(&defaults, "server.anongid");
    if (!(b->path = strdup(path)) || !(b->volume = strdup(volume)))
        goto fail;
    umask(0); /* modes come from the request, already masked by the client */
    b->root_fd = b->vfs->openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0);
    if (b->root_fd < 0) {
        rc = b->root_fd;
        snprintf(err, errlen, "cannot open brick directory %s: %s", path, strerror(-rc));
        goto fail;
    }
    if ((rc = init_private(b, id, err, errlen)) < 0)
        goto fail;
    open_tmp(b);
    gfid_t root;
    gfid_root(&root);
    rc = b->vfs->fsetxattr(b->root_fd, BRICK_XATTR_GFID, root.b, GFID_LEN, 0);
    if (rc < 0) {
        snprintf(err, errlen,
                 "cannot set %s on %s (trusted xattrs need root and a file system "
                 "with xattrs): %s",
                 BRICK_XATTR_GFID, path, strerror(-rc));
        goto fail;
    }
    if ((rc = brick_dircache_init(b)) < 0)
        goto fail;
    if ((rc = brick_accused_init(b)) < 0) {
        snprintf(err, errlen, "cannot read the heal index (or this new copy's .cairn/fill): %s",
                 strerror(-rc));
        goto fail;
    }
    if ((rc = brick_locks_init(b)) < 0) {
        brick_accused_fini(b);
        snprintf(err, errlen, "cannot start the lock service: %s", strerror(-rc));
        goto fail;
    }
    if ((rc = brick_leases_init(b)) < 0) {
        brick_locks_fini(b);
        brick_accused_fini(b);
        snprintf(err, errlen, "cannot start the lease service: %s", strerror(-rc));
        goto fail;
    }
    if ((rc = brick_warm_init(b)) < 0) {
        brick_leases_fini(b);
        brick_locks_fini(b);
        brick_accused_fini(b);
        snprintf(err, errlen, "cannot start the directory warming thread: %s", strerror(-rc));
        goto fail;
    }
    /* Without it, every new file gets a new inode. Before the trash: the
     * purge keeps spares from its first pass. */
    if ((rc = brick_spare_init(b)) < 0)
        log_warn("%s: no %s/spare (%s): no inodes kept for reuse", path, BRICK_PRIVATE,
                 strerror(-rc));
    /* Without it (a full disk that cannot take the directory), trees are
     * removed while their RMDIR waits. */
    if ((rc = brick_trash_init(b)) < 0)
        log_warn("%s: no %s/trash (%s): trees are removed in place", path, BRICK_PRIVATE,
                 strerror(-rc));
    *out = b;
    return 0;
fail:
    if (!err[0])
        snprintf(err, errlen, "%s", strerror(-rc));
    if (b) {
        brick_dircache_fini(b);
        brick_quota_fini(b);
        brick_top_fini(b);
        if (b->root_fd >= 0)
            b->vfs->close(b->root_fd);
        free(b->path);
        free(b->volume);
        free(b->id);
        free(b);
    }
    return rc;
}

void brick_close(struct brick *b)
{
    if (!b)
        return;
    brick_trash_fini(b);
    brick_spare_fini(b);
    brick_warm_fini(b);
    brick_leases_fini(b);
    brick_locks_fini(b);
    brick_accused_fini(b);
    brick_dircache_fini(b);
    for (int i = 0; i < BRICK_TMP_DIRS; i++)
        if (b->tmp_fds[i] >= 0)
            b->vfs->close(b->tmp_fds[i]);
    if (b->tmp_fd >= 0)
        b->vfs->close(b->tmp_fd);
    b->vfs->close(b->root_fd);
    brick_space_fini(b);
    brick_quota_fini(b);
    brick_top_fini(b);
    pthread_mutex_destroy(&b->opt_lock);
    pthread_mutex_destroy(&b->conns_lock);
    free(b->auth_allow);
    free(b->auth_reject);
    free(b->ssl_allow);
    rpc_tls_ctx_put(b->tls);
    free(b->statedump_path);
    free(b->path);
    free(b->volume);
    free(b->id);
    free(b);
}

void brick_set_option(struct brick *b, const char *name, const char *value)
{
    int q = brick_quota_set_option(b, name, value);
    if (q < 0)
        log_warn("%s: bad value '%s'", name, value);
    if (q != 0)
        return;
    if (!strcmp(name, "auth.allow") || !strcmp(name, "auth.reject")) {
        char *v = strdup(value);
        if (!v)
            return;
        pthread_mutex_lock(&b->opt_lock);
        char **slot = name[5] == 'a' ? &b->auth_allow : &b->auth_reject;
        free(*slot);
        *slot = v;
        pthread_mutex_unlock(&b->opt_lock);
        log_debug("option %s = %s", name, value);
    } else if (!strcmp(name, "auth.ssl-allow")) {
        char *v = strdup(value);
        if (!v)
            return;
        pthread_mutex_lock(&b->opt_lock);
        free(b->ssl_allow);
        b->ssl_allow = v;
        pthread_mutex_unlock(&b->opt_lock);
    } else if (!strcmp(name, "server.root-squash") || !strcmp(name, "server.all-squash")) {
        int bit = name[7] == 'r' ? BRICK_SQUASH_ROOT : BRICK_SQUASH_ALL;
        if (!strcmp(value, "on"))
            __atomic_or_fetch(&b->squash, bit, __ATOMIC_RELAXED);
        else
            __atomic_and_fetch(&b->squash, ~bit, __ATOMIC_RELAXED);
        log_info("option %s = %s", name, value);
    } else if (!strcmp(name, "server.anonuid") || !strcmp(name, "server.anongid")) {
        char *end;
        unsigned long long v = strtoull(value, &end, 10);
        if (*value && !*end && v < UINT32_MAX)
            __atomic_store_n(name[11] == 'u' ? &b->anonuid : &b->anongid, (uint32_t)v,
                             __ATOMIC_RELAXED);
    } else if (!strcmp(name, "network.ping-timeout")) {
        int64_t secs;
        if (opt_parse_time(value, &secs) == 0 && secs > 0 && secs <= INT_MAX / 1000)
            __atomic_store_n(&b->stall_ms, (int)secs * 1000, __ATOMIC_RELAXED);
    } else if (!strcmp(name, "features.lease-recall-timeout")) {
        double secs = atof(value);
        if (secs > 0)
            brick_lease_set_recall_timeout(b, (int)(secs * 1000));
    } else if (!strcmp(name, "storage.reserve")) {
        if (brick_space_set_reserve(b, value) < 0)
            log_warn("storage.reserve: '%s' is neither a percentage nor a size", value);
    } else if (!strcmp(name, "storage.spare-inodes")) {
        long n = atol(value);
        if (n >= 0)
            brick_spare_set_ahead(b, (size_t)n);
    } else if (!strcmp(name, "diagnostics.brick-log-level")) {
        int l = log_parse_level(value);
        if (l >= 0) {
            log_set_level((enum log_level)l);
            log_info("log level now %s", value);
        }
    } else if (!strcmp(name, "server.statedump-path")) {
        char *v = *value ? strdup(value) : NULL;
        pthread_mutex_lock(&b->opt_lock);
        free(b->statedump_path);
        b->statedump_path = v;
        pthread_mutex_unlock(&b->opt_lock);
    }
}
