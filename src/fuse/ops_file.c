/* File handlers: open/create, data, flush/release, fsync, fallocate, lseek. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "bridge.h"

/* A handle opened for writing skips the kernel's page cache by default
 * (docs/consistency.md, "Handles opened for writing"). Without the kernel's
 * write-back cache every write reaches this process before write() returns
 * anyway, so the page cache's copy of what is written is one more copy
 * into pages that are new (on this machine 16 us per 4 KiB page,
 * performance notes rounds sixteen and twenty-three), and it would be
 * dropped at the next open. It also spares the GETXATTR of
 * security.capability before a handle's first write (round twelve). The
 * kernel drops other handles' cached pages of what a direct write covers,
 * and set-id bits are still cleared (killpriv.c). Reads through such a
 * handle are answered by this process (wb.c, readcache.c) instead of the
 * page cache. A read-write handle is direct only where the
 * kernel lets a direct handle be mapped shared (FUSE_DIRECT_IO_ALLOW_MMAP,
 * asked for by uring.c); a write-only one cannot be mapped at all. */
void cf_set_direct(struct cf *cf, struct fuse_file_info *fi)
{
    int acc = fi->flags & O_ACCMODE;
    if ((fi->flags & O_DIRECT) || cf->dio_mode == CF_DIO_ENABLE)
        fi->direct_io = 1;
    else if (cf->dio_mode == CF_DIO_AUTO)
        fi->direct_io = acc == O_WRONLY || (acc == O_RDWR && cf_uring_dio_mmap(cf));
    /* No keep_cache: another client may have written since, so the
     * kernel drops this file's cached pages on each open. */
    fi->keep_cache = 0;
}

/* A reply with FLAGS 1: the brick cleared set-id bits (killpriv.c), so the
 * kernel's cached mode goes before the request is answered. */
static void note_cleared_setid(struct fop *f, const struct rpc_msg *m)
{
    if (rpc_has(m, RPC_T_FLAGS) && m->flags == 1)
        cf_lease_inval_attr(f->cf, f->parent);
}

/* An OPEN or CREATE of a handle whose writes would be written behind asks
 * for the file exclusively (docs/consistency.md, "Data: write-behind"). */
static void ask_excl(struct fop *f)
{
    if (!cf_wbh_wanted(f->cf, f->fi.flags) || !f->lease_seq)
        return;
    f->op.args.lease |= RPC_LEASE_EXCL;
}

/* Every brick granted it, and no recall of the file came since the
 * request went. Its parent's lease does not matter: a create in a
 * directory another client lists drops it at once (docs/consistency.md,
 * "Write-behind in a shared directory"). Under cf_reply_begin, so a recall
 * after this clears what it sets. A refusal starts write-behind's clock
 * for asking again. */
static void note_excl(struct fop *f, uint64_t node)
{
    const struct rpc_msg *m = &f->op.reply->msg;
    if (!(f->op.args.lease & RPC_LEASE_EXCL))
        return;
    if (rpc_has(m, RPC_T_LEASE) && (m->lease & RPC_LEASE_EXCL) && cf_lease_held_path(f, f->path))
        cf_known_file_excl(f->cf, node);
    else
        cf_wbh_refused(f->cf, node);
}

static void open_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    if (!rpc_has(&op->reply->msg, RPC_T_FH))
        FOP_FAIL(f, -EPROTO);
    f->fi.fh = op->reply->msg.fh;
    cf_set_direct(f->cf, &f->fi);
    note_cleared_setid(f, &op->reply->msg);
    cl_itable_open_fh(f->cf->it, f->parent, f->fi.fh);
    cf_reply_begin(f->cf);
    note_excl(f, f->parent);
    if (fuse_reply_open(f->req, &f->fi) != 0) {
        cl_itable_close_fh(f->cf->it, f->parent, f->fi.fh);
        fop_release_orphan(f->cf, RPC_OP_RELEASE, f->fi.fh);
    }
    cf_reply_end(f->cf);
    fop_free(f);
}

