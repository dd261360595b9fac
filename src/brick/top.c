/* `volume top`: the files and directories this brick serves most, by
 * opens, reads, writes, directory opens and listings, with the bytes and
 * time of their reads and writes (read-perf, write-perf), and the count
 * of open files (docs/cli.md, "volume top").
 *
 * One entry per path, made when the path is opened (OPEN, CREATE,
 * OPENDIR): the handle keeps a reference to it, so its reads, writes and
 * listings are counted with atomic additions and no lock. The table holds
 * at most TOP_MAX entries; when it is full, the half with the fewest
 * requests that no handle uses is dropped (the rarely used paths: the top
 * of the list stays exact for what stayed in the table). A path renamed
 * while open is counted under the name it was opened by.
 *
 * TOP (op 96): FLAGS the list (RPC_TOP_*), SIZE how many entries at most;
 * the reply has one RPC_T_TOPENTRY {PATH, CALLS[, SIZE bytes, NSEC]} per
 * entry, most first, and CALLS, SIZE, NSEC: the files open now, the most
 * open at once, and when that was (ns since the epoch). RPC_TOP_CLEAR
 * zeroes the counts. RPC_TOP_READ_PERF and RPC_TOP_WRITE_PERF list reads
 * or writes and, given TOPPERF {SIZE block size, CALLS blocks}, first time
 * writing (and reading back) such a file in .cairn/tmp: the reply's
 * TOPPERF {SIZE bytes, NSEC} (docs/protocol.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "brick.h"

#define TOP_MAX 16384
#define TOP_BUCKETS 4096
#define PERF_MAX_BYTES (1ull << 30) /* a perf test writes at most this much */

struct top_entry {
    struct top_entry *next;
    int refs;                  /* handles using it; under the lock */
    uint64_t n[RPC_TOP_LISTS]; /* atomic */
    uint64_t bytes[2], ns[2];  /* reads, writes: atomic */
    char path[];
};

struct brick_top {
    pthread_mutex_t lock;
    struct top_entry *b[TOP_BUCKETS];
    size_t n;
    uint64_t open_now, open_max, open_max_ns;
};

static uint64_t hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int brick_top_init(struct brick *b)
{
    struct brick_top *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->lock, NULL);
    b->top = t;
    return 0;
}

void brick_top_fini(struct brick *b)
{
    struct brick_top *t = b->top;
    if (!t)
        return;
    for (size_t i = 0; i < TOP_BUCKETS; i++)
        while (t->b[i]) {
            struct top_entry *e = t->b[i];
            t->b[i] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&t->lock);
    free(t);
    b->top = NULL;
}

static uint64_t total(const struct top_entry *e)
{
    uint64_t s = 0;
    for (int i = 0; i < RPC_TOP_LISTS; i++)
        s += __atomic_load_n(&e->n[i], __ATOMIC_RELAXED);
    return s;
}

static int by_total(const void *a, const void *b)
{
    uint64_t x = total(*(struct top_entry *const *)a), y = total(*(struct top_entry *const *)b);
    return x < y ? -1 : x > y;
}

/* Under the lock, the table full: drops the unused half with the fewest
 * requests. */
static void evict(struct brick_top *t)
{
    struct top_entry **v = malloc(t->n * sizeof(*v));
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < TOP_BUCKETS; i++)
        for (struct top_entry *e = t->b[i]; e; e = e->next)
            if (!e->refs)
                v[n++] = e;
    qsort(v, n, sizeof(*v), by_total);
    for (size_t k = 0; k < n / 2 + 1 && k < n; k++) {
        struct top_entry **pp = &t->b[hash(v[k]->path) % TOP_BUCKETS];
        while (*pp != v[k])
            pp = &(*pp)->next;
        *pp = v[k]->next;
        free(v[k]);
        t->n--;
    }
    free(v);
}

