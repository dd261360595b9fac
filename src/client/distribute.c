/* The distribute layer (distribute.h, docs/replication.md "Distribute").
 *
 * Two paths. The fast path runs inline, asynchronously: an operation on an
 * open file's handle, and a lookup, create or attribute call whose parent
 * layout (and, for existing objects, whose location) the layer has cached,
 * goes to one subvolume. Everything else (a cache miss, link-to files,
 * mkdir/rmdir, rename, link, unlink, statfs, directory handles and the
 * merged readdir) runs on the layer's worker threads as straight-line code
 * that waits for its subvolumes; children never call back into this layer,
 * so a worker waiting for them cannot deadlock. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "../lib/log.h"
#include "client.h"
#include "distribute.h"

#define NOFH UINT64_MAX
#define N_WORKERS 4
#define CACHE_MAX 65536
#define CACHE_BUCKETS 4096

/* ---- caches: path -> location, directory path -> layout ---- */

struct centry {
    struct centry *next;
    int subvol, is_dir, has_layout;
    struct cl_dht_layout *layout;
    char path[];
};

struct dfh {
    int is_dir, subvol;
    uint64_t fh[CL_DHT_MAX];
    char *path;
    /* mapped readdir cookies (distribute.h) */
    struct {
        int subvol;
        uint64_t cookie;
    } * map;
    size_t n_map, cap_map;
};

struct job {
    struct job *next;
    struct cl_op *op;
};

struct dht {
    struct cl_layer layer;
    int n, bits;
    char *volume;
    pthread_mutex_t lock; /* caches and handles */
    struct centry *buckets[CACHE_BUCKETS];
    size_t n_cache;
    struct dfh **fhs;
    size_t n_fhs;
    /* workers */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct job *qhead, *qtail;
    int stopping, n_threads;
    pthread_t threads[N_WORKERS];
};

static uint32_t path_hash(const char *p)
{
    return cl_dht_hash(p, strlen(p)) % CACHE_BUCKETS;
}

static struct centry *cache_find(struct dht *d, const char *path)
{
    for (struct centry *e = d->buckets[path_hash(path)]; e; e = e->next)
        if (!strcmp(e->path, path))
            return e;
    return NULL;
}

static void cache_clear(struct dht *d)
{
    for (int i = 0; i < CACHE_BUCKETS; i++) {
        struct centry *e = d->buckets[i];
        while (e) {
            struct centry *n = e->next;
            free(e->layout);
            free(e);
            e = n;
        }
        d->buckets[i] = NULL;
    }
    d->n_cache = 0;
}

/* Called with d->lock held. */
static struct centry *cache_get(struct dht *d, const char *path)
{
    struct centry *e = cache_find(d, path);
    if (e)
        return e;
    if (d->n_cache >= CACHE_MAX)
        cache_clear(d);
    size_t l = strlen(path);
    e = calloc(1, sizeof(*e) + l + 1);
    if (!e)
        return NULL;
    memcpy(e->path, path, l + 1);
    e->subvol = -1;
    uint32_t b = path_hash(path);
    e->next = d->buckets[b];
    d->buckets[b] = e;
    d->n_cache++;
    return e;
}

static void cache_set_loc(struct dht *d, const char *path, int subvol, int is_dir)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e) {
        e->subvol = subvol;
        e->is_dir = is_dir;
    }
    pthread_mutex_unlock(&d->lock);
}

static void cache_set_layout(struct dht *d, const char *path, const struct cl_dht_layout *l)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e && (e->layout || (e->layout = malloc(sizeof(*l))))) {
        *e->layout = *l;
        e->has_layout = 1;
    }
    pthread_mutex_unlock(&d->lock);
}

static void cache_drop(struct dht *d, const char *path)
{
    pthread_mutex_lock(&d->lock);
    struct centry **pp = &d->buckets[path_hash(path)];
    for (; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->path, path)) {
            struct centry *e = *pp;
            *pp = e->next;
            free(e->layout);
            free(e);
            d->n_cache--;
            break;
        }
    pthread_mutex_unlock(&d->lock);
}

/* Every path below a renamed or removed directory moved: forget them all
 * (directory renames are rare; a miss costs one lookup). */
static void cache_drop_all(struct dht *d)
{
    pthread_mutex_lock(&d->lock);
    cache_clear(d);
    pthread_mutex_unlock(&d->lock);
}

/* 1 and the location when cached. */
static int cache_loc(struct dht *d, const char *path, int *subvol, int *is_dir)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_find(d, path);
    int hit = e && e->subvol >= 0;
    if (hit) {
        *subvol = e->subvol;
        *is_dir = e->is_dir;
    }
    pthread_mutex_unlock(&d->lock);
    return hit;
}

static int cache_layout(struct dht *d, const char *dir, struct cl_dht_layout *l)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_find(d, dir);
    int hit = e && e->has_layout;
    if (hit)
        *l = *e->layout;
    pthread_mutex_unlock(&d->lock);
    return hit;
}

/* ---- paths ---- */

static int arg_path(const struct rpc_bytes *b, char *out, size_t outlen)
{
    if (rpc_bytes_str(b, out, outlen) < 0)
        return -ENAMETOOLONG;
    if (out[0] != '/')
        return -EINVAL;
    return 0;
}

/* Splits path into its parent directory (into dir) and final name. */
static const char *split(const char *path, char *dir, size_t dirlen)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash == path ? 1 : (size_t)(slash - path);
    if (dl >= dirlen)
        dl = dirlen - 1;
    memcpy(dir, path, dl);
    dir[dl] = 0;
    return slash + 1;
}

static int is_root(const char *path)
{
    return path[0] == '/' && path[1] == 0;
}

static int linkto_candidate(const struct rpc_attr *a)
{
    return S_ISREG(a->mode) && (a->mode & 07777) == S_ISVTX && a->size == 0;
}

/* ---- handles ---- */

static struct dfh *fh_get(struct dht *d, uint64_t id)
{
    struct dfh *h = NULL;
    pthread_mutex_lock(&d->lock);
    if (id >= 1 && id <= d->n_fhs)
        h = d->fhs[id - 1];
    pthread_mutex_unlock(&d->lock);
    return h;
}

static int fh_add(struct dht *d, struct dfh *h, uint64_t *id)
{
    pthread_mutex_lock(&d->lock);
    size_t i;
    for (i = 0; i < d->n_fhs && d->fhs[i]; i++)
        ;
    if (i == d->n_fhs) {
        size_t cap = d->n_fhs ? d->n_fhs * 2 : 64;
        struct dfh **n = realloc(d->fhs, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&d->lock);
            return -ENOMEM;
        }
        memset(n + d->n_fhs, 0, (cap - d->n_fhs) * sizeof(*n));
        d->fhs = n;
        d->n_fhs = cap;
    }
    d->fhs[i] = h;
    *id = i + 1;
    pthread_mutex_unlock(&d->lock);
    return 0;
}

static void dfh_free(struct dfh *h)
{
    if (h) {
        free(h->path);
        free(h->map);
        free(h);
    }
}

static struct dfh *fh_take(struct dht *d, uint64_t id)
{
    struct dfh *h = NULL;
    pthread_mutex_lock(&d->lock);
    if (id >= 1 && id <= d->n_fhs) {
        h = d->fhs[id - 1];
        d->fhs[id - 1] = NULL;
    }
    pthread_mutex_unlock(&d->lock);
    return h;
}