void cf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    cf_rc_opened(fuse_req_userdata(req), ino); /* the kernel drops its pages */
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        cf_ps_writer(fuse_req_userdata(req), ino);
        cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    }
    if (cf_wb_open(req, ino, fi))
        return;
    struct fop *f = fop_new(req, RPC_OP_OPEN, open_cb);
    if (!f)
        return;
    f->fi = *fi;
    f->parent = ino; /* the opened inode, to record its handle */
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    uint64_t flags = (uint64_t)(unsigned)fi->flags;
    if ((fi->flags & O_TRUNC) && cf_killpriv_asked())
        flags |= RPC_OPEN_KILL_SUIDGID;
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, flags);
    if ((f->lease_seq = cf_lease_mark(f->cf)) != 0) {
        RPC_SET(&f->op.args, lease, RPC_T_LEASE, RPC_LEASE_READ);
        ask_excl(f);
    }
    fop_submit(f);
}

static void create_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    if (!rpc_has(&op->reply->msg, RPC_T_FH))
        FOP_FAIL(f, -EPROTO);
    struct fuse_entry_param e;
    cf_reply_begin(f->cf);
    int rc = fop_entry(f, &e);
    if (rc < 0) {
        cf_reply_end(f->cf);
        fop_release_orphan(f->cf, RPC_OP_RELEASE, op->reply->msg.fh);
        FOP_FAIL(f, rc);
    }
    f->fi.fh = op->reply->msg.fh;
    cf_set_direct(f->cf, &f->fi);
    cf_ps_writer(f->cf, e.ino);
    cl_itable_open_fh(f->cf->it, e.ino, f->fi.fh);
    cf_known_add(f->cf, f->parent, f->name, &e.attr);
    fop_parent_attr(f, f->parent);
    note_excl(f, e.ino);
    if (cf_lease_held(f)) {
        cf_known_nocaps(f->cf, e.ino);
        cf_known_nosetid(f->cf, e.ino, !cf_killpriv_bits(e.attr.st_mode));
    }
    if (fuse_reply_create(f->req, &e, &f->fi) != 0) {
        cl_itable_close_fh(f->cf->it, e.ino, f->fi.fh);
        cl_itable_forget(f->cf->it, e.ino, 1);
        fop_release_orphan(f->cf, RPC_OP_RELEASE, f->fi.fh);
    }
    cf_reply_end(f->cf);
    fop_free(f);
}

void cf_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    struct cf *cf = fuse_req_userdata(req);
    int err = -cf_name_fits(cf, parent, name);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    err = cf_wb_dir_error(cf, parent);
    if (err) {
        fuse_reply_err(req, -err); /* a file written back here did not make it */
        return;
    }
    if (cf_wb_create(req, parent, name, mode, fi))
        return;
    struct fop *f = fop_new(req, RPC_OP_CREATE, create_cb);
    if (!f)
        return;
    f->fi = *fi;
    f->parent = parent;
    int rc = fop_path(f, parent, name);
    if (rc < 0)
        FOP_FAIL(f, rc);
    struct rpc_msg *a = &f->op.args;
    gfid_generate(&a->gfid);
    a->present |= 1ull << RPC_T_GFID;
    fop_set_creator(f, 1);
    RPC_SET(a, mode, RPC_T_MODE, mode);
    RPC_SET(a, flags, RPC_T_FLAGS, (uint64_t)(unsigned)fi->flags);
    cf_lease_ask(f);
    ask_excl(f);
    fop_submit(f);
}

/* Answers the kernel's read of size at off from the window w read from the
 * brick (len bytes at p; fewer than w->len at the end of the file). */
static void reply_from(fuse_req_t req, uint64_t off, size_t size, const struct cf_rc_window *w,
                       const char *p, size_t len)
{
    size_t from = (size_t)(off - w->start);
    const char *mine = p ? p + (from < len ? from : len) : NULL;
    size_t n = from < len ? len - from : 0;
    fuse_reply_buf(req, mine, n < size ? n : size);
}

