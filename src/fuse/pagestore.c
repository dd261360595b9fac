/* Read-ahead windows handed to the kernel's page cache.
 *
 * The read cache (readcache.c) answers a random read inside a window it
 * holds from memory, but every such read is still one FUSE request: the
 * kernel asks for the 4 KiB it lacks and waits for the answer. Here a
 * window just fetched from the brick is also stored into the kernel's page
 * cache for the file (FUSE_NOTIFY_STORE), so the kernel answers the rest of
 * the window's reads itself, as it would for a local file.
 *
 * The stores run on one thread of their own. A store locks each page it
 * fills, so it waits for reads and writes of those pages that are in
 * flight; nothing waits on this thread (beyond a bounded wait below), so
 * that cannot close a cycle.
 *
 * Validity follows the window's (readcache.c): the data is the brick's
 * under the file's lease, with no change by this mount since it was read.
 * - A window whose file changed (a write, truncate or fallocate of this
 *   mount, or the lease's recall) before the store is dropped; one that
 *   changed while it was being stored is invalidated in the kernel right
 *   after. The recall waits (bounded) for a store of its file in progress,
 *   so the pages it drops stay dropped; when the store outlasts that wait
 *   (a loaded machine), the lease goes back to the brick only once the
 *   store has ended and dropped its pages again (cf_ps_after), so another
 *   client's change never returns while a stale page can still be read.
 * - No store is made for a file this mount has opened for writing, until
 *   the kernel forgets the file. A writable open waits (bounded) for a store
 *   of its file in progress. So a store never lands over data the kernel
 *   holds that is newer than the brick's (a page dirtied through a shared
 *   mapping, which reaches the brick only at writeback).
 * Each open of a file drops its cached pages (no keep_cache, ops_file.c),
 * so stored pages last at most as long as the open that read them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "bridge.h"

#define QUEUE_MAX 32       /* windows waiting to be stored; more are not stored */
#define WRITTEN_HASH 16384 /* buckets of the set of files opened for writing */
#define WAIT_MS 100        /* longest wait of a writable open or recall */

struct job {
    struct job *next;
    fuse_ino_t ino;
    struct cf_rc_window plan;
    struct rpc_frame *frame; /* the READ reply holding the data */
    const char *data;
    size_t len;
};

static void job_free(struct job *j)
{
    rpc_frame_free(j->frame);
    free(j);
}

struct written {
    struct written *next;
    fuse_ino_t ino;
};

/* Work held until the store of ino in progress has ended (cf_ps_after). */
struct after {
    struct after *next;
    fuse_ino_t ino;
    void (*fn)(void *);
    void *arg;
};

struct cf_ps {
    pthread_mutex_t lock;
    pthread_cond_t wake, idle;
    pthread_t thread;
    struct fuse_session *se;
    struct job *head, *tail;
    int queued, stop;
    fuse_ino_t storing; /* the file being stored now (or its pages dropped after), 0: none */
    struct written *written[WRITTEN_HASH];
    struct after *afters;
    uint64_t stored, bytes, undone, dropped, waited_out, held;
};

static unsigned whash(fuse_ino_t ino)
{
    return (unsigned)(((uint64_t)ino * 0x9E3779B97F4A7C15ull) >> 40) % WRITTEN_HASH;
}

/* Under the lock. */
static int was_written(const struct cf_ps *s, fuse_ino_t ino)
{
    for (const struct written *w = s->written[whash(ino)]; w; w = w->next)
        if (w->ino == ino)
            return 1;
    return 0;
}

/* Waits, under the lock, until no store of ino is in progress or WAIT_MS
 * passed. Returns 0, or -ETIMEDOUT. */
static int wait_store(struct cf_ps *s, fuse_ino_t ino)
{
    struct timespec until;
    net_deadline(&until, CLOCK_REALTIME, WAIT_MS);
    while (s->storing == ino)
        if (pthread_cond_timedwait(&s->idle, &s->lock, &until) == ETIMEDOUT && s->storing == ino)
            return -ETIMEDOUT;
    return 0;
}

/* Under the lock: j may no longer be stored (its file changed, or is open
 * for writing here). */
static int stale(const struct cf_ps *s, struct cf *cf, const struct job *j)
{
    return !cf_rc_current(cf, j->ino, &j->plan) || was_written(s, j->ino);
}

/* Under the lock: takes the work held for ino. */
static struct after *take_afters(struct cf_ps *s, fuse_ino_t ino)
{
    struct after *out = NULL, **pp = &s->afters;
    while (*pp) {
        struct after *a = *pp;
        if (a->ino != ino) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->next = out;
        out = a;
    }
    return out;
}

static void run_afters(struct after *a)
{
    while (a) {
        struct after *n = a->next;
        a->fn(a->arg);
        free(a);
        a = n;
    }
}

/* The store of j; s->storing stays j->ino until what it stored is dropped
 * again when the file changed meanwhile, and the work held for it runs
 * after that. */
static void store(struct cf_ps *s, struct cf *cf, struct job *j)
{
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(j->len);
    bv.buf[0].mem = (void *)j->data;
    int rc = fuse_lowlevel_notify_store(s->se, j->ino, (off_t)j->plan.start, &bv, 0);
    pthread_mutex_lock(&s->lock);
    int changed = stale(s, cf, j);
    if (rc == 0) {
        s->stored++;
        s->bytes += j->len;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc < 0 && rc != -ENOENT) /* ENOENT: the kernel forgot the file */
        log_debug("storing %zu bytes of node %llu in the page cache: %s", j->len,
                  (unsigned long long)j->ino, strerror(-rc));
    if (rc == 0 && !changed)
        cf_rc_stored(cf, j->ino, &j->plan);
    if (rc == 0 && changed) {
        /* changed while it was stored: what was stored may be older */
        rc = fuse_lowlevel_notify_inval_inode(s->se, j->ino, (off_t)j->plan.start, (off_t)j->len);
        if (rc < 0 && rc != -ENOENT)
            log_warn("dropping a stale window of node %llu from the page cache: %s",
                     (unsigned long long)j->ino, strerror(-rc));
        pthread_mutex_lock(&s->lock);
        s->undone++;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&s->lock);
    s->storing = 0;
    struct after *a = take_afters(s, j->ino);
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    run_afters(a);
}

