/* Kernel caching under leases (docs/consistency.md).
 *
 * Requests that return attributes or names ask the bricks for a lease. When
 * every brick that answered granted one, the reply gives the kernel long
 * entry and attribute timeouts (client.lease-cache-timeout); otherwise 0,
 * since no recall would reach what it cached (the volume's
 * client.attribute-timeout / client.entry-timeout accept nothing else; a
 * mount's -o attribute-timeout= / entry-timeout= fix both cases alike).
 *
 * A recall arrives on a brick connection's reader thread. It bumps the
 * recall sequence at once, and a recall thread then drops what the kernel
 * cached under that lease and returns it:
 * - the changed entry (when the recall names one), the object's attributes,
 *   and every name the kernel may hold under the directory (the lease that
 *   protected them is gone);
 * - a lost connection drops every cached attribute and name.
 * Invalidating an entry takes the kernel's lock on the directory, which a
 * request in flight in that directory holds, so this never runs on a reader
 * thread (that request may be waiting for a reply the reader delivers).
 *
 * Races: a reply decides its timeouts under reply_lock (shared) and only if
 * no recall arrived since its request was sent; a recall thread takes
 * reply_lock exclusively before invalidating, so every reply that was
 * decided before the recall reached the kernel before the invalidation. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "bridge.h"

#define RECALL_THREADS_MAX 32
/* Recalls remembered by path, to tell whether one since a request concerns
 * what its reply leased (cf_lease_held_path). */
#define RECENT 256

struct job {
    struct job *next;
    struct cl_layer *from;
    char *path;    /* NULL: every lease of that brick is lost (or node) */
    uint64_t node; /* not 0: drop what is cached on and below this node */
    char name[NAME_MAX + 1];
};

struct cf_leases {
    struct cf *cf;
    struct fuse_session *se;
    pthread_rwlock_t reply_lock;
    uint64_t seq; /* recalls seen */
    int enabled;
    int no_expire; /* the kernel cannot expire entries (before 6.2) */
    double cache_timeout;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct job *head, **tail;
    int threads, idle, running, stop;
    pthread_t tids[RECALL_THREADS_MAX];
    struct {
        uint64_t seq;
        char *path;  /* NULL: everything (a lost connection) */
        int subtree; /* and everything below path (a local drop) */
    } recent[RECENT];
};

/* Counts a recall of path (NULL: of everything; subtree: and of what is
 * below it); under no lock. */
static void note_recall(struct cf_leases *L, const char *path, int subtree)
{
    char *copy = path ? strdup(path) : NULL;
    pthread_mutex_lock(&L->lock);
    uint64_t seq = __atomic_add_fetch(&L->seq, 1, __ATOMIC_ACQ_REL);
    size_t i = (size_t)(seq % RECENT);
    free(L->recent[i].path);
    L->recent[i].seq = seq;
    L->recent[i].path = copy;
    L->recent[i].subtree = subtree;
    pthread_mutex_unlock(&L->lock);
}

void cf_lease_configure(struct cf *cf, int enabled, double cache_timeout)
{
    struct cf_leases *L = cf->leases;
    if (!L)
        return;
    __atomic_store_n(&L->enabled, enabled, __ATOMIC_RELAXED);
    __atomic_store(&L->cache_timeout, &cache_timeout, __ATOMIC_RELAXED);
}

uint64_t cf_lease_mark(struct cf *cf)
{
    struct cf_leases *L = cf->leases;
    if (!L || !__atomic_load_n(&L->enabled, __ATOMIC_RELAXED))
        return 0;
    return __atomic_load_n(&L->seq, __ATOMIC_ACQUIRE) + 1;
}

void cf_lease_ask(struct fop *f)
{
    f->lease_seq = cf_lease_mark(f->cf);
    if (f->lease_seq)
        RPC_SET(&f->op.args, lease, RPC_T_LEASE, RPC_LEASE_READ);
}

