/* The distribute layer (distribute.h, docs/replication.md "Distribute").
 *
 * Two paths. The fast path runs inline, asynchronously: an operation on an
 * open file's handle, and a lookup, create or attribute call whose parent
 * layout (and, for existing objects, whose location) the layer has cached,
 * goes to one subvolume (a create only while the free-space figures of
 * cluster.min-free-disk are fresh, room_due). Everything else (a cache
 * miss, a create that must re-read free space, link-to files,
 * mkdir/rmdir, rename, link, unlink, statfs, directory handles and the
 * merged readdir) runs on the layer's worker threads as straight-line code
 * that waits for its subvolumes; children never call back into this layer,
 * so a worker waiting for them cannot deadlock. */
#include <fcntl.h>

#include "../lib/net.h"
#include "../lib/options.h"
#include "../rpc/opinfo.h"
#include "dht_int.h"

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

void dht__cache_set_loc(struct dht *d, const char *path, int subvol, int is_dir)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e) {
        e->subvol = subvol;
        e->is_dir = is_dir;
    }
    pthread_mutex_unlock(&d->lock);
}

void dht__cache_set_layout(struct dht *d, const char *path, const struct cl_dht_layout *l)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e && (e->layout || (e->layout = malloc(sizeof(*l))))) {
        *e->layout = *l;
        e->has_layout = 1;
    }
    pthread_mutex_unlock(&d->lock);
}

void dht__cache_drop(struct dht *d, const char *path)
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
void dht__cache_drop_all(struct dht *d)
{
    pthread_mutex_lock(&d->lock);
    cache_clear(d);
    pthread_mutex_unlock(&d->lock);
}

void dht__cache_set_gfid(struct dht *d, const char *path, const gfid_t *g)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e && (!e->has_gfid || !gfid_equal(&e->gfid, g))) {
        e->gfid = *g;
        e->has_gfid = 1;
        e->present = 0; /* another directory now has the name */
    }
    pthread_mutex_unlock(&d->lock);
}

int dht__cache_gfid(struct dht *d, const char *path, gfid_t *g)
{
    if (dht__is_root(path)) {
        gfid_root(g);
        return 1;
    }
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_find(d, path);
    int hit = e && e->has_gfid;
    if (hit)
        *g = e->gfid;
    pthread_mutex_unlock(&d->lock);
    return hit;
}

int dht__cache_present(struct dht *d, const char *path, int h)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_find(d, path);
    int hit = e && (e->present >> h & 1);
    pthread_mutex_unlock(&d->lock);
    return hit;
}

