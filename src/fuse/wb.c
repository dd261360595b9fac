/* Write-back of new small files (docs/consistency.md, "Write-back").
 *
 * In a directory this mount made and holds an exclusive lease on (nobody
 * else can reach it before the lease is recalled), creating a file does
 * not wait for the bricks: the create, the writes, the attribute and
 * extended-attribute changes and the close are answered here, and the file
 * goes to the bricks as one MAKE_FILE request when it is closed. The
 * application sees a local file system's speed; the bricks see one
 * request per file instead of five.
 *
 * A closed file is sent WB_SEND_DELAY_MS later (or at once when more than
 * WB_CLOSED_MAX wait): `tar` sets a file's owner, mode and times by path
 * right after closing it, and those changes still go out with the file's
 * MAKE_FILE instead of each waiting for it; a file removed meanwhile is
 * never sent at all (wb_rm.c).
 *
 * A pending file reaches the bricks (is "settled") before anything could
 * observe its absence there:
 * - another client touches the directory: the brick holds that request and
 *   recalls the lease, and the recall settles the directory first;
 * - this mount uses the file by path or lists the directory (fop_path);
 * - fsync, or a handle operation beyond write/stat/xattrs (read, lock,
 *   lseek...): the file is made on the bricks and opened there, and the
 *   handle goes on with the real one ("materialized");
 * - unmount.
 * Writes beyond WB_FILE_MAX bytes materialize the file too.
 *
 * Errors of the background request are logged, make the file disappear
 * from this mount's caches, and are returned by the next create, fsync or
 * fsyncdir in that directory. Bounded by client.write-back-size bytes and
 * client.write-back-files files pending; past either, a create waits for
 * the bricks to take files from the queue (room()), and is made on the
 * bricks at once, as without write-back, only when none leave it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "aclmode.h"
#include "bridge.h"

#define WB_FILE_MAX (1u << 20)
#define WB_BUCKETS 1024
#define WB_FH_BIT (1ull << 63)
#define WB_SEND_DELAY_MS 10
#define WB_CLOSED_MAX 256
#define WB_BATCH 64
#define WB_ROOM_WAIT_MS 1000
/* How long creates and writes wait for the bricks after one refused space. */
#define WB_NOSPACE_MS 5000

enum wb_state {
    WB_OPEN,         /* the kernel holds the handle */
    WB_CLOSED,       /* released, waiting to be sent */
    WB_SENDING,      /* MAKE_FILE in flight */
    WB_MATERIALIZED, /* on the bricks, with a real handle the kernel's forwards to */
    WB_DONE,         /* on the bricks */
    WB_FAILED,
};

struct wb_xattr {
    char *name;
    void *val;
    size_t len;
};

struct wb_file {
    struct wb_file *next;          /* in b: by node */
    struct wb_file *inext;         /* in ib: by id (the handle) */
    struct wb_file *cprev, *cnext; /* CLOSED: the queue to send, oldest first */
    uint64_t closed_ms;
    uint64_t node, parent, id;
    char name[NAME_MAX + 1];
    gfid_t gfid;
    struct stat st;
    uint64_t create_mode, umask, valid; /* valid: RPC_SET_MODE/UID/GID applied here */
    uint8_t *data;
    size_t cap;
    struct wb_xattr *xa;
    int n_xa;
    enum wb_state state;
    int kernel_open; /* the kernel holds its handle */
    int append;      /* O_APPEND when that handle is: so is the real one */
    int parent_held; /* a lookup of parent held in the inode table (its path) */
    int err, want_sync;
    uint64_t real_fh;
};

struct dir_err {
    struct dir_err *next;
    uint64_t dir;
    int err;
};

struct cf_wb {
    struct cf *cf;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct wb_file *b[WB_BUCKETS];
    struct wb_file *ib[WB_BUCKETS];
    uint64_t next_id;
    size_t files, bytes; /* pending (not yet on the bricks) */
    size_t max_files, max_bytes;
    size_t n_sending;    /* in SENDING */
    int room_waiters;    /* creates waiting for room: closed files go at once */
    uint64_t left;       /* files that stopped being pending */
    uint64_t stall_mark; /* left + 1 when a wait for room saw none leave; else 0 */
    uint64_t made, room_waits, room_wait_ms, full; /* counters (cf_wb_format) */
    int enabled;
    uint64_t nospace_until_ms; /* atomic; 0: no brick refused space lately */
    struct dir_err *errs;
    struct wb_file *closed, *closed_tail; /* CLOSED files, oldest first */
    size_t n_closed;
    pthread_cond_t fcond; /* the sender: a file closed, or stop */
    pthread_t sender;
    int sender_started, stop;
};

static size_t slot(uint64_t node)
{
    return (size_t)((node * 0x9e3779b97f4a7c15ull) >> 54);
}

int cf_wb_is_fh(uint64_t fh)
{
    return (fh & WB_FH_BIT) != 0;
}

static void send_locked(struct cf_wb *w, struct wb_file *f);
static struct wb_file *first_in(struct cf_wb *w, uint64_t dir, int closed);
static void release_parent(struct cf_wb *w, struct wb_file *f);

/* Sends closed files once they have waited WB_SEND_DELAY_MS (at once
 * while more than WB_CLOSED_MAX wait, or a create waits for room). The files that have waited half
 * as long go with the due one, up to WB_BATCH, corked (rpc_cork): one message per brick for the
 * lot, and one wake-up of each brick's reader. */
