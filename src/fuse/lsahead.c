/* Listing ahead: the listings of subdirectories fetched before they are
 * asked for (docs/notes/performance-notes.md, round sixteen).
 *
 * Why: on a fresh mount `ls -lR`, `find` or `du` wait on the bricks once
 * per directory, for its OPENDIR and for each READDIRPLUS, one after the
 * other; everything else they ask (attributes, ACLs) this mount answers.
 * When a listing under the directory's lease shows subdirectories, they
 * are queued here (newest first: a walk goes down into what it just
 * listed) and LSA_THREADS threads fetch each whole listing (OPENDIR,
 * READDIR to the end, RELEASEDIR) asking for the same lease, while the
 * walk is busy elsewhere. An OPENDIR of such a directory is then answered
 * without the bricks (a handle opened on them only if something needs
 * one, ops_dir.c) and its READDIRs come from here.
 *
 * A listing fetched ahead is what a READDIR sent at its start would have
 * returned. It is served only while that stays true:
 * - another client's change recalls the lease the listing was fetched
 *   under (on the directory or on an entry), and any recall makes every
 *   listing here stale (the mount's recall sequence moved past its mark);
 * - any change made through this mount (cf_lsa_changed, from every handler
 *   that creates, removes, renames, writes or sets attributes or extended
 *   attributes) makes them all stale too;
 * - what this mount still owes the bricks for the directory is sent
 *   before its listing is fetched (fop_path), as before any READDIR, and
 *   directories it holds exclusively are not fetched ahead at all.
 * A listing is dropped once served to its end, after LSA_TTL_MS, and the
 * oldest goes when LSA_MAX listings or LSA_BYTES bytes are held. A walk
 * that changes what it walks (`rm -rf`, `chmod -R`) would make every
 * listing stale before its use: nothing is fetched ahead until
 * LSA_QUIET_MS after the last change through this mount. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "bridge.h"

#define LSA_THREADS 4
#define LSA_QUEUE 256
#define LSA_MAX 512
#define LSA_BYTES (32u << 20)
#define LSA_TTL_MS 5000
#define LSA_CHUNK (64u << 10)    /* READDIR size asked of a brick */
#define LSA_DIR_BYTES (4u << 20) /* a larger listing is not kept */
#define LSA_QUIET_MS 1000        /* nothing is fetched ahead this long after a change */
#define LSA_WAIT_MS 1000         /* an OPENDIR waits this long for its listing on its way */

struct cf_lsa {
    struct cf *cf;
    uint64_t gen;        /* changes made through this mount (atomic) */
    uint64_t changed_ms; /* when the last one was made (atomic) */
    pthread_mutex_t qlock;
    pthread_cond_t qcond, fetched_cond;
    uint64_t queue[LSA_QUEUE]; /* a stack: the newest first */
    int n_queued, stopping;
    uint64_t busy[LSA_THREADS]; /* being fetched */
    struct lsa_thread {
        struct cf_lsa *A;
        int slot; /* in busy[] */
        pthread_t thread;
    } t[LSA_THREADS];
    int n_threads;
    pthread_mutex_t lock;            /* the listings */
    struct cf_lsa_list *head, *tail; /* oldest first */
    size_t n_lists, bytes;
    uint64_t fetched, served, stale, missed;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void list_free(struct cf_lsa_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        rpc_frame_free(l->fr[i]);
    free(l->fr);
    free(l);
}

/* Under A->lock. */
static void unlink_list(struct cf_lsa *A, struct cf_lsa_list *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        A->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        A->tail = l->prev;
    A->n_lists--;
    A->bytes -= l->bytes;
}

static int fresh(struct cf_lsa *A, const struct cf_lsa_list *l)
{
    return l->mark == cf_lease_mark(A->cf) &&
           l->gen == __atomic_load_n(&A->gen, __ATOMIC_ACQUIRE) &&
           now_ms() - l->made_ms < LSA_TTL_MS;
}

static struct cf_lsa_list *find(struct cf_lsa *A, uint64_t dir)
{
    for (struct cf_lsa_list *l = A->head; l; l = l->next)
        if (l->dir == dir)
            return l;
    return NULL;
}

static void store(struct cf_lsa *A, struct cf_lsa_list *l)
{
    pthread_mutex_lock(&A->lock);
    struct cf_lsa_list *old = find(A, l->dir);
    if (old) {
        unlink_list(A, old);
        list_free(old);
    }
    while (A->head &&
           (A->n_lists >= LSA_MAX || A->bytes + l->bytes > LSA_BYTES || !fresh(A, A->head))) {
        struct cf_lsa_list *o = A->head;
        unlink_list(A, o);
        list_free(o);
    }
    /* Checked under the lock the readers take: a change or recall after
     * this point is seen by them. */
    if (!fresh(A, l)) {
        A->stale++;
        pthread_mutex_unlock(&A->lock);
        list_free(l);
        return;
    }
    l->prev = A->tail;
    l->next = NULL;
    if (A->tail)
        A->tail->next = l;
    else
        A->head = l;
    A->tail = l;
    A->n_lists++;
    A->bytes += l->bytes;
    A->fetched++;
    pthread_mutex_unlock(&A->lock);
}

/* The cookie after the last entry of a READDIR reply; *n its entries. */
static uint64_t last_cookie(const struct rpc_frame *r, size_t *n)
{
    struct rpc_iter it;
    struct rpc_field fld;
    uint64_t last = 0;
    *n = 0;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &fld) > 0) {
        struct rpc_msg d;
        if (fld.tag != RPC_T_DIRENT || rpc_msg_decode(fld.val, fld.len, &d, NULL) < 0 ||
            !rpc_has(&d, RPC_T_OFFSET))
            continue;
        last = d.offset;
        (*n)++;
    }
    return last;
}

