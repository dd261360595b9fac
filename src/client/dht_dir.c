/* Distribute: directory handles (open on every subvolume), the merged
 * listing with its cookies, directory attributes merged from every copy,
 * statfs summed. docs/replication.md, "Distribute". */
#include "../rpc/opinfo.h"
#include "dht_int.h"

/* Replaces the ATTR field of a reply frame with a. 0 or -ENOMEM. */
static int frame_set_attr(struct rpc_frame *r, const struct rpc_attr *a)
{
    struct rpc_buf b;
    struct rpc_iter it;
    struct rpc_field f;
    rpc_buf_init(&b);
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &f) > 0)
        if (f.tag != RPC_T_ATTR)
            rpc_put_bytes(&b, f.tag, f.val, f.len);
    rpc_put_attr(&b, RPC_T_ATTR, a);
    if (b.err) {
        rpc_buf_free(&b);
        return -ENOMEM;
    }
    free(r->body);
    r->body = b.data;
    r->hdr.body_len = (uint32_t)b.len;
    return rpc_msg_decode(r->body, b.len, &r->msg, NULL) < 0 ? -EPROTO : 0;
}

static void later(int64_t *s, uint32_t *ns, int64_t s2, uint32_t ns2)
{
    if (s2 > *s || (s2 == *s && ns2 > *ns)) {
        *s = s2;
        *ns = ns2;
    }
}

/* Answers op from the copies' replies in subs (mask: asked): the copy on
 * base (another if base failed to answer) with the latest times of all. */
static void dir_attr_finish(struct dht *d, struct cl_op *op, struct cl_op *subs, uint64_t mask,
                            int base)
{
    if (!(mask >> base & 1) || subs[base].status < 0) {
        int st = (mask >> base & 1) ? subs[base].status : -ENOTCONN;
        for (int i = 0; i < d->n && (st == -ENOTCONN || st == -ETIMEDOUT); i++)
            if ((mask >> i & 1) && subs[i].status == 0)
                base = i, st = 0; /* another copy answers for a down one */
        if (st < 0) {
            dht__release_all(d, subs, mask);
            dht__complete_op(op, st, NULL);
            return;
        }
    }
    struct rpc_frame *r = subs[base].reply;
    int st = r && rpc_has(&r->msg, RPC_T_ATTR) ? 0 : -EPROTO;
    if (st == 0) {
        struct rpc_attr a = r->msg.attr;
        for (int i = 0; i < d->n; i++) {
            if (!(mask >> i & 1) || i == base || subs[i].status < 0 ||
                !rpc_has(&subs[i].reply->msg, RPC_T_ATTR))
                continue;
            const struct rpc_attr *o = &subs[i].reply->msg.attr;
            later(&a.mtime, &a.mtime_ns, o->mtime, o->mtime_ns);
            later(&a.ctime, &a.ctime_ns, o->ctime, o->ctime_ns);
            later(&a.atime, &a.atime_ns, o->atime, o->atime_ns);
        }
        st = frame_set_attr(r, &a);
    }
    if (st == 0) {
        dht__dir_lease(d, subs, mask, r);
        subs[base].reply = NULL;
        dht__release_all(d, subs, mask);
        dht__complete_op(op, 0, r);
    } else {
        dht__release_all(d, subs, mask);
        dht__complete_op(op, st, NULL);
    }
}

struct dirfan {
    struct dht *d;
    struct cl_op *parent;
    int base, remaining;
    uint32_t rounds; /* of the operation before the fan-out */
    uint64_t mask;
    struct cl_op subs[]; /* one per subvolume */
};

static void dirfan_done_cb(struct cl_op *sub)
{
    struct dirfan *f = sub->ctx;
    if (__atomic_sub_fetch(&f->remaining, 1, __ATOMIC_ACQ_REL) == 0) {
        uint32_t most = 0;
        for (int i = 0; i < f->d->n; i++)
            if ((f->mask >> i & 1) && f->subs[i].rounds > most)
                most = f->subs[i].rounds;
        dht__rounds_start(f->rounds + most);
        dir_attr_finish(f->d, f->parent, f->subs, f->mask, f->base);
        free(f);
    }
}

/* A directory's attributes: its copy on subvolume base, with the latest
 * times of all copies (a file created on one subvolume changes only that
 * copy's mtime). One round trip to every subvolume, asynchronous (callable
 * inline and from completions); a copy that is down or missing is left
 * out. By path (LOOKUP, GETATTR) or by the handle h. */
