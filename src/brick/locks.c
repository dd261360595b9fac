/* Locks: POSIX record locks per (connection, owner, file) and BSD flock per
 * handle.
 *
 * POSIX locks are Linux open-file-description locks on a file descriptor
 * opened for that (connection, owner, file) alone, so the kernel does the
 * range merging, splitting and conflict checks, and two owners conflict as
 * two processes would. Closing that fd (FLUSH of the owner, or the
 * connection going away) drops every lock the owner holds on the file.
 * flock() goes on the handle's own fd.
 *
 * Nothing here blocks the thread executing a request (a worker or the
 * connection's reader): a lock request that must wait is queued and
 * retried by one waiter thread, which answers when it is granted. The
 * kernel's OFD locks record no pid, so the pid that GETLK reports is
 * remembered from the owner's SETLK requests. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/statedump.h"
#include "brick.h"

#define MAX_WAITERS 4096
#define RETRY_MS 10
#define SHADOW_MAX 16

struct lockfd {
    struct lockfd *next;
    struct brick_conn *bc;
    uint64_t owner;
    dev_t dev;
    ino_t ino;
    int fd;
    uint64_t pid;
    /* Ranges recently granted, to name the holder of a conflict. */
    struct {
        uint64_t start, end; /* end inclusive */
    } shadow[SHADOW_MAX];
    int n_shadow;
};

enum { W_POSIX, W_FLOCK };

struct waiter {
    struct waiter *next;
    struct brick_conn *bc; /* a reference */
    uint16_t opcode;
    uint64_t reqid;
    int kind;
    struct lockfd *lf;   /* W_POSIX */
    struct flock fl;     /* W_POSIX */
    struct brick_fh *fh; /* W_FLOCK: a reference */
    int flock_op;        /* W_FLOCK */
};

struct brick_locks {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct lockfd *fds;
    struct waiter *waiters;
    int n_waiters;
    int stopping;
    pthread_t thread;
};

/* A finished wait, answered outside the lock. */
struct answer {
    struct answer *next;
    struct waiter *w;
    int status;
};

static void answer_all(struct answer *a, int reply)
{
    while (a) {
        struct answer *n = a->next;
        struct waiter *w = a->w;
        /* The handle first: once the client has the answer it may release
         * the handle, and then the descriptor (and a flock on it) must go
         * with the handle table's reference, not linger on this one. */
        if (w->fh)
            brick_fh_put(w->bc, w->fh);
        if (reply)
            brick_send_reply(w->bc, w->opcode, w->reqid, a->status, NULL, NULL);
        brick_conn_put(w->bc);
        free(w);
        free(a);
        a = n;
    }
}

/* Tries w once; returns 1 when it is finished (status in *st). Called with
 * the lock held. */
static int try_waiter(struct brick *b, struct waiter *w, int *st)
{
    int rc;
    if (w->kind == W_POSIX) {
        struct flock fl = w->fl;
        rc = b->vfs->ofd_lock(w->lf->fd, F_OFD_SETLK, &fl);
    } else {
        rc = b->vfs->flock(w->fh->fd, w->flock_op | LOCK_NB);
    }
    if (rc == -EAGAIN || rc == -EACCES || rc == -EWOULDBLOCK)
        return 0;
    *st = rc;
    return 1;
}

static void shadow_add(struct lockfd *lf, const struct flock *fl)
{
    uint64_t start = (uint64_t)fl->l_start;
    uint64_t end = fl->l_len ? start + (uint64_t)fl->l_len - 1 : UINT64_MAX;
    if (lf->n_shadow == SHADOW_MAX) {
        memmove(&lf->shadow[0], &lf->shadow[1], sizeof(lf->shadow[0]) * (SHADOW_MAX - 1));
        lf->n_shadow--;
    }
    lf->shadow[lf->n_shadow].start = start;
    lf->shadow[lf->n_shadow].end = end;
    lf->n_shadow++;
}