static int run(struct cf *cf, struct fop *f)
{
    int rc = cl_op_run(cf->stack, &f->op);
    cl_opstats_note(&cf->stats, (unsigned)f->op.args.op, f->op.rounds, rc);
    return rc;
}

/* Reads dir's listing to its end: a list, or NULL. */
static struct cf_lsa_list *fetch(struct cf_lsa *A, struct fop *f, uint64_t dir)
{
    struct cf *cf = A->cf;
    struct cf_lsa_list *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->dir = dir;
    l->mark = cf_lease_mark(cf);
    l->gen = __atomic_load_n(&A->gen, __ATOMIC_ACQUIRE);
    l->made_ms = now_ms();
    if (cl_itable_gfid(cf->it, dir, &l->gfid) < 0) {
        free(l);
        return NULL;
    }
    memset(f, 0, sizeof(*f));
    f->cf = cf;
    f->parent = dir;
    cl_op_init(&f->op, RPC_OP_OPENDIR, NULL, f);
    int ok = 0;
    if (!l->mark || cf_known_excl(cf, dir) || fop_path(f, dir, NULL) < 0 || run(cf, f) < 0 ||
        !rpc_has(&f->op.reply->msg, RPC_T_FH)) {
        cl_op_release(&f->op);
        free(l);
        return NULL;
    }
    uint64_t fh = f->op.reply->msg.fh, cookie = 0;
    cl_op_release(&f->op);
    for (;;) {
        cl_op_init(&f->op, RPC_OP_READDIR, NULL, f);
        struct rpc_msg *a = &f->op.args;
        RPC_SET(a, fh, RPC_T_FH, fh);
        RPC_SET(a, offset, RPC_T_OFFSET, cookie);
        RPC_SET(a, size, RPC_T_SIZE, LSA_CHUNK);
        RPC_SET(a, flags, RPC_T_FLAGS, 1);
        if (fop_path(f, dir, NULL) < 0)
            break;
        RPC_SET(a, lease, RPC_T_LEASE, RPC_LEASE_READ);
        if (run(cf, f) < 0)
            break;
        struct rpc_frame *r = f->op.reply;
        f->op.reply = NULL;
        struct rpc_frame **fr = realloc(l->fr, (l->n + 1) * sizeof(*fr));
        if (!fr) {
            rpc_frame_free(r);
            break;
        }
        l->fr = fr;
        l->fr[l->n++] = r;
        l->bytes += r->hdr.body_len + sizeof(*r);
        if (!rpc_lease_whole(&r->msg))
            break; /* not leased: nothing would say when it goes stale */
        size_t n;
        uint64_t next = last_cookie(r, &n);
        if (rpc_has(&r->msg, RPC_T_EOF) && r->msg.eof) {
            ok = 1;
            break;
        }
        if (!n || next == cookie || l->bytes > LSA_DIR_BYTES)
            break;
        cookie = next;
    }
    cl_op_release(&f->op);
    cl_op_init(&f->op, RPC_OP_RELEASEDIR, NULL, f);
    RPC_SET(&f->op.args, fh, RPC_T_FH, fh);
    (void)run(cf, f);
    cl_op_release(&f->op);
    /* The node still names the directory the listing is of. */
    gfid_t now;
    if (!ok || cl_itable_gfid(cf->it, dir, &now) < 0 || !gfid_equal(&now, &l->gfid)) {
        list_free(l);
        return NULL;
    }
    return l;
}

