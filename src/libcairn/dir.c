/* Directory listings: OPENDIR, then READDIR batches handed out one entry
 * at a time, resuming at the cookie of the last entry handed out. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../client/distribute.h"
#include "../lib/log.h"
#include "internal.h"

/* Reply budget of one READDIR (bytes of entries). */
#define BATCH_BYTES (128u << 10)

static ssize_t fh_finish(struct cairn__req *r)
{
    const struct rpc_msg *m = &r->op.reply->msg;
    if (!rpc_has(m, RPC_T_FH))
        return -EPROTO;
    *(uint64_t *)r->out = m->fh;
    return 0;
}

int cairn_opendir(cairn_vol_t *vol, const char *path, unsigned flags, cairn_dir_t **out)
{
    if (!vol || !out || (flags & ~CAIRN_DIR_STAT))
        return -EINVAL;
    *out = NULL;
    int err;
    struct cairn__req *r = cairn__req_new(vol, RPC_OP_OPENDIR, path, NULL, &err);
    if (!r)
        return err;
    uint64_t fh = 0;
    r->finish = fh_finish;
    r->out = &fh;
    int rc = (int)cairn__run(r);
    if (rc < 0)
        return rc;
    struct cairn_dir *d = calloc(1, sizeof(*d));
    if (!d) {
        if ((r = cairn__req_new(vol, RPC_OP_RELEASEDIR, NULL, NULL, &err)) != NULL) {
            RPC_SET(&r->op.args, fh, RPC_T_FH, fh);
            (void)cairn__run(r);
        }
        return -ENOMEM;
    }
    d->vol = vol;
    d->fh = fh;
    d->plus = (flags & CAIRN_DIR_STAT) != 0;
    pthread_mutex_lock(&vol->lock);
    d->next = vol->dirs;
    if (vol->dirs)
        vol->dirs->prev = d;
    vol->dirs = d;
    pthread_mutex_unlock(&vol->lock);
    *out = d;
    return 0;
}

static ssize_t batch_finish(struct cairn__req *r)
{
    struct cairn_dir *d = r->out;
    d->batch = r->op.reply;
    r->op.reply = NULL; /* kept: entries are read from it */
    d->eof = rpc_has(&d->batch->msg, RPC_T_EOF) && d->batch->msg.eof;
    rpc_iter_init(&d->it, d->batch->body, d->batch->hdr.body_len);
    return 0;
}

static int fetch(struct cairn_dir *d)
{
    int err;
    struct cairn__req *r = cairn__req_new(d->vol, RPC_OP_READDIR, NULL, NULL, &err);
    if (!r)
        return err;
    struct rpc_msg *a = &r->op.args;
    RPC_SET(a, fh, RPC_T_FH, d->fh);
    RPC_SET(a, offset, RPC_T_OFFSET, d->cookie);
    RPC_SET(a, size, RPC_T_SIZE, BATCH_BYTES);
    if (d->plus)
        RPC_SET(a, flags, RPC_T_FLAGS, 1);
    r->finish = batch_finish;
    r->out = d;
    return (int)cairn__run(r);
}

static int is_dots(const char *name)
{
    return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* The next DIRENT of the batch: 1, 0 when the batch is used up, -EPROTO. */
static int next_in_batch(struct cairn_dir *d, struct cairn_dirent *ent)
{
    struct rpc_field f;
    int rc;
    while ((rc = rpc_iter_next(&d->it, &f)) > 0) {
        if (f.tag != RPC_T_DIRENT)
            continue;
        struct rpc_msg m;
        if (rpc_msg_decode(f.val, f.len, &m, NULL) < 0 || !rpc_has(&m, RPC_T_NAME) ||
            !rpc_has(&m, RPC_T_OFFSET) || m.name.len == 0 ||
            rpc_bytes_str(&m.name, ent->d_name, sizeof(ent->d_name)) < 0 ||
            memchr(m.name.p, '/', m.name.len))
            return -EPROTO;
        d->cookie = m.offset;
        if (is_dots(ent->d_name))
            continue;
        mode_t type = (mode_t)(m.mode & S_IFMT);
        ent->has_stat = 0;
        ent->d_ino = 0;
        memset(&ent->st, 0, sizeof(ent->st));
        if (rpc_has(&m, RPC_T_ATTR)) {
            ent->d_ino = gfid_ino(&m.attr.gfid);
            if (d->plus) {
                rpc_attr_to_stat(&m.attr, &ent->st);
                ent->has_stat = 1;
                type = ent->st.st_mode & S_IFMT;
            }
        }
        ent->d_type = (unsigned char)IFTODT(type);
        return 1;
    }
    return rc < 0 ? -EPROTO : 0;
}

int cairn_readdir(cairn_dir_t *d, struct cairn_dirent *ent)
{
    if (!d || !ent)
        return -EINVAL;
    for (;;) {
        if (d->batch) {
            int rc = next_in_batch(d, ent);
            if (rc != 0)
                return rc;
            rpc_frame_free(d->batch);
            d->batch = NULL;
            if (!d->eof && d->cookie == d->asked)
                return -EPROTO; /* a brick must make progress */
        }
        /* a listing ends at EOF, or at the end marker of a merged listing
         * or of an ext4 brick */
        if (d->eof || d->cookie == CL_DHT_COOKIE_END)
            return 0;
        d->asked = d->cookie;
        int rc = fetch(d);
        if (rc < 0)
            return rc;
    }
}

void cairn_rewinddir(cairn_dir_t *d)
{
    if (!d)
        return;
    rpc_frame_free(d->batch);
    d->batch = NULL;
    d->eof = 0;
    d->cookie = 0;
}

static void dir_unlink(struct cairn_dir *d)
{
    struct cairn_vol *vol = d->vol;
    pthread_mutex_lock(&vol->lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        vol->dirs = d->next;
    if (d->next)
        d->next->prev = d->prev;
    pthread_mutex_unlock(&vol->lock);
}

int cairn_closedir(cairn_dir_t *d)
{
    if (!d)
        return -EINVAL;
    int err, rc;
    dir_unlink(d);
    struct cairn__req *r = cairn__req_new(d->vol, RPC_OP_RELEASEDIR, NULL, NULL, &err);
    if (r) {
        RPC_SET(&r->op.args, fh, RPC_T_FH, d->fh);
        rc = (int)cairn__run(r);
        if (rc == -ENOTCONN)
            rc = 0; /* closed with its connection */
    } else {
        rc = err;
    }
    rpc_frame_free(d->batch);
    free(d);
    return rc;
}

void cairn__dir_release_all(struct cairn_vol *vol)
{
    int n = 0;
    while (vol->dirs) {
        (void)cairn_closedir(vol->dirs);
        n++;
    }
    if (n)
        log_warn("volume %s closed with %d directories open: closed them", vol->name, n);
}