static void *waiter_main(void *arg)
{
    struct brick *b = arg;
    struct brick_locks *L = b->locks;
    pthread_mutex_lock(&L->lock);
    while (!L->stopping) {
        struct answer *done = NULL;
        for (struct waiter **pp = &L->waiters; *pp;) {
            struct waiter *w = *pp;
            int st;
            if (!try_waiter(b, w, &st)) {
                pp = &w->next;
                continue;
            }
            if (st == 0 && w->kind == W_POSIX)
                shadow_add(w->lf, &w->fl);
            *pp = w->next;
            L->n_waiters--;
            struct answer *a = malloc(sizeof(*a));
            if (a) {
                a->w = w;
                a->status = st;
                a->next = done;
                done = a;
            } else {
                /* Keep it queued rather than lose the answer. */
                w->next = *pp;
                *pp = w;
                L->n_waiters++;
                if (st == 0 && w->kind == W_POSIX) {
                    struct flock un = w->fl;
                    un.l_type = F_UNLCK;
                    b->vfs->ofd_lock(w->lf->fd, F_OFD_SETLK, &un);
                }
                pp = &w->next;
            }
        }
        if (done) {
            pthread_mutex_unlock(&L->lock);
            answer_all(done, 1);
            pthread_mutex_lock(&L->lock);
            continue;
        }
        if (L->waiters) {
            struct timespec until;
            net_deadline(&until, CLOCK_REALTIME, RETRY_MS);
            pthread_cond_timedwait(&L->cond, &L->lock, &until);
        } else {
            pthread_cond_wait(&L->cond, &L->lock);
        }
    }
    pthread_mutex_unlock(&L->lock);
    return NULL;
}

int brick_locks_init(struct brick *b)
{
    struct brick_locks *L = calloc(1, sizeof(*L));
    if (!L)
        return -ENOMEM;
    pthread_mutex_init(&L->lock, NULL);
    pthread_cond_init(&L->cond, NULL);
    b->locks = L;
    int rc = pthread_create(&L->thread, NULL, waiter_main, b);
    if (rc) {
        b->locks = NULL;
        free(L);
        return -rc;
    }
    return 0;
}

void brick_locks_fini(struct brick *b)
{
    struct brick_locks *L = b->locks;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    L->stopping = 1;
    pthread_cond_broadcast(&L->cond);
    pthread_mutex_unlock(&L->lock);
    pthread_join(L->thread, NULL);
    struct answer *left = NULL;
    while (L->waiters) {
        struct waiter *w = L->waiters;
        L->waiters = w->next;
        struct answer *a = malloc(sizeof(*a));
        if (a) {
            a->w = w;
            a->status = -ESHUTDOWN;
            a->next = left;
            left = a;
        }
    }
    answer_all(left, 1);
    while (L->fds) {
        struct lockfd *lf = L->fds;
        L->fds = lf->next;
        b->vfs->close(lf->fd);
        free(lf);
    }
    pthread_mutex_destroy(&L->lock);
    pthread_cond_destroy(&L->cond);
    free(L);
    b->locks = NULL;
}

/* Drops queued waits of bc, narrowed to the POSIX waits of lf and the
 * flock waits of fh when those are given; returns them as answers. Lock
 * held. */
static struct answer *take_waiters(struct brick_locks *L, struct brick_conn *bc, struct lockfd *lf,
                                   const struct brick_fh *fh, int status)
{
    struct answer *out = NULL;
    for (struct waiter **pp = &L->waiters; *pp;) {
        struct waiter *w = *pp;
        if (w->bc != bc || (lf && w->lf != lf) || (fh && w->fh != fh)) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        L->n_waiters--;
        struct answer *a = malloc(sizeof(*a));
        if (!a) {
            /* Cannot answer: drop the references anyway. */
            if (w->fh)
                brick_fh_put(w->bc, w->fh);
            brick_conn_put(w->bc);
            free(w);
            continue;
        }
        a->w = w;
        a->status = status;
        a->next = out;
        out = a;
    }
    return out;
}