static void *lsa_main(void *arg)
{
    struct lsa_thread *t = arg;
    struct cf_lsa *A = t->A;
    struct fop *f = malloc(sizeof(*f)); /* large (two paths): one per thread */
    pthread_mutex_lock(&A->qlock);
    while (!A->stopping && f) {
        if (!A->n_queued) {
            pthread_cond_wait(&A->qcond, &A->qlock);
            continue;
        }
        uint64_t dir = A->queue[--A->n_queued];
        A->busy[t->slot] = dir;
        pthread_mutex_unlock(&A->qlock);
        struct cf_lsa_list *l = fetch(A, f, dir);
        if (l)
            store(A, l);
        pthread_mutex_lock(&A->qlock);
        A->busy[t->slot] = 0;
        pthread_cond_broadcast(&A->fetched_cond);
    }
    pthread_mutex_unlock(&A->qlock);
    free(f);
    return NULL;
}

int cf_lsa_init(struct cf *cf)
{
    struct cf_lsa *A = calloc(1, sizeof(*A));
    if (!A)
        return -ENOMEM;
    A->cf = cf;
    pthread_mutex_init(&A->qlock, NULL);
    pthread_cond_init(&A->qcond, NULL);
    pthread_cond_init(&A->fetched_cond, NULL);
    pthread_mutex_init(&A->lock, NULL);
    for (int i = 0; i < LSA_THREADS; i++) {
        A->t[i].A = A;
        A->t[i].slot = i;
        if (pthread_create(&A->t[i].thread, NULL, lsa_main, &A->t[i]) != 0)
            break;
        A->n_threads++;
    }
    if (!A->n_threads) {
        pthread_mutex_destroy(&A->lock);
        pthread_cond_destroy(&A->fetched_cond);
        pthread_cond_destroy(&A->qcond);
        pthread_mutex_destroy(&A->qlock);
        free(A);
        return -EAGAIN;
    }
    cf->lsa = A;
    return 0;
}

void cf_lsa_free(struct cf *cf)
{
    struct cf_lsa *A = cf->lsa;
    if (!A)
        return;
    pthread_mutex_lock(&A->qlock);
    A->stopping = 1;
    pthread_cond_broadcast(&A->qcond);
    pthread_mutex_unlock(&A->qlock);
    for (int i = 0; i < A->n_threads; i++)
        pthread_join(A->t[i].thread, NULL);
    cf->lsa = NULL;
    while (A->head) {
        struct cf_lsa_list *l = A->head;
        unlink_list(A, l);
        list_free(l);
    }
    pthread_mutex_destroy(&A->lock);
    pthread_cond_destroy(&A->fetched_cond);
    pthread_cond_destroy(&A->qcond);
    pthread_mutex_destroy(&A->qlock);
    free(A);
}

static uint64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Nothing changed through this mount for LSA_QUIET_MS. */
static int quiet(struct cf_lsa *A)
{
    return coarse_ms() - __atomic_load_n(&A->changed_ms, __ATOMIC_RELAXED) >= LSA_QUIET_MS;
}

void cf_lsa_changed(struct cf *cf)
{
    struct cf_lsa *A = cf->lsa;
    if (!A)
        return;
    __atomic_add_fetch(&A->gen, 1, __ATOMIC_ACQ_REL);
    __atomic_store_n(&A->changed_ms, coarse_ms(), __ATOMIC_RELAXED);
    if (__atomic_load_n(&A->n_queued, __ATOMIC_RELAXED)) { /* a hint: set under qlock */
        pthread_mutex_lock(&A->qlock);
        A->n_queued = 0; /* they would be stale before they are used */
        pthread_mutex_unlock(&A->qlock);
    }
}

