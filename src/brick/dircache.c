/* A bounded cache of open parent directories, keyed by their path below the
 * brick root, so a request in a known directory does not pay an openat2()
 * walk and a close() (most requests of a copy land in a few directories).
 *
 * Correctness rests on two rules:
 * - Every operation of the brick that can move or remove a directory (rename,
 *   rmdir) drops the cached entries at and below the path(s) it touched,
 *   after the change is made (brick_dircache_invalidate). An fd taken from
 *   the cache before that refers to the directory as it was when the
 *   concurrent request began, which is an allowed order of the two.
 * - An fd opened on a miss is only inserted when no invalidation happened
 *   since the lookup started (a generation count), so a walk racing with a
 *   rename never caches the old directory under its old name.
 * Changes made on the brick behind Cairn's back (an administrator moving
 * directories by hand while it serves) are not seen; that was never
 * supported for a running brick.
 *
 * Entries in use are reference counted; an evicted or invalidated entry's fd
 * is closed by its last user. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "brick.h"

#define DC_MAX 256 /* entries (and so open fds) at most */
#define DC_BUCKETS 512
#define SHAPE_KEEP_MS 1000 /* brick_dir_shape */

/* brick_dir_shape's copy of a directory's shape, under the cache lock:
 * read at generation gen, at ms (0: none). */
struct shape_copy {
    struct brick_dir_shape s;
    uint64_t gen, ms;
};

struct brick_dent {
    struct brick_dent *hnext;       /* hash chain */
    struct brick_dent *prev, *next; /* LRU list, most recent first */
    int fd;
    int refs;   /* users, plus one while in the cache */
    int cached; /* still in the hash and the LRU list */
    struct shape_copy shape;
    size_t len;
    char path[]; /* relative to the root, no leading '/' */
};

struct brick_dircache {
    pthread_mutex_t lock;
    uint64_t gen; /* bumped by every invalidation */
    struct brick_dent *hash[DC_BUCKETS];
    struct brick_dent *head, *tail;
    unsigned n;
    struct shape_copy root_shape; /* the root is never cached here */
};

static unsigned dc_hash(const char *p, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h % DC_BUCKETS;
}

int brick_dircache_init(struct brick *b)
{
    struct brick_dircache *dc = calloc(1, sizeof(*dc));
    if (!dc)
        return -ENOMEM;
    pthread_mutex_init(&dc->lock, NULL);
    b->dircache = dc;
    return 0;
}