void dht__dir_attr(struct dht *d, struct cl_op *op, int base, const struct dfh *h)
{
    struct dirfan *f = calloc(1, sizeof(*f) + (size_t)d->n * sizeof(struct cl_op));
    if (!f) {
        dht__complete_op(op, -ENOMEM, NULL);
        return;
    }
    f->d = d;
    f->parent = op;
    f->base = base;
    f->rounds = dht__rounds_now();
    uint64_t down = dht__down_mask(d);
    for (int i = 0; i < d->n; i++) {
        if ((h && h->fh[i] == NOFH) || (down >> i & 1))
            continue;
        dht__sub_from(&f->subs[i], &op->args);
        if (!h && rpc_has(&op->args, RPC_T_LEASE)) /* every copy's lease (dht__dir_lease) */
            RPC_SET(&f->subs[i].args, lease, RPC_T_LEASE, op->args.lease);
        f->subs[i].done = dirfan_done_cb;
        f->subs[i].ctx = f;
        if (h)
            f->subs[i].args.fh = h->fh[i];
        f->mask |= 1ull << i;
    }
    if (!f->mask) {
        free(f);
        dht__complete_op(op, -ENOTCONN, NULL);
        return;
    }
    /* f may be gone once the last one is submitted: work from copies. */
    uint64_t mask = f->mask;
    struct cl_op *subs = f->subs;
    f->remaining = __builtin_popcountll(mask);
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1)
            cl_submit(d->layer.children[i], &subs[i]);
}

void dht__do_statfs(struct dht *d, struct cl_op *op)
{
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        dht__sub_from(&subs[i], &op->args);
    dht__fan_run(d, subs, dht__all_mask(d));
    struct rpc_statfs sum = {0};
    int first = -1, st = 0;
    /* A quota limit's sizes (docs/quota.md) are the whole directory's on
     * every set: one answer, not their sum. */
    for (int i = 0; i < d->n; i++) {
        const struct rpc_msg *m = subs[i].status < 0 ? NULL : &subs[i].reply->msg;
        if (m && rpc_has(m, RPC_T_STATFS) && rpc_has(m, RPC_T_FLAGS) &&
            (m->flags & RPC_STATFS_QUOTA)) {
            struct rpc_frame *r = subs[i].reply;
            subs[i].reply = NULL;
            dht__release_all(d, subs, dht__all_mask(d));
            dht__complete_op(op, 0, r);
            return;
        }
    }
    for (int i = 0; i < d->n; i++) {
        if (subs[i].status < 0 || !rpc_has(&subs[i].reply->msg, RPC_T_STATFS)) {
            if (!st)
                st = subs[i].status < 0 ? subs[i].status : -EPROTO;
            continue;
        }
        const struct rpc_statfs *s = &subs[i].reply->msg.statfs;
        if (first < 0) {
            first = i;
            sum = *s;
            continue;
        }
        /* In units of the first subvolume's fragment size. */
        uint64_t f = sum.frsize ? sum.frsize : 1;
        sum.blocks += s->blocks * s->frsize / f;
        sum.bfree += s->bfree * s->frsize / f;
        sum.bavail += s->bavail * s->frsize / f;
        sum.files += s->files;
        sum.ffree += s->ffree;
        if (s->namemax < sum.namemax)
            sum.namemax = s->namemax;
    }
    if (first < 0) {
        dht__complete_op(op, st ? st : -ENOTCONN, NULL);
    } else {
        /* A subvolume down shrinks the totals rather than failing df. */
        struct rpc_frame *r = subs[first].reply;
        subs[first].reply = NULL;
        r->msg.statfs = sum;
        /* The body still carries the first subvolume's STATFS: rewrite it. */
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_put_statfs(&b, RPC_T_STATFS, &sum);
        if (!b.err) {
            free(r->body);
            r->body = b.data;
            r->hdr.body_len = (uint32_t)b.len;
            rpc_msg_decode(r->body, b.len, &r->msg, NULL);
        } else {
            rpc_buf_free(&b);
        }
        dht__complete_op(op, 0, r);
    }
    dht__release_all(d, subs, dht__all_mask(d));
}

/* ---- directory handles and the merged listing ---- */