static void *sender_main(void *arg)
{
    struct cf_wb *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct wb_file *f = w->closed;
        if (!f) {
            pthread_cond_wait(&w->fcond, &w->lock);
            continue;
        }
        uint64_t now = net_now_ms(), due = f->closed_ms + WB_SEND_DELAY_MS;
        int now_all = w->n_closed > WB_CLOSED_MAX || w->room_waiters > 0;
        if (!now_all && now < due) {
            cf_wait_until_ms(&w->fcond, &w->lock, due);
            continue;
        }
        rpc_cork();
        for (int n = 0; f && n < WB_BATCH; f = w->closed, n++) {
            if (n > 0 && !now_all && f->closed_ms + WB_SEND_DELAY_MS / 2 > now)
                break;
            send_locked(w, f);
        }
        pthread_mutex_unlock(&w->lock);
        rpc_uncork();
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int cf_wb_init(struct cf *cf)
{
    struct cf_wb *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->cf = cf;
    w->next_id = 1;
    pthread_mutex_init(&w->lock, NULL);
    net_cond_init_mono(&w->cond);
    net_cond_init_mono(&w->fcond);
    cf->wb = w;
    int rc = cf_wbrm_init(cf);
    if (rc == 0)
        rc = cf_wbd_init(cf);
    if (rc == 0)
        rc = cf_wbm_init(cf);
    if (rc == 0 && pthread_create(&w->sender, NULL, sender_main, w) != 0)
        rc = -EAGAIN;
    if (rc < 0) {
        cf_wb_free(cf);
        return rc;
    }
    w->sender_started = 1;
    return 0;
}

void cf_wb_configure(struct cf *cf, int enabled, size_t max_bytes, size_t max_files)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->enabled = enabled;
    w->max_bytes = max_bytes;
    w->max_files = max_files;
    pthread_cond_broadcast(&w->cond); /* creates waiting for room: maybe there is now */
    pthread_mutex_unlock(&w->lock);
}

int cf_wb_enabled(struct cf *cf)
{
    struct cf_wb *w = cf->wb;
    if (!w || !__atomic_load_n(&w->enabled, __ATOMIC_RELAXED))
        return 0;
    uint64_t until = __atomic_load_n(&w->nospace_until_ms, __ATOMIC_RELAXED);
    if (!until)
        return 1;
    if (net_now_ms() < until)
        return 0;
    if (__atomic_compare_exchange_n(&w->nospace_until_ms, &until, 0, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        log_info("no brick refused space for %d s: write-back and write-behind resume",
                 WB_NOSPACE_MS / 1000);
    return 1;
}

void cf_wb_nospace(struct cf *cf)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return;
    uint64_t old =
        __atomic_exchange_n(&w->nospace_until_ms, net_now_ms() + WB_NOSPACE_MS, __ATOMIC_RELAXED);
    if (!old)
        log_warn("a brick is out of space: creates and writes wait for the bricks (no "
                 "write-back, no write-behind) until none has refused space for %d s",
                 WB_NOSPACE_MS / 1000);
}

static void file_free(struct wb_file *f)
{
    for (int i = 0; i < f->n_xa; i++) {
        free(f->xa[i].name);
        free(f->xa[i].val);
    }
    free(f->xa);
    free(f->data);
    free(f);
}

static struct wb_file *find_node(struct cf_wb *w, uint64_t node)
{
    for (struct wb_file *f = w->b[slot(node)]; f; f = f->next)
        if (f->node == node)
            return f;
    return NULL;
}

static struct wb_file *find_fh(struct cf_wb *w, uint64_t fh)
{
    uint64_t id = fh & ~WB_FH_BIT;
    for (struct wb_file *f = w->ib[slot(id)]; f; f = f->inext)
        if (f->id == id)
            return f;
    return NULL;
}

static void unlink_file(struct cf_wb *w, struct wb_file *f)
{
    struct wb_file **pp = &w->b[slot(f->node)];
    while (*pp != f)
        pp = &(*pp)->next;
    *pp = f->next;
    for (pp = &w->ib[slot(f->id)]; *pp != f;)
        pp = &(*pp)->inext;
    *pp = f->inext;
}

static int pending(const struct wb_file *f)
{
    return f->state == WB_OPEN || f->state == WB_CLOSED || f->state == WB_SENDING;
}

static void now_ts(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
}

void cf_wait_until_ms(pthread_cond_t *c, pthread_mutex_t *m, uint64_t due_ms)
{
    struct timespec ts = {.tv_sec = (time_t)(due_ms / 1000),
                          .tv_nsec = (long)(due_ms % 1000) * 1000000};
    pthread_cond_timedwait(c, m, &ts);
}

/* The queue of closed files waiting to be sent; under w->lock. */
static void closed_push(struct cf_wb *w, struct wb_file *f)
{
    f->closed_ms = net_now_ms();
    f->cnext = NULL;
    f->cprev = w->closed_tail;
    if (w->closed_tail)
        w->closed_tail->cnext = f;
    else
        w->closed = f;
    w->closed_tail = f;
    /* The sender sleeps until the head is due: only a new head, or a queue
     * grown past WB_CLOSED_MAX, needs it now (a wake-up per close would
     * cost a context switch on the closing application's CPU). */
    if (++w->n_closed == 1 || w->n_closed > WB_CLOSED_MAX)
        pthread_cond_signal(&w->fcond);
}

static void closed_remove(struct cf_wb *w, struct wb_file *f)
{
    if (!f->cprev && w->closed != f)
        return; /* not queued */
    if (f->cprev)
        f->cprev->cnext = f->cnext;
    else
        w->closed = f->cnext;
    if (f->cnext)
        f->cnext->cprev = f->cprev;
    else
        w->closed_tail = f->cprev;
    f->cprev = f->cnext = NULL;
    w->n_closed--;
}

static void dir_error(struct cf_wb *w, uint64_t dir, int err)
{
    for (struct dir_err *e = w->errs; e; e = e->next)
        if (e->dir == dir) {
            e->err = err;
            return;
        }
    struct dir_err *e = malloc(sizeof(*e));
    if (!e)
        return;
    e->dir = dir;
    e->err = err;
    e->next = w->errs;
    w->errs = e;
}

void cf_wb_note_error(struct cf *cf, uint64_t dir, int err)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    dir_error(w, dir, err);
    pthread_mutex_unlock(&w->lock);
}

size_t cf_wb_max_files(struct cf *cf)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return 0;
    pthread_mutex_lock(&w->lock);
    size_t n = w->max_files;
    pthread_mutex_unlock(&w->lock);
    return n;
}