struct top_entry *brick_top_open(struct brick *b, const char *path, size_t len, int list)
{
    struct brick_top *t = b->top;
    if (!t || !path)
        return NULL;
    char p[PATH_MAX];
    if (len >= sizeof(p))
        return NULL;
    memcpy(p, path, len);
    p[len] = 0;
    uint64_t h = hash(p) % TOP_BUCKETS;
    pthread_mutex_lock(&t->lock);
    struct top_entry *e = t->b[h];
    while (e && strcmp(e->path, p) != 0)
        e = e->next;
    if (!e) {
        if (t->n >= TOP_MAX)
            evict(t);
        if ((e = calloc(1, sizeof(*e) + len + 1))) {
            memcpy(e->path, p, len + 1);
            e->next = t->b[h];
            t->b[h] = e;
            t->n++;
        }
    }
    if (e) {
        e->refs++;
        e->n[list]++;
        if (list == RPC_TOP_OPEN && ++t->open_now > t->open_max) {
            t->open_max = t->open_now;
            t->open_max_ns = wall_ns();
        }
    }
    pthread_mutex_unlock(&t->lock);
    return e;
}

void brick_top_close(struct brick *b, struct top_entry *e, int was_file)
{
    struct brick_top *t = b->top;
    if (!t || !e)
        return;
    pthread_mutex_lock(&t->lock);
    e->refs--;
    if (was_file && t->open_now)
        t->open_now--;
    pthread_mutex_unlock(&t->lock);
}

void brick_top_count(struct top_entry *e, int list, uint64_t bytes, uint64_t ns)
{
    if (!e)
        return;
    __atomic_add_fetch(&e->n[list], 1, __ATOMIC_RELAXED);
    if (list == RPC_TOP_READ || list == RPC_TOP_WRITE) {
        int w = list == RPC_TOP_WRITE;
        __atomic_add_fetch(&e->bytes[w], bytes, __ATOMIC_RELAXED);
        __atomic_add_fetch(&e->ns[w], ns, __ATOMIC_RELAXED);
    }
}

struct row {
    const struct top_entry *e;
    uint64_t n;
};

static int by_n_desc(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return strcmp(x->e->path, y->e->path);
}

/* Writes (write=1) or reads back a file of count blocks of bs bytes in
 * .cairn/tmp, timed; the file is removed. 0 with *ns, or -errno. */