void dht__do_opendir(struct dht *d, struct cl_op *op, const char *path)
{
    struct dfh *h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(path))) {
        dht__dfh_free(h);
        dht__complete_op(op, -ENOMEM, NULL);
        return;
    }
    h->is_dir = 1;
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        dht__sub_from(&subs[i], &op->args);
    dht__fan_run(d, subs, dht__all_mask(d));
    int st = 0, any = -1;
    for (int i = 0; i < d->n; i++) {
        h->fh[i] = NOFH;
        if (subs[i].status == 0 && rpc_has(&subs[i].reply->msg, RPC_T_FH)) {
            h->fh[i] = subs[i].reply->msg.fh;
            if (any < 0)
                any = i;
        } else if (st == 0) {
            st = subs[i].status < 0 ? subs[i].status : -EPROTO;
        }
    }
    /* A directory missing on some subvolume lists what the others hold; a
     * subvolume that is down fails the open (its files would be missing). */
    if ((st == -ENOENT || st == -ENOTCONN || st == -ETIMEDOUT) && any >= 0) {
        if (st != -ENOENT)
            log_warn("volume %s: listing %s without the subvolumes that are down", d->volume, path);
        st = 0;
    }
    uint64_t id;
    if (st == 0 && (st = dht__fh_add(d, h, &id)) == 0) {
        h->subvol = any;
        subs[any].reply->msg.fh = id;
        dht__complete_sub(op, &subs[any]);
    } else {
        for (int i = 0; i < d->n; i++)
            if (h->fh[i] != NOFH) {
                struct cl_op r;
                cl_op_init(&r, RPC_OP_RELEASEDIR, NULL, NULL);
                RPC_SET(&r.args, fh, RPC_T_FH, h->fh[i]);
                dht__run(d, i, &r);
                cl_op_release(&r);
            }
        dht__dfh_free(h);
        dht__complete_op(op, st ? st : -ENOENT, NULL);
    }
    dht__release_all(d, subs, dht__all_mask(d));
}

static int cookie_out(struct dht *d, int subvol, uint64_t bc, uint64_t *out)
{
    if (cl_dht_cookie_pack(bc, subvol, d->bits, out) == 0)
        return 0;
    return cl_dht_cookie_map_put(d->cookies, subvol, bc, out);
}

/* 1 when name in the listing of subvolume i is a link-to file. */
static int is_linkto(struct dht *d, struct dfh *h, int i, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dht__is_root(h->path) ? "" : h->path, name) >=
        (int)sizeof(path))
        return 0;
    uint8_t v[8];
    size_t vl;
    return dht__get_xattr(d, i, path, CL_DHT_XATTR_LINKTO, v, sizeof(v), &vl) == 0;
}

/* The directories a page of the listing on first shows, each with its
 * attributes merged with every other copy's (the latest times, as
 * dir_attr_finish) and the lease bits to pass up with it: the name's from
 * first, the attributes' when every copy granted its lease. The other
 * copies are asked at once, DIRS_AT_ONCE directories at a time; a copy
 * that does not answer leaves that directory's attributes unleased. */
#define DIRS_AT_ONCE 32

struct dir_copy {
    char *name;
    struct rpc_attr attr; /* first's, merged with the others'; a mode of 0: none given */
    unsigned lease;       /* the bits to pass up with the entry */
};

struct dir_copies {
    size_t n;
    struct dir_copy *e;
};

static void dir_copies_free(struct dir_copies *c)
{
    for (size_t k = 0; k < c->n; k++)
        free(c->e[k].name);
    free(c->e);
    c->e = NULL;
    c->n = 0;
}

/* The directory entries of r (not "." or ".."), in order, with first's
 * attributes. 0, or -ENOMEM. */
static int dir_entries(const struct rpc_frame *r, struct dir_copies *c)
{
    struct rpc_iter it;
    struct rpc_field f;
    size_t cap = 0;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg e;
        char name[NAME_MAX + 1];
        if (f.tag != RPC_T_DIRENT || rpc_msg_decode(f.val, f.len, &e, NULL) < 0 ||
            !rpc_has(&e, RPC_T_NAME) || rpc_bytes_str(&e.name, name, sizeof(name)) < 0 ||
            !S_ISDIR((mode_t)(e.mode & S_IFMT)) || !strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        if (c->n == cap) {
            cap = cap ? cap * 2 : 16;
            struct dir_copy *ne = realloc(c->e, cap * sizeof(*ne));
            if (!ne)
                return -ENOMEM;
            c->e = ne;
        }
        struct dir_copy *x = &c->e[c->n];
        if (!(x->name = strdup(name)))
            return -ENOMEM;
        x->attr = rpc_has(&e, RPC_T_ATTR) ? e.attr : (struct rpc_attr){0};
        x->lease = 0;
        c->n++;
    }
    return 0;
}