void brick_locks_conn_gone(struct brick_conn *bc)
{
    struct brick *b = bc->b;
    struct brick_locks *L = b->locks;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    struct answer *a = take_waiters(L, bc, NULL, NULL, -ENOTCONN);
    for (struct lockfd **pp = &L->fds; *pp;) {
        struct lockfd *lf = *pp;
        if (lf->bc != bc) {
            pp = &lf->next;
            continue;
        }
        *pp = lf->next;
        b->vfs->close(lf->fd);
        free(lf);
    }
    pthread_cond_broadcast(&L->cond);
    pthread_mutex_unlock(&L->lock);
    answer_all(a, 0);
}

static struct lockfd *find_lockfd(struct brick_locks *L, struct brick_conn *bc, uint64_t owner,
                                  const struct brick_fh *fh)
{
    for (struct lockfd *lf = L->fds; lf; lf = lf->next)
        if (lf->bc == bc && lf->owner == owner && lf->dev == fh->dev && lf->ino == fh->ino)
            return lf;
    return NULL;
}

void brick_locks_flush(struct brick_conn *bc, struct brick_fh *fh, uint64_t owner)
{
    struct brick *b = bc->b;
    struct brick_locks *L = b->locks;
    pthread_mutex_lock(&L->lock);
    struct lockfd *lf = find_lockfd(L, bc, owner, fh);
    struct answer *a = NULL;
    if (lf) {
        /* The owner closed the file: its waits end and its locks go. */
        a = take_waiters(L, bc, lf, NULL, -EINTR);
        for (struct lockfd **pp = &L->fds; *pp; pp = &(*pp)->next) {
            if (*pp == lf) {
                *pp = lf->next;
                break;
            }
        }
        b->vfs->close(lf->fd);
        free(lf);
        pthread_cond_broadcast(&L->cond);
    }
    pthread_mutex_unlock(&L->lock);
    answer_all(a, 1);
}