void cf_reply_begin(struct cf *cf)
{
    if (cf->leases)
        pthread_rwlock_rdlock(&cf->leases->reply_lock);
}

void cf_reply_end(struct cf *cf)
{
    if (cf->leases)
        pthread_rwlock_unlock(&cf->leases->reply_lock);
}

/* The leases of f's session, when f asked for them and its reply grants
 * them all (whole), or at least the object's. */
static struct cf_leases *granted_as(const struct fop *f, int whole)
{
    struct cf_leases *L = f->cf->leases;
    if (!L || !f->lease_seq || !f->op.reply)
        return NULL;
    const struct rpc_msg *m = &f->op.reply->msg;
    return (whole ? rpc_lease_whole(m) : rpc_lease_object(m)) ? L : NULL;
}

/* Whether no recall arrived since f's request was sent. */
static int unrecalled(const struct cf_leases *L, const struct fop *f)
{
    return __atomic_load_n(&L->seq, __ATOMIC_ACQUIRE) + 1 == f->lease_seq;
}

static int held_as(const struct fop *f, int whole)
{
    struct cf_leases *L = granted_as(f, whole);
    return L && unrecalled(L, f);
}

int cf_lease_held(const struct fop *f)
{
    return held_as(f, 1);
}

int cf_lease_object_held(const struct fop *f)
{
    return held_as(f, 0);
}

/* An entry of a merged listing carries its own leases (RPC_LEASE_READ: its
 * attributes, RPC_LEASE_NAME: its name); any other is covered by the
 * reply's, whose whole grant covers both. */
int cf_lease_entry_held(const struct fop *f, const struct rpc_msg *d, unsigned bit)
{
    struct cf_leases *L = f->cf->leases;
    if (!L || !f->lease_seq || !f->op.reply)
        return 0;
    unsigned got;
    if (rpc_has(d, RPC_T_LEASE))
        got = (unsigned)d->lease;
    else if (rpc_lease_whole(&f->op.reply->msg))
        got = RPC_LEASE_READ | RPC_LEASE_NAME;
    else
        got = rpc_lease_object(&f->op.reply->msg) ? RPC_LEASE_READ : 0;
    return (got & bit) == bit && unrecalled(L, f);
}

int cf_lease_held_path(const struct fop *f, const char *path)
{
    return granted_as(f, 0) && cf_lease_kept(f->cf, f->lease_seq, path);
}

/* Whether path is dropped or below it. */
static int covers(const char *dropped, const char *path)
{
    size_t n = strlen(dropped);
    if (n == 1 && dropped[0] == '/')
        return 1;
    return !strncmp(dropped, path, n) && (path[n] == 0 || path[n] == '/');
}

int cf_lease_kept(struct cf *cf, uint64_t mark, const char *path)
{
    struct cf_leases *L = cf->leases;
    if (!L || !mark)
        return 0;
    uint64_t base = mark - 1;
    pthread_mutex_lock(&L->lock);
    uint64_t now = __atomic_load_n(&L->seq, __ATOMIC_ACQUIRE);
    int held = now - base <= RECENT;
    for (uint64_t s = base + 1; held && s <= now; s++) {
        size_t i = (size_t)(s % RECENT);
        held = L->recent[i].seq == s && L->recent[i].path &&
               (L->recent[i].subtree ? !covers(L->recent[i].path, path)
                                     : strcmp(L->recent[i].path, path) != 0);
    }
    pthread_mutex_unlock(&L->lock);
    return held;
}

double cf_lease_cache_timeout(struct cf *cf)
{
    if (cf->attr_fixed || !cf->leases)
        return cf_attr_timeout(cf);
    double d;
    __atomic_load(&cf->leases->cache_timeout, &d, __ATOMIC_RELAXED);
    return d;
}

double cf_lease_entry_timeout_as(const struct fop *f, int held)
{
    if (f->cf->entry_fixed || !held)
        return cf_entry_timeout(f->cf);
    double d;
    __atomic_load(&f->cf->leases->cache_timeout, &d, __ATOMIC_RELAXED);
    return d;
}

