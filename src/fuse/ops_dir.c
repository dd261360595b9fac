/* Directory handlers.
 *
 * Offsets. The kernel resumes a listing at the offset of the last entry it
 * consumed, so every entry carries the offset of the one after it. Cairn adds
 * "." and ".." itself and passes brick cookies through shifted by two:
 *   kernel 0      start: ".", "..", then the brick listing from its start
 *   kernel 1      after ".": "..", then the brick listing from its start
 *   kernel 2      after "..": the brick listing from its start
 *   kernel c + 2  the brick listing from brick cookie c
 * Brick cookies are the backing file system's d_off values: small integers
 * on xfs/tmpfs, hashes below 2^63 on ext4, whose end-of-directory marker is
 * 2^63 - 1. Cookies too large to shift (>= 2^63 - 3) all become END, which
 * lists nothing; only ext4's end marker lives there in practice. Brick
 * cookies stay valid while entries come and go, and so do these. Every
 * entry is answered at most once per pass because each request restarts at
 * exactly the cookie of the last entry the kernel kept. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "bridge.h"

#define OFF_SHIFT 2
#define OFF_END ((uint64_t)INT64_MAX)

static uint64_t kernel_off(uint64_t cookie)
{
    if (cookie == 0 || cookie >= OFF_END - OFF_SHIFT)
        return OFF_END;
    return cookie + OFF_SHIFT;
}

static void opendir_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    if (!rpc_has(&op->reply->msg, RPC_T_FH))
        FOP_FAIL(f, -EPROTO);
    f->fi.fh = op->reply->msg.fh;
    /* Under a lease on the directory's entries the kernel keeps its listing
     * between opens; it is filled under the lease the first time, and the
     * recall drops it (docs/consistency.md, "Listings"). */
    cf_reply_begin(f->cf);
    int cache = cf_known_dir_cache(f->cf, f->parent);
    f->fi.cache_readdir = cache > 0;
    f->fi.keep_cache = cache == 2;
    if (fuse_reply_open(f->req, &f->fi) != 0)
        fop_release_orphan(f->cf, RPC_OP_RELEASEDIR, f->fi.fh);
    cf_reply_end(f->cf);
    fop_free(f);
}

/* A directory whose listing the kernel keeps under the lease is opened
 * without the brick: the kernel lists it from its cache, so the handle it
 * gets is only a promise. The brick handle is made the first time a
 * request needs it (a READDIR after a recall dropped the cache, fsyncdir,
 * a lock, an fstat; fop_submit calls cf_dir_real_fh), and released with
 * the handle. LAZY_BIT marks such handles: brick handles are small
 * numbers and write-back handles use bit 63. */
#define LAZY_BIT (1ull << 62)

struct lazy_dir {
    pthread_mutex_t lock;
    fuse_ino_t ino;
    uint64_t fh; /* 0 until opened on the brick */
    /* Opened to be listed from what this mount knows (serve_known): the
     * entries of the pass in progress, when it is answered so. */
    int known, bricks; /* bricks: the pass in progress is the bricks' */
    struct cf_known_list *list;
};

static struct lazy_dir *lazy_of(uint64_t fh)
{
    return (fh & LAZY_BIT) && !(fh & (1ull << 63)) ? (struct lazy_dir *)(uintptr_t)(fh & ~LAZY_BIT)
                                                   : NULL;
}

int cf_dir_is_lazy(uint64_t fh)
{
    return lazy_of(fh) != NULL;
}