/* Asks the other copies of directories [from, to) of c for their
 * attributes, under the lease, and merges them in. */
static int dir_copies_batch(struct dht *d, struct dfh *h, int first, unsigned got,
                            struct dir_copies *c, size_t from, size_t to)
{
    size_t per = (size_t)d->n - 1, n = (to - from) * per;
    struct cl_op *ops = calloc(n, sizeof(*ops));
    struct cl_op **run = calloc(n, sizeof(*run));
    int *child = calloc(n, sizeof(*child));
    char *paths[DIRS_AT_ONCE] = {0};
    int rc = ops && run && child ? 0 : -ENOMEM;
    size_t m = 0;
    for (size_t k = from; rc == 0 && k < to; k++) {
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s/%s", dht__is_root(h->path) ? "" : h->path,
                     c->e[k].name) >= (int)sizeof(buf))
            continue; /* not leased: no copy asked */
        const char *p = paths[k - from] = strdup(buf);
        if (!p) {
            rc = -ENOMEM;
            break;
        }
        for (int j = 0; j < d->n; j++) {
            if (j == first || h->fh[j] == NOFH)
                continue;
            cl_op_init(&ops[m], RPC_OP_GETATTR, NULL, NULL);
            rpc_set_str(&ops[m].args, RPC_T_PATH, &ops[m].args.path, p);
            RPC_SET(&ops[m].args, lease, RPC_T_LEASE, RPC_LEASE_READ);
            run[m] = &ops[m];
            child[m++] = j;
        }
    }
    if (rc == 0)
        dht__run_many(d, run, child, m);
    /* Each directory: every other copy answered under its lease? */
    size_t q = 0;
    for (size_t k = from; rc == 0 && k < to; k++) {
        const char *p = paths[k - from];
        struct rpc_attr *a = &c->e[k].attr;
        int asked = 0, ok = (got & RPC_LEASE_READ) && a->mode != 0;
        for (; p && q < m && ops[q].args.path.p == (const uint8_t *)p; q++) {
            asked++;
            const struct rpc_frame *r = ops[q].reply;
            if (ops[q].status < 0 || !r || !rpc_has(&r->msg, RPC_T_ATTR) ||
                !rpc_lease_object(&r->msg)) {
                ok = 0;
                continue;
            }
            const struct rpc_attr *o = &r->msg.attr;
            later(&a->mtime, &a->mtime_ns, o->mtime, o->mtime_ns);
            later(&a->ctime, &a->ctime_ns, o->ctime, o->ctime_ns);
            later(&a->atime, &a->atime_ns, o->atime, o->atime_ns);
        }
        c->e[k].lease = (got & RPC_LEASE_NAME) | (ok && asked == (int)per ? RPC_LEASE_READ : 0);
    }
    for (size_t k = 0; k < m; k++)
        cl_op_release(&ops[k]);
    free(ops);
    free(run);
    free(child);
    for (size_t k = 0; k < DIRS_AT_ONCE; k++)
        free(paths[k]);
    return rc;
}

static void dir_copies_get(struct dht *d, struct dfh *h, int first, const struct rpc_frame *r,
                           unsigned got, struct dir_copies *c)
{
    int rc = dir_entries(r, c);
    for (size_t k = 0; rc == 0 && k < c->n; k += DIRS_AT_ONCE)
        rc = dir_copies_batch(d, h, first, got, c, k,
                              k + DIRS_AT_ONCE < c->n ? k + DIRS_AT_ONCE : c->n);
    if (rc < 0)
        dir_copies_free(c); /* the entries pass up first's, name leased only */
}

/* Counts subvolume i's reply to a listing, whole: it granted every lease. */
static void note_lease(struct dht *d, struct dfh *h, int i, int whole)
{
    pthread_mutex_lock(&d->lock);
    if (whole)
        h->leased |= 1ull << i;
    else
        h->unleased = 1;
    pthread_mutex_unlock(&d->lock);
}