double cf_lease_attr_timeout_as(const struct fop *f, int held, const struct rpc_attr *a)
{
    /* A change through another name of a hard-linked file recalls leases
     * on that name only: its attributes are not cached. */
    if (f->cf->attr_fixed || !held || (!S_ISDIR(a->mode) && a->nlink > 1))
        return cf_attr_timeout(f->cf);
    double d;
    __atomic_load(&f->cf->leases->cache_timeout, &d, __ATOMIC_RELAXED);
    return d;
}

double cf_lease_entry_timeout(const struct fop *f)
{
    return cf_lease_entry_timeout_as(f, cf_lease_held(f));
}

double cf_lease_attr_timeout(const struct fop *f, const struct rpc_attr *a)
{
    return cf_lease_attr_timeout_as(f, cf_lease_object_held(f), a);
}

/* ---- recalls ---- */

/* The kernel's entry name of parent. Expired rather than dropped where the
 * kernel can: the next use asks this mount again (which still knows a
 * directory it holds), and dentries cached below it survive when it turns
 * out unchanged; dropping a directory's dentry drops every one below it,
 * which then all go to the bricks again. */
static void inval_entry(struct cf_leases *L, uint64_t parent, const char *name)
{
    int rc = -ENOSYS;
    if (!__atomic_load_n(&L->no_expire, __ATOMIC_RELAXED) &&
        (rc = fuse_lowlevel_notify_expire_entry(L->se, parent, name, strlen(name),
                                                FUSE_LL_EXPIRE_ONLY)) == -ENOSYS) {
        __atomic_store_n(&L->no_expire, 1, __ATOMIC_RELAXED);
        log_info("the kernel cannot expire entries: recalls drop them");
    }
    if (rc == -ENOSYS)
        rc = fuse_lowlevel_notify_inval_entry(L->se, parent, name, strlen(name));
    if (rc < 0 && rc != -ENOENT)
        log_debug("invalidating entry %s of node %llu: %s", name, (unsigned long long)parent,
                  strerror(-rc));
}

/* The attributes and cached pages (a directory's listing) of nodeid. */
static void inval_attr(struct cf_leases *L, uint64_t nodeid)
{
    int rc = fuse_lowlevel_notify_inval_inode(L->se, nodeid, 0, 0);
    if (rc < 0 && rc != -ENOENT)
        log_debug("invalidating node %llu: %s", (unsigned long long)nodeid, strerror(-rc));
}

void cf_lease_inval_attr(struct cf *cf, uint64_t node)
{
    struct cf_leases *L = cf->leases;
    if (!L)
        return;
    /* offset -1: the attributes only. A write in flight holds its pages
     * locked, so dropping pages here could wait for its own reply. */
    int rc = fuse_lowlevel_notify_inval_inode(L->se, node, -1, 0);
    if (rc < 0 && rc != -ENOENT)
        log_debug("invalidating attributes of node %llu: %s", (unsigned long long)node,
                  strerror(-rc));
}

/* Drops what the kernel holds under path's lease; returns its node (0:
 * not known here). */