int cf_dir_real_fh(struct cf *cf, uint64_t fh, uint64_t *real)
{
    struct lazy_dir *d = lazy_of(fh);
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->fh) {
        struct fop *f = calloc(1, sizeof(*f));
        if (!f) {
            pthread_mutex_unlock(&d->lock);
            return -ENOMEM;
        }
        f->cf = cf;
        cl_op_init(&f->op, RPC_OP_OPENDIR, NULL, f);
        f->op.rounds = 0;
        if ((rc = fop_path(f, d->ino, NULL)) == 0) {
            rc = cl_op_run(cf->stack, &f->op);
            cl_opstats_note(&cf->stats, RPC_OP_OPENDIR, f->op.rounds, rc);
        }
        if (rc == 0) {
            if (rpc_has(&f->op.reply->msg, RPC_T_FH))
                d->fh = f->op.reply->msg.fh;
            else
                rc = -EPROTO;
        }
        cl_op_release(&f->op);
        free(f);
    }
    *real = d->fh;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Answers an OPENDIR with a lazy handle; cache as cf_known_dir_cache
 * says (-1: a handle for a listing answered from cf_known_list, which the
 * kernel does not keep). 0 without memory (the caller opens on the
 * bricks). */
static int open_lazy(fuse_req_t req, struct fuse_file_info *fi, fuse_ino_t ino, int cache)
{
    struct lazy_dir *d = calloc(1, sizeof(*d));
    if (!d)
        return 0;
    pthread_mutex_init(&d->lock, NULL);
    d->ino = ino;
    d->known = cache < 0;
    if (cache < 0)
        cache = 0;
    struct fuse_file_info o = *fi;
    o.fh = (uint64_t)(uintptr_t)d | LAZY_BIT;
    o.cache_readdir = cache > 0;
    o.keep_cache = cache == 2;
    if (fuse_reply_open(req, &o) != 0) {
        pthread_mutex_destroy(&d->lock);
        free(d);
    }
    return 1;
}

/* Under the reply lock: a directory whose listing was fetched ahead under
 * the lease, with no recall since, is as one listed under it (serve_ahead
 * says so once it serves), and the kernel may keep that listing from this
 * open on (cf_known_dir_cache). -1: no such listing. */
static int ahead_cache(struct cf *cf, fuse_ino_t ino)
{
    if (!cf_lsa_has(cf, ino))
        return -1;
    cf_known_leased(cf, ino);
    return cf_known_dir_cache(cf, ino);
}

void cf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    cf_reply_begin(cf);
    /* The kernel lists it from its cache, or its listing was fetched ahead
     * (lsahead.c): no brick handle unless something needs one. */
    int cache = cf_known_dir_cache_kept(cf, ino) ? 2 : ahead_cache(cf, ino);
    int done = cache >= 0 && open_lazy(req, fi, ino, cache);
    /* Every entry known here (a directory this mount made and holds the
     * lease of): listed without the bricks (serve_known). */
    if (!done && cf_known_listable(cf, ino))
        done = open_lazy(req, fi, ino, -1);
    cf_reply_end(cf);
    if (done)
        return;
    if (cf_lsa_unwant(cf, ino)) {
        cf_reply_begin(cf);
        cache = ahead_cache(cf, ino);
        done = cache >= 0 && open_lazy(req, fi, ino, cache);
        cf_reply_end(cf);
        if (done)
            return;
    }
    struct fop *f = fop_new(req, RPC_OP_OPENDIR, opendir_cb);
    if (!f)
        return;
    f->fi = *fi;
    f->parent = ino;
    int rc = fop_path(f, ino, NULL);
    if (rc < 0)
        FOP_FAIL(f, rc);
    fop_submit(f);
}