static void read_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    const char *p = rpc_has(m, RPC_T_DATA) ? (const char *)m->data.p : NULL;
    size_t len = p ? m->data.len : 0;
    struct cf_rc_window *w = f->data;
    if (w) {
        /* a window around the kernel's read: answer its part, keep it */
        if (len > w->len)
            FOP_FAIL(f, -EPROTO);
        cf_rc_fill(f->cf, f->parent, w, p ? p : "", len);
        reply_from(f->req, f->off, f->size, w, p, len);
        /* after the reply: the store locks pages, the kernel's read among them */
        cf_ps_offer(f->cf, f->parent, w, &op->reply);
        fop_free(f);
        return;
    }
    if (len > f->size)
        FOP_FAIL(f, -EPROTO);
    fuse_reply_buf(f->req, p, len);
    fop_free(f);
}

/* A window read ahead of the reads (readcache.c); ino's handle waits for it
 * before it is released. */
struct ahead {
    struct cl_op op;
    struct cf *cf;
    fuse_ino_t ino;
    uint64_t fh;
    struct cf_rc_window plan;
};

static void read_ahead(struct cf *cf, fuse_ino_t ino, uint64_t fh, const struct cf_rc_window *miss,
                       const struct cf_rc_window *landed);

static void read_from_brick(fuse_req_t req, fuse_ino_t ino, uint64_t fh, size_t size, uint64_t off,
                            const struct cf_rc_window *w);

static void ahead_cb(struct cl_op *op)
{
    struct ahead *a = op->ctx;
    cl_opstats_note(&a->cf->stats, RPC_OP_READ, op->rounds, op->status);
    const struct rpc_msg *m = op->status == 0 && op->reply ? &op->reply->msg : NULL;
    int full = 0, ok = m && m->data.len <= a->plan.len;
    const char *p = ok && rpc_has(m, RPC_T_DATA) ? (const char *)m->data.p : NULL;
    size_t len = p ? m->data.len : 0;
    if (ok)
        cf_rc_fill(a->cf, a->ino, &a->plan, p ? p : "", len);
    for (struct cf_rc_waiter *w = cf_rc_landed(a->cf, a->ino, &a->plan), *next; w; w = next) {
        next = w->next;
        if (ok)
            reply_from(w->req, w->off, w->size, &a->plan, p, len);
        else /* the reads it waited for ask the brick themselves */
            read_from_brick(w->req, a->ino, w->fh, w->size, w->off, NULL);
        free(w);
    }
    if (ok) {
        full = len == a->plan.len;
        /* after the replies: the store locks pages, waiting reads among them */
        cf_ps_offer(a->cf, a->ino, &a->plan, &op->reply); /* m and p may go with it */
    }
    if (full)
        read_ahead(a->cf, a->ino, a->fh, NULL, &a->plan); /* the sweep goes on */
    else
        cf_rc_ahead_done(a->cf, a->ino, &a->plan);
    cl_op_release(op);
    free(a);
}

/* Windows after a miss, or after a window read ahead that landed (which
 * this ends). */
static void read_ahead(struct cf *cf, fuse_ino_t ino, uint64_t fh, const struct cf_rc_window *miss,
                       const struct cf_rc_window *landed)
{
    struct cf_rc_window plan[CF_RC_AHEAD_N];
    /* write-back and lazy handles are not brick handles */
    int n = cf_wb_is_fh(fh) || cf_dir_is_lazy(fh)
                ? 0
                : cf_rc_ahead_plan(cf, ino, fh, miss, landed, plan);
    for (int i = 0; i < n; i++) {
        struct ahead *a = calloc(1, sizeof(*a));
        if (!a) {
            cf_rc_ahead_done(cf, ino, &plan[i]);
            continue;
        }
        a->cf = cf;
        a->ino = ino;
        a->fh = fh;
        a->plan = plan[i];
        cl_op_init(&a->op, RPC_OP_READ, ahead_cb, a);
        a->op.rounds = 0;
        a->op.spread = 1;
        RPC_SET(&a->op.args, fh, RPC_T_FH, fh);
        RPC_SET(&a->op.args, offset, RPC_T_OFFSET, plan[i].start);
        RPC_SET(&a->op.args, size, RPC_T_SIZE, plan[i].len);
        cl_submit(cf->stack, &a->op);
    }
}

