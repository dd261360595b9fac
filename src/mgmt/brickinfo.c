/* The brick marker BRICK/.cairn/brick.info. `volume create` writes it, so a
 * directory can belong to one volume only, and `volume start` checks it, so a
 * brick whose file system is not mounted is not started on the empty mount
 * point below it. `volume delete` removes it. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/dirs.h"
#include "../lib/log.h"
#include "mgmt.h"

int mgmt_brickinfo_write(const struct mgmt_vol *v, const struct mgmt_brick *b)
{
    char dir[PATH_MAX + 16], tmp[PATH_MAX + 32], path[PATH_MAX + 32], text[512];
    snprintf(dir, sizeof(dir), "%s/.cairn", b->path);
    snprintf(tmp, sizeof(tmp), "%s/brick.info.tmp", dir);
    snprintf(path, sizeof(path), "%s/brick.info", dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    int n = snprintf(text, sizeof(text), "volume=%s\nvolume-id=%s\nbrick-id=%s\n", v->name, v->id,
                     b->id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = mgmt_write_all(fd, text, (size_t)n);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        log_error("cannot write %s: %s", path, strerror(-rc));
    }
    return rc;
}

int mgmt_brickinfo_read(const char *brick_path, char *volname, size_t nlen, char *volid,
                        size_t idlen)
{
    char path[PATH_MAX + 32], text[1024];
    snprintf(path, sizeof(path), "%s/.cairn/brick.info", brick_path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n < 0)
        return -EIO;
    text[n] = 0;
    snprintf(volname, nlen, "?");
    snprintf(volid, idlen, "?");
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "volume=", 7) == 0)
            snprintf(volname, nlen, "%s", l + 7);
        else if (strncmp(l, "volume-id=", 10) == 0)
            snprintf(volid, idlen, "%s", l + 10);
    }
    return 0;
}

void mgmt_brickinfo_remove(const char *brick_path, const char *volid)
{
    char name[MGMT_VOLNAME_MAX + 1], id[64], path[PATH_MAX + 32];
    if (mgmt_brickinfo_read(brick_path, name, sizeof(name), id, sizeof(id)) < 0 ||
        strcmp(id, volid) != 0)
        return;
    snprintf(path, sizeof(path), "%s/.cairn/brick.info", brick_path);
    if (unlink(path) < 0)
        log_warn("cannot remove %s: %s", path, strerror(errno));
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc < 0 && errno != ENOENT)
        log_warn("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

int mgmt_brick_prepare_set(const struct mgmt_vol *v, const struct mgmt_brick *b)
{
    int rc = dirs_make(b->path);
    return rc < 0 ? rc : mgmt_brickinfo_write(v, b);
}

int mgmt_brick_prepare_fill(const struct mgmt_vol *v, const struct mgmt_brick *b, int member,
                            int reset)
{
    char dir[PATH_MAX + 16], path[PATH_MAX + 32], text[64];
    int rc = dirs_make(b->path);
    if (rc < 0)
        return rc;
    snprintf(dir, sizeof(dir), "%s/.cairn", b->path);
    /* A reset brick keeps nothing of what it was: the heal index and
     * marks of its old copy would say it holds what it does not. */
    if (reset && nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        return -errno;
    if ((rc = mgmt_brickinfo_write(v, b)) < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/" MGMT_FILL_NAME, dir);
    int n = snprintf(text, sizeof(text), "member=%d\n", member);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    rc = mgmt_write_all(fd, text, (size_t)n);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}