static int is_dots(const char *name)
{
    return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* Adds one entry; returns 0, or 1 when the buffer is full. *sub (when not
 * NULL): the node of a subdirectory listed under the lease, else 0. */
static int add_entry(struct fop *f, int plus, const char *name, uint64_t next,
                     const struct rpc_msg *d, uint64_t dir_ino_number, uint64_t *sub)
{
    if (sub)
        *sub = 0;
    char *buf = (char *)f->data + f->pos;
    size_t room = f->size - f->pos;
    int dots = is_dots(name);
    if (!plus) {
        struct stat st = {0};
        if (dots) {
            st.st_ino = dir_ino_number;
            st.st_mode = S_IFDIR;
        } else {
            st.st_ino = rpc_has(d, RPC_T_ATTR) ? gfid_ino(&d->attr.gfid) : 1;
            st.st_mode = (mode_t)(d->mode & S_IFMT);
        }
        size_t n = fuse_add_direntry(f->req, buf, room, name, &st, (off_t)next);
        if (n > room)
            return 1;
        f->pos += n;
        return 0;
    }
    size_t need = fuse_add_direntry_plus(f->req, NULL, 0, name, NULL, 0);
    if (need > room)
        return 1;
    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    if (dots) {
        /* The kernel counts no lookup for these; node id 0 says so. */
        e.attr.st_ino = dir_ino_number;
        e.attr.st_mode = S_IFDIR;
    } else if (rpc_has(d, RPC_T_ATTR)) {
        int err;
        e.ino =
            cl_itable_link(f->cf->it, f->parent, name, &d->attr.gfid, d->attr.mode & S_IFMT, &err);
        if (e.ino)
            cl_itable_set_nlink(f->cf->it, e.ino, d->attr.nlink);
        rpc_attr_to_stat(&d->attr, &e.attr);
        int attr = cf_lease_entry_held(f, d, RPC_LEASE_READ);
        int named = cf_lease_entry_held(f, d, RPC_LEASE_NAME);
        e.attr_timeout = cf_lease_attr_timeout_as(f, attr, &d->attr);
        e.entry_timeout = cf_lease_entry_timeout_as(f, named);
        struct stat known;
        if (e.ino && S_ISDIR(e.attr.st_mode) && cf_known_attr(f->cf, e.ino, &known) &&
            S_ISDIR(known.st_mode)) {
            /* What this mount holds under the directory's own lease, which
             * the kernel has too: the copy listed may not have this
             * mount's changes written back yet, and a merged listing's
             * copy is not every copy (its attributes merge them all). Set
             * back, the kernel's mtime would drop the listing it keeps. */
            e.attr = known;
            e.attr_timeout = cf_lease_cache_timeout(f->cf);
        } else if (e.ino && S_ISDIR(e.attr.st_mode) && attr) {
            cf_known_set_attr(f->cf, e.ino, &e.attr);
        }
        if (!e.ino) {
            e.attr.st_mode = (mode_t)(d->mode & S_IFMT);
        } else {
            if (attr) {
                cf_known_leased_as(f->cf, e.ino, &e.attr, 1);
                if (rpc_has(d, RPC_T_NOXATTRS))
                    cf_known_noxattrs(f->cf, e.ino);
            }
            /* Its listing is fetched ahead under its own leases. */
            if (sub && named && S_ISDIR(d->attr.mode))
                *sub = e.ino;
        }
    } else {
        e.attr.st_ino = 1;
        e.attr.st_mode = (mode_t)(d->mode & S_IFMT);
    }
    f->pos += fuse_add_direntry_plus(f->req, buf, room, name, &e, (off_t)next);
    return 0;
}

static void submit_readdir(struct fop *f, uint64_t cookie);

/* One DIRENT of a READDIR reply: its fields and its name checked. */
static int decode_dirent(const struct rpc_field *fld, struct rpc_msg *d, char name[NAME_MAX + 1])
{
    if (rpc_msg_decode(fld->val, fld->len, d, NULL) < 0 || !rpc_has(d, RPC_T_NAME) ||
        !rpc_has(d, RPC_T_OFFSET) || d->name.len == 0 ||
        rpc_bytes_str(&d->name, name, NAME_MAX + 1) < 0 || memchr(name, '/', d->name.len) ||
        memchr(d->name.p, 0, d->name.len))
        return -EPROTO;
    return 0;
}

/* The entries of a READDIR reply the kernel gets (not "." and ".."): the
 * last of a listing's is given the end offset, so that the kernel's next
 * READDIR, which would find nothing, is answered at once. */
static size_t count_entries(const struct rpc_frame *r)
{
    struct rpc_iter it;
    struct rpc_field fld;
    size_t n = 0;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &fld) > 0) {
        struct rpc_msg d;
        char name[NAME_MAX + 1];
        if (fld.tag == RPC_T_DIRENT && decode_dirent(&fld, &d, name) == 0 && !is_dots(name))
            n++;
    }
    return n;
}