static void *store_main(void *arg)
{
    struct cf *cf = arg;
    struct cf_ps *s = cf->ps;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->stop)
            break;
        struct job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        if (stale(s, cf, j)) {
            s->dropped++;
            job_free(j);
            continue;
        }
        s->storing = j->ino;
        pthread_mutex_unlock(&s->lock);
        store(s, cf, j);
        job_free(j);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int cf_ps_start(struct cf *cf, struct fuse_session *se)
{
    struct cf_ps *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->se = se;
    cf->ps = s;
    int rc = pthread_create(&s->thread, NULL, store_main, cf);
    if (rc != 0) {
        cf->ps = NULL;
        pthread_cond_destroy(&s->idle);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return -rc;
    }
    return 0;
}

void cf_ps_stop(struct cf *cf)
{
    struct cf_ps *s = cf->ps;
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    /* Nothing is held now: work is held only while its store runs, and
     * that store runs it. */
}

void cf_ps_free(struct cf *cf)
{
    struct cf_ps *s = cf->ps;
    if (!s)
        return;
    while (s->head) {
        struct job *j = s->head;
        s->head = j->next;
        job_free(j);
    }
    for (int i = 0; i < WRITTEN_HASH; i++)
        while (s->written[i]) {
            struct written *w = s->written[i];
            s->written[i] = w->next;
            free(w);
        }
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
    cf->ps = NULL;
}

void cf_ps_offer(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan,
                 struct rpc_frame **frame)
{
    struct cf_ps *s = cf->ps;
    const struct rpc_msg *m = *frame ? &(*frame)->msg : NULL;
    if (!s || !m || !rpc_has(m, RPC_T_DATA) || !m->data.len)
        return;
    struct job *j = malloc(sizeof(*j));
    if (!j)
        return;
    pthread_mutex_lock(&s->lock);
    int take = !s->stop && s->queued < QUEUE_MAX && !was_written(s, ino);
    if (!s->stop && s->queued >= QUEUE_MAX)
        s->dropped++;
    if (!take) {
        pthread_mutex_unlock(&s->lock);
        free(j);
        return;
    }
    *j = (struct job){.ino = ino,
                      .plan = *plan,
                      .frame = *frame,
                      .data = (const char *)m->data.p,
                      .len = m->data.len};
    *frame = NULL;
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued++;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

static void note_wait(struct cf_ps *s, fuse_ino_t ino, const char *why)
{
    if (wait_store(s, ino) == 0)
        return;
    s->waited_out++;
    /* the store still invalidates what it stored once it ends */
    log_warn("%s of node %llu: a store into the page cache did not end within %d ms", why,
             (unsigned long long)ino, WAIT_MS);
}

void cf_ps_writer(struct cf *cf, fuse_ino_t ino)
{
    struct cf_ps *s = cf->ps;
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (!was_written(s, ino)) {
        struct written *w = malloc(sizeof(*w));
        if (w) {
            w->ino = ino;
            w->next = s->written[whash(ino)];
            s->written[whash(ino)] = w;
        } else {
            /* cannot remember it: no file is stored from now on */
            s->stop = 1;
            pthread_cond_signal(&s->wake);
            log_error("out of memory: reads no longer fill the page cache ahead");
        }
    }
    note_wait(s, ino, "opening for writing");
    pthread_mutex_unlock(&s->lock);
}

void cf_ps_quiesce(struct cf *cf, fuse_ino_t ino)
{
    struct cf_ps *s = cf->ps;
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (wait_store(s, ino) < 0)
        s->waited_out++; /* cf_ps_after holds the lease's return */
    pthread_mutex_unlock(&s->lock);
}

void cf_ps_after(struct cf *cf, fuse_ino_t ino, void (*fn)(void *), void *arg)
{
    struct cf_ps *s = cf->ps;
    struct after *a = NULL;
    if (s) {
        pthread_mutex_lock(&s->lock);
        if (s->storing == ino && (a = malloc(sizeof(*a)))) {
            *a = (struct after){.next = s->afters, .ino = ino, .fn = fn, .arg = arg};
            s->afters = a;
            s->held++;
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (!a)
        fn(arg); /* no store of ino in progress (or no memory to hold it: at once) */
}

void cf_ps_forget(struct cf *cf, fuse_ino_t ino)
{
    struct cf_ps *s = cf->ps;
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    for (struct written **pp = &s->written[whash(ino)]; *pp; pp = &(*pp)->next)
        if ((*pp)->ino == ino) {
            struct written *w = *pp;
            *pp = w->next;
            free(w);
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

size_t cf_ps_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_ps *s = cf->ps;
    int len = 0;
    if (s) {
        pthread_mutex_lock(&s->lock);
        len = snprintf(buf, n,
                       "FUSE page-cache fill: %llu windows stored (%llu bytes), %llu invalidated "
                       "after a change, %llu not stored, %llu waits cut short, %llu lease "
                       "returns held for a store\n",
                       (unsigned long long)s->stored, (unsigned long long)s->bytes,
                       (unsigned long long)s->undone, (unsigned long long)s->dropped,
                       (unsigned long long)s->waited_out, (unsigned long long)s->held);
        pthread_mutex_unlock(&s->lock);
    }
    return cf_fmt_len(len, n);
}