/* A closed file never sent: it never reaches the bricks. Under w->lock. */
static void drop_closed(struct cf_wb *w, struct wb_file *f)
{
    closed_remove(w, f);
    release_parent(w, f);
    w->bytes -= f->cap;
    w->files--;
    w->left++;
    unlink_file(w, f);
    file_free(f);
    pthread_cond_broadcast(&w->cond);
}

int cf_wb_drop_unsent(struct cf *cf, uint64_t node)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_node(w, node);
    if (f && f->state == WB_OPEN) {
        rc = -EBUSY;
    } else if (f && f->state == WB_CLOSED) {
        drop_closed(w, f);
        rc = 1;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

size_t cf_wb_drop_dir(struct cf *cf, uint64_t dir)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f;
    while ((f = first_in(w, dir, 1))) {
        drop_closed(w, f);
        n++;
    }
    pthread_mutex_unlock(&w->lock);
    return n;
}

int cf_wb_dir_error(struct cf *cf, uint64_t dir)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return 0;
    int err = 0;
    pthread_mutex_lock(&w->lock);
    for (struct dir_err **pp = &w->errs; *pp; pp = &(*pp)->next)
        if ((*pp)->dir == dir) {
            struct dir_err *e = *pp;
            err = e->err;
            *pp = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&w->lock);
    return err;
}

/* ---- sending ---- */

struct send {
    struct cl_op op;
    struct cf_wb *w;
    struct wb_file *f;
    struct rpc_buf xattrs;
    char path[PATH_MAX];
};

/* The file no longer needs its directory's path. */
static void release_parent(struct cf_wb *w, struct wb_file *f)
{
    if (f->parent_held) {
        f->parent_held = 0;
        cl_itable_forget(w->cf->it, f->parent, 1);
    }
}