/* Subdirectories a reply showed, whose listings are fetched ahead once the
 * reply is out (lsahead.c). */
#define SUBS_MAX 64
struct subs {
    uint64_t node[SUBS_MAX];
    int n;
};

static void note_sub(struct subs *s, uint64_t node)
{
    if (node && s->n < SUBS_MAX)
        s->node[s->n++] = node;
}

static void want_subs(struct cf *cf, const struct subs *s)
{
    for (int i = 0; i < s->n; i++)
        cf_lsa_want(cf, s->node[i]);
}

static void readdir_cb(struct cl_op *op)
{
    struct fop *f = op->ctx;
    int plus = f->flags & 1;
    if (op->status < 0)
        FOP_FAIL(f, op->status);
    const struct rpc_frame *r = op->reply;
    struct rpc_iter it;
    struct rpc_field fld;
    uint64_t last_cookie = 0, sub;
    int full = 0, seen = 0, rc;
    struct subs subs = {.n = 0};
    int eof = rpc_has(&r->msg, RPC_T_EOF) && r->msg.eof;
    size_t left = eof ? count_entries(r) : SIZE_MAX;
    /* Held to the reply: the entries' timeouts depend on the lease. */
    cf_reply_begin(f->cf);
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (!full && (rc = rpc_iter_next(&it, &fld)) > 0) {
        if (fld.tag != RPC_T_DIRENT)
            continue;
        struct rpc_msg d;
        char name[NAME_MAX + 1];
        if (decode_dirent(&fld, &d, name) < 0) {
            cf_reply_end(f->cf);
            FOP_FAIL(f, -EPROTO);
        }
        seen++;
        last_cookie = d.offset;
        if (is_dots(name))
            continue; /* we add our own */
        full = add_entry(f, plus, name, --left ? kernel_off(d.offset) : OFF_END, &d, 0, &sub);
        note_sub(&subs, sub);
    }
    /* The kernel may cache this listing (opendir_cb): only under the lease. */
    if (cf_lease_held(f))
        cf_known_leased(f->cf, f->parent);
    else
        cf_known_dir_uncached(f->cf, f->parent);
    if (!full && f->pos == 0 && !eof) {
        cf_reply_end(f->cf);
        if (!seen || kernel_off(last_cookie) == OFF_END)
            FOP_FAIL(f, -EPROTO); /* a brick must make progress */
        /* Only entries we skip: go on from there. */
        cl_op_release(&f->op);
        submit_readdir(f, last_cookie);
        return;
    }
    fuse_reply_buf(f->req, f->data, f->pos);
    cf_reply_end(f->cf);
    want_subs(f->cf, &subs);
    fop_free(f);
}

/* A READDIR of a directory whose listing was fetched ahead (lsahead.c),
 * answered from it as readdir_cb answers from a brick's reply. 0: not
 * answered (no good listing, or the cookie is not in it). */