void cf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    if (cf_wb_read(req, fi, size, off))
        return;
    cf_wbh_sync(cf, ino);
    struct cf_rc_window w;
    char buf[64 * 1024];
    size_t n = 0;
    int c =
        size <= sizeof(buf) ? cf_rc_read(cf, ino, fi->flags, (uint64_t)off, size, buf, &n, &w) : 0;
    if (c == 1) {
        fuse_reply_buf(req, buf, n);
        return;
    }
    if (c == 2) {
        /* inside a window already on its way: its reply answers this one */
        struct cf_rc_waiter *wt = malloc(sizeof(*wt));
        if (wt) {
            *wt =
                (struct cf_rc_waiter){.req = req, .fh = fi->fh, .off = (uint64_t)off, .size = size};
            if (cf_rc_wait_ahead(cf, ino, &w, wt))
                return;
            free(wt);
        }
    }
    read_from_brick(req, ino, fi->fh, size, (uint64_t)off, c == 2 ? &w : NULL);
    if (c == 2)
        read_ahead(cf, ino, fi->fh, &w, NULL);
}

/* The kernel's read of size at off through brick handle fh, or the whole
 * window w around it when w is given (a miss of the read cache). */
static void read_from_brick(fuse_req_t req, fuse_ino_t ino, uint64_t fh, size_t size, uint64_t off,
                            const struct cf_rc_window *w)
{
    struct fop *f = fop_new(req, RPC_OP_READ, read_cb);
    if (!f)
        return;
    f->size = size;
    f->off = off;
    f->parent = ino;
    if (w && (f->data = malloc(sizeof(*w))) != NULL) {
        memcpy(f->data, w, sizeof(*w));
        off = w->start;
        size = w->len;
    }
    struct rpc_msg *a = &f->op.args;
    RPC_SET(a, fh, RPC_T_FH, fh);
    RPC_SET(a, offset, RPC_T_OFFSET, off);
    RPC_SET(a, size, RPC_T_SIZE, size);
    fop_submit(f);
}

static void write_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_msg *m = &op->reply->msg;
    if (!rpc_has(m, RPC_T_SIZE) || m->size > f->size)
        FOP_FAIL(f, -EPROTO);
    note_cleared_setid(f, m);
    fuse_reply_write(f->req, m->size);
    fop_free(f);
}

void cf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    struct cf *cf = fuse_req_userdata(req);
    cf_rc_changed(cf, ino);
    if (cf_wb_write(req, fi, buf, size, off))
        return;
    /* A caller without CAP_FSETID: the brick clears set-id bits, unless
     * this mount knows the file has none (killpriv.c). */
    int kill = cf_killpriv_asked() && !cf_known_has_nosetid(cf, ino);
    if (!kill && cf_wbh_write(req, ino, buf, size, off, fi))
        return;
    if (kill)
        cf_wbh_sync(cf, ino);
    struct fop *f = fop_new(req, RPC_OP_WRITE, write_cb);
    if (!f)
        return;
    f->parent = ino;
    if (kill)
        RPC_SET(&f->op.args, flags, RPC_T_FLAGS, RPC_WRITE_KILL_SUIDGID);
    /* buf belongs to the FUSE worker and is reused once we return. */
    f->data = malloc(size ? size : 1);
    if (!f->data)
        FOP_FAIL(f, -ENOMEM);
    memcpy(f->data, buf, size);
    f->size = size;
    struct rpc_msg *a = &f->op.args;
    RPC_SET(a, fh, RPC_T_FH, fi->fh);
    RPC_SET(a, offset, RPC_T_OFFSET, (uint64_t)off);
    rpc_set_bytes(a, RPC_T_DATA, &a->data, f->data, size);
    fop_lease_key(f, ino);
    fop_submit(f);
}