/* The owner's lock fd for fh's file, opened on first use. Lock held. */
static int get_lockfd(struct brick *b, struct brick_conn *bc, uint64_t owner, struct brick_fh *fh,
                      struct lockfd **out)
{
    struct brick_locks *L = b->locks;
    struct lockfd *lf = find_lockfd(L, bc, owner, fh);
    if (lf) {
        *out = lf;
        return 0;
    }
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/fd/%d", fh->fd);
    int fd = b->vfs->openat(AT_FDCWD, p, O_RDWR | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        fd = b->vfs->openat(AT_FDCWD, p, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        return fd;
    if (!(lf = calloc(1, sizeof(*lf)))) {
        b->vfs->close(fd);
        return -ENOMEM;
    }
    lf->bc = bc;
    lf->owner = owner;
    lf->dev = fh->dev;
    lf->ino = fh->ino;
    lf->fd = fd;
    lf->next = L->fds;
    L->fds = lf;
    *out = lf;
    return 0;
}

/* LOCK field to struct flock; -EINVAL when out of range. */
static int to_flock(const struct rpc_lock *l, struct flock *fl)
{
    static const short types[] = {F_RDLCK, F_WRLCK, F_UNLCK};
    if (l->type > 2 || l->start > INT64_MAX || l->len > INT64_MAX)
        return -EINVAL;
    if (l->len && l->start + l->len - 1 > (uint64_t)INT64_MAX)
        return -EOVERFLOW;
    memset(fl, 0, sizeof(*fl));
    fl->l_type = types[l->type];
    fl->l_whence = SEEK_SET;
    fl->l_start = (off_t)l->start;
    fl->l_len = (off_t)l->len;
    return 0;
}

/* The pid of the (other) owner holding a lock over [start, end]. */
static uint64_t holder_pid(struct brick_locks *L, struct lockfd *self, const struct brick_fh *fh,
                           uint64_t start, uint64_t end)
{
    uint64_t any = 0;
    for (struct lockfd *lf = L->fds; lf; lf = lf->next) {
        if (lf == self || lf->dev != fh->dev || lf->ino != fh->ino)
            continue;
        any = lf->pid;
        for (int i = 0; i < lf->n_shadow; i++)
            if (lf->shadow[i].start <= end && start <= lf->shadow[i].end)
                return lf->pid;
    }
    return any;
}

static int lock_args(struct brick_req *r, struct brick_fh **fh, struct flock *fl)
{
    if (!rpc_has(r->in, RPC_T_LOCK) || !rpc_has(r->in, RPC_T_OWNER))
        return -EINVAL;
    int rc = to_flock(&r->in->lock, fl);
    if (rc < 0)
        return rc;
    return brick_fh_get(r->bc, r->in->fh, 0, fh);
}

int brick_op_getlk(struct brick_req *r)
{
    struct brick_locks *L = r->b->locks;
    struct brick_fh *fh;
    struct flock fl;
    int rc = lock_args(r, &fh, &fl);
    if (rc < 0)
        return rc;
    if (fl.l_type == F_UNLCK) {
        brick_fh_put(r->bc, fh);
        return -EINVAL;
    }
    pthread_mutex_lock(&L->lock);
    struct lockfd *lf = find_lockfd(L, r->bc, r->in->owner, fh);
    /* An owner without a lock fd holds no locks: any fd of ours asks the
     * same question (flock and OFD locks do not interact). */
    rc = r->b->vfs->ofd_lock(lf ? lf->fd : fh->fd, F_OFD_GETLK, &fl);
    struct rpc_lock out = {.type = 2};
    if (rc == 0 && fl.l_type != F_UNLCK) {
        out.type = fl.l_type == F_RDLCK ? 0 : 1;
        out.start = (uint64_t)fl.l_start;
        out.len = (uint64_t)fl.l_len;
        uint64_t end = fl.l_len ? out.start + out.len - 1 : UINT64_MAX;
        out.pid = holder_pid(L, lf, fh, out.start, end);
    }
    pthread_mutex_unlock(&L->lock);
    brick_fh_put(r->bc, fh);
    if (rc == 0)
        rpc_put_lock(r->out, RPC_T_LOCK, &out);
    return rc;
}

/* Queues a wait for r, taking over the references in w. */
static int enqueue(struct brick_req *r, struct waiter *w)
{
    struct brick_locks *L = r->b->locks;
    if (L->n_waiters >= MAX_WAITERS)
        return -ENOLCK;
    w->bc = r->bc;
    w->opcode = r->opcode;
    w->reqid = r->reqid;
    brick_conn_get(r->bc);
    w->next = L->waiters;
    L->waiters = w;
    L->n_waiters++;
    pthread_cond_broadcast(&L->cond);
    return BRICK_DEFERRED;
}

int brick_op_setlk(struct brick_req *r)
{
    struct brick_locks *L = r->b->locks;
    struct brick_fh *fh;
    struct flock fl;
    int rc = lock_args(r, &fh, &fl);
    if (rc < 0)
        return rc;
    int acc = fh->flags & O_ACCMODE;
    if ((fl.l_type == F_WRLCK && acc == O_RDONLY) || (fl.l_type == F_RDLCK && acc == O_WRONLY)) {
        brick_fh_put(r->bc, fh);
        return -EBADF;
    }
    uint64_t flags = rpc_has(r->in, RPC_T_FLAGS) ? r->in->flags : 0;
    int wait = (flags & RPC_LK_WAIT) && !r->in_compound;
    struct lockfd *lf = NULL;
    pthread_mutex_lock(&L->lock);
    if (flags & RPC_LK_CANCEL) {
        lf = find_lockfd(L, r->bc, r->in->owner, fh);
        struct answer *a = lf ? take_waiters(L, r->bc, lf, NULL, -EINTR) : NULL;
        pthread_mutex_unlock(&L->lock);
        brick_fh_put(r->bc, fh);
        answer_all(a, 1);
        return 0;
    }
    if (fl.l_type == F_UNLCK) {
        lf = find_lockfd(L, r->bc, r->in->owner, fh);
        rc = lf ? r->b->vfs->ofd_lock(lf->fd, F_OFD_SETLK, &fl) : 0;
        pthread_cond_broadcast(&L->cond);
        goto out;
    }
    if ((rc = get_lockfd(r->b, r->bc, r->in->owner, fh, &lf)) < 0)
        goto out;
    lf->pid = r->in->lock.pid;
    struct flock try = fl;
    rc = r->b->vfs->ofd_lock(lf->fd, F_OFD_SETLK, &try);
    if (rc == 0) {
        shadow_add(lf, &fl);
        goto out;
    }
    if ((rc == -EAGAIN || rc == -EACCES) && wait) {
        struct waiter *w = calloc(1, sizeof(*w));
        if (!w) {
            rc = -ENOMEM;
            goto out;
        }
        w->kind = W_POSIX;
        w->lf = lf;
        w->fl = fl;
        if ((rc = enqueue(r, w)) < 0)
            free(w);
        goto out;
    }
    if (rc == -EACCES)
        rc = -EAGAIN;
out:
    pthread_mutex_unlock(&L->lock);
    brick_fh_put(r->bc, fh);
    return rc;
}

int brick_op_flock(struct brick_req *r)
{
    struct brick_locks *L = r->b->locks;
    struct brick_fh *fh;
    uint64_t f = rpc_has(r->in, RPC_T_FLAGS) ? r->in->flags : 0;
    int op = (int)(f & (LOCK_SH | LOCK_EX | LOCK_UN));
    int cancel = (f & RPC_FLOCK_CANCEL) != 0;
    f &= ~(uint64_t)RPC_FLOCK_CANCEL;
    if ((f & ~(uint64_t)(LOCK_SH | LOCK_EX | LOCK_UN | LOCK_NB)) ||
        (!cancel && op != LOCK_SH && op != LOCK_EX && op != LOCK_UN))
        return -EINVAL;
    int rc = brick_fh_get(r->bc, r->in->fh, 0, &fh);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&L->lock);
    if (cancel) {
        struct answer *a = take_waiters(L, r->bc, NULL, fh, -EINTR);
        pthread_mutex_unlock(&L->lock);
        brick_fh_put(r->bc, fh);
        answer_all(a, 1);
        return 0;
    }
    rc = r->b->vfs->flock(fh->fd, op | LOCK_NB);
    if (op == LOCK_UN)
        pthread_cond_broadcast(&L->cond);
    if (rc == -EWOULDBLOCK && !(f & LOCK_NB) && !r->in_compound) {
        struct waiter *w = calloc(1, sizeof(*w));
        if (!w) {
            rc = -ENOMEM;
        } else {
            w->kind = W_FLOCK;
            w->fh = fh; /* the waiter keeps this reference */
            w->flock_op = op;
            if ((rc = enqueue(r, w)) < 0) {
                free(w);
            } else {
                pthread_mutex_unlock(&L->lock);
                return rc;
            }
        }
    }
    pthread_mutex_unlock(&L->lock);
    brick_fh_put(r->bc, fh);
    return rc;
}

void brick_locks_dump(struct brick *b, FILE *f)
{
    struct brick_locks *L = b->locks;
    if (!L || sd_section(f, "brick.locks", &L->lock) < 0)
        return;
    int n = 0;
    for (const struct lockfd *lf = L->fds; lf; lf = lf->next)
        n++;
    fprintf(f, "lock-owners=%d\nwaiters=%d\n", n, L->n_waiters);
    for (const struct lockfd *lf = L->fds; lf; lf = lf->next) {
        fprintf(f, "owner=%016llx peer=%s pid=%llu inode=%llu:%llu", (unsigned long long)lf->owner,
                lf->bc->peer, (unsigned long long)lf->pid, (unsigned long long)lf->dev,
                (unsigned long long)lf->ino);
        for (int i = 0; i < lf->n_shadow; i++)
            fprintf(f, " granted=%llu-%llu", (unsigned long long)lf->shadow[i].start,
                    (unsigned long long)lf->shadow[i].end);
        fputc('\n', f);
    }
    for (const struct waiter *w = L->waiters; w; w = w->next) {
        if (w->kind == W_POSIX)
            fprintf(f, "waiter=posix peer=%s type=%s start=%lld len=%lld\n", w->bc->peer,
                    w->fl.l_type == F_WRLCK ? "write" : "read", (long long)w->fl.l_start,
                    (long long)w->fl.l_len);
        else
            fprintf(f, "waiter=flock peer=%s op=%s\n", w->bc->peer,
                    (w->flock_op & LOCK_EX) ? "exclusive" : "shared");
    }
    pthread_mutex_unlock(&L->lock);
}