static void finish(struct cf_wb *w, struct wb_file *f, int status, int lease)
{
    struct cf *cf = w->cf;
    closed_remove(w, f);
    release_parent(w, f);
    if (f->state == WB_SENDING)
        w->n_sending--;
    if (status < 0) {
        log_error("write-back of %s (in directory node %llu) failed: %s; the file did not reach "
                  "the bricks",
                  f->name, (unsigned long long)f->parent, strerror(-status));
        if (status == -ENOSPC || status == -EDQUOT)
            cf_wb_nospace(cf);
        f->state = WB_FAILED;
        f->err = status;
        dir_error(w, f->parent, status);
    } else {
        f->state = f->real_fh ? WB_MATERIALIZED : WB_DONE;
    }
    if (f->data) {
        w->bytes -= f->cap;
        free(f->data);
        f->data = NULL;
        f->cap = 0;
    }
    w->files--;
    w->left++;
    uint64_t node = f->node, parent = f->parent;
    if (!f->kernel_open) {
        /* Nothing refers to it any more. */
        unlink_file(w, f);
        file_free(f);
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (status < 0) {
        /* This mount showed a file the bricks do not have. */
        cf_known_forget(cf, parent);
        cf_lease_drop_node(cf, parent);
    } else if (!lease) {
        cf_lease_drop_node(cf, node);
    }
    pthread_mutex_lock(&w->lock);
}

/* Once the MKDIRs above f are answered: -EIO when one failed (f cannot
 * reach the bricks: its path may name somebody else's directory), else 0.
 * Without w->lock. */
static int dir_gone(struct cf_wb *w, struct wb_file *f)
{
    return cf_wbm_gone(w->cf, f->parent) < 0 ? -EIO : 0;
}

static void send_free(struct send *s)
{
    cl_op_release(&s->op);
    rpc_buf_free(&s->xattrs);
    free(s);
}

static void send_done_cb(struct cl_op *op)
{
    struct send *s = op->ctx;
    struct cf_wb *w = s->w;
    int lease = op->status == 0 && op->reply && rpc_lease_whole(&op->reply->msg);
    pthread_mutex_lock(&w->lock);
    finish(w, s->f, op->status, lease);
    pthread_mutex_unlock(&w->lock);
    send_free(s);
}

/* Builds the MAKE_FILE request of f (state becomes SENDING); under w->lock.
 * NULL on ENOMEM or when f has no path (then f is FAILED). */
static struct send *build(struct cf_wb *w, struct wb_file *f)
{
    struct send *s = calloc(1, sizeof(*s));
    int rc = s ? cl_itable_path(w->cf->it, f->parent, f->name, s->path, sizeof(s->path)) : -ENOMEM;
    if (rc < 0) {
        free(s);
        finish(w, f, rc, 0);
        return NULL;
    }
    s->w = w;
    s->f = f;
    cl_op_init(&s->op, RPC_OP_MAKE_FILE, send_done_cb, s);
    struct rpc_msg *a = &s->op.args;
    rpc_set_str(a, RPC_T_PATH, &a->path, s->path);
    a->gfid = f->gfid;
    a->present |= 1ull << RPC_T_GFID;
    RPC_SET(a, mode, RPC_T_MODE, (f->valid & RPC_SET_MODE) ? f->st.st_mode : f->create_mode);
    RPC_SET(a, umask, RPC_T_UMASK, (f->valid & RPC_SET_MODE) ? 0 : f->umask);
    RPC_SET(a, uid, RPC_T_UID, f->st.st_uid);
    RPC_SET(a, gid, RPC_T_GID, f->st.st_gid);
    if (f->st.st_size > 0) {
        size_t n = (size_t)f->st.st_size < f->cap ? (size_t)f->st.st_size : f->cap;
        rpc_set_bytes(a, RPC_T_DATA, &a->data, f->data, n);
        RPC_SET(a, size, RPC_T_SIZE, (uint64_t)f->st.st_size);
    }
    rpc_buf_init(&s->xattrs);
    for (int i = 0; i < f->n_xa; i++) {
        rpc_put_str(&s->xattrs, RPC_T_NAME, f->xa[i].name);
        rpc_put_bytes(&s->xattrs, RPC_T_DATA, f->xa[i].val, (uint32_t)f->xa[i].len);
    }
    if (f->n_xa)
        rpc_set_bytes(a, RPC_T_XATTRS, &a->xattrs, s->xattrs.data, (uint32_t)s->xattrs.len);
    /* The times the application saw (and set) are the file's. */
    a->atime.sec = f->st.st_atim.tv_sec;
    a->atime.nsec = (uint32_t)f->st.st_atim.tv_nsec;
    a->mtime.sec = f->st.st_mtim.tv_sec;
    a->mtime.nsec = (uint32_t)f->st.st_mtim.tv_nsec;
    a->present |= (1ull << RPC_T_ATIME) | (1ull << RPC_T_MTIME);
    uint64_t valid =
        (f->valid & (RPC_SET_MODE | RPC_SET_UID | RPC_SET_GID)) | RPC_SET_ATIME | RPC_SET_MTIME;
    RPC_SET(a, valid, RPC_T_VALID, valid);
    if (f->want_sync)
        RPC_SET(a, flags, RPC_T_FLAGS, 1);
    RPC_SET(a, lease, RPC_T_LEASE, RPC_LEASE_READ);
    closed_remove(w, f);
    f->state = WB_SENDING;
    w->n_sending++;
    return s;
}

/* Sends f now (CLOSED -> SENDING); under w->lock, which it drops and
 * takes again. */
static void send_locked(struct cf_wb *w, struct wb_file *f)
{
    struct send *s = build(w, f);
    if (!s)
        return;
    pthread_mutex_unlock(&w->lock);
    int rc = dir_gone(w, f); /* its directory is on the bricks */
    if (rc == 0)
        cl_submit(w->cf->stack, &s->op);
    pthread_mutex_lock(&w->lock);
    if (rc < 0) {
        finish(w, f, rc, 0);
        send_free(s);
    }
}

/* Makes f exist on the bricks and opens it there (the kernel still holds
 * its handle); under w->lock. Returns 0 or -errno. */
static int materialize(struct cf_wb *w, struct wb_file *f)
{
    int append = f->append;
    struct send *s = build(w, f);
    if (!s)
        return f->err ? f->err : -ENOMEM;
    pthread_mutex_unlock(&w->lock);
    int rc = dir_gone(w, f);
    if (rc == 0)
        rc = cl_op_run(w->cf->stack, &s->op);
    int lease = rc == 0 && s->op.reply && rpc_lease_whole(&s->op.reply->msg);
    uint64_t fh = 0;
    if (rc == 0) {
        struct cl_op o;
        cl_op_init(&o, RPC_OP_OPEN, NULL, NULL);
        rpc_set_str(&o.args, RPC_T_PATH, &o.args.path, s->path);
        /* O_APPEND as the kernel's handle: the kernel takes an append's
         * offset from its cached size, which another client's appends
         * leave stale once the file is shared; the brick's handle puts
         * every write at the end the brick has. */
        RPC_SET(&o.args, flags, RPC_T_FLAGS, (uint64_t)(O_RDWR | append));
        rc = cl_op_run(w->cf->stack, &o);
        if (rc == 0 && o.reply && rpc_has(&o.reply->msg, RPC_T_FH))
            fh = o.reply->msg.fh;
        else if (rc == 0)
            rc = -EPROTO;
        cl_op_release(&o);
    }
    send_free(s);
    pthread_mutex_lock(&w->lock);
    if (rc == 0) {
        f->real_fh = fh;
        /* Reaches the file once it is unlinked (no path left); closed
         * with it in cf_release. */
        cl_itable_open_fh(w->cf->it, f->node, fh);
    }
    finish(w, f, rc, lease);
    return rc;
}

/* Until f is on the bricks (or failed); under w->lock. */
static int settle_locked(struct cf_wb *w, struct wb_file *f)
{
    for (;;) {
        switch (f->state) {
        case WB_OPEN:
            return materialize(w, f);
        case WB_CLOSED:
            send_locked(w, f);
            break;
        case WB_SENDING:
            pthread_cond_wait(&w->cond, &w->lock);
            break;
        case WB_FAILED:
            return f->err;
        default:
            return 0;
        }
        /* f may be freed once DONE: look it up again by the caller's key. */
        return 1;
    }
}

int cf_wb_settle(struct cf *cf, uint64_t node)
{
    struct cf_wb *w = cf->wb;
    if (!w || !node)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f;
    while ((f = find_node(w, node)) && (pending(f) || f->state == WB_FAILED)) {
        rc = settle_locked(w, f);
        if (rc != 1)
            break;
        rc = 0;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int cf_wb_settle_name(struct cf *cf, uint64_t parent, const char *name)
{
    struct cf_wb *w = cf->wb;
    if (!w || !__atomic_load_n(&w->files, __ATOMIC_RELAXED))
        return 0;
    uint64_t node = 0;
    pthread_mutex_lock(&w->lock);
    for (size_t k = 0; k < WB_BUCKETS && !node; k++)
        for (struct wb_file *g = w->b[k]; g && !node; g = g->next)
            if (g->parent == parent && pending(g) && !strcmp(g->name, name))
                node = g->node;
    pthread_mutex_unlock(&w->lock);
    return node ? cf_wb_settle(cf, node) : 0;
}

/* The first file of dir (0: of any directory) that is closed and unsent
 * (closed) or not yet on the bricks; under w->lock. */
static struct wb_file *first_in(struct cf_wb *w, uint64_t dir, int closed)
{
    for (size_t k = 0; k < WB_BUCKETS; k++)
        for (struct wb_file *g = w->b[k]; g; g = g->next)
            if ((!dir || g->parent == dir) && (closed ? g->state == WB_CLOSED : pending(g)))
                return g;
    return NULL;
}

/* Every file of dir (0: all) on the bricks. The closed ones are sent
 * first (corked), then all are waited for: one round trip of wall time for
 * the lot, not one per file. send_locked and settle_locked drop the lock,
 * so each step looks for the next file again. */
static int settle_in(struct cf_wb *w, uint64_t dir)
{
    int rc = 0;
    struct wb_file *f;
    pthread_mutex_lock(&w->lock);
    if (first_in(w, dir, 1)) {
        rpc_cork(); /* one message per brick for the lot */
        while ((f = first_in(w, dir, 1)))
            send_locked(w, f);
        pthread_mutex_unlock(&w->lock);
        rpc_uncork();
        pthread_mutex_lock(&w->lock);
    }
    while ((f = first_in(w, dir, 0))) {
        int r = settle_locked(w, f);
        if (r < 0 && !rc)
            rc = r;
    }
    pthread_mutex_unlock(&w->lock);
    /* and the removals in dir queued after them (all of the queue: it is
     * kept in order) */
    cf_wbrm_settle_dir(w->cf, dir);
    return rc;
}

int cf_wb_settle_dir(struct cf *cf, uint64_t dir)
{
    return cf->wb && dir ? settle_in(cf->wb, dir) : 0;
}

int cf_wb_settle_all(struct cf *cf)
{
    int r0 = cf_wbm_settle_all(cf); /* the directories before their files */
    int rc = cf->wb ? settle_in(cf->wb, 0) : 0;
    if (!rc)
        rc = r0;
    int r2 = cf_wbd_settle_all(cf); /* the directories' attributes after their files */
    return rc ? rc : r2;
}

void cf_wb_free(struct cf *cf)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return;
    cf_wbd_free(cf);
    cf_wbm_free(cf);
    cf_wbrm_free(cf);
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->fcond);
    pthread_mutex_unlock(&w->lock);
    if (w->sender_started)
        pthread_join(w->sender, NULL);
    for (size_t k = 0; k < WB_BUCKETS; k++)
        for (struct wb_file *f = w->b[k], *nx; f; f = nx) {
            nx = f->next;
            file_free(f);
        }
    while (w->errs) {
        struct dir_err *e = w->errs;
        w->errs = e->next;
        free(e);
    }
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->fcond);
    free(w);
    cf->wb = NULL;
}

