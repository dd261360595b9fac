/* Directory quota on the brick (docs/quota.md).
 *
 * The brick counts, for each limited directory, what its subtree holds on
 * this brick: bytes (the apparent size of regular files, each name of a
 * hard-linked file counted), files (every non-directory name but
 * distribute's link-to files) and directories (the limited one included).
 * A crawl computes the counts when quota is turned on, the limits change
 * or the brick starts; from then on every request that changes a limited
 * subtree updates them from what it changed, read before and after it ran.
 *
 * A request that would take a limited directory's usage past its hard
 * limit is refused with EDQUOT before anything changes: its usage on this
 * brick, plus the usage on the volume's other replica sets that cairnd
 * last summed (QUOTA_OTHERS), plus what the request adds. Requests of the
 * self-heal (PID RPC_PID_HEAL) are never refused: a copy catching up on its
 * replica set's data only reaches what the others hold.
 *
 * Locks: q->rw is held shared by every request that is counted, from the
 * reading before to the update after, and exclusively by the crawl, so a
 * crawl's counts are never mixed with a request's change. Changes of one
 * file (WRITE, truncate) also hold a stripe lock by inode, so that two
 * writes racing on a file do not both count the same growth. q->lock
 * protects the counts. Order: rw, stripe, lock. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../lib/options.h"
#include "../lib/quota.h"
#include "../lib/statedump.h"
#include "brick.h"

#define STRIPES 64

struct qdir {
    struct quota_limit lim;     /* path owned */
    int64_t bytes, files, dirs; /* on this brick */
    int64_t o_bytes, o_files;   /* on the other replica sets (cairnd's last sum) */
    int64_t reserved;           /* bytes granted to requests still running */
    int over_soft, over_hard;   /* for the log: said so already */
};

struct brick_quota {
    pthread_rwlock_t rw;
    pthread_mutex_t lock;
    pthread_mutex_t stripes[STRIPES];
    int enabled;       /* features.quota (atomic read on the fast path) */
    int deem_statfs;   /* features.quota-deem-statfs */
    int default_soft;  /* features.default-soft-limit */
    char *limits;      /* features.quota-limits as last applied */
    struct qdir *dirs; /* counted; replaced whole by a crawl */
    int n;
    /* the crawler thread */
    pthread_t thread;
    int started, stop, want_crawl;
    pthread_cond_t wake;
    uint64_t crawls;
};

/* A request's quota state between brick_quota_pre and brick_quota_post. */
enum qkind { Q_NONE, Q_FILE, Q_MAKE, Q_REMOVE, Q_RENAME };

/* ---- counting ---- */

static int is_linkto(const struct stat *st)
{
    return S_ISREG(st->st_mode) && (st->st_mode & 07777) == S_ISVTX && st->st_size == 0;
}

static void count_stat(const struct stat *st, struct brick_qobj *o)
{
    if (S_ISDIR(st->st_mode)) {
        o->dirs++;
    } else if (!is_linkto(st)) {
        o->files++;
        if (S_ISREG(st->st_mode))
            o->bytes += st->st_size;
    }
}

struct lx_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Adds the subtree below the directory fd (not fd itself) to o; at the
 * brick root (root set) without the brick's private directory. */