static void do_readdir(struct dht *d, struct cl_op *op, struct dfh *h)
{
    int i;
    uint64_t bc;
    int k = cl_dht_cookie_unpack(op->args.offset, d->bits, d->n, &i, &bc);
    if (op->args.offset == CL_DHT_COOKIE_END) {
        k = 0;
        i = d->n; /* nothing left */
    } else if (k == 1)
        k = cl_dht_cookie_map_get(d->cookies, op->args.offset, &i, &bc);
    if (k < 0) {
        dht__complete_op(op, -EINVAL, NULL);
        return;
    }
    int first = h->subvol; /* directories are listed from this subvolume only */
    /* Leases (distribute.c): each entry carries those of the subvolume that
     * listed it; the reply's covers the listing (the directory's entries),
     * when every copy's was granted in this pass. */
    int ask = rpc_has(&op->args, RPC_T_LEASE);
    if (ask && op->args.offset == 0) {
        pthread_mutex_lock(&d->lock);
        h->leased = 0;
        h->unleased = 0;
        h->pass = 1;
        pthread_mutex_unlock(&d->lock);
    }
    struct rpc_buf out;
    rpc_buf_init(&out);
    int kept = 0, st = 0, eof_all = 0, stop = 0;
    /* Small listings of several subvolumes fill one reply: go on to the
     * next subvolume while less than half the budget is used. */
    size_t budget = rpc_has(&op->args, RPC_T_SIZE) ? op->args.size / 2 : 4096;
    while (!stop && st == 0) {
        while (i < d->n && h->fh[i] == NOFH) {
            i++;
            bc = 0;
        }
        if (i >= d->n) {
            eof_all = 1;
            break;
        }
        struct cl_op s;
        dht__sub_from(&s, &op->args);
        s.args.fh = h->fh[i];
        s.args.offset = bc;
        if (kept && rpc_has(&op->args, RPC_T_SIZE))
            s.args.size = op->args.size - out.len > 4096 ? op->args.size - out.len : 4096;
        if (ask)
            RPC_SET(&s.args, lease, RPC_T_LEASE, op->args.lease);
        if ((st = dht__run(d, i, &s)) < 0) {
            cl_op_release(&s);
            note_lease(d, h, i, 0);
            if (st == -ENOTCONN || st == -ETIMEDOUT) {
                /* Gone mid-listing: the rest comes from the others. */
                st = 0;
                i++;
                bc = 0;
                continue;
            }
            break;
        }
        const struct rpc_frame *r = s.reply;
        int eof = rpc_has(&r->msg, RPC_T_EOF) && r->msg.eof;
        unsigned got = rpc_lease_whole(&r->msg)    ? RPC_LEASE_READ | RPC_LEASE_NAME
                       : rpc_lease_object(&r->msg) ? RPC_LEASE_READ
                                                   : 0;
        note_lease(d, h, i, got == (RPC_LEASE_READ | RPC_LEASE_NAME));
        struct dir_copies copies = {0};
        size_t kd = 0;
        if (ask && i == first && d->n > 1)
            dir_copies_get(d, h, first, r, got, &copies);
        struct rpc_iter it;
        struct rpc_field f;
        int n_ent = 0, rc;
        rpc_iter_init(&it, r->body, r->hdr.body_len);
        while ((rc = rpc_iter_next(&it, &f)) > 0)
            n_ent += f.tag == RPC_T_DIRENT;
        int seen = 0;
        uint64_t last = bc;
        rpc_iter_init(&it, r->body, r->hdr.body_len);
        while (st == 0 && (rc = rpc_iter_next(&it, &f)) > 0) {
            if (f.tag != RPC_T_DIRENT)
                continue;
            seen++;
            struct rpc_msg e;
            char name[NAME_MAX + 1];
            if (rpc_msg_decode(f.val, f.len, &e, NULL) < 0 || !rpc_has(&e, RPC_T_NAME) ||
                !rpc_has(&e, RPC_T_OFFSET) || rpc_bytes_str(&e.name, name, sizeof(name)) < 0) {
                st = -EPROTO;
                break;
            }
            last = e.offset;
            if (!strcmp(name, ".") || !strcmp(name, ".."))
                continue;
            mode_t type = (mode_t)(e.mode & S_IFMT);
            if (S_ISDIR(type) && i != first)
                continue;
            if (rpc_has(&e, RPC_T_ATTR) && dht__linkto_candidate(&e.attr) &&
                is_linkto(d, h, i, name))
                continue;
            /* The last entry of a subvolume's listing leads to the next one. */
            uint64_t next;
            int nx = i + 1;
            while (nx < d->n && h->fh[nx] == NOFH)
                nx++;
            if (eof && seen == n_ent && nx < d->n)
                st = cookie_out(d, nx, 0, &next);
            else if (eof && seen == n_ent)
                next = CL_DHT_COOKIE_END; /* asking again would find nothing */
            else
                st = cookie_out(d, i, e.offset, &next);
            if (st < 0)
                break;
            e.offset = next;
            /* A file's attributes and name are on this subvolume, which
             * recalls its lease on every change of them; a directory's
             * name is on every one, its attributes merge every copy's
             * (dir_copies_get asked the others). */
            unsigned lease = S_ISDIR(type) ? got & RPC_LEASE_NAME : got;
            if (S_ISDIR(type) && kd < copies.n) {
                if (rpc_has(&e, RPC_T_ATTR) && copies.e[kd].attr.mode)
                    e.attr = copies.e[kd].attr;
                lease = copies.e[kd].lease;
            }
            kd += S_ISDIR(type);
            if (ask)
                RPC_SET(&e, lease, RPC_T_LEASE, lease);
            size_t mark = rpc_put_begin(&out, RPC_T_DIRENT);
            rpc_msg_encode(&e, &out);
            rpc_put_end(&out, mark);
            kept++;
        }
        dir_copies_free(&copies);
        if (rc < 0 && st == 0)
            st = -EPROTO;
        if (st == 0 && eof) {
            int nx = i + 1;
            while (nx < d->n && h->fh[nx] == NOFH)
                nx++;
            if (nx >= d->n) {
                eof_all = 1;
                stop = 1;
            } else {
                i = nx;
                bc = 0;
                stop = kept && out.len >= budget;
            }
        } else if (st == 0) {
            if (!seen)
                st = -EPROTO; /* no progress */
            else if (kept)
                stop = 1;
            else
                bc = last;
        }
        cl_op_release(&s);
    }
    if (st == 0 && eof_all)
        rpc_put_u64(&out, RPC_T_EOF, 1);
    if (st == 0 && ask) {
        pthread_mutex_lock(&d->lock);
        int whole = h->pass && !h->unleased && (!eof_all || h->leased == dht__all_mask(d));
        pthread_mutex_unlock(&d->lock);
        rpc_put_u64(&out, RPC_T_LEASE, whole ? RPC_LEASE_READ | RPC_LEASE_NAME : 0);
    }
    struct rpc_frame *fr = NULL;
    if (st == 0 && (out.err || !(fr = calloc(1, sizeof(*fr)))))
        st = -ENOMEM;
    if (st < 0) {
        rpc_buf_free(&out);
        dht__complete_op(op, st, NULL);
        return;
    }
    fr->body = out.data;
    fr->hdr.body_len = (uint32_t)out.len;
    fr->hdr.kind = 2;
    fr->hdr.opcode = RPC_OP_READDIR;
    if (rpc_msg_decode(fr->body, out.len, &fr->msg, NULL) < 0) {
        rpc_frame_free(fr);
        dht__complete_op(op, -EPROTO, NULL);
        return;
    }
    dht__complete_op(op, 0, fr);
}