/* ---- the handlers' side ---- */

/* 1: dir has no default ACL, 2: it has one (or the question failed). */
static int ask_default_acl(struct cf *cf, uint64_t dir)
{
    struct cl_op o;
    char path[PATH_MAX];
    if (cl_itable_path(cf->it, dir, NULL, path, sizeof(path)) < 0)
        return 2;
    cl_op_init(&o, RPC_OP_GETXATTR, NULL, NULL);
    rpc_set_str(&o.args, RPC_T_PATH, &o.args.path, path);
    rpc_set_str(&o.args, RPC_T_NAME, &o.args.name, "system.posix_acl_default");
    RPC_SET(&o.args, size, RPC_T_SIZE, 0);
    int rc = cl_op_run(cf->stack, &o);
    cl_op_release(&o);
    return rc == -ENODATA ? 1 : 2;
}

static int full(const struct cf_wb *w)
{
    return w->files >= w->max_files || w->bytes >= w->max_bytes;
}

/* Back-pressure, under w->lock: a create that finds the queue full waits
 * while files closed or in flight leave it, and goes on written back once
 * there is room; 1 then. 0, and the file is made on the bricks at once,
 * when none of the pending files can leave (the application keeps them
 * all open), or when none left for WB_ROOM_WAIT_MS (bricks that do not
 * answer); the creates after such a wait do not wait until one leaves. */
static int room(struct cf_wb *w)
{
    if (!full(w))
        return 1;
    if (w->n_closed + w->n_sending == 0 || w->stall_mark == w->left + 1)
        return 0;
    w->stall_mark = 0;
    w->room_waits++;
    w->room_waiters++;
    pthread_cond_signal(&w->fcond); /* the closed files need not wait for more */
    uint64_t start = net_now_ms(), due = start + WB_ROOM_WAIT_MS, seen = w->left;
    while (full(w) && w->n_closed + w->n_sending > 0) {
        cf_wait_until_ms(&w->cond, &w->lock, due);
        uint64_t now = net_now_ms();
        if (w->left != seen) {
            seen = w->left;
            due = now + WB_ROOM_WAIT_MS;
        } else if (now >= due) {
            w->stall_mark = w->left + 1;
            break;
        }
    }
    w->room_waiters--;
    w->room_wait_ms += net_now_ms() - start;
    return !full(w);
}

size_t cf_wb_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_wb *w = cf->wb;
    int len = 0;
    if (w) {
        pthread_mutex_lock(&w->lock);
        len = snprintf(buf, n,
                       "FUSE write-back: %llu files made here, %llu waits for room (%llu ms), "
                       "%llu made on the bricks at once with the queue full, %zu files and %zu "
                       "bytes pending\n",
                       (unsigned long long)w->made, (unsigned long long)w->room_waits,
                       (unsigned long long)w->room_wait_ms, (unsigned long long)w->full, w->files,
                       w->bytes);
        pthread_mutex_unlock(&w->lock);
    }
    return cf_fmt_len(len, n);
}

void cf_wb_order_new(struct cf *cf, uint64_t parent, const char *name)
{
    (void)cf_wbd_settle(cf, parent);
    if (cf_wbrm_queued(cf, parent, name))
        cf_wbrm_settle(cf);
}