/* ---- synchronous helpers (workers only) ---- */

/* Prepares sub as a copy of args for another subvolume. */
static void sub_from(struct cl_op *sub, const struct rpc_msg *args)
{
    cl_op_init(sub, (uint16_t)args->op, NULL, NULL);
    sub->args = *args;
}

/* A brick subvolume whose connection is down is skipped at once rather
 * than waited for (a replicate subvolume decides that for itself). */
static int child_down(struct dht *d, int i)
{
    struct cl_layer *c = d->layer.children[i];
    return !strcmp(c->name, "protocol/client") && !cl_proto_connected(c);
}

static uint64_t down_mask(struct dht *d)
{
    uint64_t m = 0;
    for (int i = 0; i < d->n; i++)
        if (child_down(d, i))
            m |= 1ull << i;
    return m;
}

static int run(struct dht *d, int i, struct cl_op *sub)
{
    if (child_down(d, i)) {
        sub->status = -ENOTCONN;
        sub->reply = NULL;
        return -ENOTCONN;
    }
    return cl_op_run(d->layer.children[i], sub);
}

struct fan_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int remaining;
};

static void fan_done_cb(struct cl_op *op)
{
    struct fan_wait *w = op->ctx;
    pthread_mutex_lock(&w->lock);
    if (--w->remaining == 0)
        pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Runs subs[i] on child i for every bit of mask, all at once; waits. */
static void fan_run(struct dht *d, struct cl_op *subs, uint64_t mask)
{
    struct fan_wait w;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    uint64_t down = down_mask(d) & mask;
    for (int i = 0; i < d->n; i++)
        if (down >> i & 1) {
            subs[i].status = -ENOTCONN;
            subs[i].reply = NULL;
        }
    mask &= ~down;
    w.remaining = __builtin_popcountll(mask);
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1) {
            subs[i].done = fan_done_cb;
            subs[i].ctx = &w;
        }
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1)
            cl_submit(d->layer.children[i], &subs[i]);
    pthread_mutex_lock(&w.lock);
    while (w.remaining > 0)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
}

static uint64_t all_mask(struct dht *d)
{
    return d->n == 64 ? UINT64_MAX : (1ull << d->n) - 1;
}

static void release_all(struct dht *d, struct cl_op *subs, uint64_t mask)
{
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1)
            cl_op_release(&subs[i]);
}

static int get_xattr(struct dht *d, int i, const char *path, const char *name, uint8_t *buf,
                     size_t cap, size_t *len)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_GETXATTR, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
    rpc_set_str(&s.args, RPC_T_NAME, &s.args.name, name);
    RPC_SET(&s.args, size, RPC_T_SIZE, cap);
    int rc = run(d, i, &s);
    if (rc == 0) {
        if (!rpc_has(&s.reply->msg, RPC_T_DATA) || s.reply->msg.data.len > cap) {
            rc = -EPROTO;
        } else {
            memcpy(buf, s.reply->msg.data.p, s.reply->msg.data.len);
            *len = s.reply->msg.data.len;
        }
    }
    cl_op_release(&s);
    return rc;
}

/* The layout of directory dir: cached, else read from its first subvolume
 * that answers; a directory without one (made by heal, or the root before
 * first use) has the default layout, which the root is then given. */
static int get_layout(struct dht *d, const char *dir, struct cl_dht_layout *l)
{
    if (cache_layout(d, dir, l))
        return 0;
    uint8_t buf[CL_DHT_LAYOUT_MAXLEN];
    size_t len = 0;
    int rc = -ENOTCONN;
    for (int i = 0; i < d->n && (rc == -ENOTCONN || rc == -ETIMEDOUT); i++)
        rc = get_xattr(d, i, dir, CL_DHT_XATTR_LAYOUT, buf, sizeof(buf), &len);
    if (rc == 0 && cl_dht_layout_decode(buf, len, d->n, l) < 0) {
        log_warn("volume %s: directory %s has a malformed or foreign layout; using the default",
                 d->volume, dir);
        rc = -ENODATA;
    }
    if (rc == -ENODATA) {
        cl_dht_layout_default(d->n, l);
        if (is_root(dir)) {
            struct cl_op subs[CL_DHT_MAX];
            uint8_t v[CL_DHT_LAYOUT_MAXLEN];
            size_t vl = cl_dht_layout_encode(l, v);
            for (int i = 0; i < d->n; i++) {
                cl_op_init(&subs[i], RPC_OP_SETXATTR, NULL, NULL);
                rpc_set_str(&subs[i].args, RPC_T_PATH, &subs[i].args.path, "/");
                rpc_set_str(&subs[i].args, RPC_T_NAME, &subs[i].args.name, CL_DHT_XATTR_LAYOUT);
                rpc_set_bytes(&subs[i].args, RPC_T_DATA, &subs[i].args.data, v, vl);
                RPC_SET(&subs[i].args, flags, RPC_T_FLAGS, XATTR_CREATE);
            }
            fan_run(d, subs, all_mask(d));
            release_all(d, subs, all_mask(d));
            log_info("volume %s: root directory given its layout over %d subvolumes", d->volume,
                     d->n);
        }
        rc = 0;
    }
    if (rc == 0)
        cache_set_layout(d, dir, l);
    return rc;
}

/* The subvolume path's name hashes to in its parent's layout. */
static int hashed(struct dht *d, const char *path, int *h)
{
    if (is_root(path)) {
        *h = 0;
        return 0;
    }
    char dir[PATH_MAX];
    const char *name = split(path, dir, sizeof(dir));
    struct cl_dht_layout l;
    int rc = get_layout(d, dir, &l);
    if (rc < 0)
        return rc;
    *h = cl_dht_layout_pick(&l, cl_dht_hash(name, strlen(name)));
    return *h < 0 ? -EIO : 0;
}

/* Looks path up where it lives: its hashed subvolume, following a link-to
 * file. On success *reply (may be NULL) is the LOOKUP reply of the
 * subvolume holding it. Lookups of absent names ask the hashed subvolume
 * only. */