void dht__do_dir_fh(struct dht *d, struct cl_op *op, struct dfh *h)
{
    unsigned code = (unsigned)op->args.op;
    if (code == RPC_OP_READDIR) {
        do_readdir(d, op, h);
    } else if (code == RPC_OP_RELEASEDIR) {
        dht__fh_take(d, op->args.fh);
        struct cl_op subs[CL_DHT_MAX];
        uint64_t mask = 0;
        for (int i = 0; i < d->n; i++)
            if (h->fh[i] != NOFH) {
                dht__sub_from(&subs[i], &op->args);
                subs[i].args.fh = h->fh[i];
                mask |= 1ull << i;
            }
        dht__fan_run(d, subs, mask);
        dht__release_all(d, subs, mask);
        dht__dfh_free(h);
        dht__complete_op(op, 0, NULL);
    } else if (code == RPC_OP_FSYNC || rpc_op_is(code, RPC_OPF_META)) {
        dht__every(d, op, h->subvol, h);
    } else if (code == RPC_OP_GETATTR) {
        dht__dir_attr(d, op, h->subvol, h);
    } else {
        struct cl_op s;
        dht__sub_from(&s, &op->args);
        s.args.fh = h->fh[h->subvol];
        dht__run(d, h->subvol, &s);
        dht__complete_sub(op, &s);
        cl_op_release(&s);
    }
}