int cf_wb_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                 struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct stat pst;
    size_t nl = strlen(name);
    if (!cf_wb_enabled(cf) || nl > NAME_MAX || (fi->flags & (O_DIRECT | O_SYNC | O_DSYNC)) ||
        !cf_known_excl(cf, parent) || !cf_known_attr(cf, parent, &pst))
        return 0;
    /* A default ACL would shape the file's mode and ACL on the bricks:
     * such directories are left to the bricks (asked once per directory). */
    if (cf_known_dir_acl(cf, parent) == 0)
        cf_known_set_dir_acl(cf, parent, ask_default_acl(cf, parent));
    if (cf_known_dir_acl(cf, parent) != 1)
        return 0;
    cf_wb_order_new(cf, parent, name);
    const struct fuse_ctx *c = fuse_req_ctx(req);
    struct wb_file *f = calloc(1, sizeof(*f));
    if (!f)
        return 0;
    pthread_mutex_lock(&w->lock);
    if (!room(w)) {
        w->full++;
        pthread_mutex_unlock(&w->lock);
        free(f);
        return 0;
    }
    w->made++;
    f->id = w->next_id++;
    pthread_mutex_unlock(&w->lock);
    f->parent = parent;
    memcpy(f->name, name, nl + 1);
    gfid_generate(&f->gfid);
    int err;
    /* The file is named by its directory's path when it is sent, maybe
     * after the kernel forgot the directory (a lost connection makes it
     * drop every cached entry): the table keeps the directory until then. */
    if (cl_itable_hold(cf->it, parent) < 0) {
        free(f);
        return 0;
    }
    f->parent_held = 1;
    f->node = cl_itable_link(cf->it, parent, name, &f->gfid, S_IFREG, &err);
    if (!f->node) {
        cl_itable_forget(cf->it, parent, 1);
        free(f);
        return 0;
    }
    cl_itable_set_nlink(cf->it, f->node, 1);
    f->create_mode = mode;
    f->umask = c->umask;
    f->st.st_mode = S_IFREG | (mode & 07777 & ~c->umask);
    f->st.st_nlink = 1;
    uid_t uid;
    gid_t gid;
    cf_squash_ids(req, &uid, &gid); /* the owner the bricks would give it */
    f->st.st_uid = uid;
    /* A setgid directory gives its group (the brick does the same). */
    f->st.st_gid = (pst.st_mode & S_ISGID) ? pst.st_gid : gid;
    f->st.st_blksize = 4096;
    f->st.st_ino = gfid_ino(&f->gfid);
    now_ts(&f->st.st_mtim);
    f->st.st_atim = f->st.st_ctim = f->st.st_mtim;
    f->state = WB_OPEN;
    f->kernel_open = 1;
    f->append = fi->flags & O_APPEND;
    pthread_mutex_lock(&w->lock);
    f->next = w->b[slot(f->node)];
    w->b[slot(f->node)] = f;
    f->inext = w->ib[slot(f->id)];
    w->ib[slot(f->id)] = f;
    w->files++;
    pthread_mutex_unlock(&w->lock);

    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    e.ino = f->node;
    e.attr = f->st;
    e.attr_timeout = e.entry_timeout = cf_lease_cache_timeout(cf);
    fi->fh = WB_FH_BIT | f->id;
    cf_set_direct(cf, fi);
    cf_ps_writer(cf, f->node);
    cf_known_add(cf, parent, name, &f->st);
    cf_known_nosetid(cf, f->node, !cf_killpriv_bits(f->st.st_mode));
    pst.st_mtim = pst.st_ctim = f->st.st_mtim;
    cf_known_set_attr(cf, parent, &pst);
    if (fuse_reply_create(req, &e, fi) != 0) {
        /* Interrupted: the kernel never saw it. It is still a file made
         * here, and goes to the bricks like any other. */
        cl_itable_forget(cf->it, f->node, 1);
        pthread_mutex_lock(&w->lock);
        f->state = WB_CLOSED;
        f->kernel_open = 0;
        send_locked(w, f);
        pthread_mutex_unlock(&w->lock);
    }
    return 1;
}

/* The pending file behind node (not yet on the bricks), locked; NULL and
 * unlocked when there is none. */
static struct wb_file *pending_node(struct cf_wb *w, uint64_t node)
{
    if (!w)
        return NULL;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_node(w, node);
    if (f && (f->state == WB_OPEN || f->state == WB_CLOSED))
        return f;
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int cf_wb_getattr(fuse_req_t req, fuse_ino_t ino)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    struct stat st = f->st;
    pthread_mutex_unlock(&w->lock);
    fuse_reply_attr(req, &st, cf_lease_cache_timeout(cf));
    return 1;
}

static int resize(struct cf_wb *w, struct wb_file *f, size_t size)
{
    if (size > WB_FILE_MAX)
        return -EFBIG;
    if (size > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < size)
            cap *= 2;
        uint8_t *d = realloc(f->data, cap);
        if (!d)
            return -ENOMEM;
        memset(d + f->cap, 0, cap - f->cap);
        w->bytes += cap - f->cap;
        f->data = d;
        f->cap = cap;
    }
    if (size < (size_t)f->st.st_size)
        memset(f->data + size, 0, (size_t)f->st.st_size - size);
    f->st.st_size = (off_t)size;
    f->st.st_blocks = (blkcnt_t)((size + 511) / 512);
    return 0;
}

/* A write, truncate or O_TRUNC open by a caller without CAP_FSETID
 * (killpriv.c) clears the set-id bits here, as the brick would; 1 if it
 * did. Under w->lock. */
static int kill_setid(struct wb_file *f)
{
    if (!cf_killpriv_asked() || !cf_killpriv_bits(f->st.st_mode))
        return 0;
    f->st.st_mode = S_IFREG | rpc_kill_suidgid_mode(f->st.st_mode);
    f->valid |= RPC_SET_MODE;
    return 1;
}

int cf_wb_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    struct timespec now;
    now_ts(&now);
    if ((to_set & FUSE_SET_ATTR_SIZE) && resize(w, f, (size_t)attr->st_size) < 0) {
        pthread_mutex_unlock(&w->lock);
        return 0; /* too big to keep here: the caller settles it and asks the bricks */
    }
    if (to_set & FUSE_SET_ATTR_MODE) {
        f->st.st_mode = S_IFREG | (attr->st_mode & 07777);
        f->valid |= RPC_SET_MODE;
    }
    if (to_set & FUSE_SET_ATTR_UID) {
        f->st.st_uid = attr->st_uid;
        f->valid |= RPC_SET_UID;
    }
    if (to_set & FUSE_SET_ATTR_GID) {
        f->st.st_gid = attr->st_gid;
        f->valid |= RPC_SET_GID;
    }
    /* A chown drops set-user-ID, and set-group-ID when group-executable,
     * whoever makes it: the kernel leaves that to the file system
     * (HANDLE_KILLPRIV_V2), and the bricks' own kernel does it there. */
    if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && cf_killpriv_bits(f->st.st_mode)) {
        f->st.st_mode = S_IFREG | rpc_kill_suidgid_mode(f->st.st_mode);
        f->valid |= RPC_SET_MODE;
    }
    if (to_set & FUSE_SET_ATTR_ATIME_NOW)
        f->st.st_atim = now;
    else if (to_set & FUSE_SET_ATTR_ATIME)
        f->st.st_atim = attr->st_atim;
    if (to_set & FUSE_SET_ATTR_MTIME_NOW)
        f->st.st_mtim = now;
    else if (to_set & FUSE_SET_ATTR_MTIME)
        f->st.st_mtim = attr->st_mtim;
    if (to_set & FUSE_SET_ATTR_SIZE) {
        f->st.st_mtim = now;
        (void)kill_setid(f); /* the reply below carries the mode */
    }
    f->st.st_ctim = now;
    struct stat st = f->st;
    pthread_mutex_unlock(&w->lock);
    fuse_reply_attr(req, &st, cf_lease_cache_timeout(cf));
    return 1;
}