static uint64_t drop_path(struct cf_leases *L, const char *path, const char *name)
{
    struct cl_itable *it = L->cf->it;
    uint64_t node = cl_itable_resolve(it, path);
    if (!node)
        return 0;
    /* Files written back into it reach the bricks before the lease goes. */
    int rc = cf_wb_settle_dir(L->cf, node);
    if (rc < 0)
        log_warn("files written back into %s before its recall: %s", path, strerror(-rc));
    if ((rc = cf_wbm_settle_in(L->cf, node)) < 0)
        log_warn("directories made in %s before its recall: %s", path, strerror(-rc));
    if ((rc = cf_wbd_settle_in(L->cf, node)) < 0)
        log_warn("directory attributes written back in %s before its recall: %s", path,
                 strerror(-rc));
    cf_known_forget(L->cf, node);
    cf_ps_quiesce(L->cf, node); /* a store of its pages ends before they are dropped */
    /* Then what was written behind in it: a write checks the lease under
     * the write-behind lock, so none is added after this. */
    cf_wbh_settle_dir(L->cf, node);
    cf_wbh_sync(L->cf, node);
    /* Hard links. The name path went through, or the entry the recall
     * names, may be gone (another client removed or replaced it): the
     * file's paths go through its other names. The entry named is expired
     * in the kernel and forgotten; the one recalled by path stays known,
     * for a recall of its directory to expire. */
    (void)cl_itable_demote_path(it, node, path);
    if (name[0]) {
        cl_itable_forget_alias(it, node, name);
        inval_entry(L, node, name);
    }
    inval_attr(L, node);
    struct cl_itable_name *v;
    size_t n = cl_itable_names(it, node, &v);
    for (size_t i = 0; i < n; i++)
        if (!name[0] || strcmp(v[i].name, name))
            inval_entry(L, node, v[i].name);
    cl_itable_names_free(v, n);
    return node;
}

struct held_return {
    struct cl_layer *from;
    char path[];
};

static void return_held(void *arg)
{
    struct held_return *r = arg;
    cl_proto_lease_return(r->from, r->path);
    free(r);
}

/* Returns path's lease to the brick it came from once no store into the
 * kernel's page cache of node is in progress (cf_ps_after). */
static void return_lease(struct cf_leases *L, struct cl_layer *from, const char *path,
                         uint64_t node)
{
    size_t len = strlen(path) + 1;
    struct held_return *r = node ? malloc(sizeof(*r) + len) : NULL;
    if (!r) {
        cl_proto_lease_return(from, path);
        return;
    }
    r->from = from;
    memcpy(r->path, path, len);
    cf_ps_after(L->cf, node, return_held, r);
}

/* node and everything the table knows below it. */
static void drop_tree(struct cf_leases *L, uint64_t node)
{
    size_t cap = 64, n = 0;
    uint64_t *todo = malloc(cap * sizeof(*todo));
    if (!todo)
        return;
    todo[n++] = node;
    while (n > 0) {
        uint64_t id = todo[--n];
        cf_known_forget(L->cf, id);
        cf_ps_quiesce(L->cf, id);
        inval_attr(L, id);
        struct cl_itable_name *v;
        size_t k = cl_itable_names(L->cf->it, id, &v);
        for (size_t i = 0; i < k; i++) {
            inval_entry(L, id, v[i].name);
            if (n == cap) {
                uint64_t *t = realloc(todo, 2 * cap * sizeof(*t));
                if (!t)
                    continue;
                todo = t;
                cap *= 2;
            }
            todo[n++] = v[i].nodeid;
        }
        cl_itable_names_free(v, k);
    }
    free(todo);
}

static void drop_all(struct cf_leases *L)
{
    cf_known_forget_all(L->cf);
    struct cl_itable_name *v;
    size_t n = cl_itable_names(L->cf->it, 0, &v);
    for (size_t i = 0; i < n; i++) {
        if (v[i].name)
            inval_entry(L, v[i].parent, v[i].name);
        inval_attr(L, v[i].nodeid);
    }
    cl_itable_names_free(v, n);
}

static void run_job(struct cf_leases *L, struct job *j)
{
    /* Replies decided before this recall reach the kernel first. */
    pthread_rwlock_wrlock(&L->reply_lock);
    pthread_rwlock_unlock(&L->reply_lock);
    if (j->node) {
        drop_tree(L, j->node);
    } else if (j->path) {
        uint64_t node = drop_path(L, j->path, j->name);
        return_lease(L, j->from, j->path, node);
    } else {
        drop_all(L);
    }
}