static int serve_ahead(struct fop *f, uint64_t cookie)
{
    struct cf *cf = f->cf;
    int plus = f->flags & 1, started = cookie == 0, full = 0, bad = 0;
    size_t pos0 = f->pos;
    struct subs subs = {.n = 0};
    cf_reply_begin(cf);
    const struct cf_lsa_list *l = cf_lsa_get(cf, f->parent);
    if (!l) {
        cf_reply_end(cf);
        return 0;
    }
    /* The entries' timeouts follow the lease the listing was fetched under
     * (every reply of it granted it; no recall since: cf_lsa_get): its mark
     * and a reply lent for cf_lease_held, taken back before fop_free. */
    f->lease_seq = l->mark;
    f->op.reply = l->fr[0];
    size_t left = 0;
    for (size_t i = 0; i < l->n; i++)
        left += count_entries(l->fr[i]);
    for (size_t i = 0; i < l->n && !full && !bad; i++) {
        struct rpc_iter it;
        struct rpc_field fld;
        rpc_iter_init(&it, l->fr[i]->body, l->fr[i]->hdr.body_len);
        while (!full && rpc_iter_next(&it, &fld) > 0) {
            struct rpc_msg d;
            char name[NAME_MAX + 1];
            uint64_t sub;
            if (fld.tag != RPC_T_DIRENT)
                continue;
            if (decode_dirent(&fld, &d, name) < 0) {
                bad = 1; /* the bricks are asked again, and their error returned */
                break;
            }
            if (is_dots(name))
                continue;
            --left;
            if (!started) {
                started = d.offset == cookie;
                continue;
            }
            full = add_entry(f, plus, name, left ? kernel_off(d.offset) : OFF_END, &d, 0, &sub);
            note_sub(&subs, sub);
        }
    }
    f->op.reply = NULL;
    if (!started || bad) {
        f->pos = pos0;
        cf_lsa_done(cf, l, 1);
        cf_reply_end(cf);
        return 0;
    }
    cf_known_leased(cf, f->parent);
    cf_lsa_done(cf, l, !full); /* served to its end: dropped */
    fuse_reply_buf(f->req, f->data, f->pos);
    cf_reply_end(cf);
    want_subs(cf, &subs);
    fop_free(f);
    return 1;
}

/* A READDIR on a handle opened for it, answered from what this mount
 * knows of the directory (cf_known_list): each pass takes the entries as
 * they are at its start, so offsets stay valid through it (entries made or
 * removed meanwhile may or may not show, as POSIX allows). The order is
 * that of the names' table, the same for the same entries. Entry i is
 * followed by offset i + 3 ("." and ".." take 1 and 2), the last by END.
 * Plus entries carry no node (node id 0): the kernel keeps no attributes
 * from them. 0: not answered (the bricks list it, from their cookies). */
static int serve_known(struct fop *f, struct lazy_dir *d)
{
    struct cf *cf = f->cf;
    int plus = f->flags & 1;
    pthread_mutex_lock(&d->lock);
    /* A pass starts: this or the bricks'. A handle that resumes a pass it
     * did not start (seekdir to another stream's position) takes the
     * entries too: the same entries come in the same order. */
    if (f->off <= OFF_SHIFT || (!d->list && !d->bricks)) {
        free(d->list);
        cf_reply_begin(cf);
        d->list = cf_known_list(cf, f->parent);
        cf_reply_end(cf);
        d->bricks = !d->list; /* their cookies from now on */
    }
    struct cf_known_list *l = d->list;
    if (!l) {
        pthread_mutex_unlock(&d->lock);
        return 0;
    }
    size_t i = f->off <= OFF_SHIFT ? 0 : (size_t)(f->off - OFF_SHIFT);
    for (; i < l->n; i++) {
        uint64_t next = i + 1 < l->n ? i + 1 + OFF_SHIFT : OFF_END;
        char *buf = (char *)f->data + f->pos;
        size_t room = f->size - f->pos, n;
        struct fuse_entry_param e;
        memset(&e, 0, sizeof(e));
        e.attr.st_ino = (ino_t)l->e[i].ino;
        e.attr.st_mode = l->e[i].type;
        if (plus)
            n = fuse_add_direntry_plus(f->req, buf, room, l->e[i].name, &e, (off_t)next);
        else
            n = fuse_add_direntry(f->req, buf, room, l->e[i].name, &e.attr, (off_t)next);
        if (n > room)
            break;
        f->pos += n;
    }
    pthread_mutex_unlock(&d->lock);
    fuse_reply_buf(f->req, f->data, f->pos);
    fop_free(f);
    return 1;
}