static int perf(struct brick *b, int write_only, uint64_t bs, uint64_t count, uint64_t *ns)
{
    if (b->tmp_fd < 0)
        return -ENOTSUP;
    char name[64];
    snprintf(name, sizeof(name), "top-perf.%d.%llu", (int)getpid(), (unsigned long long)wall_ns());
    int fd = openat(b->tmp_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    char *buf = malloc(bs);
    int rc = buf ? 0 : -ENOMEM;
    if (buf)
        memset(buf, 0xa5, bs);
    uint64_t t0 = wall_ns();
    for (uint64_t i = 0; rc == 0 && i < count; i++)
        if (pwrite(fd, buf, bs, (off_t)(i * bs)) != (ssize_t)bs)
            rc = errno ? -errno : -ENOSPC;
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (rc == 0 && !write_only) {
        /* the read is of what the disk holds, not of the page cache */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        t0 = wall_ns();
        for (uint64_t i = 0; rc == 0 && i < count; i++)
            if (pread(fd, buf, bs, (off_t)(i * bs)) != (ssize_t)bs)
                rc = errno ? -errno : -EIO;
    }
    *ns = wall_ns() - t0;
    free(buf);
    close(fd);
    unlinkat(b->tmp_fd, name, 0);
    return rc;
}

int brick_op_top(struct brick_req *r)
{
    struct brick_top *t = r->b->top;
    unsigned list = rpc_has(r->in, RPC_T_FLAGS) ? (unsigned)r->in->flags : RPC_TOP_OPEN;
    if (!t)
        return -ENOMEM;
    if (list == RPC_TOP_CLEAR) {
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < TOP_BUCKETS; i++)
            for (struct top_entry *e = t->b[i]; e; e = e->next) {
                for (int k = 0; k < RPC_TOP_LISTS; k++)
                    __atomic_store_n(&e->n[k], 0, __ATOMIC_RELAXED);
                for (int k = 0; k < 2; k++) {
                    __atomic_store_n(&e->bytes[k], 0, __ATOMIC_RELAXED);
                    __atomic_store_n(&e->ns[k], 0, __ATOMIC_RELAXED);
                }
            }
        t->open_max = t->open_now;
        t->open_max_ns = wall_ns();
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    int perf_test = list == RPC_TOP_READ_PERF || list == RPC_TOP_WRITE_PERF;
    if (list >= RPC_TOP_LISTS && !perf_test)
        return -EINVAL;
    struct rpc_msg pm;
    if (perf_test && rpc_has(r->in, RPC_T_TOPPERF) &&
        rpc_msg_decode(r->in->topperf.p, r->in->topperf.len, &pm, NULL) == 0) {
        uint64_t bs = rpc_has(&pm, RPC_T_SIZE) ? pm.size : 0;
        uint64_t count = rpc_has(&pm, RPC_T_CALLS) ? pm.calls : 0;
        if (bs == 0 || count == 0 || bs > PERF_MAX_BYTES || count > PERF_MAX_BYTES / bs) {
            snprintf(r->text, sizeof(r->text),
                     "bs and count must be positive, bs * count at most %llu bytes",
                     (unsigned long long)PERF_MAX_BYTES);
            return -EINVAL;
        }
        uint64_t ns = 0;
        int rc = perf(r->b, list == RPC_TOP_WRITE_PERF, bs, count, &ns);
        if (rc < 0)
            return rc;
        size_t mark = rpc_put_begin(r->out, RPC_T_TOPPERF);
        rpc_put_u64(r->out, RPC_T_SIZE, bs * count);
        rpc_put_u64(r->out, RPC_T_NSEC, ns);
        rpc_put_end(r->out, mark);
    }
    unsigned kind = list == RPC_TOP_READ_PERF    ? RPC_TOP_READ
                    : list == RPC_TOP_WRITE_PERF ? RPC_TOP_WRITE
                                                 : list;
    uint64_t max = rpc_has(r->in, RPC_T_SIZE) && r->in->size ? r->in->size : 100;
    pthread_mutex_lock(&t->lock);
    struct row *rows = malloc((t->n + 1) * sizeof(*rows));
    size_t n = 0;
    for (size_t i = 0; rows && i < TOP_BUCKETS; i++)
        for (const struct top_entry *e = t->b[i]; e; e = e->next) {
            uint64_t c = __atomic_load_n(&e->n[kind], __ATOMIC_RELAXED);
            if (c)
                rows[n++] = (struct row){e, c};
        }
    if (rows)
        qsort(rows, n, sizeof(*rows), by_n_desc);
    for (size_t i = 0; i < n && i < max; i++) {
        const struct top_entry *e = rows[i].e;
        size_t mark = rpc_put_begin(r->out, RPC_T_TOPENTRY);
        rpc_put_str(r->out, RPC_T_PATH, e->path);
        rpc_put_u64(r->out, RPC_T_CALLS, rows[i].n);
        if (kind == RPC_TOP_READ || kind == RPC_TOP_WRITE) {
            int w = kind == RPC_TOP_WRITE;
            rpc_put_u64(r->out, RPC_T_SIZE, __atomic_load_n(&e->bytes[w], __ATOMIC_RELAXED));
            rpc_put_u64(r->out, RPC_T_NSEC, __atomic_load_n(&e->ns[w], __ATOMIC_RELAXED));
        }
        rpc_put_end(r->out, mark);
    }
    rpc_put_u64(r->out, RPC_T_CALLS, t->open_now);
    rpc_put_u64(r->out, RPC_T_SIZE, t->open_max);
    rpc_put_u64(r->out, RPC_T_NSEC, t->open_max_ns);
    pthread_mutex_unlock(&t->lock);
    free(rows);
    return rows || n == 0 ? 0 : -ENOMEM;
}