static int crawl_fd(struct brick *b, int fd, struct brick_qobj *o, int depth, int root)
{
    char buf[16384];
    if (depth > 256)
        return -ELOOP;
    for (;;) {
        long n = b->vfs->getdents(fd, buf, sizeof(buf));
        if (n < 0)
            return (int)n;
        if (n == 0)
            return 0;
        for (long off = 0; off < n;) {
            struct lx_dirent64 *d = (struct lx_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
                (root && !strcmp(d->d_name, BRICK_PRIVATE)))
                continue;
            struct stat st;
            if (b->vfs->fstatat(fd, d->d_name, &st) < 0)
                continue; /* removed meanwhile */
            count_stat(&st, o);
            if (!S_ISDIR(st.st_mode))
                continue;
            int sub = b->vfs->openat(fd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
            if (sub < 0)
                continue;
            int rc = crawl_fd(b, sub, o, depth + 1, 0);
            b->vfs->close(sub);
            if (rc < 0)
                return rc;
        }
    }
}

/* What the object at path (volume path) holds, its subtree included. */
static int measure(struct brick *b, const char *path, struct brick_qobj *o)
{
    memset(o, 0, sizeof(*o));
    struct stat st;
    const char *rel = path[1] ? path + 1 : "";
    int fd = b->vfs->resolve(b->root_fd, path[1] ? rel : ".", O_PATH | O_NOFOLLOW);
    if (fd < 0)
        return fd;
    int rc = b->vfs->fstatat(fd, "", &st);
    b->vfs->close(fd);
    if (rc < 0)
        return rc;
    o->exists = 1;
    o->is_dir = S_ISDIR(st.st_mode);
    count_stat(&st, o);
    if (!o->is_dir)
        return 0;
    fd = b->vfs->resolve(b->root_fd, path[1] ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0)
        return fd;
    struct brick_qobj sub = {0};
    rc = crawl_fd(b, fd, &sub, 0, path[1] == 0);
    b->vfs->close(fd);
    o->bytes += sub.bytes;
    o->files += sub.files;
    o->dirs += sub.dirs;
    return rc;
}

/* ---- options and the crawler ---- */

static void *crawler_main(void *arg);

void brick_quota_init(struct brick *b)
{
    struct brick_quota *q = calloc(1, sizeof(*q));
    if (!q) {
        log_warn("out of memory: quota is off on this brick");
        return;
    }
    pthread_rwlock_init(&q->rw, NULL);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, NULL);
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&q->stripes[i], NULL);
    q->deem_statfs = 1;
    q->default_soft = 80;
    b->quota = q;
    if (pthread_create(&q->thread, NULL, crawler_main, b) == 0)
        q->started = 1;
    else
        log_warn("cannot start the quota crawler: quota limits are not enforced");
}

static void free_dirs(struct qdir *d, int n)
{
    for (int i = 0; i < n; i++)
        free(d[i].lim.path);
    free(d);
}

void brick_quota_fini(struct brick *b)
{
    struct brick_quota *q = b->quota;
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    if (q->started)
        pthread_join(q->thread, NULL);
    free_dirs(q->dirs, q->n);
    free(q->limits);
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_destroy(&q->stripes[i]);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
    pthread_rwlock_destroy(&q->rw);
    free(q);
    b->quota = NULL;
}

/* The other sets' usage of the last sum, kept across restarts in
 * .cairn/quota-others ("BYTES FILES PATH" lines): a restarted brick of a
 * distributed volume goes on from that sum instead of from nothing
 * (docs/quota.md). Written whole (temporary file, rename) at each sum
 * that changed it; no fsync: a crash loses at most what the next sum,
 * made at once when cairnd sees the new brick process, brings back. */
#define OTHERS_FILE BRICK_PRIVATE "/quota-others"

static void save_others(struct brick *b, const struct qdir *dirs, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    for (int i = 0; i < n; i++)
        if (dirs[i].o_bytes || dirs[i].o_files)
            fprintf(f, "%" PRId64 " %" PRId64 " %s\n", dirs[i].o_bytes, dirs[i].o_files,
                    dirs[i].lim.path);
    if (fclose(f) != 0) {
        free(text);
        return;
    }
    int fd = b->vfs->openat(b->root_fd, OTHERS_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = fd;
    if (fd >= 0) {
        long w = len ? b->vfs->pwrite(fd, text, len, 0) : 0;
        rc = w < 0 ? (int)w : (size_t)w != len ? -EIO : 0;
        b->vfs->close(fd);
        if (rc == 0)
            rc = b->vfs->renameat2(b->root_fd, OTHERS_FILE ".tmp", b->root_fd, OTHERS_FILE, 0);
    }
    if (rc < 0)
        log_debug("quota: keeping the other sets' usage in %s: %s", OTHERS_FILE, strerror(-rc));
    free(text);
}

static void load_others(struct brick *b, struct qdir *dirs, int n)
{
    int fd = b->vfs->openat(b->root_fd, OTHERS_FILE, O_RDONLY, 0);
    if (fd < 0)
        return;
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            char *t = realloc(text, cap = len + 65536);
            if (!t)
                break;
            text = t;
        }
        long r = b->vfs->pread(fd, text + len, cap - len - 1, (off_t)len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    b->vfs->close(fd);
    if (!text)
        return;
    text[len] = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        long long ob, of;
        int at = 0;
        if (sscanf(line, "%lld %lld %n", &ob, &of, &at) != 2 || !at || ob < 0 || of < 0)
            continue;
        for (int i = 0; i < n; i++)
            if (!strcmp(dirs[i].lim.path, line + at) && !dirs[i].o_bytes && !dirs[i].o_files) {
                dirs[i].o_bytes = ob;
                dirs[i].o_files = of;
            }
    }
    free(text);
}