void dht__cache_set_present(struct dht *d, const char *path, int h)
{
    pthread_mutex_lock(&d->lock);
    struct centry *e = cache_get(d, path);
    if (e)
        e->present |= 1ull << h;
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

int dht__is_root(const char *path)
{
    return path[0] == '/' && path[1] == 0;
}

int dht__linkto_candidate(const struct rpc_attr *a)
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

int dht__fh_add(struct dht *d, struct dfh *h, uint64_t *id)
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

void dht__dfh_free(struct dfh *h)
{
    if (h) {
        free(h->path);
        free(h);
    }
}

struct dfh *dht__fh_take(struct dht *d, uint64_t id)
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

/* Leases (docs/consistency.md) are granted per brick, and this layer
 * passes one up only where the subvolumes that see every change of what it
 * covers granted it:
 * - a directory has a copy on every subvolume, and a change of its entries
 *   or attributes reaches at least one of them: its lease (LOOKUP, GETATTR,
 *   MKDIR) holds when every copy's was granted, and the bits passed up are
 *   those every subvolume granted (dht__dir_lease);
 * - a name lives on the subvolume it hashes to, which every change of it
 *   reaches (a create, removal, rename or link makes or removes the name,
 *   or its link-to, there): the parent's lease there covers the name
 *   (RPC_LEASE_NAME of a LOOKUP or a create);
 * - an object other than a directory lives on one subvolume, which
 *   recalls its lease on every change of it; one reached through a
 *   link-to was asked for none;
 * - a directory's extended attributes are the same on every copy, which
 *   every change of them reaches: the lease of the copy a GETXATTR read
 *   covers them. (A file's GETXATTR asks for none: a location cached from
 *   before another client's rename may name a link-to.)
 * PATTR never passes up: a directory's attributes merge every copy's.
 * ask_lease and pass_lease decide per operation. */
#define LEASE_BITS ((1ull << RPC_T_LEASE) | (1ull << RPC_T_PATTR))

void dht__no_lease(struct rpc_frame *r)
{
    if (r)
        r->msg.present &= ~LEASE_BITS;
}

/* The lease sub (a copy of args without one) asks for: what args asked, of
 * a LOOKUP, an OPEN or a request making a name (the subvolume it hashes
 * to, or for a directory every subvolume), or of a directory's GETXATTR
 * (dir: args are known to name a directory). */
static void ask_lease_as(struct rpc_msg *sub, const struct rpc_msg *args, int dir)
{
    unsigned op = (unsigned)sub->op;
    if (rpc_has(args, RPC_T_LEASE) &&
        (op == RPC_OP_LOOKUP || op == RPC_OP_OPEN || (dir && op == RPC_OP_GETXATTR) ||
         rpc_op_is(op, RPC_OPF_MAKES)))
        RPC_SET(sub, lease, RPC_T_LEASE, args->lease);
}

void dht__ask_lease(struct rpc_msg *sub, const struct rpc_msg *args)
{
    ask_lease_as(sub, args, 0);
}

/* A LOOKUP reply of the subvolume the name hashes to: the leases of an
 * object other than a directory there, and of its name, pass up. */
static void object_lease(struct rpc_frame *r)
{
    if (!r)
        return;
    struct rpc_msg *m = &r->msg;
    if (!rpc_has(m, RPC_T_LEASE) || !(m->lease & RPC_LEASE_READ) || !rpc_has(m, RPC_T_ATTR) ||
        S_ISDIR(m->attr.mode) || dht__linkto_candidate(&m->attr)) {
        dht__no_lease(r);
        return;
    }
    m->lease &= RPC_LEASE_READ | RPC_LEASE_NAME;
    m->present &= ~(1ull << RPC_T_PATTR);
}

/* What of a reply to op passes up: a LOOKUP's (object_lease); a
 * directory's GETXATTR's (asked only of one); an OPEN's exclusive lease on the file, granted by the
 * one subvolume holding it, which holds every other client's request naming the file or listing its
 * directory until the lease is returned; a new name's and its object's from the subvolume it hashes
 * to (not a directory's: dht__do_mkdir); nothing else. */
static void pass_lease(unsigned op, struct rpc_frame *r)
{
    unsigned got = r && rpc_has(&r->msg, RPC_T_LEASE) ? (unsigned)r->msg.lease : 0;
    if (op == RPC_OP_LOOKUP)
        object_lease(r);
    else if (op == RPC_OP_GETXATTR && (got & RPC_LEASE_READ))
        r->msg.lease &= RPC_LEASE_READ | RPC_LEASE_NAME;
    else if ((got & RPC_LEASE_READ) &&
             (op == RPC_OP_OPEN ? (got & RPC_LEASE_EXCL) != 0
                                : rpc_op_is(op, RPC_OPF_MAKES) && op != RPC_OP_MKDIR))
        r->msg.present &= ~(1ull << RPC_T_PATTR);
    else
        dht__no_lease(r);
}

/* Completes op with sub's reply, passing up what of its lease may pass. */
static void complete_passing(struct cl_op *op, struct cl_op *sub)
{
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    pass_lease(sub->args.op, r);
    dht__complete_op(op, sub->status, r);
}

/* Passes up on r the lease bits every subvolume granted for a directory
 * (subs: one request per subvolume, all of them asked); none when one did
 * not answer or grant. */
void dht__dir_lease(struct dht *d, const struct cl_op *subs, uint64_t mask, struct rpc_frame *r)
{
    unsigned bits = mask == dht__all_mask(d) ? ~0u : 0;
    for (int i = 0; i < d->n && bits; i++) {
        const struct rpc_frame *s = subs[i].reply;
        if (subs[i].status < 0 || !s || !rpc_has(&s->msg, RPC_T_LEASE))
            bits = 0;
        else
            bits &= (unsigned)s->msg.lease;
    }
    dht__no_lease(r);
    if (r && (bits & RPC_LEASE_READ))
        RPC_SET(&r->msg, lease, RPC_T_LEASE,
                bits & (RPC_LEASE_READ | RPC_LEASE_NAME | RPC_LEASE_EXCL));
}

/* Prepares sub as a copy of args (without a lease) for a subvolume. */
void dht__sub_from(struct cl_op *sub, const struct rpc_msg *args)
{
    cl_op_init(sub, (uint16_t)args->op, NULL, NULL);
    sub->args = *args;
    sub->args.present &= ~LEASE_BITS;
}

/* A brick subvolume whose connection is down is skipped at once rather
 * than waited for (a replicate subvolume decides that for itself). */
static int child_down(struct dht *d, int i)
{
    struct cl_layer *c = d->layer.children[i];
    return !strcmp(c->name, "protocol/client") && !cl_proto_connected(c);
}

/* Whether no brick of set i is connected (a set whose bricks were just
 * added, before this client reached them). */
static int set_unreachable(struct dht *d, int i)
{
    struct cl_layer *c = d->layer.children[i];
    if (!strcmp(c->name, "protocol/client"))
        return !cl_proto_connected(c);
    int n = __atomic_load_n(&c->n_children, __ATOMIC_ACQUIRE);
    for (int j = 0; j < n; j++) {
        struct cl_layer *m = __atomic_load_n(&c->children[j], __ATOMIC_ACQUIRE);
        if (!m || strcmp(m->name, "protocol/client") || cl_proto_connected(m))
            return 0;
    }
    return n > 0;
}

uint64_t dht__down_mask(struct dht *d)
{
    uint64_t m = 0;
    for (int i = 0; i < d->n; i++)
        if (child_down(d, i))
            m |= 1ull << i;
    return m;
}

static __thread uint32_t rounds_here;

void dht__rounds_start(uint32_t rounds)
{
    rounds_here = rounds;
}

uint32_t dht__rounds_now(void)
{
    return rounds_here;
}

void dht__complete_op(struct cl_op *op, int status, struct rpc_frame *reply)
{
    op->rounds = rounds_here;
    cl_op_complete(op, status, reply);
}

int dht__run(struct dht *d, int i, struct cl_op *sub)
{
    if (child_down(d, i)) {
        sub->status = -ENOTCONN;
        sub->reply = NULL;
        return -ENOTCONN;
    }
    int rc = cl_op_run(d->layer.children[i], sub);
    rounds_here += sub->rounds;
    return rc;
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

void dht__run_many(struct dht *d, struct cl_op **ops, const int *child, size_t n)
{
    struct fan_wait w;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    uint64_t down = dht__down_mask(d);
    w.remaining = 0;
    for (size_t k = 0; k < n; k++) {
        if (down >> child[k] & 1) {
            ops[k]->status = -ENOTCONN;
            ops[k]->reply = NULL;
            continue;
        }
        ops[k]->done = fan_done_cb;
        ops[k]->ctx = &w;
        w.remaining++;
    }
    for (size_t k = 0; k < n; k++)
        if (!(down >> child[k] & 1))
            cl_submit(d->layer.children[child[k]], ops[k]);
    rpc_cork_flush();
    pthread_mutex_lock(&w.lock);
    while (w.remaining > 0)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    uint32_t most = 0;
    for (size_t k = 0; k < n; k++)
        if (ops[k]->rounds > most)
            most = ops[k]->rounds;
    rounds_here += most;
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
}

void dht__fan_run(struct dht *d, struct cl_op *subs, uint64_t mask)
{
    struct cl_op *ops[CL_DHT_MAX];
    int child[CL_DHT_MAX];
    size_t n = 0;
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1) {
            ops[n] = &subs[i];
            child[n++] = i;
        }
    dht__run_many(d, ops, child, n);
}

uint64_t dht__all_mask(struct dht *d)
{
    return d->n == 64 ? UINT64_MAX : (1ull << d->n) - 1;
}

void dht__release_all(struct dht *d, struct cl_op *subs, uint64_t mask)
{
    for (int i = 0; i < d->n; i++)
        if (mask >> i & 1)
            cl_op_release(&subs[i]);
}

int dht__get_xattr(struct dht *d, int i, const char *path, const char *name, uint8_t *buf,
                   size_t cap, size_t *len)
{
    struct cl_op s;
    cl_op_init(&s, RPC_OP_GETXATTR, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
    rpc_set_str(&s.args, RPC_T_NAME, &s.args.name, name);
    RPC_SET(&s.args, size, RPC_T_SIZE, cap);
    int rc = dht__run(d, i, &s);
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
        rc = dht__get_xattr(d, i, dir, CL_DHT_XATTR_LAYOUT, buf, sizeof(buf), &len);
    if (rc == 0 && cl_dht_layout_decode(buf, len, d->n, l) < 0) {
        log_warn("volume %s: directory %s has a malformed or foreign layout; using the default",
                 d->volume, dir);
        rc = -ENODATA;
    }
    if (rc == -ENODATA) {
        cl_dht_layout_default(d->n, l);
        if (dht__is_root(dir)) {
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
            dht__fan_run(d, subs, dht__all_mask(d));
            dht__release_all(d, subs, dht__all_mask(d));
            log_info("volume %s: root directory given its layout over %d subvolumes", d->volume,
                     d->n);
        }
        rc = 0;
    }
    if (rc == 0)
        dht__cache_set_layout(d, dir, l);
    return rc;
}

static int lookup(struct dht *d, const struct rpc_msg *args, const char *path, int *where,
                  int *is_dir, struct rpc_frame **reply);

/* The places of the name with key in the current and previous placements
 * (dht__place_of). */
static int place_pick(struct dht *d, uint64_t key, int *h, int *hp)
{
    pthread_mutex_lock(&d->lock);
    *h = d->place ? cl_place_pick(d->place, key) : -1;
    *hp = d->prev ? cl_place_pick(d->prev, key) : -1;
    int n = d->n;
    pthread_mutex_unlock(&d->lock);
    if (*hp == *h || *hp >= n)
        *hp = -1;
    return *h >= 0 && *h < n ? 0 : -EIO;
}

int dht__place_of(struct dht *d, const char *path, int *h, int *hp)
{
    if (dht__is_root(path)) {
        *h = 0;
        *hp = -1;
        return 0;
    }
    char dir[PATH_MAX];
    const char *name = split(path, dir, sizeof(dir));
    gfid_t g;
    if (!dht__cache_gfid(d, dir, &g)) {
        int where, is_dir, rc = lookup(d, NULL, dir, &where, &is_dir, NULL);
        if (rc == 0 && !is_dir)
            rc = -ENOTDIR;
        if (rc < 0)
            return rc;
        if (!dht__cache_gfid(d, dir, &g))
            return -EIO; /* the cache was cleared meanwhile: try again */
    }
    return place_pick(d, cl_place_key(g.b, name, strlen(name)), h, hp);
}

int dht__dir_ensure(struct dht *d, const char *dir, int h)
{
    if (dht__is_root(dir) || dht__cache_present(d, dir, h))
        return 0;
    struct cl_op s;
    cl_op_init(&s, RPC_OP_LOOKUP, NULL, NULL);
    rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, dir);
    int rc = dht__run(d, h, &s);
    cl_op_release(&s);
    if (rc == -ENOENT) {
        /* A set added after the directory was made: copy it there, parents
         * first, from where it is. */
        char parent[PATH_MAX];
        split(dir, parent, sizeof(parent));
        int where, is_dir;
        if ((rc = dht__dir_ensure(d, parent, h)) == 0 &&
            (rc = lookup(d, NULL, dir, &where, &is_dir, NULL)) == 0) {
            if (where == h) /* made meanwhile */
                rc = 0;
            else if (!is_dir)
                rc = -ENOTDIR;
            else {
                dht__remake_dirs(d, dir, 1ull << h, where, 0);
                struct cl_op c;
                cl_op_init(&c, RPC_OP_LOOKUP, NULL, NULL);
                rpc_set_str(&c.args, RPC_T_PATH, &c.args.path, dir);
                rc = dht__run(d, h, &c);
                cl_op_release(&c);
                if (rc == 0)
                    log_info("volume %s: directory %s copied to subvolume %d", d->volume, dir, h);
            }
        }
    }
    if (rc == 0)
        dht__cache_set_present(d, dir, h);
    return rc;
}

/* The subvolume path's name hashes to in its parent's layout. */
int dht__hashed(struct dht *d, const char *path, int *h)
{
    if (dht__is_root(path)) {
        *h = 0;
        return 0;
    }
    if (d->placed) {
        int hp;
        return dht__place_of(d, path, h, &hp);
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
    int h, hp = -1, rc;
    if ((rc = d->placed ? dht__place_of(d, path, &h, &hp) : dht__hashed(d, path, &h)) < 0)
        return rc;
    /* A placement volume whose files may still be where the previous
     * placement put them: the new place, then the old, then the new again
     * (the file moved between the two asks). */
    int order[3] = {h, hp, h}, tries = hp >= 0 ? 3 : 1;
    struct cl_op s;
    for (int k = 0; k < tries; k++) {
        if (k)
            cl_op_release(&s);
        cl_op_init(&s, RPC_OP_LOOKUP, NULL, NULL);
        rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
        if (reply && args)
            dht__ask_lease(&s.args, args);
        h = order[k];
        rc = dht__run(d, h, &s);
        if (rc == 0 && !rpc_has(&s.reply->msg, RPC_T_ATTR))
            rc = -EPROTO;
        if (rc != -ENOENT)
            break;
    }
    if (rc < 0) {
        cl_op_release(&s);
        if (rc == -ENOENT)
            dht__cache_drop(d, path);
        return rc;
    }
    int at = h;
    if (dht__linkto_candidate(&s.reply->msg.attr)) {
        uint8_t v[8];
        size_t vl = 0;
        int xr = dht__get_xattr(d, h, path, CL_DHT_XATTR_LINKTO, v, sizeof(v), &vl);
        int t = xr == 0 ? cl_dht_linkto_parse(v, vl, d->n) : xr;
        if (xr == 0 && t < 0)
            log_warn("volume %s: %s on subvolume %d has a malformed link-to", d->volume, path, h);
        if (t >= 0 && t != h) {
            cl_op_release(&s);
            cl_op_init(&s, RPC_OP_LOOKUP, NULL, NULL);
            rpc_set_str(&s.args, RPC_T_PATH, &s.args.path, path);
            rc = dht__run(d, t, &s);
            if (rc == 0 && !rpc_has(&s.reply->msg, RPC_T_ATTR))
                rc = -EPROTO;
            if (rc < 0) {
                /* A link-to whose file is gone: the name does not exist. */
                cl_op_release(&s);
                dht__cache_drop(d, path);
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
    dht__cache_set_loc(d, path, at, *is_dir);
    if (d->placed && *is_dir) {
        dht__cache_set_gfid(d, path, &s.reply->msg.attr.gfid);
        dht__cache_set_present(d, path, at);
    }
    if (reply) {
        object_lease(s.reply); /* a link-to's target was asked for none */
        *reply = s.reply;
        s.reply = NULL;
    }
    cl_op_release(&s);
    return 0;
}

int dht__locate(struct dht *d, const struct rpc_msg *args, const char *path, int *where,
                int *is_dir)
{
    if (dht__is_root(path)) {
        *where = 0;
        *is_dir = 1;
        return 0;
    }
    if (cache_loc(d, path, where, is_dir))
        return 0;
    return lookup(d, args, path, where, is_dir, NULL);
}

void dht__complete_sub(struct cl_op *op, struct cl_op *sub)
{
    struct rpc_frame *r = sub->reply;
    sub->reply = NULL;
    dht__no_lease(r);
    dht__complete_op(op, sub->status, r);
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
        dht__complete_op(op, st, NULL);
        return;
    }
    struct dfh *h = calloc(1, sizeof(*h));
    uint64_t id;
    if (!h || dht__fh_add(d, h, &id) < 0) {
        free(h);
        struct cl_op *r = calloc(1, sizeof(*r));
        if (r) { /* give the child its handle back, without waiting */
            cl_op_init(r, RPC_OP_RELEASE, free_op_cb, NULL);
            RPC_SET(&r->args, fh, RPC_T_FH, sub->reply->msg.fh);
            cl_submit(d->layer.children[i], r);
        }
        cl_op_release(sub);
        dht__complete_op(op, -ENOMEM, NULL);
        return;
    }
    h->subvol = i;
    h->fh[i] = sub->reply->msg.fh;
    sub->reply->msg.fh = id;
    complete_passing(op, sub);
}

/* One subvolume serves the operation (dir: on a directory). */
static void one(struct dht *d, struct cl_op *op, int i, int dir)
{
    struct cl_op s;
    dht__sub_from(&s, &op->args);
    ask_lease_as(&s.args, &op->args, dir);
    dht__run(d, i, &s);
    unsigned code = (unsigned)op->args.op;
    if (code == RPC_OP_OPEN || code == RPC_OP_CREATE)
        complete_open(d, op, i, &s);
    else if (dir && code == RPC_OP_GETXATTR)
        complete_passing(op, &s);
    else
        dht__complete_sub(op, &s);
}

/* The same change on every subvolume; the reply is primary's. Succeeds when
 * every subvolume that has the object succeeded. */
void dht__every(struct dht *d, struct cl_op *op, int primary, const struct dfh *h)
{
    struct cl_op subs[CL_DHT_MAX];
    uint64_t mask = 0;
    if (op->args.op != RPC_OP_FSYNC && dht__down_mask(d)) {
        /* A directory change must reach every copy: refuse it whole. */
        dht__complete_op(op, -ENOTCONN, NULL);
        return;
    }
    for (int i = 0; i < d->n; i++) {
        if (h && h->fh[i] == NOFH)
            continue;
        dht__sub_from(&subs[i], &op->args);
        if (h)
            subs[i].args.fh = h->fh[i];
        mask |= 1ull << i;
    }
    if (!mask) {
        dht__complete_op(op, -ENOTCONN, NULL);
        return;
    }
    dht__fan_run(d, subs, mask);
    int st = 0;
    for (int i = 0; i < d->n; i++)
        if ((mask >> i & 1) && subs[i].status < 0 && st == 0 &&
            /* a set added after the directory was made lacks it */
            !(d->placed && subs[i].status == -ENOENT && i != primary))
            st = subs[i].status;
    if (!(mask >> primary & 1))
        primary = __builtin_ctzll(mask);
    if (st == 0) {
        dht__complete_sub(op, &subs[primary]);
    } else {
        if (subs[primary].status == 0)
            log_warn("volume %s: %s failed on some subvolumes: %s", d->volume,
                     rpc_op_name((unsigned)op->args.op), strerror(-st));
        dht__complete_op(op, st, NULL);
    }
    dht__release_all(d, subs, mask);
}

/* ---- cluster.min-free-disk ---- */

#define ROOM_RECHECK_MS 2000

static void dht_reconfigure(struct cl_layer *self, const struct opt_set *opts)
{
    struct dht *d = self->priv;
    int pct;
    int64_t bytes;
    opt_space(opts, "cluster.min-free-disk", &pct, &bytes);
    pthread_mutex_lock(&d->lock);
    d->mfd_percent = pct;
    d->mfd_bytes = bytes;
    d->room_ms = 0; /* judge the subvolumes again by the new threshold */
    pthread_mutex_unlock(&d->lock);
}

static int room_due(struct dht *d)
{
    pthread_mutex_lock(&d->lock);
    int off = d->mfd_percent == 0 || (d->mfd_percent < 0 && d->mfd_bytes == 0);
    int due = !off && (!d->room_ms || net_now_ms() - d->room_ms >= ROOM_RECHECK_MS);
    pthread_mutex_unlock(&d->lock);
    return due;
}

/* Reads every subvolume's free space (on a worker: it waits) and marks
 * those below cluster.min-free-disk. */
static void room_read(struct dht *d)
{
    struct cl_op subs[CL_DHT_MAX];
    uint64_t mask = dht__all_mask(d) & ~dht__down_mask(d);
    for (int i = 0; i < d->n; i++) {
        cl_op_init(&subs[i], RPC_OP_STATFS, NULL, NULL);
        rpc_set_str(&subs[i].args, RPC_T_PATH, &subs[i].args.path, "/");
    }
    dht__fan_run(d, subs, mask);
    pthread_mutex_lock(&d->lock);
    uint64_t was = d->short_of_room;
    for (int i = 0; i < d->n; i++) {
        if (!(mask >> i & 1) || subs[i].status < 0 || !rpc_has(&subs[i].reply->msg, RPC_T_STATFS))
            continue;
        const struct rpc_statfs *st = &subs[i].reply->msg.statfs;
        uint64_t f = st->frsize ? st->frsize : st->bsize;
        uint64_t total = st->blocks * f;
        d->avail[i] = st->bavail * f;
        if (d->avail[i] < opt_space_bytes(d->mfd_percent, d->mfd_bytes, total))
            d->short_of_room |= 1ull << i;
        else
            d->short_of_room &= ~(1ull << i);
    }
    d->room_ms = net_now_ms();
    uint64_t now_short = d->short_of_room;
    pthread_mutex_unlock(&d->lock);
    dht__release_all(d, subs, mask);
    for (int i = 0; i < d->n; i++)
        if ((now_short ^ was) >> i & 1)
            log_info("volume %s: subvolume %d %s cluster.min-free-disk%s", d->volume, i,
                     now_short >> i & 1 ? "is below" : "is above",
                     now_short >> i & 1 ? ": new files go to subvolumes with more room" : "");
}

/* The subvolume a new file hashing to h goes to instead (the one with the
 * most room), or -1 when h has room or none has more. */
static int elsewhere(struct dht *d, int h)
{
    int best = -1;
    pthread_mutex_lock(&d->lock);
    if (d->short_of_room >> h & 1)
        for (int i = 0; i < d->n; i++)
            if (!(d->short_of_room >> i & 1) && (best < 0 || d->avail[i] > d->avail[best]))
                best = i;
    pthread_mutex_unlock(&d->lock);
    return best >= 0 && !child_down(d, best) ? best : -1;
}

static void complete_open(struct dht *d, struct cl_op *op, int i, struct cl_op *sub);

/* A new file on subvolume t with a link-to under its name on h, the
 * subvolume its name hashes to (as a renamed file): lookups of the name
 * follow it there. The link-to goes first, so the name never exists twice.
 * No lease is passed up: changes of the name reach h, not t. */
static void create_elsewhere(struct dht *d, struct cl_op *op, const char *path, int h, int t)
{
    int rc = dht__make_linkto(d, h, path, t);
    if (rc == -EEXIST && !(op->args.op == RPC_OP_CREATE && (op->args.flags & O_EXCL))) {
        one(d, op, h, 0); /* the name exists there: as without the option */
        return;
    }
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    struct cl_op s;
    dht__sub_from(&s, &op->args);
    dht__run(d, t, &s);
    if (s.status < 0) {
        dht__remove_name(d, h, path);
    } else {
        dht__cache_set_loc(d, path, t, 0);
        log_debug("volume %s: %s made on subvolume %d, not %d (cluster.min-free-disk)", d->volume,
                  path, t, h);
    }
    if (op->args.op == RPC_OP_CREATE)
        complete_open(d, op, t, &s);
    else
        dht__complete_sub(op, &s);
}

/* ---- the worker path ---- */

static void slow(struct dht *d, struct cl_op *op)
{
    unsigned code = (unsigned)op->args.op;
    char path[PATH_MAX], path2[PATH_MAX];
    if (rpc_has(&op->args, RPC_T_FH)) {
        struct dfh *h = fh_get(d, op->args.fh);
        if (!h)
            dht__complete_op(op, rpc_op_is(code, RPC_OPF_RELEASE) ? 0 : -EBADF, NULL);
        else
            dht__do_dir_fh(d, op, h);
        return;
    }
    int rc =
        rpc_has(&op->args, RPC_T_PATH) ? arg_path(&op->args.path, path, sizeof(path)) : -EINVAL;
    if (rc == 0 && rpc_has(&op->args, RPC_T_PATH2))
        rc = arg_path(&op->args.path2, path2, sizeof(path2));
    else if (rc == 0 && rpc_op_is(code, RPC_OPF_PATH2))
        rc = -EINVAL;
    if (rc < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    int where, is_dir, h;
    switch (code) {
    case RPC_OP_LOOKUP: {
        struct rpc_frame *r = NULL;
        if (dht__is_root(path)) {
            struct cl_dht_layout l;
            if (!d->placed)
                get_layout(d, "/", &l); /* first use gives the root its layout */
            dht__dir_attr(d, op, 0, NULL);
            return;
        }
        if (cache_loc(d, path, &where, &is_dir) && is_dir) {
            dht__dir_attr(d, op, where, NULL);
            return;
        }
        rc = lookup(d, &op->args, path, &where, &is_dir, &r);
        if (rc == 0 && is_dir) {
            rpc_frame_free(r);
            dht__dir_attr(d, op, where, NULL);
            return;
        }
        dht__complete_op(op, rc, r);
        return;
    }
    case RPC_OP_MKDIR:
        dht__do_mkdir(d, op, path);
        return;
    case RPC_OP_RMDIR:
        dht__do_rmdir(d, op, path);
        return;
    case RPC_OP_UNLINK:
        dht__do_unlink(d, op, path);
        return;
    case RPC_OP_LINK:
        dht__do_link(d, op, path, path2);
        return;
    case RPC_OP_RENAME:
        dht__do_rename(d, op, path, path2);
        return;
    case RPC_OP_STATFS:
        dht__do_statfs(d, op);
        return;
    case RPC_OP_OPENDIR:
        dht__do_opendir(d, op, path);
        return;
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_SYMLINK:
    case RPC_OP_MAKE_FILE:
        if ((rc = dht__hashed(d, path, &h)) < 0) {
            dht__complete_op(op, rc, NULL);
            return;
        }
        if (d->placed) {
            /* A set just added whose bricks this client has not reached
             * yet: the file goes where the previous placement puts it,
             * where lookups also look, rather than failing. */
            int hp;
            if (dht__place_of(d, path, &h, &hp) == 0 && hp >= 0 && set_unreachable(d, h) &&
                !set_unreachable(d, hp))
                h = hp;
            char dir[PATH_MAX];
            split(path, dir, sizeof(dir));
            if ((rc = dht__dir_ensure(d, dir, h)) < 0) {
                dht__complete_op(op, rc, NULL);
                return;
            }
        }
        dht__cache_drop(d, path);
        if (code == RPC_OP_CREATE || code == RPC_OP_MAKE_FILE) {
            /* files only: their data is what fills a brick */
            if (room_due(d))
                room_read(d);
            int t = elsewhere(d, h);
            if (t >= 0) {
                create_elsewhere(d, op, path, h, t);
                return;
            }
        }
        one(d, op, h, 0);
        return;
    default:
        break;
    }
    if ((rc = dht__locate(d, &op->args, path, &where, &is_dir)) < 0) {
        dht__complete_op(op, rc, NULL);
        return;
    }
    if (is_dir && rpc_op_is(code, RPC_OPF_META))
        dht__every(d, op, where, NULL);
    else if (is_dir && code == RPC_OP_GETATTR)
        dht__dir_attr(d, op, where, NULL);
    else
        one(d, op, where, is_dir);
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
        rounds_here = j->op->rounds; /* what it cost before it was queued */
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
        dht__complete_op(op, -ENOMEM, NULL);
        return;
    }
    j->op = op;
    j->next = NULL;
    op->rounds = rounds_here;
    pthread_mutex_lock(&d->qlock);
    if (d->stopping) {
        pthread_mutex_unlock(&d->qlock);
        free(j);
        dht__complete_op(op, -ENOTCONN, NULL);
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

/* FWD_DIR: a request on a directory (its GETXATTR asks for a lease). */
enum fwd_kind { FWD_PLAIN, FWD_DIR, FWD_OPEN, FWD_LOOKUP, FWD_CREATED, FWD_RELEASE, FWD_UNLINK };

struct fwd {
    struct dht *d;
    struct cl_op *parent;
    struct cl_op sub;
    int subvol;
    uint32_t rounds; /* of the operation before it was forwarded */
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
    rounds_here = w->rounds + sub->rounds;
    if (w->kind == FWD_RELEASE) {
        dht__dfh_free(w->h);
    } else if (w->kind == FWD_UNLINK) {
        dht__cache_drop(d, w->path);
        if (st == -ENOENT) { /* moved by another client: resolve again */
            cl_op_release(sub);
            free(w);
            enqueue(d, op);
            return;
        }
    } else if (st == -ENOENT && w->kind != FWD_CREATED) {
        /* Gone from where the cache said (another client renamed or
         * removed it): forget and ask again the slow way. */
        dht__cache_drop(d, w->path);
        if (w->kind != FWD_LOOKUP) {
            cl_op_release(sub);
            free(w);
            enqueue(d, op);
            return;
        }
    } else if (st == 0 && w->path[0] && (w->kind == FWD_OPEN || sub->args.op == RPC_OP_GETATTR) &&
               rpc_has(&sub->reply->msg, RPC_T_ATTR) &&
               dht__linkto_candidate(&sub->reply->msg.attr)) {
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
        dht__cache_drop(d, w->path);
        cl_op_release(sub);
        free(w);
        enqueue(d, op);
        return;
    } else if (st == 0 && w->kind == FWD_LOOKUP) {
        const struct rpc_msg *m = &sub->reply->msg;
        if (rpc_has(m, RPC_T_ATTR) && dht__linkto_candidate(&m->attr)) {
            cl_op_release(sub);
            free(w);
            enqueue(d, op); /* maybe a link-to: the worker follows it */
            return;
        }
        if (rpc_has(m, RPC_T_ATTR))
            dht__cache_set_loc(d, w->path, w->subvol, S_ISDIR(m->attr.mode));
        if (rpc_has(m, RPC_T_ATTR) && S_ISDIR(m->attr.mode)) {
            /* a directory: its times come from every copy */
            int base = w->subvol;
            cl_op_release(sub);
            free(w);
            dht__dir_attr(d, op, base, NULL);
            return;
        }
    } else if (st == 0 && w->kind == FWD_CREATED) {
        dht__cache_set_loc(d, w->path, w->subvol, sub->args.op == RPC_OP_MKDIR);
    }
    if (st == 0 &&
        (w->kind == FWD_OPEN || (w->kind == FWD_CREATED && sub->args.op == RPC_OP_CREATE))) {
        /* Wrapping the handle allocates; it never waits for a child. */
        complete_open(d, op, w->subvol, sub);
        free(w);
        return;
    }
    complete_passing(op, sub);
    free(w);
}

static void forward(struct dht *d, struct cl_op *op, int i, enum fwd_kind kind, const char *path,
                    uint64_t child_fh, struct dfh *h)
{
    if (child_down(d, i)) {
        if (kind == FWD_RELEASE)
            dht__dfh_free(h); /* its handle died with the connection */
        dht__complete_op(op, kind == FWD_RELEASE ? 0 : -ENOTCONN, NULL);
        return;
    }
    size_t pl = path ? strlen(path) : 0;
    struct fwd *w = malloc(sizeof(*w) + pl + 1);
    if (!w) {
        dht__complete_op(op, -ENOMEM, NULL);
        return;
    }
    w->d = d;
    w->parent = op;
    w->subvol = i;
    w->rounds = rounds_here;
    w->kind = kind;
    w->h = h;
    memcpy(w->path, path ? path : "", pl + 1);
    cl_op_init(&w->sub, (uint16_t)op->args.op, fwd_done_cb, w);
    w->sub.args = op->args;
    w->sub.args.present &= ~LEASE_BITS;
    ask_lease_as(&w->sub.args, &op->args, kind == FWD_DIR);
    w->sub.spread = op->spread;
    if (child_fh != NOFH)
        w->sub.args.fh = child_fh;
    cl_submit(d->layer.children[i], &w->sub);
}

/* The subvolume a name hashes to, from cached layouts only; -1 if unknown. */
static int hashed_cached(struct dht *d, const char *path)
{
    if (dht__is_root(path))
        return -1;
    char dir[PATH_MAX];
    const char *name = split(path, dir, sizeof(dir));
    if (d->placed) {
        /* while files may be at their previous places: a worker looks */
        gfid_t g;
        int h, hp;
        if (!dht__cache_gfid(d, dir, &g) ||
            place_pick(d, cl_place_key(g.b, name, strlen(name)), &h, &hp) < 0 || hp >= 0)
            return -1;
        return h;
    }
    struct cl_dht_layout l;
    if (!cache_layout(d, dir, &l))
        return -1;
    return cl_dht_layout_pick(&l, cl_dht_hash(name, strlen(name)));
}

static void dht_submit(struct cl_layer *self, struct cl_op *op)
{
    struct dht *d = self->priv;
    unsigned code = (unsigned)op->args.op;
    rounds_here = 0;
    if (rpc_op_is(code, RPC_OPF_UNROUTED)) {
        dht__complete_op(op, -ENOTSUP, NULL);
        return;
    }
    if (rpc_has(&op->args, RPC_T_FH)) {
        struct dfh *h = fh_get(d, op->args.fh);
        if (!h) {
            dht__complete_op(op, rpc_op_is(code, RPC_OPF_RELEASE) ? 0 : -EBADF, NULL);
        } else if (h->is_dir && !rpc_op_is(code, RPC_OPF_LOCK)) {
            enqueue(d, op);
        } else if (h->is_dir) {
            /* Lock waits can last: never on a worker. One subvolume's copy
             * of the directory carries its locks. */
            forward(d, op, h->subvol, FWD_PLAIN, NULL, h->fh[h->subvol], NULL);
        } else if (code == RPC_OP_RELEASE) {
            dht__fh_take(d, op->args.fh);
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
            dht__dir_attr(d, op, i, NULL); /* directory times come from every copy */
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
    case RPC_OP_MAKE_FILE:
        /* A file whose place may move for want of room, or when the room
         * is to be read again, goes to a worker. */
        if (!d->placed && (i = hashed_cached(d, path)) >= 0 &&
            ((code != RPC_OP_CREATE && code != RPC_OP_MAKE_FILE) ||
             (!room_due(d) && elsewhere(d, i) < 0))) {
            forward(d, op, i, FWD_CREATED, path, NOFH, NULL);
            return;
        }
        break;
    case RPC_OP_GETATTR:
        if (dht__is_root(path) || (cache_loc(d, path, &i, &is_dir) && is_dir)) {
            dht__dir_attr(d, op, dht__is_root(path) ? 0 : i, NULL);
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
        if (!dht__is_root(path) && cache_loc(d, path, &i, &is_dir) &&
            !(is_dir && (rpc_op_is(code, RPC_OPF_META) || code == RPC_OP_GETATTR))) {
            forward(d, op, i,
                    code == RPC_OP_OPEN ? FWD_OPEN
                    : is_dir            ? FWD_DIR
                                        : FWD_PLAIN,
                    path, NOFH, NULL);
            return;
        }
        if (dht__is_root(path) && !rpc_op_is(code, RPC_OPF_META) && code != RPC_OP_OPEN &&
            code != RPC_OP_GETATTR) {
            forward(d, op, 0, FWD_DIR, path, NOFH, NULL);
            return;
        }
        break;
    default:
        break;
    }
    enqueue(d, op);
}

/* ---- lifetime ---- */

static void dht_stop(struct cl_layer *l)
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
    dht_stop(self);
    cache_clear(d);
    for (size_t i = 0; i < d->n_fhs; i++)
        dht__dfh_free(d->fhs[i]);
    free(d->fhs);
    free(d->volume);
    free(self->children);
    free(d->place);
    free(d->prev);
    cl_dht_cookie_map_free(d->cookies);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->qlock);
    pthread_cond_destroy(&d->qcond);
    free(d);
}

/* Mapped readdir cookies kept (dht_cookies.c): about 24 bytes each. */
#define COOKIE_SLOTS (1u << 20)

static struct cl_layer *dht_new(struct cl_layer **children, int n, const char *volume,
                                const struct cl_place *place, const struct cl_place *prev)
{
    if (n < (place ? 1 : 2) || n > CL_DHT_MAX)
        return NULL;
    struct dht *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    if (place &&
        (!(d->place = malloc(sizeof(*place))) || (prev && !(d->prev = malloc(sizeof(*prev)))))) {
        free(d->place);
        free(d);
        return NULL;
    }
    if (place) {
        d->placed = 1;
        *d->place = *place;
        if (prev)
            *d->prev = *prev;
    }
    /* a placement volume gains sets live (cl_dht_add_child) */
    d->layer.children = calloc(place ? CL_DHT_MAX : (size_t)n, sizeof(*children));
    d->volume = strdup(volume ? volume : "");
    d->cookies = cl_dht_cookie_map_new(COOKIE_SLOTS);
    if (!d->layer.children || !d->volume || !d->cookies) {
        free(d->layer.children);
        free(d->place);
        free(d->prev);
        free(d->volume);
        cl_dht_cookie_map_free(d->cookies);
        free(d);
        return NULL;
    }
    memcpy(d->layer.children, children, (size_t)n * sizeof(*children));
    d->layer.n_children = n;
    d->layer.name = "distribute";
    d->layer.submit = dht_submit;
    d->layer.reconfigure = dht_reconfigure;
    d->layer.stop = dht_stop;
    d->layer.destroy = dht_destroy;
    d->layer.priv = d;
    d->n = n;
    /* cookies of a volume that may grow keep their meaning as it does */
    d->bits = cl_dht_cookie_bits(place ? CL_DHT_MAX : n);
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

struct cl_layer *cl_dht_new(struct cl_layer **children, int n, const char *volume)
{
    return dht_new(children, n, volume, NULL, NULL);
}

struct cl_layer *cl_dht_new_placed(struct cl_layer **children, int n, const char *volume,
                                   const struct cl_place *place, const struct cl_place *prev)
{
    if (!place || place->n != n || (prev && prev->n > n))
        return NULL;
    return dht_new(children, n, volume, place, prev);
}

int cl_dht_add_child(struct cl_layer *l, struct cl_layer *child)
{
    struct dht *d = l->priv;
    if (!d->placed)
        return -ENOTSUP;
    pthread_mutex_lock(&d->lock);
    int n = d->n;
    if (n >= CL_DHT_MAX) {
        pthread_mutex_unlock(&d->lock);
        return -ENOSPC;
    }
    /* The slot first, then the count: an operation that sees the new count
     * finds the child. No name goes there before the placement says so
     * (cl_dht_set_place, after). */
    __atomic_store_n(&l->children[n], child, __ATOMIC_RELEASE);
    __atomic_store_n(&l->n_children, n + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&d->n, n + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&d->lock);
    log_info("volume %s: distribute gains set %d", d->volume, n);
    return 0;
}

int cl_dht_set_place(struct cl_layer *l, const struct cl_place *place, const struct cl_place *prev)
{
    struct dht *d = l->priv;
    if (!d->placed || !place)
        return -ENOTSUP;
    struct cl_place *np = malloc(sizeof(*np)), *pp = prev ? malloc(sizeof(*pp)) : NULL;
    if (!np || (prev && !pp)) {
        free(np);
        free(pp);
        return -ENOMEM;
    }
    *np = *place;
    if (prev)
        *pp = *prev;
    pthread_mutex_lock(&d->lock);
    if (place->n > d->n || (prev && prev->n > d->n)) {
        pthread_mutex_unlock(&d->lock);
        free(np);
        free(pp);
        return -EINVAL;
    }
    struct cl_place *op = d->place, *opp = d->prev;
    uint64_t was = op->gen;
    d->place = np;
    d->prev = pp;
    pthread_mutex_unlock(&d->lock);
    free(op);
    free(opp);
    if (was != place->gen)
        log_info("volume %s: placement generation %llu (%d sets)%s", d->volume,
                 (unsigned long long)place->gen, place->n,
                 prev ? ": files may still be where the previous one put them" : "");
    return 0;
}