/* Under A->qlock: being fetched. */
static int busy(const struct cf_lsa *A, uint64_t dir)
{
    for (int i = 0; i < A->n_threads; i++)
        if (A->busy[i] == dir)
            return 1;
    return 0;
}

/* Under A->qlock: queued or being fetched. */
static int pending(const struct cf_lsa *A, uint64_t dir)
{
    for (int i = 0; i < A->n_queued; i++)
        if (A->queue[i] == dir)
            return 1;
    return busy(A, dir);
}

void cf_lsa_want(struct cf *cf, uint64_t dir)
{
    struct cf_lsa *A = cf->lsa;
    if (!A || !quiet(A) || cf_known_excl(cf, dir))
        return;
    pthread_mutex_lock(&A->lock);
    struct cf_lsa_list *l = find(A, dir);
    int have = l && fresh(A, l);
    pthread_mutex_unlock(&A->lock);
    if (have)
        return;
    pthread_mutex_lock(&A->qlock);
    if (!A->stopping && !pending(A, dir)) {
        if (A->n_queued == LSA_QUEUE) { /* the oldest wish goes */
            memmove(A->queue, A->queue + 1, (LSA_QUEUE - 1) * sizeof(A->queue[0]));
            A->n_queued--;
        }
        A->queue[A->n_queued++] = dir;
        pthread_cond_signal(&A->qcond);
    }
    pthread_mutex_unlock(&A->qlock);
}

int cf_lsa_unwant(struct cf *cf, uint64_t dir)
{
    struct cf_lsa *A = cf->lsa;
    if (!A)
        return 0;
    pthread_mutex_lock(&A->qlock);
    for (int i = 0; i < A->n_queued; i++)
        if (A->queue[i] == dir) {
            memmove(A->queue + i, A->queue + i + 1,
                    (size_t)(A->n_queued - i - 1) * sizeof(A->queue[0]));
            A->n_queued--;
            break;
        }
    /* Already on its way: it comes sooner than a new request would. */
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += LSA_WAIT_MS / 1000;
    int waited = 0;
    while (!A->stopping && busy(A, dir) &&
           pthread_cond_timedwait(&A->fetched_cond, &A->qlock, &end) == 0)
        waited = 1;
    A->missed += !waited;
    pthread_mutex_unlock(&A->qlock);
    return waited && cf_lsa_has(cf, dir);
}

const struct cf_lsa_list *cf_lsa_get(struct cf *cf, uint64_t dir)
{
    struct cf_lsa *A = cf->lsa;
    gfid_t g;
    if (!A || cl_itable_gfid(cf->it, dir, &g) < 0)
        return NULL;
    pthread_mutex_lock(&A->lock);
    struct cf_lsa_list *l = find(A, dir);
    if (l && (!fresh(A, l) || !gfid_equal(&l->gfid, &g))) {
        unlink_list(A, l);
        list_free(l);
        l = NULL;
    }
    if (!l)
        pthread_mutex_unlock(&A->lock);
    return l;
}

void cf_lsa_done(struct cf *cf, const struct cf_lsa_list *cl, int drop)
{
    struct cf_lsa *A = cf->lsa;
    struct cf_lsa_list *l = (struct cf_lsa_list *)cl;
    A->served++;
    if (drop)
        unlink_list(A, l);
    pthread_mutex_unlock(&A->lock);
    if (drop)
        list_free(l);
}

int cf_lsa_has(struct cf *cf, uint64_t dir)
{
    const struct cf_lsa_list *l = cf_lsa_get(cf, dir);
    if (!l)
        return 0;
    pthread_mutex_unlock(&cf->lsa->lock);
    return 1;
}

size_t cf_lsa_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_lsa *A = cf->lsa;
    if (!A || !n)
        return 0;
    pthread_mutex_lock(&A->lock);
    int len = snprintf(buf, n,
                       "FUSE listing-ahead: %llu listings fetched, %llu served, %llu stale when "
                       "fetched, %llu not fetched in time\n",
                       (unsigned long long)A->fetched, (unsigned long long)A->served,
                       (unsigned long long)A->stale, (unsigned long long)A->missed);
    pthread_mutex_unlock(&A->lock);
    return cf_fmt_len(len, n);
}
