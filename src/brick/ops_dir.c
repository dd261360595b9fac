/* Directories: open, read in chunks with resumable cookies, release.
 *
 * Cookies are the backing file system's d_off values (hashes on ext4,
 * positions on xfs and tmpfs): each entry carries the cookie that resumes
 * the listing after it, and they stay valid while entries come and go, so a
 * listing read in chunks returns every entry that existed throughout exactly
 * once. "." and ".." are left out (the client adds its own) and so is the
 * brick's private directory. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "brick.h"

#define VFS (r->b->vfs)

#define FH_ROOT 1 /* brick_fh.flags of the root directory's handle */
/* Largest READDIR reply, whatever budget the client names. */
#define BRICK_MAX_READDIR (1u << 20)
/* Subdirectories one READDIRPLUS reply queues for warming, at most. */
#define WARM_PER_REPLY 64
#define DENTS_BUF 32768

int brick_op_opendir(struct brick_req *r)
{
    struct brick_loc loc;
    uint64_t id;
    int rc = brick_resolve(r->b, &r->in->path, BRICK_LOC_EXISTING, &loc);
    if (rc < 0)
        goto out;
    int fd = VFS->openat(loc.dirfd, loc.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (fd < 0) {
        rc = fd == -ELOOP ? -ENOTDIR : fd;
        goto out;
    }
    struct brick_fh *fh = brick_fh_new(fd, 1, loc.is_root ? FH_ROOT : 0);
    if (!fh) {
        VFS->close(fd);
        rc = -ENOMEM;
        goto out;
    }
    fh->top = brick_top_open(r->b, (const char *)r->in->path.p, r->in->path.len, RPC_TOP_OPENDIR);
    if ((rc = brick_fh_add(r->bc, fh, &id)) < 0) {
        brick_fh_put(r->bc, fh);
        goto out;
    }
    rpc_put_u64(r->out, RPC_T_FH, id);
out:
    brick_loc_release(r->b, &loc);
    return rc;
}

int brick_op_releasedir(struct brick_req *r)
{
    return brick_fh_remove(r->bc, r->in->fh, 1);
}

static mode_t dtype_mode(unsigned char t)
{
    return (mode_t)DTTOIF(t);
}

/* Appends one DIRENT; returns 0, 1 when the entry vanished meanwhile (left
 * out), or -errno. */
static int put_entry(struct brick_req *r, int dirfd, const struct linux_dirent64 *d, int plus)
{
    mode_t mode = dtype_mode(d->d_type);
    struct rpc_attr a;
    struct brick_loc loc = {.dirfd = dirfd, .path = d->d_name};
    snprintf(loc.name, sizeof(loc.name), "%s", d->d_name);
    if (plus || d->d_type == DT_UNKNOWN) {
        int rc = brick_loc_attr(r->b, &loc, &a);
        if (rc == -ENOENT)
            return 1;
        if (rc < 0)
            return rc;
        mode = (mode_t)a.mode & S_IFMT;
    }
    size_t mark = rpc_put_begin(r->out, RPC_T_DIRENT);
    rpc_put_u64(r->out, RPC_T_OFFSET, (uint64_t)d->d_off);
    rpc_put_str(r->out, RPC_T_NAME, d->d_name);
    rpc_put_u64(r->out, RPC_T_MODE, mode);
    if (plus) {
        rpc_put_attr(r->out, RPC_T_ATTR, &a);
        brick_put_noxattrs(r, &loc);
    }
    rpc_put_end(r->out, mark);
    return 0;
}

int brick_op_readdir(struct brick_req *r)
{
    struct brick_fh *fh;
    if (r->in->offset > INT64_MAX)
        return -EINVAL;
    int rc = brick_fh_get(r->bc, r->in->fh, 1, &fh);
    if (rc < 0)
        return rc;
    int plus = rpc_has(r->in, RPC_T_FLAGS) && (r->in->flags & 1);
    size_t budget = r->in->size > BRICK_MAX_READDIR ? BRICK_MAX_READDIR : (size_t)r->in->size;
    size_t start = r->out->len;
    int n_entries = 0, n_warm = 0, eof = 0, full = 0;
    char *buf = malloc(DENTS_BUF);
    if (!buf) {
        brick_fh_put(r->bc, fh);
        return -ENOMEM;
    }
    pthread_mutex_lock(&fh->dir_lock);
    off_t pos = VFS->lseek(fh->fd, (off_t)r->in->offset, SEEK_SET);
    if (pos < 0) {
        rc = (int)pos;
        goto out;
    }
    while (!full && !eof) {
        long n = VFS->getdents(fh->fd, buf, DENTS_BUF);
        if (n < 0) {
            rc = (int)n;
            goto out;
        }
        if (n == 0) {
            eof = 1;
            break;
        }
        for (long o = 0; o < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + o);
            o += d->d_reclen;
            const char *nm = d->d_name;
            if ((nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]))) ||
                ((fh->flags & FH_ROOT) && !strcmp(nm, BRICK_PRIVATE)))
                continue;
            size_t before = r->out->len;
            int e = put_entry(r, fh->fd, d, plus);
            if (e < 0) {
                rc = e;
                goto out;
            }
            if (e > 0)
                continue;
            if (r->out->len - start > budget && n_entries > 0) {
                /* Over budget: this entry goes in the next reply, which
                 * resumes from the previous entry's cookie. */
                r->out->len = before;
                full = 1;
                break;
            }
            n_entries++;
            /* a listing with attributes: the subdirectories are likely
             * listed next (warm.c) */
            if (plus && d->d_type == DT_DIR && n_warm < WARM_PER_REPLY) {
                brick_warm_subdir(r->b, fh->fd, nm);
                n_warm++;
            }
        }
    }
    if (eof)
        rpc_put_u64(r->out, RPC_T_EOF, 1);
out:
    if (rc >= 0)
        brick_top_count(fh->top, RPC_TOP_READDIR, 0, 0);
    pthread_mutex_unlock(&fh->dir_lock);
    free(buf);
    brick_fh_put(r->bc, fh);
    return rc;
}