static void flush_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    /* The locks are released either way; a write's error comes first. */
    fuse_reply_err(f->req, f->off ? (int)f->off : fop_errno(op->status));
    fop_free(f);
}

void cf_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    /* FLUSH only releases the closing owner's POSIX locks on the brick
     * (writes are synchronous, so no error can be pending). A file no lock
     * request of this mount ever touched has none: answer here and save
     * the round trip every close() would pay. */
    struct cf *cf = fuse_req_userdata(req);
    int err = cf_wbh_flush(cf, ino); /* a write behind that failed */
    if (!cl_itable_was_locked(cf->it, ino)) {
        fuse_reply_err(req, -err);
        return;
    }
    struct fop *f = fop_new(req, RPC_OP_FLUSH, flush_cb);
    if (!f)
        return;
    f->off = (uint64_t)-err;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fi->fh);
    RPC_SET(&f->op.args, owner, RPC_T_OWNER, fi->lock_owner);
    fop_submit(f);
}

void cf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    uint64_t fh = fi->fh;
    cf_wbh_sync(cf, ino);
    if (cf_wb_release(req, fi, &fh)) {
        /* A write-back file goes to the bricks now (wb.c). */
        if (!fh) {
            fuse_reply_err(req, 0);
            return;
        }
    }
    cl_itable_close_fh(cf->it, ino, fh);
    /* The bricks share the file again once its last handle here closes;
     * what was written behind went above. */
    uint64_t other;
    if (cl_itable_any_fh(cf->it, ino, &other) < 0)
        cf_known_file_shared(cf, ino);
    cf_rc_release_wait(cf, fh); /* windows read ahead through it */
    struct fop *f = fop_new(req, RPC_OP_RELEASE, fop_done_release_cb);
    if (!f)
        return;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fh);
    fop_submit(f);
}

void cf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    int err = cf_wbh_flush(cf, ino);
    if (err < 0) {
        fuse_reply_err(req, -err);
        return;
    }
    cf_wb_fsync_fh(cf, fi->fh);
    struct fop *f = fop_new(req, RPC_OP_FSYNC, fop_done_err_cb);
    if (!f)
        return;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fi->fh);
    RPC_SET(&f->op.args, flags, RPC_T_FLAGS, datasync ? 1 : 0);
    fop_submit(f);
}

void cf_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                  struct fuse_file_info *fi)
{
    cf_lsa_changed(fuse_req_userdata(req)); /* lsahead.c */
    cf_rc_changed(fuse_req_userdata(req), ino);
    cf_wbh_sync(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_FALLOCATE, fop_done_err_cb);
    if (!f)
        return;
    struct rpc_msg *a = &f->op.args;
    RPC_SET(a, fh, RPC_T_FH, fi->fh);
    RPC_SET(a, flags, RPC_T_FLAGS, (uint64_t)(unsigned)mode);
    RPC_SET(a, offset, RPC_T_OFFSET, (uint64_t)offset);
    RPC_SET(a, size, RPC_T_SIZE, (uint64_t)length);
    fop_lease_key(f, ino);
    fop_submit(f);
}

static void lseek_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    if (!rpc_has(&op->reply->msg, RPC_T_OFFSET))
        FOP_FAIL(f, -EPROTO);
    fuse_reply_lseek(f->req, (off_t)op->reply->msg.offset);
    fop_free(f);
}

void cf_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        fuse_reply_err(req, EINVAL); /* the kernel resolves the others itself */
        return;
    }
    cf_wbh_sync(fuse_req_userdata(req), ino);
    struct fop *f = fop_new(req, RPC_OP_LSEEK, lseek_cb);
    if (!f)
        return;
    struct rpc_msg *a = &f->op.args;
    RPC_SET(a, fh, RPC_T_FH, fi->fh);
    RPC_SET(a, offset, RPC_T_OFFSET, (uint64_t)off);
    RPC_SET(a, whence, RPC_T_WHENCE, (uint64_t)whence);
    fop_submit(f);
}