static void lru_unlink(struct brick_dircache *dc, struct brick_dent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        dc->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        dc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(struct brick_dircache *dc, struct brick_dent *e)
{
    e->prev = NULL;
    e->next = dc->head;
    if (dc->head)
        dc->head->prev = e;
    dc->head = e;
    if (!dc->tail)
        dc->tail = e;
}

/* Takes e out of the cache (lock held); returns it when its fd must be
 * closed now (nobody uses it), else NULL. */
static struct brick_dent *uncache(struct brick_dircache *dc, struct brick_dent *e)
{
    struct brick_dent **pp = &dc->hash[dc_hash(e->path, e->len)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(dc, e);
    e->cached = 0;
    dc->n--;
    return --e->refs == 0 ? e : NULL;
}

static void dent_free(struct brick *b, struct brick_dent *e)
{
    b->vfs->close(e->fd);
    free(e);
}

void brick_dircache_fini(struct brick *b)
{
    struct brick_dircache *dc = b->dircache;
    if (!dc)
        return;
    while (dc->head) {
        struct brick_dent *e = uncache(dc, dc->head);
        if (e)
            dent_free(b, e);
    }
    pthread_mutex_destroy(&dc->lock);
    free(dc);
    b->dircache = NULL;
}

static struct brick_dent *find(struct brick_dircache *dc, const char *p, size_t len)
{
    for (struct brick_dent *e = dc->hash[dc_hash(p, len)]; e; e = e->hnext)
        if (e->len == len && !memcmp(e->path, p, len))
            return e;
    return NULL;
}

int brick_dircache_get(struct brick *b, const char *path, size_t len, struct brick_dent **out)
{
    struct brick_dircache *dc = b->dircache;
    *out = NULL;
    pthread_mutex_lock(&dc->lock);
    struct brick_dent *e = find(dc, path, len);
    if (e) {
        e->refs++;
        lru_unlink(dc, e);
        lru_push(dc, e);
        pthread_mutex_unlock(&dc->lock);
        *out = e;
        return e->fd;
    }
    uint64_t gen = dc->gen;
    pthread_mutex_unlock(&dc->lock);

    e = malloc(sizeof(*e) + len + 1);
    if (!e)
        return -ENOMEM;
    memcpy(e->path, path, len);
    e->path[len] = 0;
    e->len = len;
    int fd = b->vfs->resolve(b->root_fd, e->path, O_PATH | O_DIRECTORY);
    if (fd < 0) {
        free(e);
        return fd;
    }
    e->fd = fd;
    e->refs = 1; /* the caller's */
    e->cached = 0;
    e->shape.ms = 0;
    e->prev = e->next = e->hnext = NULL;
    struct brick_dent *evict = NULL;
    pthread_mutex_lock(&dc->lock);
    if (dc->gen == gen && !find(dc, path, len)) {
        if (dc->n >= DC_MAX)
            evict = uncache(dc, dc->tail);
        unsigned h = dc_hash(path, len);
        e->hnext = dc->hash[h];
        dc->hash[h] = e;
        lru_push(dc, e);
        e->cached = 1;
        e->refs++;
        dc->n++;
    }
    pthread_mutex_unlock(&dc->lock);
    if (evict)
        dent_free(b, evict);
    *out = e;
    return fd;
}

void brick_dircache_put(struct brick *b, struct brick_dent *e)
{
    struct brick_dircache *dc = b->dircache;
    pthread_mutex_lock(&dc->lock);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&dc->lock);
    if (last)
        dent_free(b, e);
}

void brick_dircache_invalidate(struct brick *b, const char *path)
{
    struct brick_dircache *dc = b->dircache;
    while (*path == '/')
        path++;
    size_t len = strlen(path);
    struct brick_dent *dead = NULL;
    pthread_mutex_lock(&dc->lock);
    dc->gen++;
    for (struct brick_dent *e = dc->head, *next; e; e = next) {
        next = e->next;
        if (len == 0 || (e->len >= len && !memcmp(e->path, path, len) &&
                         (e->len == len || e->path[len] == '/'))) {
            struct brick_dent *d = uncache(dc, e);
            if (d) {
                d->hnext = dead;
                dead = d;
            }
        }
    }
    pthread_mutex_unlock(&dc->lock);
    while (dead) {
        struct brick_dent *n = dead->hnext;
        dent_free(b, dead);
        dead = n;
    }
}

int brick_dircache_shape(struct brick *b, struct brick_dent *e, uint64_t gen, uint64_t now_ms,
                         struct brick_dir_shape *s)
{
    struct brick_dircache *dc = b->dircache;
    pthread_mutex_lock(&dc->lock);
    const struct shape_copy *c = e ? &e->shape : &dc->root_shape;
    int ok = c->ms && c->gen == gen && now_ms - c->ms < SHAPE_KEEP_MS;
    if (ok)
        *s = c->s;
    pthread_mutex_unlock(&dc->lock);
    return ok;
}

void brick_dircache_set_shape(struct brick *b, struct brick_dent *e, uint64_t gen, uint64_t now_ms,
                              const struct brick_dir_shape *s)
{
    struct brick_dircache *dc = b->dircache;
    pthread_mutex_lock(&dc->lock);
    *(e ? &e->shape : &dc->root_shape) =
        (struct shape_copy){.s = *s, .gen = gen, .ms = now_ms ? now_ms : 1};
    pthread_mutex_unlock(&dc->lock);
}