/* Counts every limited directory afresh, with no request counted meanwhile. */
static void crawl_all(struct brick *b)
{
    struct brick_quota *q = b->quota;
    pthread_rwlock_wrlock(&q->rw);
    pthread_mutex_lock(&q->lock);
    char *limits = q->limits ? strdup(q->limits) : NULL;
    int enabled = q->enabled;
    pthread_mutex_unlock(&q->lock);
    struct quota_limits ql = {0};
    char err[128];
    if (enabled && limits && quota_limits_parse(limits, &ql, err, sizeof(err)) < 0)
        log_warn("features.quota-limits: %s", err);
    struct qdir *dirs = ql.n ? calloc((size_t)ql.n, sizeof(*dirs)) : NULL;
    int n = 0;
    for (int i = 0; dirs && i < ql.n; i++) {
        struct brick_qobj o;
        int rc = measure(b, ql.l[i].path, &o);
        if (rc < 0 && rc != -ENOENT)
            log_warn("quota: counting %s on brick %s: %s", ql.l[i].path, b->path, strerror(-rc));
        dirs[n].lim = ql.l[i];
        ql.l[i].path = NULL;
        dirs[n].bytes = o.bytes;
        dirs[n].files = o.files;
        dirs[n].dirs = o.dirs;
        log_info("quota: %s holds %" PRId64 " bytes, %" PRId64 " files, %" PRId64
                 " directories on brick %s",
                 dirs[n].lim.path, o.bytes, o.files, o.dirs, b->path);
        n++;
    }
    pthread_mutex_lock(&q->lock);
    /* keep the other sets' last sums for limits that stay */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < q->n; j++)
            if (!strcmp(q->dirs[j].lim.path, dirs[i].lim.path)) {
                dirs[i].o_bytes = q->dirs[j].o_bytes;
                dirs[i].o_files = q->dirs[j].o_files;
                dirs[i].over_soft = q->dirs[j].over_soft;
            }
    if (q->crawls == 0)
        load_others(b, dirs, n); /* the first count since the brick started */
    free_dirs(q->dirs, q->n);
    q->dirs = dirs;
    q->n = n;
    q->crawls++;
    pthread_mutex_unlock(&q->lock);
    pthread_rwlock_unlock(&q->rw);
    quota_limits_free(&ql);
    free(limits);
}