static void submit_readdir(struct fop *f, uint64_t cookie)
{
    cl_op_init(&f->op, RPC_OP_READDIR, readdir_cb, f);
    struct rpc_msg *a = &f->op.args;
    RPC_SET(a, fh, RPC_T_FH, f->fi.fh);
    RPC_SET(a, offset, RPC_T_OFFSET, cookie);
    /* Ask for about what fits: a brick entry with attributes is about the
     * size of a FUSE plus entry and five times a plain one. */
    size_t budget = (f->flags & 1) ? f->size + f->size / 4 : f->size * 5;
    RPC_SET(a, size, RPC_T_SIZE, budget < 4096 ? 4096 : budget);
    /* Always ask for attributes: plain readdir needs the gfid for d_ino. */
    RPC_SET(a, flags, RPC_T_FLAGS, 1);
    /* Entries go into the kernel's caches: under a lease on the directory
     * (named by PATH) and on each entry, they may stay there. */
    if (fop_path(f, f->parent, NULL) == 0)
        cf_lease_ask(f);
    fop_submit(f);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, int plus)
{
    struct fop *f = fop_new(req, RPC_OP_READDIR, readdir_cb);
    if (!f)
        return;
    f->fi = *fi;
    f->parent = ino;
    f->flags = (uint32_t)plus;
    f->size = size;
    f->off = (uint64_t)off;
    if (!(f->data = malloc(size ? size : 1)))
        FOP_FAIL(f, -ENOMEM);
    if (f->off == OFF_END) {
        fuse_reply_buf(req, NULL, 0);
        fop_free(f);
        return;
    }
    if (f->off < OFF_SHIFT) {
        struct cf *cf = f->cf;
        gfid_t g;
        uint64_t dino = cl_itable_gfid(cf->it, ino, &g) == 0 ? gfid_ino(&g) : 1;
        struct rpc_msg none = {0};
        if (f->off == 0)
            add_entry(f, plus, ".", 1, &none, dino, NULL);
        add_entry(f, plus, "..", 2, &none, 1, NULL);
    }
    uint64_t cookie = f->off <= OFF_SHIFT ? 0 : f->off - OFF_SHIFT;
    struct lazy_dir *d = lazy_of(fi->fh);
    if (d && d->known && serve_known(f, d))
        return;
    if (d && serve_ahead(f, cookie))
        return;
    submit_readdir(f, cookie);
}

void cf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, 0);
}

void cf_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, 1);
}

void cf_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    uint64_t fh = fi->fh;
    struct lazy_dir *d = lazy_of(fh);
    if (d) {
        fh = d->fh; /* no other request uses the handle any more */
        free(d->list);
        pthread_mutex_destroy(&d->lock);
        free(d);
        if (!fh) {
            fuse_reply_err(req, 0);
            return;
        }
    }
    struct fop *f = fop_new(req, RPC_OP_RELEASEDIR, fop_done_release_cb);
    if (!f)
        return;
    RPC_SET(&f->op.args, fh, RPC_T_FH, fh);
    fop_submit(f);
}

/* A directory handle syncs like a file's: FSYNC on the brick handle. */
void cf_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    /* Every file this mount holds written back reaches the bricks: fsync
     * of any directory is how a program (or `sync DIR`) waits for them. */
    struct cf *cf = fuse_req_userdata(req);
    int err = cf_wb_settle_all(cf);
    cf_wbh_settle_all(cf);
    int late = cf_wb_dir_error(cf, ino);
    if (err || late) {
        fuse_reply_err(req, -(err ? err : late));
        return;
    }
    cf_fsync(req, ino, datasync, fi);
}