int cf_wb_write(fuse_req_t req, struct fuse_file_info *fi, const char *buf, size_t size, off_t off)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    if (!w || !cf_wb_is_fh(fi->fh))
        return 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_fh(w, fi->fh);
    if (!f || f->state != WB_OPEN || off < 0 || (uint64_t)off + size > WB_FILE_MAX) {
        pthread_mutex_unlock(&w->lock);
        return 0; /* the caller materializes the file */
    }
    size_t end = (size_t)off + size;
    if (end > (size_t)f->st.st_size && resize(w, f, end) < 0) {
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    memcpy(f->data + off, buf, size);
    now_ts(&f->st.st_mtim);
    f->st.st_ctim = f->st.st_mtim;
    int killed = kill_setid(f);
    uint64_t node = f->node;
    pthread_mutex_unlock(&w->lock);
    if (killed)
        cf_lease_inval_attr(cf, node); /* the kernel's mode is stale */
    fuse_reply_write(req, size);
    return 1;
}

int cf_wb_read(fuse_req_t req, struct fuse_file_info *fi, size_t size, off_t off)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    if (!w || !cf_wb_is_fh(fi->fh) || off < 0)
        return 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_fh(w, fi->fh);
    if (!f || f->state != WB_OPEN) {
        pthread_mutex_unlock(&w->lock);
        return 0; /* the caller materializes the file */
    }
    size_t len = (size_t)f->st.st_size, n = 0;
    if ((uint64_t)off < len)
        n = len - (size_t)off < size ? len - (size_t)off : size;
    /* under the lock: the reply copies the bytes before a write can move them */
    fuse_reply_buf(req, n ? (const char *)f->data + off : NULL, n);
    pthread_mutex_unlock(&w->lock);
    return 1;
}

static struct wb_xattr *xa_find(struct wb_file *f, const char *name)
{
    for (int i = 0; i < f->n_xa; i++)
        if (!strcmp(f->xa[i].name, name))
            return &f->xa[i];
    return NULL;
}

static void xa_drop(struct wb_file *f, struct wb_xattr *x)
{
    free(x->name);
    free(x->val);
    *x = f->xa[--f->n_xa];
}

int cf_wb_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    struct wb_xattr *x = xa_find(f, name);
    if (!x)
        fuse_reply_err(req, ENODATA);
    else if (size == 0)
        fuse_reply_xattr(req, x->len);
    else if (x->len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, x->val, x->len);
    pthread_mutex_unlock(&w->lock);
    return 1;
}

int cf_wb_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    size_t need = 0;
    for (int i = 0; i < f->n_xa; i++)
        need += strlen(f->xa[i].name) + 1;
    if (size == 0) {
        fuse_reply_xattr(req, need);
    } else if (need > size) {
        fuse_reply_err(req, ERANGE);
    } else {
        char *buf = malloc(need ? need : 1), *p = buf;
        for (int i = 0; buf && i < f->n_xa; i++) {
            size_t l = strlen(f->xa[i].name) + 1;
            memcpy(p, f->xa[i].name, l);
            p += l;
        }
        if (buf)
            fuse_reply_buf(req, buf, need);
        else
            fuse_reply_err(req, ENOMEM);
        free(buf);
    }
    pthread_mutex_unlock(&w->lock);
    return 1;
}

/* Names the bricks take from clients; others go the normal way (and get
 * the brick's answer). */
static int xattr_local_ok(const char *name)
{
    return !strncmp(name, "user.", 5) || !strcmp(name, "system.posix_acl_access") ||
           (!strncmp(name, "security.", 9) && strcmp(name, "security.capability"));
}

int cf_wb_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                   int flags)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    if (!xattr_local_ok(name) || size > 65536)
        return 0;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    struct wb_xattr *x = xa_find(f, name);
    /* An access ACL sets the mode's permission bits (the group's from its
     * mask), as a file system does; MAKE_FILE sets the xattrs before the
     * mode, so the last of chmod and setfacl wins there too. */
    int acl = !strcmp(name, "system.posix_acl_access") ? cf_acl_mode(value, size) : -2;
    int err = 0;
    if ((flags & XATTR_CREATE) && x)
        err = EEXIST;
    else if ((flags & XATTR_REPLACE) && !x)
        err = ENODATA;
    else if (acl == -1)
        err = EINVAL;
    if (!err && acl >= 0 && cf_acl_minimal(value, size)) {
        /* No more than a mode: a file system keeps no xattr for it, and
         * the bricks get a chmod instead of an ACL to set. */
        if (x)
            xa_drop(f, x);
    } else if (!err) {
        void *v = malloc(size ? size : 1);
        if (v && size)
            memcpy(v, value, size);
        if (v && !x) {
            struct wb_xattr *nx = realloc(f->xa, (size_t)(f->n_xa + 1) * sizeof(*nx));
            char *n = strdup(name);
            if (nx)
                f->xa = nx;
            if (nx && n) {
                x = &f->xa[f->n_xa++];
                x->name = n;
                x->val = NULL;
            } else {
                free(n);
            }
        }
        if (v && x) {
            free(x->val);
            x->val = v;
            x->len = size;
        } else {
            free(v);
            err = ENOMEM;
        }
    }
    if (!err) {
        now_ts(&f->st.st_ctim);
        if (acl >= 0) {
            f->st.st_mode = (f->st.st_mode & ~(mode_t)0777) | (mode_t)acl;
            f->valid |= RPC_SET_MODE;
        }
    }
    pthread_mutex_unlock(&w->lock);
    fuse_reply_err(req, err);
    return 1;
}