static void *crawler_main(void *arg)
{
    struct brick *b = arg;
    struct brick_quota *q = b->quota;
    pthread_mutex_lock(&q->lock);
    while (!q->stop) {
        if (!q->want_crawl) {
            pthread_cond_wait(&q->wake, &q->lock);
            continue;
        }
        q->want_crawl = 0;
        pthread_mutex_unlock(&q->lock);
        crawl_all(b);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int brick_quota_set_option(struct brick *b, const char *name, const char *value)
{
    struct brick_quota *q = b->quota;
    if (!q)
        return 0;
    if (!strcmp(name, "features.quota")) {
        bool on;
        if (opt_parse_bool(value, &on) < 0)
            return -EINVAL;
        pthread_mutex_lock(&q->lock);
        if (q->enabled != on) {
            __atomic_store_n(&q->enabled, on, __ATOMIC_RELEASE);
            q->want_crawl = 1;
            pthread_cond_signal(&q->wake);
        }
        pthread_mutex_unlock(&q->lock);
    } else if (!strcmp(name, "features.quota-limits")) {
        pthread_mutex_lock(&q->lock);
        if (!q->limits || strcmp(q->limits, value)) {
            char *v = strdup(value);
            if (v) {
                free(q->limits);
                q->limits = v;
                q->want_crawl = 1;
                pthread_cond_signal(&q->wake);
            }
        }
        pthread_mutex_unlock(&q->lock);
    } else if (!strcmp(name, "features.quota-deem-statfs")) {
        bool on;
        if (opt_parse_bool(value, &on) < 0)
            return -EINVAL;
        __atomic_store_n(&q->deem_statfs, on, __ATOMIC_RELAXED);
    } else if (!strcmp(name, "features.default-soft-limit")) {
        int v = atoi(value);
        if (v >= 1 && v <= 100)
            __atomic_store_n(&q->default_soft, v, __ATOMIC_RELAXED);
    } else {
        return 0;
    }
    return 1;
}

int brick_quota_settle(struct brick *b)
{
    struct brick_quota *q = b->quota;
    for (int i = 0; q && i < 10000; i++) {
        pthread_mutex_lock(&q->lock);
        int busy = q->want_crawl;
        pthread_mutex_unlock(&q->lock);
        if (!busy) {
            /* a crawl running holds rw exclusively */
            pthread_rwlock_rdlock(&q->rw);
            pthread_rwlock_unlock(&q->rw);
            return 0;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return -ETIMEDOUT;
}

/* ---- limits ---- */

static int soft_of(const struct brick_quota *q, int soft)
{
    return soft > 0 ? soft : q->default_soft;
}

static int64_t pct(int64_t v, int p)
{
    return (int64_t)((double)v * p / 100.0);
}

/* Logs crossings of d's soft and hard limits (q->lock held). */
static void note_levels(struct brick *b, struct brick_quota *q, struct qdir *d)
{
    if (d->lim.hard <= 0)
        return;
    int64_t used = d->bytes + d->o_bytes;
    int64_t soft = pct(d->lim.hard, soft_of(q, d->lim.soft));
    char u[32], s[32], h[32];
    quota_format_size(used, u, sizeof(u));
    if (used > soft && !d->over_soft) {
        d->over_soft = 1;
        quota_format_size(soft, s, sizeof(s));
        log_warn("quota: usage crossed the soft limit: %s used by %s (soft limit %s, %d%%) on "
                 "brick %s",
                 u, d->lim.path, s, soft_of(q, d->lim.soft), b->path);
    } else if (used <= soft && d->over_soft) {
        d->over_soft = 0;
        log_info("quota: usage of %s is below its soft limit again: %s used, on brick %s",
                 d->lim.path, u, b->path);
    }
    if (used >= d->lim.hard && !d->over_hard) {
        d->over_hard = 1;
        quota_format_size(d->lim.hard, h, sizeof(h));
        log_warn("quota: hard limit reached: %s used by %s (hard limit %s) on brick %s", u,
                 d->lim.path, h, b->path);
    } else if (used < d->lim.hard) {
        d->over_hard = 0;
    }
}

/* ---- requests ---- */

static int is_active(struct brick *b)
{
    return b->quota && __atomic_load_n(&b->quota->enabled, __ATOMIC_ACQUIRE);
}

/* Whether any limit covers path (q->lock held). */
static int covered(struct brick_quota *q, const char *path)
{
    for (int i = 0; i < q->n; i++)
        if (quota_path_under(q->dirs[i].lim.path, path))
            return 1;
    return 0;
}

static int copy_path(const struct rpc_bytes *p, char *out)
{
    if (!p->p || p->len == 0 || p->len >= RPC_PATH_MAX || p->p[0] != '/')
        return -EINVAL;
    memcpy(out, p->p, p->len);
    out[p->len] = 0;
    return 0;
}

static uint64_t write_end(const struct rpc_msg *in)
{
    if (rpc_has(in, RPC_T_EXTENTS)) {
        uint64_t end = 0;
        uint32_t n = in->extents.len / RPC_EXTENT_LEN;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t off;
            uint32_t len;
            rpc_extent_get(&in->extents, i, &off, &len);
            if (off + len > end)
                end = off + len;
        }
        return end;
    }
    return in->offset + (rpc_has(in, RPC_T_DATA) ? in->data.len : 0);
}

/* Reads what a request's object holds before it runs (Q_FILE: by handle or
 * path; the others: by path). */
static int file_size(struct brick_req *r, struct brick_qop *op, int64_t *size)
{
    struct stat st;
    int rc;
    if (op->fd >= 0) {
        rc = r->b->vfs->fstatat(op->fd, "", &st);
    } else {
        struct brick_qobj o;
        rc = measure(r->b, op->path, &o);
        if (rc == 0 && o.is_dir)
            return -EISDIR;
        if (rc == 0)
            *size = o.bytes;
        return rc;
    }
    if (rc == 0) {
        *size = S_ISREG(st.st_mode) ? st.st_size : 0;
        op->ino = st.st_ino;
    }
    return rc;
}

/* Sets op's kind and paths; Q_NONE when the request changes no usage. */
static int classify(struct brick_req *r, struct brick_qop *op)
{
    const struct rpc_msg *in = r->in;
    switch (r->opcode) {
    case RPC_OP_WRITE:
    case RPC_OP_FALLOCATE:
        op->kind = Q_FILE;
        break;
    case RPC_OP_SETATTR:
        if (!rpc_has(in, RPC_T_VALID) || !(in->valid & RPC_SET_SIZE))
            return 0;
        op->kind = Q_FILE;
        break;
    case RPC_OP_OPEN:
        if (!rpc_has(in, RPC_T_FLAGS) || !(in->flags & O_TRUNC))
            return 0;
        op->kind = Q_FILE;
        break;
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_MKDIR:
    case RPC_OP_SYMLINK:
    case RPC_OP_MAKE_FILE:
        op->kind = Q_MAKE;
        return copy_path(&in->path, op->path);
    case RPC_OP_LINK:
        op->kind = Q_MAKE;
        if (copy_path(&in->path2, op->path) < 0)
            return -EINVAL;
        return copy_path(&in->path, op->path2);
    case RPC_OP_UNLINK:
    case RPC_OP_RMDIR:
        op->kind = Q_REMOVE;
        return copy_path(&in->path, op->path);
    case RPC_OP_RENAME:
        op->kind = Q_RENAME;
        if (copy_path(&in->path, op->path) < 0)
            return -EINVAL;
        return copy_path(&in->path2, op->path2);
    default:
        return 0;
    }
    /* Q_FILE: by handle when there is one */
    if (rpc_has(in, RPC_T_FH) && r->opcode != RPC_OP_OPEN) {
        if (brick_fh_get(r->bc, in->fh, 0, &op->fh) < 0 || !op->fh->path) {
            op->kind = Q_NONE; /* the operation itself answers EBADF */
            return 0;
        }
        op->fd = op->fh->fd;
        snprintf(op->path, sizeof(op->path), "%s", op->fh->path);
        return 0;
    }
    return copy_path(&in->path, op->path);
}

/* The bytes and objects a request adds where it lands (before it runs). */
static void growth(struct brick_req *r, struct brick_qop *op)
{
    const struct rpc_msg *in = r->in;
    switch (r->opcode) {
    case RPC_OP_WRITE: {
        uint64_t end = write_end(in);
        op->grow = end > (uint64_t)op->before.bytes ? (int64_t)(end - op->before.bytes) : 0;
        break;
    }
    case RPC_OP_FALLOCATE:
        if ((rpc_has(in, RPC_T_FLAGS) &&
             (in->flags & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE))))
            break;
        if (in->offset + in->size > (uint64_t)op->before.bytes)
            op->grow = (int64_t)(in->offset + in->size - (uint64_t)op->before.bytes);
        break;
    case RPC_OP_SETATTR:
        if ((int64_t)in->size > op->before.bytes)
            op->grow = (int64_t)in->size - op->before.bytes;
        break;
    case RPC_OP_MAKE_FILE: {
        uint64_t n = rpc_has(in, RPC_T_DATA) ? in->data.len : 0;
        if (rpc_has(in, RPC_T_SIZE) && in->size > n)
            n = in->size;
        op->grow = (int64_t)n;
        op->grow_objs = 1;
        break;
    }
    case RPC_OP_CREATE:
    case RPC_OP_MKNOD:
    case RPC_OP_MKDIR:
    case RPC_OP_SYMLINK:
        if (!(r->opcode == RPC_OP_MKNOD && rpc_has(in, RPC_T_MODE) &&
              (in->mode & (S_IFMT | 07777)) == (S_IFREG | S_ISVTX)))
            op->grow_objs = 1;
        break;
    case RPC_OP_LINK:
        op->grow = op->moved.bytes;
        op->grow_objs = 1;
        break;
    case RPC_OP_RENAME:
        op->grow = op->moved.bytes;
        op->grow_objs = op->moved.files + op->moved.dirs;
        break;
    default:
        break;
    }
}

/* Whether d would go past a hard limit with op's growth (q->lock held). */
static int refuses(struct brick_quota *q, struct qdir *d, const struct brick_qop *op, char *why,
                   size_t len)
{
    if (op->grow > 0 && d->lim.hard > 0 &&
        d->bytes + d->o_bytes + d->reserved + op->grow > d->lim.hard) {
        snprintf(why, len, "quota: %s would exceed its hard limit of %" PRId64 " bytes",
                 d->lim.path, d->lim.hard);
        return 1;
    }
    if (op->grow_objs > 0 && d->lim.objects > 0 &&
        d->files + d->dirs + d->o_files + op->grow_objs > d->lim.objects) {
        snprintf(why, len, "quota: %s would exceed its limit of %" PRId64 " objects", d->lim.path,
                 d->lim.objects);
        return 1;
    }
    return 0;
}

/* Clears op but its path buffers (every request passes here). */
static void qop_clear(struct brick_qop *op)
{
    memset(op, 0, offsetof(struct brick_qop, path));
    op->fd = -1;
    op->path[0] = op->path2[0] = 0;
}

int brick_quota_pre(struct brick_req *r, struct brick_qop *op)
{
    qop_clear(op);
    if (!is_active(r->b))
        return 0;
    struct brick_quota *q = r->b->quota;
    if (classify(r, op) < 0 || op->kind == Q_NONE)
        goto none;
    pthread_rwlock_rdlock(&q->rw);
    op->held = 1;
    pthread_mutex_lock(&q->lock);
    int hit = covered(q, op->path) || (op->kind == Q_RENAME && covered(q, op->path2)) ||
              (op->kind == Q_MAKE && r->opcode == RPC_OP_LINK && covered(q, op->path2));
    pthread_mutex_unlock(&q->lock);
    if (!hit)
        goto none;
    int rc = 0;
    switch (op->kind) {
    case Q_FILE:
        rc = file_size(r, op, &op->before.bytes);
        if (rc < 0)
            goto none; /* the operation answers for itself */
        if (op->fd >= 0) {
            op->stripe = (int)(op->ino % STRIPES);
            pthread_mutex_lock(&q->stripes[op->stripe]);
            op->striped = 1;
            /* again, under the stripe: another write may have grown it */
            file_size(r, op, &op->before.bytes);
        }
        break;
    case Q_MAKE:
        if (r->opcode == RPC_OP_LINK && measure(r->b, op->path2, &op->moved) < 0)
            goto none;
        break;
    case Q_REMOVE:
        if (measure(r->b, op->path, &op->before) < 0)
            goto none;
        break;
    case Q_RENAME:
        /* what moves is counted only when it changes limits */
        pthread_mutex_lock(&q->lock);
        int crosses = 0;
        for (int i = 0; i < q->n && !crosses; i++)
            crosses = quota_path_under(q->dirs[i].lim.path, op->path) !=
                      quota_path_under(q->dirs[i].lim.path, op->path2);
        pthread_mutex_unlock(&q->lock);
        if (crosses && measure(r->b, op->path, &op->moved) < 0)
            goto none;
        if (measure(r->b, op->path2, &op->before) < 0)
            memset(&op->before, 0, sizeof(op->before));
        break;
    }
    growth(r, op);
    op->active = 1;
    int exempt = rpc_has(r->in, RPC_T_PID) && r->in->pid == RPC_PID_HEAL;
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->n; i++) {
        struct qdir *d = &q->dirs[i];
        const char *where = op->kind == Q_RENAME ? op->path2 : op->path;
        if (!quota_path_under(d->lim.path, where))
            continue;
        /* a rename within one limited directory adds nothing to it */
        if (op->kind == Q_RENAME && quota_path_under(d->lim.path, op->path))
            continue;
        if (!exempt && refuses(q, d, op, r->text, sizeof(r->text))) {
            pthread_mutex_unlock(&q->lock);
            log_debug("%s", r->text);
            brick_quota_post(r, op, -EDQUOT);
            return -EDQUOT;
        }
    }
    /* granted: reserved until it is counted */
    for (int i = 0; i < q->n && op->grow > 0; i++)
        if (quota_path_under(q->dirs[i].lim.path, op->kind == Q_RENAME ? op->path2 : op->path))
            q->dirs[i].reserved += op->grow;
    op->reserved = op->grow > 0;
    pthread_mutex_unlock(&q->lock);
    return 0;
none:
    if (op->held)
        pthread_rwlock_unlock(&q->rw);
    if (op->fh)
        brick_fh_put(r->bc, op->fh);
    qop_clear(op);
    return 0;
}

/* Adds sign x o to every limit covering path (q->lock held). */
static void apply(struct brick_quota *q, const char *path, const struct brick_qobj *o, int sign,
                  const char *unless)
{
    for (int i = 0; i < q->n; i++) {
        struct qdir *d = &q->dirs[i];
        if (!quota_path_under(d->lim.path, path))
            continue;
        if (unless && quota_path_under(d->lim.path, unless))
            continue;
        d->bytes += sign * o->bytes;
        d->files += sign * o->files;
        d->dirs += sign * o->dirs;
    }
}

void brick_quota_post(struct brick_req *r, struct brick_qop *op, int rc)
{
    if (!op->held && !op->fh)
        return;
    struct brick_quota *q = r->b->quota;
    struct brick_qobj after = {0}, delta = {0};
    int counted = op->active && rc >= 0 && rc != BRICK_DEFERRED;
    if (counted) {
        switch (op->kind) {
        case Q_FILE:
            if (file_size(r, op, &after.bytes) == 0) {
                delta.bytes = after.bytes - op->before.bytes;
            }
            break;
        case Q_MAKE:
            if (measure(r->b, op->path, &after) < 0)
                memset(&after, 0, sizeof(after));
            delta = after;
            break;
        case Q_REMOVE:
            if (measure(r->b, op->path, &after) == 0 && after.exists)
                counted = 0; /* still there: nothing removed */
            delta = op->before;
            break;
        case Q_RENAME:
            break;
        }
    }
    pthread_mutex_lock(&q->lock);
    if (op->reserved)
        for (int i = 0; i < q->n; i++)
            if (quota_path_under(q->dirs[i].lim.path, op->kind == Q_RENAME ? op->path2 : op->path))
                q->dirs[i].reserved -= op->grow;
    if (counted) {
        switch (op->kind) {
        case Q_FILE:
        case Q_MAKE:
            apply(q, op->path, &delta, 1, NULL);
            break;
        case Q_REMOVE:
            apply(q, op->path, &delta, -1, NULL);
            break;
        case Q_RENAME:
            /* what the target replaced goes; what moved leaves the limits
             * covering only its old place and joins those covering only
             * the new one */
            if (rpc_has(r->in, RPC_T_FLAGS) && (r->in->flags & RENAME_EXCHANGE)) {
                /* the two trade places: the target's moves the other way */
                apply(q, op->path2, &op->before, -1, op->path);
                apply(q, op->path, &op->before, 1, op->path2);
            } else {
                apply(q, op->path2, &op->before, -1, NULL);
            }
            apply(q, op->path, &op->moved, -1, op->path2);
            apply(q, op->path2, &op->moved, 1, op->path);
            break;
        }
        for (int i = 0; i < q->n; i++)
            if (quota_path_under(q->dirs[i].lim.path, op->path) ||
                (op->kind == Q_RENAME && quota_path_under(q->dirs[i].lim.path, op->path2)))
                note_levels(r->b, q, &q->dirs[i]);
    }
    pthread_mutex_unlock(&q->lock);
    if (op->striped)
        pthread_mutex_unlock(&q->stripes[op->stripe]);
    if (op->held)
        pthread_rwlock_unlock(&q->rw);
    if (op->fh)
        brick_fh_put(r->bc, op->fh);
    op->held = 0;
    op->fh = NULL;
    op->striped = 0;
}

/* ---- QUOTA, QUOTA_OTHERS, STATFS ---- */

int brick_op_quota(struct brick_req *r)
{
    struct brick_quota *q = r->b->quota;
    if (!q)
        return -ENOMEM;
    brick_quota_settle(r->b);
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->n; i++) {
        struct qdir *d = &q->dirs[i];
        size_t mark = rpc_put_begin(r->out, RPC_T_QUOTA);
        rpc_put_str(r->out, RPC_T_PATH, d->lim.path);
        rpc_put_u64(r->out, RPC_T_SIZE, (uint64_t)(d->bytes > 0 ? d->bytes : 0));
        rpc_put_u64(r->out, RPC_T_CALLS, (uint64_t)(d->files > 0 ? d->files : 0));
        rpc_put_u64(r->out, RPC_T_OFFSET, (uint64_t)(d->dirs > 0 ? d->dirs : 0));
        rpc_put_end(r->out, mark);
    }
    rpc_put_u64(r->out, RPC_T_STATUS, (uint64_t)q->enabled);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int brick_op_quota_others(struct brick_req *r)
{
    struct brick_quota *q = r->b->quota;
    if (!q)
        return -ENOMEM;
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, r->in->body, r->in->body_len);
    int changed = 0;
    pthread_mutex_lock(&q->lock);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg m;
        char path[RPC_PATH_MAX];
        if (f.tag != RPC_T_QUOTA || rpc_msg_decode(f.val, f.len, &m, NULL) < 0 ||
            !rpc_has(&m, RPC_T_PATH) || copy_path(&m.path, path) < 0)
            continue;
        for (int i = 0; i < q->n; i++) {
            struct qdir *d = &q->dirs[i];
            if (strcmp(d->lim.path, path))
                continue;
            int64_t ob = rpc_has(&m, RPC_T_SIZE) ? (int64_t)m.size : 0;
            int64_t of = rpc_has(&m, RPC_T_CALLS) ? (int64_t)m.calls : 0;
            changed |= ob != d->o_bytes || of != d->o_files;
            d->o_bytes = ob;
            d->o_files = of;
            note_levels(r->b, q, d);
        }
    }
    if (changed)
        save_others(r->b, q->dirs, q->n);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int brick_quota_statfs(struct brick *b, const char *path, struct rpc_statfs *s)
{
    struct brick_quota *q = b->quota;
    if (!is_active(b) || !__atomic_load_n(&q->deem_statfs, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&q->lock);
    /* the innermost limit with a size covering path */
    struct qdir *best = NULL;
    for (int i = 0; i < q->n; i++) {
        struct qdir *d = &q->dirs[i];
        if (d->lim.hard > 0 && quota_path_under(d->lim.path, path) &&
            (!best || strlen(d->lim.path) > strlen(best->lim.path)))
            best = d;
    }
    int deemed = 0;
    if (best) {
        uint64_t f = s->frsize ? s->frsize : (s->bsize ? s->bsize : 4096);
        int64_t used = best->bytes + best->o_bytes;
        int64_t avail = best->lim.hard > used ? best->lim.hard - used : 0;
        uint64_t blocks = ((uint64_t)best->lim.hard + f - 1) / f;
        uint64_t free_blocks = (uint64_t)avail / f;
        /* never more room than the disk has */
        if (free_blocks > s->bavail)
            free_blocks = s->bavail;
        s->blocks = blocks;
        s->bfree = free_blocks;
        s->bavail = free_blocks;
        deemed = 1;
    }
    pthread_mutex_unlock(&q->lock);
    return deemed;
}

void brick_quota_dump(struct brick *b, FILE *f)
{
    struct brick_quota *q = b->quota;
    if (!q || sd_section(f, "brick.quota", &q->lock) < 0)
        return;
    fprintf(f, "enabled=%d\ndeem-statfs=%d\ncrawls=%llu\nlimits=%d\n", q->enabled, q->deem_statfs,
            (unsigned long long)q->crawls, q->n);
    for (int i = 0; i < q->n; i++) {
        struct qdir *d = &q->dirs[i];
        fprintf(f,
                "limit.%d.path=%s\nlimit.%d.bytes=%" PRId64 "\nlimit.%d.files=%" PRId64
                "\nlimit.%d.dirs=%" PRId64 "\nlimit.%d.other-sets-bytes=%" PRId64 "\n",
                i, d->lim.path, i, d->bytes, i, d->files, i, d->dirs, i, d->o_bytes);
    }
    pthread_mutex_unlock(&q->lock);
}