static int lookup(struct dht *d, const struct rpc_msg *args, const char *path, int *where,
                  int *is_dir, struct rpc_frame **reply)
{
    int h, rc;
    if ((rc = hashed(d, path, &h)) < 0)
        return rc;
    struct cl_op s;
    cl_op_init(&s, RPC_OP_LOOKUP, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
    rc = run(d, h, &s);
    if (rc == 0 && !rpc_has(&s.reply->msg, RPC_T_ATTR))
        rc = -EPROTO;
    if (rc < 0) {
        cl_op_release(&s);
        if (rc == -ENOENT)
            cache_drop(d, path);
        return rc;
    }
    int at = h;
    if (linkto_candidate(&s.reply->msg.attr)) {
        uint8_t v[8];
        size_t vl = 0;
        int xr = get_xattr(d, h, path, CL_DHT_XATTR_LINKTO, v, sizeof(v), &vl);
        int t = xr == 0 ? cl_dht_linkto_parse(v, vl, d->n) : xr;
        if (xr == 0 && t < 0)
            log_warn("volume %s: %s on subvolume %d has a malformed link-to", d->volume, path, h);
        if (t >= 0 && t != h) {
            cl_op_release(&s);
            cl_op_init(&s, RPC_OP_LOOKUP, NULL, NULL);
            rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
            rc = run(d, t, &s);
            if (rc == 0 && !rpc_has(&s.reply->msg, RPC_T_ATTR))
                rc = -EPROTO;
            if (rc < 0) {
                /* A link-to whose file is gone: the name does not exist. */
                cl_op_release(&s);
                cache_drop(d, path);
                return rc == -ENOENT ? -ENOENT : rc;
            }
            at = t;
        } else if (xr < 0 && xr != -ENODATA) {
            cl_op_release(&s);
            return xr;
        }
    }
    *where = at;
    *is_dir = S_ISDIR(s.reply->msg.attr.mode);
    cache_set_loc(d, path, at, *is_dir);
    if (reply) {
        *reply = s.reply;
        s.reply = NULL;
    }
    cl_op_release(&s);
    return 0;
}

static int locate(struct dht *d, const struct rpc_msg *args, const char *path, int *where,
                  int *is_dir)
{
    if (is_root(path)) {
        *where = 0;
        *is_dir = 1;
        return 0;
    }
    if (cache_loc(d, path, where, is_dir))
        return 0;
    return lookup(d, args, path, where, is_dir, NULL);
}

static void complete_sub(struct cl_op *op, struct cl_op *sub)
{
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    cl_op_complete(op, sub->status, r);
}

static void free_op_cb(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

/* A new handle for an open/create reply of subvolume i (files). */
static void complete_open(struct dht *d, struct cl_op *op, int i, struct cl_op *sub)
{
    if (sub->status < 0 || !rpc_has(&sub->reply->msg, RPC_T_FH)) {
        int st = sub->status < 0 ? sub->status : -EPROTO;
        cl_op_release(sub);
        cl_op_complete(op, st, NULL);
        return;
    }
    struct dfh *h = calloc(1, sizeof(*h));
    uint64_t id;
    if (!h || fh_add(d, h, &id) < 0) {
        free(h);
        struct cl_op *r = calloc(1, sizeof(*r));
        if (r) { /* give the child its handle back, without waiting */
            cl_op_init(r, RPC_OP_RELEASE, free_op_cb, NULL);
            RPC_SET(&r->args, fh, RPC_T_FH, sub->reply->msg.fh);
            cl_submit(d->layer.children[i], r);
        }
        cl_op_release(sub);
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    h->subvol = i;
    h->fh[i] = sub->reply->msg.fh;
    sub->reply->msg.fh = id;
    complete_sub(op, sub);
}

/* One subvolume serves the operation. */
static void one(struct dht *d, struct cl_op *op, int i)
{
    struct cl_op s;
    sub_from(&s, &op->args);
    run(d, i, &s);
    unsigned code = (unsigned)op->args.op;
    if (code == RPC_OP_OPEN || code == RPC_OP_CREATE)
        complete_open(d, op, i, &s);
    else
        complete_sub(op, &s);
}

/* The same change on every subvolume; the reply is primary's. Succeeds when
 * every subvolume that has the object succeeded. */
static void every(struct dht *d, struct cl_op *op, int primary, const struct dfh *h)
{
    struct cl_op subs[CL_DHT_MAX];
    uint64_t mask = 0;
    if (op->args.op != RPC_OP_FSYNC && down_mask(d)) {
        /* A directory change must reach every copy: refuse it whole. */
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    for (int i = 0; i < d->n; i++) {
        if (h && h->fh[i] == NOFH)
            continue;
        sub_from(&subs[i], &op->args);
        if (h)
            subs[i].args.fh = h->fh[i];
        mask |= 1ull << i;
    }
    if (!mask) {
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    fan_run(d, subs, mask);
    int st = 0;
    for (int i = 0; i < d->n; i++)
        if ((mask >> i & 1) && subs[i].status < 0 && st == 0)
            st = subs[i].status;
    if (!(mask >> primary & 1))
        primary = __builtin_ctzll(mask);
    if (st == 0) {
        complete_sub(op, &subs[primary]);
    } else {
        if (subs[primary].status == 0)
            log_warn("volume %s: %s failed on some subvolumes: %s", d->volume,
                     rpc_op_name((unsigned)op->args.op), strerror(-st));
        cl_op_complete(op, st, NULL);
    }
    release_all(d, subs, mask);
}

/* ---- namespace changes ---- */

/* (Re)creates directory path on the subvolumes in mask as a copy of the
 * one on subvolume from: same gfid, mode and owner, default layout. With
 * replace, the copies there now (empty ones of our own making) are removed
 * first; a copy that is not empty is in use and stays. */
static void remake_dirs(struct dht *d, const char *path, uint64_t mask, int from, int replace)
{
    struct cl_op lk;
    cl_op_init(&lk, RPC_OP_LOOKUP, NULL, NULL);
    rpc_set_str(&lk.args, RPC_T_PATH, &lk.args.path, path);
    if (run(d, from, &lk) < 0 || !rpc_has(&lk.reply->msg, RPC_T_ATTR) ||
        !S_ISDIR(lk.reply->msg.attr.mode)) {
        log_warn("volume %s: cannot read directory %s on subvolume %d to copy it", d->volume, path,
                 from);
        cl_op_release(&lk);
        return;
    }
    const struct rpc_attr *a = &lk.reply->msg.attr;
    struct cl_op ops[CL_DHT_MAX];
    if (replace) {
        for (int i = 0; i < d->n; i++)
            if (mask >> i & 1) {
                cl_op_init(&ops[i], RPC_OP_RMDIR, NULL, NULL);
                rpc_set_str(&ops[i].args, RPC_T_PATH, &ops[i].args.path, path);
            }
        fan_run(d, ops, mask);
        release_all(d, ops, mask);
        for (int i = 0; i < d->n; i++)
            if ((mask >> i & 1) && ops[i].status < 0)
                mask &= ~(1ull << i);
    }
    struct cl_dht_layout l;
    cl_dht_layout_default(d->n, &l);
    uint8_t v[CL_DHT_LAYOUT_MAXLEN];
    size_t vl = cl_dht_layout_encode(&l, v);
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1) {
            struct rpc_msg *m = &ops[i].args;
            cl_op_init(&ops[i], RPC_OP_MKDIR, NULL, NULL);
            rpc_set_str(m, RPC_T_PATH, &m->path, path);
            RPC_SET(m, mode, RPC_T_MODE, a->mode & 07777);
            RPC_SET(m, umask, RPC_T_UMASK, 0);
            RPC_SET(m, uid, RPC_T_UID, a->uid);
            RPC_SET(m, gid, RPC_T_GID, a->gid);
            m->gfid = a->gfid;
            m->present |= 1ull << RPC_T_GFID;
            rpc_set_bytes(m, RPC_T_LAYOUT, &m->layout, v, vl);
        }
    fan_run(d, ops, mask);
    for (int i = 0; i < d->n; i++)
        if ((mask >> i & 1) && ops[i].status < 0 && ops[i].status != -EEXIST)
            log_warn("volume %s: directory %s could not be made on subvolume %d: %s", d->volume,
                     path, i, strerror(-ops[i].status));
    release_all(d, ops, mask);
    cl_op_release(&lk);
}

static void do_mkdir(struct dht *d, struct cl_op *op, const char *path)
{
    int h, rc = down_mask(d) ? -ENOTCONN : hashed(d, path, &h);
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    struct cl_dht_layout l;
    cl_dht_layout_default(d->n, &l);
    uint8_t v[CL_DHT_LAYOUT_MAXLEN];
    size_t vl = cl_dht_layout_encode(&l, v);
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++) {
        sub_from(&subs[i], &op->args);
        rpc_set_bytes(&subs[i].args, RPC_T_LAYOUT, &subs[i].args.layout, v, vl);
    }
    fan_run(d, subs, all_mask(d));
    /* The hashed subvolume decides (a racing mkdir of the same name loses
     * there); elsewhere an existing directory is adopted. */
    int st = subs[h].status;
    for (int i = 0; i < d->n && st == 0; i++)
        if (i != h && subs[i].status < 0 && subs[i].status != -EEXIST)
            st = subs[i].status;
    uint64_t made = 0;
    for (int i = 0; i < d->n; i++)
        if (subs[i].status == 0)
            made |= 1ull << i;
    if (st == 0) {
        cache_set_loc(d, path, h, 1);
        cache_set_layout(d, path, &l);
        complete_sub(op, &subs[h]);
    } else if (st == -EEXIST && made) {
        /* Another client's mkdir of this name won on the hashed subvolume
         * (or a copy was missing here): the copies we made may already be
         * the winner's, so never just remove them; make them copies of the
         * hashed subvolume's directory (its gfid). */
        remake_dirs(d, path, made, h, 1);
        cl_op_complete(op, -EEXIST, NULL);
    } else {
        /* Undo: a directory on some subvolumes only is worse than none. */
        uint64_t undo = 0;
        struct cl_op rm[CL_DHT_MAX];
        for (int i = 0; i < d->n; i++)
            if (subs[i].status == 0) {
                cl_op_init(&rm[i], RPC_OP_RMDIR, NULL, NULL);
                rpc_set_str(&rm[i].args, RPC_T_PATH, &rm[i].args.path, path);
                undo |= 1ull << i;
            }
        fan_run(d, rm, undo);
        release_all(d, rm, undo);
        cl_op_complete(op, st, NULL);
    }
    release_all(d, subs, all_mask(d));
}

static void do_rmdir(struct dht *d, struct cl_op *op, const char *path)
{
    int h, rc = down_mask(d) ? -ENOTCONN : hashed(d, path, &h);
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        sub_from(&subs[i], &op->args);
    fan_run(d, subs, all_mask(d));
    int st = subs[h].status, failed = -1;
    uint64_t removed = 0;
    for (int i = 0; i < d->n; i++) {
        if (subs[i].status == 0)
            removed |= 1ull << i;
        else if (subs[i].status != -ENOENT || i == h) {
            if (st == 0)
                st = subs[i].status;
            if (failed < 0 && subs[i].status != -ENOENT)
                failed = i;
        }
    }
    cache_drop_all(d);
    if (st < 0 && removed && failed >= 0) {
        /* Not empty somewhere (or a subvolume failed): put the directory
         * back where it went, with the surviving copy's id and owner. */
        remake_dirs(d, path, removed, failed, 0);
    }
    cl_op_complete(op, st, NULL);
    release_all(d, subs, all_mask(d));
}

/* A link-to file at path on subvolume at, pointing to subvolume target. */
static int make_linkto(struct dht *d, int at, const char *path, int target)
{
    char v[8];
    snprintf(v, sizeof(v), "%d", target);
    struct cl_op s;
    struct rpc_msg *m = &s.args;
    cl_op_init(&s, RPC_OP_MKNOD, NULL, NULL);
    rpc_set_str(m, RPC_T_PATH, &m->path, path);
    RPC_SET(m, mode, RPC_T_MODE, S_IFREG | S_ISVTX);
    RPC_SET(m, umask, RPC_T_UMASK, 0);
    RPC_SET(m, uid, RPC_T_UID, 0);
    RPC_SET(m, gid, RPC_T_GID, 0);
    gfid_generate(&m->gfid);
    m->present |= 1ull << RPC_T_GFID;
    rpc_set_bytes(m, RPC_T_LINKTO, &m->linkto, v, strlen(v));
    int rc = run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

static int remove_name(struct dht *d, int at, const char *path)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_UNLINK, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
    int rc = run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

static void do_unlink(struct dht *d, struct cl_op *op, const char *path)
{
    int c, is_dir, h, rc = locate(d, &op->args, path, &c, &is_dir);
    if (rc == 0)
        rc = hashed(d, path, &h);
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    struct cl_op s;
    sub_from(&s, &op->args);
    rc = run(d, c, &s);
    cache_drop(d, path);
    if (rc == 0 && h != c) {
        int lr = remove_name(d, h, path);
        if (lr < 0 && lr != -ENOENT)
            log_warn("volume %s: removing the link-to %s on subvolume %d: %s", d->volume, path, h,
                     strerror(-lr));
    }
    complete_sub(op, &s);
    cl_op_release(&s);
}

static void do_link(struct dht *d, struct cl_op *op, const char *src, const char *dst)
{
    int c, is_dir, h2, rc = locate(d, &op->args, src, &c, &is_dir);
    if (rc == 0)
        rc = hashed(d, dst, &h2);
    if (rc == 0 && is_dir)
        rc = -EPERM;
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    if (h2 != c && (rc = make_linkto(d, h2, dst, c)) < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    struct cl_op s;
    sub_from(&s, &op->args);
    rc = run(d, c, &s);
    if (rc < 0 && h2 != c)
        remove_name(d, h2, dst);
    if (rc == 0)
        cache_set_loc(d, dst, c, 0);
    complete_sub(op, &s);
    cl_op_release(&s);
}

/* A plain rename of one name on subvolume at. */
static int rename_on(struct dht *d, int at, const char *from, const char *to, uint64_t flags)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_RENAME, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, from);
    rpc_set_str(&s.args, RPC_T_PATH2, &s.args.path2, to);
    if (flags)
        RPC_SET(&s.args, flags, RPC_T_FLAGS, flags);
    int rc = run(d, at, &s);
    cl_op_release(&s);
    return rc;
}

/* Points the link-to of name (hashed to h) at the data's subvolume at:
 * drops a stale one, makes the new one where needed. */
static void relink(struct dht *d, const char *name, int h, int at, int had_linkto)
{
    if (had_linkto)
        remove_name(d, h, name);
    if (h != at) {
        int rc = make_linkto(d, h, name, at);
        if (rc < 0)
            log_warn("volume %s: link-to %s on subvolume %d -> %d: %s", d->volume, name, h, at,
                     strerror(-rc));
    }
}

/* RENAME_EXCHANGE. Two files on one subvolume swap there (their link-tos
 * stay right). Otherwise the swap is done name by name (not atomic to
 * other clients): files on two subvolumes each move to the other name on
 * their own subvolume; a file and a directory swap on the file's
 * subvolume and the directory's other copies are renamed. Link-tos follow. */
static void do_exchange(struct dht *d, struct cl_op *op, const char *a, const char *b)
{
    int ca, cb, da, db, ha, hb, rc;
    if ((rc = locate(d, &op->args, a, &ca, &da)) < 0 ||
        (rc = locate(d, &op->args, b, &cb, &db)) < 0 || (rc = hashed(d, a, &ha)) < 0 ||
        (rc = hashed(d, b, &hb)) < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    if (da && db) {
        every(d, op, ca, NULL);
        cache_drop_all(d);
        return;
    }
    if (down_mask(d)) {
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    cache_drop(d, a);
    cache_drop(d, b);
    if (!da && !db && ca == cb) {
        cl_op_complete(op, rename_on(d, ca, a, b, RENAME_EXCHANGE), NULL);
        return;
    }
    if (!da && !db) {
        if ((rc = rename_on(d, ca, a, b, 0)) < 0) {
            cl_op_complete(op, rc, NULL);
            return;
        }
        if ((rc = rename_on(d, cb, b, a, 0)) < 0) {
            rename_on(d, ca, b, a, 0); /* put a back */
            cl_op_complete(op, rc, NULL);
            return;
        }
        /* a's data (on ca) is now named b, b's (on cb) a */
        relink(d, a, ha, cb, ha != ca && ha != cb);
        relink(d, b, hb, ca, hb != ca && hb != cb);
        cl_op_complete(op, 0, NULL);
        return;
    }
    /* a file f (on cf) and a directory g */
    const char *f = da ? b : a, *g = da ? a : b;
    int cf = da ? cb : ca, hf = da ? hb : ha, hg = da ? ha : hb;
    if ((rc = rename_on(d, cf, a, b, RENAME_EXCHANGE)) < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    for (int j = 0; j < d->n && rc == 0; j++) {
        if (j == cf)
            continue;
        if (j == hf)
            remove_name(d, j, f); /* the file's link-to makes way */
        rc = rename_on(d, j, g, f, 0);
    }
    if (rc < 0)
        log_warn("volume %s: exchanging %s and %s left directory copies behind: %s", d->volume, a,
                 b, strerror(-rc));
    /* the file is now named g, its data still on cf */
    relink(d, g, hg, cf, 0);
    cache_drop_all(d);
    cl_op_complete(op, rc, NULL);
}

static void do_rename(struct dht *d, struct cl_op *op, const char *src, const char *dst)
{
    if (rpc_has(&op->args, RPC_T_FLAGS) && (op->args.flags & RENAME_EXCHANGE)) {
        do_exchange(d, op, src, dst);
        return;
    }
    int c, is_dir, rc = locate(d, &op->args, src, &c, &is_dir);
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    if (is_dir) {
        /* Directories exist everywhere: rename every copy. A file in the
         * way exists on one subvolume only: refuse before renaming the
         * copies elsewhere. */
        int cd, dst_dir;
        rc = locate(d, &op->args, dst, &cd, &dst_dir);
        if (rc == 0 && !dst_dir) {
            cl_op_complete(op, -ENOTDIR, NULL);
            return;
        }
        if (rc < 0 && rc != -ENOENT) {
            cl_op_complete(op, rc, NULL);
            return;
        }
        every(d, op, c, NULL);
        cache_drop_all(d);
        return;
    }
    int hs, hd, cd = -1, dst_dir = 0;
    if ((rc = hashed(d, src, &hs)) < 0 || (rc = hashed(d, dst, &hd)) < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    rc = locate(d, &op->args, dst, &cd, &dst_dir);
    if (rc < 0 && rc != -ENOENT) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    if (rc == -ENOENT)
        cd = -1;
    uint64_t fl = rpc_has(&op->args, RPC_T_FLAGS) ? op->args.flags : 0;
    if ((fl & RENAME_NOREPLACE) && cd >= 0) {
        cl_op_complete(op, -EEXIST, NULL);
        return;
    }
    if (dst_dir && cd >= 0)
        cd = c; /* let the brick refuse (EISDIR) or replace an empty one */
    /* The data stays where it is; only names move. */
    struct cl_op s;
    sub_from(&s, &op->args);
    rc = run(d, c, &s);
    if (rc < 0) {
        complete_sub(op, &s);
        cl_op_release(&s);
        return;
    }
    cache_drop(d, src);
    cache_drop(d, dst);
    if (cd >= 0 && cd != c) {
        int r2 = remove_name(d, cd, dst); /* the replaced file's data */
        if (r2 < 0 && r2 != -ENOENT)
            log_warn("volume %s: rename: removing the replaced %s on subvolume %d: %s", d->volume,
                     dst, cd, strerror(-r2));
    }
    if (hd != c) {
        if (cd >= 0 && cd != hd)
            remove_name(d, hd, dst); /* the replaced file's link-to */
        int r3 = make_linkto(d, hd, dst, c);
        if (r3 < 0)
            log_warn("volume %s: rename: link-to %s on subvolume %d -> %d: %s", d->volume, dst, hd,
                     c, strerror(-r3));
    }
    if (hs != c) {
        int r4 = remove_name(d, hs, src);
        if (r4 < 0 && r4 != -ENOENT)
            log_warn("volume %s: rename: removing the link-to %s on subvolume %d: %s", d->volume,
                     src, hs, strerror(-r4));
    }
    cache_set_loc(d, dst, c, 0);
    complete_sub(op, &s);
    cl_op_release(&s);
}

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
            release_all(d, subs, mask);
            cl_op_complete(op, st, NULL);
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
        subs[base].reply = NULL;
        release_all(d, subs, mask);
        cl_op_complete(op, 0, r);
    } else {
        release_all(d, subs, mask);
        cl_op_complete(op, st, NULL);
    }
}

struct dirfan {
    struct dht *d;
    struct cl_op *parent;
    int base, remaining;
    uint64_t mask;
    struct cl_op subs[]; /* one per subvolume */
};

static void dirfan_done_cb(struct cl_op *sub)
{
    struct dirfan *f = sub->ctx;
    if (__atomic_sub_fetch(&f->remaining, 1, __ATOMIC_ACQ_REL) == 0) {
        dir_attr_finish(f->d, f->parent, f->subs, f->mask, f->base);
        free(f);
    }
}

/* A directory's attributes: its copy on subvolume base, with the latest
 * times of all copies (a file created on one subvolume changes only that
 * copy's mtime). One round trip to every subvolume, asynchronous (callable
 * inline and from completions); a copy that is down or missing is left
 * out. By path (LOOKUP, GETATTR) or by the handle h. */
static void dir_attr(struct dht *d, struct cl_op *op, int base, const struct dfh *h)
{
    struct dirfan *f = calloc(1, sizeof(*f) + (size_t)d->n * sizeof(struct cl_op));
    if (!f) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    f->d = d;
    f->parent = op;
    f->base = base;
    uint64_t down = down_mask(d);
    for (int i = 0; i < d->n; i++) {
        if ((h && h->fh[i] == NOFH) || (down >> i & 1))
            continue;
        sub_from(&f->subs[i], &op->args);
        f->subs[i].done = dirfan_done_cb;
        f->subs[i].ctx = f;
        if (h)
            f->subs[i].args.fh = h->fh[i];
        f->mask |= 1ull << i;
    }
    if (!f->mask) {
        free(f);
        cl_op_complete(op, -ENOTCONN, NULL);
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

static void do_statfs(struct dht *d, struct cl_op *op)
{
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        sub_from(&subs[i], &op->args);
    fan_run(d, subs, all_mask(d));
    struct rpc_statfs sum = {0};
    int first = -1, st = 0;
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
        cl_op_complete(op, st ? st : -ENOTCONN, NULL);
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
        cl_op_complete(op, 0, r);
    }
    release_all(d, subs, all_mask(d));
}

/* ---- directory handles and the merged listing ---- */

static void do_opendir(struct dht *d, struct cl_op *op, const char *path)
{
    struct dfh *h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(path))) {
        dfh_free(h);
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    h->is_dir = 1;
    struct cl_op subs[CL_DHT_MAX];
    for (int i = 0; i < d->n; i++)
        sub_from(&subs[i], &op->args);
    fan_run(d, subs, all_mask(d));
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
    if (st == 0 && (st = fh_add(d, h, &id)) == 0) {
        h->subvol = any;
        subs[any].reply->msg.fh = id;
        complete_sub(op, &subs[any]);
    } else {
        for (int i = 0; i < d->n; i++)
            if (h->fh[i] != NOFH) {
                struct cl_op r;
                cl_op_init(&r, RPC_OP_RELEASEDIR, NULL, NULL);
                RPC_SET(&r.args, fh, RPC_T_FH, h->fh[i]);
                run(d, i, &r);
                cl_op_release(&r);
            }
        dfh_free(h);
        cl_op_complete(op, st ? st : -ENOENT, NULL);
    }
    release_all(d, subs, all_mask(d));
}

static int cookie_out(struct dht *d, struct dfh *h, int subvol, uint64_t bc, uint64_t *out)
{
    if (cl_dht_cookie_pack(bc, subvol, d->bits, out) == 0)
        return 0;
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (h->n_map == h->cap_map) {
        size_t cap = h->cap_map ? h->cap_map * 2 : 256;
        void *n = realloc(h->map, cap * sizeof(*h->map));
        if (!n)
            rc = -ENOMEM;
        else {
            h->map = n;
            h->cap_map = cap;
        }
    }
    if (rc == 0) {
        h->map[h->n_map].subvol = subvol;
        h->map[h->n_map].cookie = bc;
        *out = CL_DHT_COOKIE_MAPPED | h->n_map++;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* 1 when name in the listing of subvolume i is a link-to file. */
static int is_linkto(struct dht *d, struct dfh *h, int i, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", is_root(h->path) ? "" : h->path, name) >=
        (int)sizeof(path))
        return 0;
    uint8_t v[8];
    size_t vl;
    return get_xattr(d, i, path, CL_DHT_XATTR_LINKTO, v, sizeof(v), &vl) == 0;
}

static void do_readdir(struct dht *d, struct cl_op *op, struct dfh *h)
{
    int i;
    uint64_t bc;
    int k = cl_dht_cookie_unpack(op->args.offset, d->bits, d->n, &i, &bc);
    if (k == 1) {
        pthread_mutex_lock(&d->lock);
        if (bc < h->n_map) {
            i = h->map[bc].subvol;
            bc = h->map[bc].cookie;
        } else {
            k = -EINVAL;
        }
        pthread_mutex_unlock(&d->lock);
    }
    if (k < 0) {
        cl_op_complete(op, -EINVAL, NULL);
        return;
    }
    int first = h->subvol; /* directories are listed from this subvolume only */
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
        sub_from(&s, &op->args);
        s.args.fh = h->fh[i];
        s.args.offset = bc;
        if (kept && rpc_has(&op->args, RPC_T_SIZE))
            s.args.size = op->args.size - out.len > 4096 ? op->args.size - out.len : 4096;
        if ((st = run(d, i, &s)) < 0) {
            cl_op_release(&s);
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
            if (rpc_has(&e, RPC_T_ATTR) && linkto_candidate(&e.attr) && is_linkto(d, h, i, name))
                continue;
            /* The last entry of a subvolume's listing leads to the next one. */
            uint64_t next;
            int nx = i + 1;
            while (nx < d->n && h->fh[nx] == NOFH)
                nx++;
            if (eof && seen == n_ent && nx < d->n)
                st = cookie_out(d, h, nx, 0, &next);
            else
                st = cookie_out(d, h, i, e.offset, &next);
            if (st < 0)
                break;
            e.offset = next;
            size_t mark = rpc_put_begin(&out, RPC_T_DIRENT);
            rpc_msg_encode(&e, &out);
            rpc_put_end(&out, mark);
            kept++;
        }
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
    struct rpc_frame *fr = NULL;
    if (st == 0 && (out.err || !(fr = calloc(1, sizeof(*fr)))))
        st = -ENOMEM;
    if (st < 0) {
        rpc_buf_free(&out);
        cl_op_complete(op, st, NULL);
        return;
    }
    fr->body = out.data;
    fr->hdr.body_len = (uint32_t)out.len;
    fr->hdr.kind = 2;
    fr->hdr.opcode = RPC_OP_READDIR;
    if (rpc_msg_decode(fr->body, out.len, &fr->msg, NULL) < 0) {
        rpc_frame_free(fr);
        cl_op_complete(op, -EPROTO, NULL);
        return;
    }
    cl_op_complete(op, 0, fr);
}

static void do_dir_fh(struct dht *d, struct cl_op *op, struct dfh *h)
{
    unsigned code = (unsigned)op->args.op;
    if (code == RPC_OP_READDIR) {
        do_readdir(d, op, h);
    } else if (code == RPC_OP_RELEASEDIR) {
        fh_take(d, op->args.fh);
        struct cl_op subs[CL_DHT_MAX];
        uint64_t mask = 0;
        for (int i = 0; i < d->n; i++)
            if (h->fh[i] != NOFH) {
                sub_from(&subs[i], &op->args);
                subs[i].args.fh = h->fh[i];
                mask |= 1ull << i;
            }
        fan_run(d, subs, mask);
        release_all(d, subs, mask);
        dfh_free(h);
        cl_op_complete(op, 0, NULL);
    } else if (code == RPC_OP_FSYNC || code == RPC_OP_SETATTR || code == RPC_OP_SETXATTR ||
               code == RPC_OP_REMOVEXATTR) {
        every(d, op, h->subvol, h);
    } else if (code == RPC_OP_GETATTR) {
        dir_attr(d, op, h->subvol, h);
    } else {
        struct cl_op s;
        sub_from(&s, &op->args);
        s.args.fh = h->fh[h->subvol];
        run(d, h->subvol, &s);
        complete_sub(op, &s);
        cl_op_release(&s);
    }
}

/* ---- the worker path ---- */

static int is_dir_change(unsigned code)
{
    return code == RPC_OP_SETATTR || code == RPC_OP_SETXATTR || code == RPC_OP_REMOVEXATTR;
}

static void slow(struct dht *d, struct cl_op *op)
{
    unsigned code = (unsigned)op->args.op;
    char path[PATH_MAX], path2[PATH_MAX];
    if (rpc_has(&op->args, RPC_T_FH)) {
        struct dfh *h = fh_get(d, op->args.fh);
        if (!h)
            cl_op_complete(op, code == RPC_OP_RELEASE || code == RPC_OP_RELEASEDIR ? 0 : -EBADF,
                           NULL);
        else
            do_dir_fh(d, op, h);
        return;
    }
    int rc =
        rpc_has(&op->args, RPC_T_PATH) ? arg_path(&op->args.path, path, sizeof(path)) : -EINVAL;
    if (rc == 0 && rpc_has(&op->args, RPC_T_PATH2))
        rc = arg_path(&op->args.path2, path2, sizeof(path2));
    else if (rc == 0 && (code == RPC_OP_RENAME || code == RPC_OP_LINK))
        rc = -EINVAL;
    if (rc < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    int where, is_dir, h;
    switch (code) {
    case RPC_OP_LOOKUP: {
        struct rpc_frame *r = NULL;
        if (is_root(path)) {
            struct cl_dht_layout l;
            get_layout(d, "/", &l); /* first use gives the root its layout */
            dir_attr(d, op, 0, NULL);
            return;
        }
        if (cache_loc(d, path, &where, &is_dir) && is_dir) {
            dir_attr(d, op, where, NULL);
            return;
        }
        rc = lookup(d, &op->args, path, &where, &is_dir, &r);
        if (rc == 0 && is_dir) {
            rpc_frame_free(r);
            dir_attr(d, op, where, NULL);
            return;
        }
        cl_op_complete(op, rc, r);
        return;
    }
    case RPC_OP_MKDIR:
        do_mkdir(d, op, path);
        return;
    case RPC_OP_RMDIR:
        do_rmdir(d, op, path);
        return;
    case RPC_OP_UNLINK:
        do_unlink(d, op, path);
        return;
    case RPC_OP_LINK:
        do_link(d, op, path, path2);
        return;
    case RPC_OP_RENAME:
        do_rename(d, op, path, path2);
        return;
    case RPC_OP_STATFS:
        do_statfs(d, op);
        return;
    case RPC_OP_OPENDIR:
        do_opendir(d, op, path);
        return;
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_SYMLINK:
        if ((rc = hashed(d, path, &h)) < 0) {
            cl_op_complete(op, rc, NULL);
            return;
        }
        cache_drop(d, path);
        one(d, op, h);
        return;
    default:
        break;
    }
    if ((rc = locate(d, &op->args, path, &where, &is_dir)) < 0) {
        cl_op_complete(op, rc, NULL);
        return;
    }
    if (is_dir && is_dir_change(code))
        every(d, op, where, NULL);
    else if (is_dir && code == RPC_OP_GETATTR)
        dir_attr(d, op, where, NULL);
    else
        one(d, op, where);
}

static void *worker(void *arg)
{
    struct dht *d = arg;
    pthread_mutex_lock(&d->qlock);
    for (;;) {
        while (!d->qhead && !d->stopping)
            pthread_cond_wait(&d->qcond, &d->qlock);
        if (!d->qhead)
            break;
        struct job *j = d->qhead;
        d->qhead = j->next;
        if (!d->qhead)
            d->qtail = NULL;
        pthread_mutex_unlock(&d->qlock);
        slow(d, j->op);
        free(j);
        pthread_mutex_lock(&d->qlock);
    }
    pthread_mutex_unlock(&d->qlock);
    return NULL;
}

static void enqueue(struct dht *d, struct cl_op *op)
{
    struct job *j = malloc(sizeof(*j));
    if (!j) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    j->op = op;
    j->next = NULL;
    pthread_mutex_lock(&d->qlock);
    if (d->stopping) {
        pthread_mutex_unlock(&d->qlock);
        free(j);
        cl_op_complete(op, -ENOTCONN, NULL);
        return;
    }
    if (d->qtail)
        d->qtail->next = j;
    else
        d->qhead = j;
    d->qtail = j;
    pthread_cond_signal(&d->qcond);
    pthread_mutex_unlock(&d->qlock);
}

/* ---- the inline path ---- */

enum fwd_kind { FWD_PLAIN, FWD_OPEN, FWD_LOOKUP, FWD_CREATED, FWD_RELEASE, FWD_UNLINK };

struct fwd {
    struct dht *d;
    struct cl_op *parent;
    struct cl_op sub;
    int subvol;
    enum fwd_kind kind;
    struct dfh *h; /* FWD_RELEASE: freed when the child answered */
    char path[];
};

static void fwd_done_cb(struct cl_op *sub)
{
    struct fwd *w = sub->ctx;
    struct dht *d = w->d;
    struct cl_op *op = w->parent;
    int st = sub->status;
    if (w->kind == FWD_RELEASE) {
        dfh_free(w->h);
    } else if (w->kind == FWD_UNLINK) {
        cache_drop(d, w->path);
        if (st == -ENOENT) { /* moved by another client: resolve again */
            cl_op_release(sub);
            free(w);
            enqueue(d, op);
            return;
        }
    } else if (st == -ENOENT && w->kind != FWD_CREATED) {
        /* Gone from where the cache said (another client renamed or
         * removed it): forget and ask again the slow way. */
        cache_drop(d, w->path);
        if (w->kind != FWD_LOOKUP) {
            cl_op_release(sub);
            free(w);
            enqueue(d, op);
            return;
        }
    } else if (st == 0 && w->path[0] && (w->kind == FWD_OPEN || sub->args.op == RPC_OP_GETATTR) &&
               rpc_has(&sub->reply->msg, RPC_T_ATTR) && linkto_candidate(&sub->reply->msg.attr)) {
        /* The cache sent us to what may be a link-to (another client
         * renamed a file onto this name): forget it and resolve again. */
        if (w->kind == FWD_OPEN && rpc_has(&sub->reply->msg, RPC_T_FH)) {
            struct cl_op *r = calloc(1, sizeof(*r));
            if (r) {
                cl_op_init(r, RPC_OP_RELEASE, free_op_cb, NULL);
                RPC_SET(&r->args, fh, RPC_T_FH, sub->reply->msg.fh);
                cl_submit(d->layer.children[w->subvol], r);
            }
        }
        cache_drop(d, w->path);
        cl_op_release(sub);
        free(w);
        enqueue(d, op);
        return;
    } else if (st == 0 && w->kind == FWD_LOOKUP) {
        const struct rpc_msg *m = &sub->reply->msg;
        if (rpc_has(m, RPC_T_ATTR) && linkto_candidate(&m->attr)) {
            cl_op_release(sub);
            free(w);
            enqueue(d, op); /* maybe a link-to: the worker follows it */
            return;
        }
        if (rpc_has(m, RPC_T_ATTR))
            cache_set_loc(d, w->path, w->subvol, S_ISDIR(m->attr.mode));
        if (rpc_has(m, RPC_T_ATTR) && S_ISDIR(m->attr.mode)) {
            /* a directory: its times come from every copy */
            int base = w->subvol;
            cl_op_release(sub);
            free(w);
            dir_attr(d, op, base, NULL);
            return;
        }
    } else if (st == 0 && w->kind == FWD_CREATED) {
        cache_set_loc(d, w->path, w->subvol, sub->args.op == RPC_OP_MKDIR);
    }
    if (st == 0 &&
        (w->kind == FWD_OPEN || (w->kind == FWD_CREATED && sub->args.op == RPC_OP_CREATE))) {
        /* Wrapping the handle allocates; it never waits for a child. */
        complete_open(d, op, w->subvol, sub);
        free(w);
        return;
    }
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    free(w);
    cl_op_complete(op, st, r);
}

static void forward(struct dht *d, struct cl_op *op, int i, enum fwd_kind kind, const char *path,
                    uint64_t child_fh, struct dfh *h)
{
    if (child_down(d, i)) {
        if (kind == FWD_RELEASE)
            dfh_free(h); /* its handle died with the connection */
        cl_op_complete(op, kind == FWD_RELEASE ? 0 : -ENOTCONN, NULL);
        return;
    }
    size_t pl = path ? strlen(path) : 0;
    struct fwd *w = malloc(sizeof(*w) + pl + 1);
    if (!w) {
        cl_op_complete(op, -ENOMEM, NULL);
        return;
    }
    w->d = d;
    w->parent = op;
    w->subvol = i;
    w->kind = kind;
    w->h = h;
    memcpy(w->path, path ? path : "", pl + 1);
    cl_op_init(&w->sub, (uint16_t)op->args.op, fwd_done_cb, w);
    w->sub.args = op->args;
    if (child_fh != NOFH)
        w->sub.args.fh = child_fh;
    cl_submit(d->layer.children[i], &w->sub);
}

/* The subvolume a name hashes to, from cached layouts only; -1 if unknown. */
static int hashed_cached(struct dht *d, const char *path)
{
    if (is_root(path))
        return -1;
    char dir[PATH_MAX];
    const char *name = split(path, dir, sizeof(dir));
    struct cl_dht_layout l;
    if (!cache_layout(d, dir, &l))
        return -1;
    return cl_dht_layout_pick(&l, cl_dht_hash(name, strlen(name)));
}

static void dht_submit(struct cl_layer *self, struct cl_op *op)
{
    struct dht *d = self->priv;
    unsigned code = (unsigned)op->args.op;
    if (code == RPC_OP_MARK || code == RPC_OP_INDEX || code == RPC_OP_UNMARK ||
        code == RPC_OP_COMPOUND) {
        cl_op_complete(op, -ENOTSUP, NULL);
        return;
    }
    if (rpc_has(&op->args, RPC_T_FH)) {
        struct dfh *h = fh_get(d, op->args.fh);
        if (!h) {
            cl_op_complete(op, code == RPC_OP_RELEASE || code == RPC_OP_RELEASEDIR ? 0 : -EBADF,
                           NULL);
        } else if (h->is_dir && code != RPC_OP_GETLK && code != RPC_OP_SETLK &&
                   code != RPC_OP_FLOCK) {
            enqueue(d, op);
        } else if (h->is_dir) {
            /* Lock waits can last: never on a worker. One subvolume's copy
             * of the directory carries its locks. */
            forward(d, op, h->subvol, FWD_PLAIN, NULL, h->fh[h->subvol], NULL);
        } else if (code == RPC_OP_RELEASE) {
            fh_take(d, op->args.fh);
            forward(d, op, h->subvol, FWD_RELEASE, NULL, h->fh[h->subvol], h);
        } else {
            forward(d, op, h->subvol, FWD_PLAIN, NULL, h->fh[h->subvol], NULL);
        }
        return;
    }
    char path[PATH_MAX];
    if (!rpc_has(&op->args, RPC_T_PATH) || rpc_has(&op->args, RPC_T_PATH2) ||
        arg_path(&op->args.path, path, sizeof(path)) < 0) {
        enqueue(d, op);
        return;
    }
    int i, is_dir;
    switch (code) {
    case RPC_OP_LOOKUP:
        if (cache_loc(d, path, &i, &is_dir) && is_dir) {
            dir_attr(d, op, i, NULL); /* directory times come from every copy */
            return;
        }
        if ((i = hashed_cached(d, path)) >= 0) {
            forward(d, op, i, FWD_LOOKUP, path, NOFH, NULL);
            return;
        }
        break;
    case RPC_OP_UNLINK:
        /* A file on its hashed subvolume has no link-to to remove. */
        if (cache_loc(d, path, &i, &is_dir) && !is_dir && hashed_cached(d, path) == i) {
            forward(d, op, i, FWD_UNLINK, path, NOFH, NULL);
            return;
        }
        break;
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_SYMLINK:
        if ((i = hashed_cached(d, path)) >= 0) {
            forward(d, op, i, FWD_CREATED, path, NOFH, NULL);
            return;
        }
        break;
    case RPC_OP_GETATTR:
        if (is_root(path) || (cache_loc(d, path, &i, &is_dir) && is_dir)) {
            dir_attr(d, op, is_root(path) ? 0 : i, NULL);
            return;
        }
        /* fall through */
    case RPC_OP_READLINK:
    case RPC_OP_GETXATTR:
    case RPC_OP_LISTXATTR:
    case RPC_OP_OPEN:
    case RPC_OP_SETATTR:
    case RPC_OP_SETXATTR:
    case RPC_OP_REMOVEXATTR:
        if (!is_root(path) && cache_loc(d, path, &i, &is_dir) &&
            !(is_dir && (is_dir_change(code) || code == RPC_OP_GETATTR))) {
            forward(d, op, i, code == RPC_OP_OPEN ? FWD_OPEN : FWD_PLAIN, path, NOFH, NULL);
            return;
        }
        if (is_root(path) && !is_dir_change(code) && code != RPC_OP_OPEN &&
            code != RPC_OP_GETATTR) {
            forward(d, op, 0, FWD_PLAIN, path, NOFH, NULL);
            return;
        }
        break;
    default:
        break;
    }
    enqueue(d, op);
}

/* ---- lifetime ---- */

void cl_dht_stop(struct cl_layer *l)
{
    struct dht *d = l->priv;
    pthread_mutex_lock(&d->qlock);
    d->stopping = 1;
    pthread_cond_broadcast(&d->qcond);
    pthread_mutex_unlock(&d->qlock);
    for (int i = 0; i < d->n_threads; i++)
        pthread_join(d->threads[i], NULL);
    d->n_threads = 0;
}

static void dht_destroy(struct cl_layer *self)
{
    struct dht *d = self->priv;
    cl_dht_stop(self);
    cache_clear(d);
    for (size_t i = 0; i < d->n_fhs; i++)
        dfh_free(d->fhs[i]);
    free(d->fhs);
    free(d->volume);
    free(self->children);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->qlock);
    pthread_cond_destroy(&d->qcond);
    free(d);
}

struct cl_layer *cl_dht_new(struct cl_layer **children, int n, const char *volume)
{
    if (n < 2 || n > CL_DHT_MAX)
        return NULL;
    struct dht *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->layer.children = calloc((size_t)n, sizeof(*children));
    d->volume = strdup(volume ? volume : "");
    if (!d->layer.children || !d->volume) {
        free(d->layer.children);
        free(d->volume);
        free(d);
        return NULL;
    }
    memcpy(d->layer.children, children, (size_t)n * sizeof(*children));
    d->layer.n_children = n;
    d->layer.name = "distribute";
    d->layer.submit = dht_submit;
    d->layer.destroy = dht_destroy;
    d->layer.priv = d;
    d->n = n;
    d->bits = cl_dht_cookie_bits(n);
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->qlock, NULL);
    pthread_cond_init(&d->qcond, NULL);
    for (int i = 0; i < N_WORKERS; i++)
        if (pthread_create(&d->threads[i], NULL, worker, d) == 0)
            d->n_threads++;
    if (!d->n_threads) {
        dht_destroy(&d->layer);
        return NULL;
    }
    return &d->layer;
}