int cf_wb_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    /* A closed file not yet sent, opened again (rsync sets its times
     * through a new handle): it goes on being answered here. */
    if (!w || !cf_wb_enabled(cf) || (fi->flags & (O_DIRECT | O_SYNC | O_DSYNC)))
        return 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_node(w, ino);
    if (!f || f->state != WB_CLOSED || f->kernel_open) {
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    closed_remove(w, f);
    f->state = WB_OPEN;
    f->kernel_open = 1;
    f->append = fi->flags & O_APPEND;
    int killed = 0;
    if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
        (void)resize(w, f, 0);
        now_ts(&f->st.st_mtim);
        f->st.st_ctim = f->st.st_mtim;
        killed = kill_setid(f);
    }
    if (killed)
        cf_lease_inval_attr(cf, ino);
    fi->fh = WB_FH_BIT | f->id;
    cf_set_direct(cf, fi);
    if (fuse_reply_open(req, fi) != 0) {
        f->kernel_open = 0;
        f->state = WB_CLOSED;
        closed_push(w, f);
    }
    pthread_mutex_unlock(&w->lock);
    return 1;
}

void cf_wb_moved(struct cf *cf, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname)
{
    cl_itable_rename(cf->it, parent, name, newparent, newname, 0);
    cf_known_remove(cf, parent, name);
    cf_known_add_node(cf, newparent, newname, cl_itable_child(cf->it, newparent, newname));
    cf_known_touch_dir(cf, parent, 0);
    if (newparent != parent)
        cf_known_touch_dir(cf, newparent, 0);
}

int cf_wb_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    size_t nl = strlen(newname);
    /* A file not yet sent, to a name nobody has (the bricks included):
     * only the name it will be sent under changes. */
    if (!w || !cf_wb_enabled(cf) || (flags & ~(unsigned)RENAME_NOREPLACE) || nl > NAME_MAX ||
        !cf_known_excl(cf, parent) || !cf_known_excl(cf, newparent) ||
        !cf_known_absent(cf, newparent, newname) || cf_wbrm_queued(cf, newparent, newname))
        return 0;
    uint64_t node = cl_itable_child(cf->it, parent, name);
    if (!node || cf_wbd_settle(cf, parent) < 0 || cf_wbd_settle(cf, newparent) < 0 ||
        cl_itable_hold(cf->it, newparent) < 0)
        return 0;
    struct wb_file *f = pending_node(w, node);
    if (!f || f->parent != parent || strcmp(f->name, name)) {
        if (f)
            pthread_mutex_unlock(&w->lock);
        cl_itable_forget(cf->it, newparent, 1);
        return 0;
    }
    release_parent(w, f);
    f->parent_held = 1;
    f->parent = newparent;
    memcpy(f->name, newname, nl + 1);
    now_ts(&f->st.st_ctim);
    pthread_mutex_unlock(&w->lock);
    cf_wb_moved(cf, parent, name, newparent, newname);
    fuse_reply_err(req, 0);
    return 1;
}

int cf_wb_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    struct wb_file *f = pending_node(w, ino);
    if (!f)
        return 0;
    struct wb_xattr *x = xa_find(f, name);
    int err = ENODATA;
    if (x) {
        xa_drop(f, x);
        now_ts(&f->st.st_ctim);
        err = 0;
    }
    pthread_mutex_unlock(&w->lock);
    fuse_reply_err(req, err);
    return 1;
}

int cf_wb_release(fuse_req_t req, struct fuse_file_info *fi, uint64_t *real_fh)
{
    struct cf *cf = fuse_req_userdata(req);
    struct cf_wb *w = cf->wb;
    if (!w || !cf_wb_is_fh(fi->fh))
        return 0;
    *real_fh = 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_fh(w, fi->fh);
    if (f)
        f->kernel_open = 0;
    if (f && f->state == WB_OPEN) {
        f->state = WB_CLOSED;
        closed_push(w, f);
    } else if (f && !pending(f)) {
        *real_fh = f->state == WB_MATERIALIZED ? f->real_fh : 0;
        unlink_file(w, f);
        file_free(f);
    }
    pthread_mutex_unlock(&w->lock);
    return 1;
}

int cf_wb_real_fh(struct cf *cf, uint64_t fh, uint64_t *real)
{
    struct cf_wb *w = cf->wb;
    *real = fh;
    if (!w || !cf_wb_is_fh(fh))
        return 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_fh(w, fh);
    int rc = f ? 0 : -EBADF;
    if (f && f->state == WB_OPEN)
        rc = materialize(w, f);
    if (rc == 0 && (f = find_fh(w, fh)) && f->state == WB_MATERIALIZED)
        *real = f->real_fh;
    else if (rc == 0)
        rc = f && f->state == WB_FAILED ? f->err : -EBADF;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int cf_wb_fsync_fh(struct cf *cf, uint64_t fh)
{
    struct cf_wb *w = cf->wb;
    if (!w || !cf_wb_is_fh(fh))
        return 0;
    pthread_mutex_lock(&w->lock);
    struct wb_file *f = find_fh(w, fh);
    if (f && f->state == WB_OPEN)
        f->want_sync = 1;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

void cf_wb_report(struct cf *cf, struct rpc_buf *b)
{
    struct cf_wb *w = cf->wb;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    uint64_t files = w->files, bytes = w->bytes, made = w->made;
    uint64_t oldest = w->closed ? w->closed->closed_ms : 0;
    pthread_mutex_unlock(&w->lock);
    uint64_t now = net_now_ms();
    cf_put_counter(b, "wb_pending_files", files);
    cf_put_counter(b, "wb_pending_bytes", bytes);
    cf_put_counter(b, "wb_oldest_ms", oldest && now > oldest ? now - oldest : 0);
    cf_put_counter(b, "wb_made", made);
}