static void *recall_main(void *arg)
{
    struct cf_leases *L = arg;
    pthread_mutex_lock(&L->lock);
    for (;;) {
        while (!L->head && !L->stop) {
            L->idle++;
            pthread_cond_wait(&L->cond, &L->lock);
            L->idle--;
        }
        if (!L->head)
            break;
        struct job *j = L->head;
        L->head = j->next;
        if (!L->head)
            L->tail = &L->head;
        L->running++;
        pthread_mutex_unlock(&L->lock);
        run_job(L, j);
        free(j->path);
        free(j);
        pthread_mutex_lock(&L->lock);
        L->running--;
    }
    pthread_mutex_unlock(&L->lock);
    return NULL;
}

static void enqueue(struct cf_leases *L, struct job *j)
{
    pthread_mutex_lock(&L->lock);
    *L->tail = j;
    L->tail = &j->next;
    if (L->idle == 0 && !L->stop && L->threads < RECALL_THREADS_MAX &&
        pthread_create(&L->tids[L->threads], NULL, recall_main, L) == 0)
        L->threads++;
    pthread_cond_signal(&L->cond);
    pthread_mutex_unlock(&L->lock);
}

void cf_lease_drop_node(struct cf *cf, uint64_t node)
{
    struct cf_leases *L = cf->leases;
    if (!L)
        return;
    cf_known_forget(cf, node);
    /* Grants in flight for it or below it are void; others stand. */
    char path[PATH_MAX];
    note_recall(L, cl_itable_path(cf->it, node, NULL, path, sizeof(path)) == 0 ? path : NULL, 1);
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->node = node;
    enqueue(L, j);
}

/* Recall callback of the stack (client.h): on a reader thread, so it only
 * queues. Each recall may wait for a kernel lock held by a request in
 * flight, so one blocked recall must not hold up the others: a thread is
 * added while none is idle. */
static void recall_cb(void *ctx, struct cl_layer *from, const char *path, const char *name)
{
    struct cf_leases *L = ctx;
    note_recall(L, path, 0);
    struct job *j = calloc(1, sizeof(*j));
    if (!j || (path && !(j->path = strdup(path)))) {
        free(j);
        log_error("out of memory for a lease recall: returning it without dropping the cache");
        if (path)
            cl_proto_lease_return(from, path);
        return;
    }
    j->from = from;
    if (name)
        snprintf(j->name, sizeof(j->name), "%s", name);
    enqueue(L, j);
}

int cf_leases_start(struct cf *cf, struct fuse_session *se, struct cl_stack_params *sp)
{
    struct cf_leases *L = calloc(1, sizeof(*L));
    if (!L)
        return -ENOMEM;
    L->cf = cf;
    L->se = se;
    L->tail = &L->head;
    pthread_rwlock_init(&L->reply_lock, NULL);
    pthread_mutex_init(&L->lock, NULL);
    pthread_cond_init(&L->cond, NULL);
    if (pthread_create(&L->tids[0], NULL, recall_main, L) != 0) {
        pthread_rwlock_destroy(&L->reply_lock);
        pthread_mutex_destroy(&L->lock);
        pthread_cond_destroy(&L->cond);
        free(L);
        return -EAGAIN;
    }
    L->threads = 1;
    cf->leases = L;
    sp->recall = recall_cb;
    sp->recall_ctx = L;
    return 0;
}

void cf_leases_stop(struct cf *cf)
{
    struct cf_leases *L = cf->leases;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    L->stop = 1;
    pthread_cond_broadcast(&L->cond);
    int n = L->threads;
    pthread_mutex_unlock(&L->lock);
    for (int i = 0; i < n; i++)
        pthread_join(L->tids[i], NULL);
}

void cf_leases_free(struct cf *cf)
{
    struct cf_leases *L = cf->leases;
    if (!L)
        return;
    while (L->head) {
        struct job *j = L->head;
        L->head = j->next;
        free(j->path);
        free(j);
    }
    cf->leases = NULL;
    for (size_t i = 0; i < RECENT; i++)
        free(L->recent[i].path);
    pthread_rwlock_destroy(&L->reply_lock);
    pthread_mutex_destroy(&L->lock);
    pthread_cond_destroy(&L->cond);
    free(L);
}
