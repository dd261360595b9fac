/* Read cache for small random reads, valid under the file's lease.
 *
 * The kernel reads ahead sequential streams itself but sends a random
 * 4 KiB read as a 4 KiB request, one brick round trip each. Here a read
 * smaller than the window (performance.read-ahead-page-count x 128 KiB) of
 * a file this mount holds a lease on asks the brick for the whole aligned
 * window around it, answers the kernel from it and keeps the window; later
 * reads inside it are answered from memory. A file read at random is then
 * fetched once, window by window, as long as the cache
 * (performance.cache-size) holds it.
 *
 * Validity:
 * - another client's change of the file recalls this mount's lease on it,
 *   and the recall forgets what is known about the file (known.c), which
 *   drops its windows here (cf_rc_changed); a window is only kept, and
 *   only used, while the lease is held;
 * - this mount's own writes, truncates and fallocates drop the file's
 *   windows when they start, and a window read before such a change is
 *   not kept (a generation per bucket of inode numbers, compared under
 *   the cache's lock when the window arrives).
 * A window made stale by a change is freed with the change (every window
 * of the bucket: they share the generation), so the cache holds only
 * windows it may still answer from.
 *
 * Reading ahead of misses. A file read at random densely (the whole of it,
 * in any order) pays a brick round trip per window, one after another.
 * Once a file has fetched AHEAD_MIN windows under its lease and a miss
 * lands next to a window already fetched (a sparse read of a large file
 * rarely does), the next windows not fetched after it are read in the
 * background too (cf_rc_ahead_plan), AHEAD_N at a time, and each that
 * comes back whole plans the next ones after itself, in its own slot: a
 * sweep to the end of the file, AHEAD_FLY windows in flight at most.
 * "Fetched" is what the cache holds or what was stored into the kernel's
 * page cache since the file's last open (cover, told by pagestore.c): the
 * page cache holds far more of a file than this cache, and a window
 * evicted here is not read ahead again (should the kernel drop it too, its
 * next read there misses and fetches it). A miss inside a window in flight
 * waits for it (cf_rc_wait_ahead) rather than fetching it again. Such a
 * read uses the kernel's handle, so the handle's release waits for it and
 * stops the sweep meanwhile (cf_rc_release_wait, closing): handle numbers
 * are reused. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "bridge.h"

#define BUCKETS 4096
#define HASH 8192
#define UNIT (128u * 1024)    /* window = page count x UNIT */
#define AHEAD_MIN 16          /* windows a file fetched under its lease before reading ahead */
#define AHEAD_N CF_RC_AHEAD_N /* windows read ahead per miss or landing */
#define AHEAD_SCAN 64         /* how far past a miss or landing to look for windows not fetched */
#define AHEAD_FLY 8           /* windows read ahead at once, over all files */
#define DENS 64               /* files whose fetches are counted */
#define COVER_BITS 16384      /* windows per file whose storing is remembered */

struct win {
    struct win *hnext;       /* hash chain */
    struct win *prev, *next; /* LRU, most recent first */
    struct win *bnext;       /* the windows of the bucket of ino */
    struct win **bpp;        /* what points to this one in that list */
    fuse_ino_t ino;
    uint64_t start, gen, epoch;
    size_t len;
    char data[];
};

/* Windows one file fetched under its current lease (gen and epoch). */
struct dens {
    fuse_ino_t ino;
    uint64_t gen, epoch;
    unsigned fetched;
    uint64_t eof; /* a window came back short here; UINT64_MAX: not seen */
    /* windows stored into the kernel's page cache since the file's last
     * open (pagestore.c); the kernel may have dropped some since */
    uint8_t cover[COVER_BITS / 8];
};

struct fly {
    fuse_ino_t ino; /* 0: free */
    uint64_t start, len, fh, gen, epoch;
    int landed;                   /* its reply came: no more waiters */
    struct cf_rc_waiter *waiters; /* reads of the kernel answered from it */
};

struct cf_rc {
    pthread_mutex_t lock;
    pthread_cond_t landed; /* a read ahead ended */
    struct dens dens[DENS];
    struct fly fly[AHEAD_FLY];
    uint64_t closing[AHEAD_FLY]; /* handles being released: no new reads ahead */
    int nclosing;
    struct win *hash[HASH];
    struct win *by_bucket[BUCKETS];
    struct win lru; /* sentinel */
    size_t bytes, max;
    int pages;             /* window in UNITs; 0: off */
    uint64_t gen[BUCKETS]; /* per bucket of inodes */
    uint64_t epoch;        /* all leases gone: every window stale */
    uint64_t hits, misses, fetched, ahead, waited;
};

static unsigned bucket(fuse_ino_t ino)
{
    return (unsigned)(((uint64_t)ino * 0x9E3779B97F4A7C15ull) >> 40) % BUCKETS;
}

static struct win **slot(struct cf_rc *r, fuse_ino_t ino, uint64_t start)
{
    uint64_t h = ((uint64_t)ino * 0x9E3779B97F4A7C15ull) ^ (start / UNIT) * 0xC2B2AE3D27D4EB4Full;
    struct win **pp = &r->hash[(h >> 32) % HASH];
    while (*pp && ((*pp)->ino != ino || (*pp)->start != start))
        pp = &(*pp)->hnext;
    return pp;
}

static void unlink_win(struct cf_rc *r, struct win **pp)
{
    struct win *w = *pp;
    *pp = w->hnext;
    *w->bpp = w->bnext;
    if (w->bnext)
        w->bnext->bpp = w->bpp;
    w->prev->next = w->next;
    w->next->prev = w->prev;
    r->bytes -= w->len;
    free(w);
}

static void evict(struct cf_rc *r)
{
    while (r->bytes > r->max && r->lru.prev != &r->lru) {
        struct win *w = r->lru.prev;
        unlink_win(r, slot(r, w->ino, w->start));
    }
}

static int fresh(const struct cf_rc *r, const struct win *w)
{
    return w->gen == r->gen[bucket(w->ino)] && w->epoch == r->epoch;
}

/* d counts ino's fetches under the same lease as plan. */
static int dens_of(const struct dens *d, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    return d->ino == ino && d->gen == plan->gen && d->epoch == plan->epoch;
}

/* Window number n of a file: stored into the page cache, as far as is
 * known here. */
static int covered(const struct dens *d, uint64_t n)
{
    return n < COVER_BITS && (d->cover[n / 8] >> (n % 8) & 1);
}

/* Under the lock: nothing changed ino's windows since plan was made. */
static int plan_current(const struct cf_rc *r, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    return r->pages && plan->gen == r->gen[bucket(ino)] && plan->epoch == r->epoch;
}

int cf_rc_init(struct cf *cf)
{
    struct cf_rc *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->landed, NULL);
    r->lru.prev = r->lru.next = &r->lru;
    cf->rc = r;
    return 0;
}

static void clear(struct cf_rc *r)
{
    for (int i = 0; i < HASH; i++)
        while (r->hash[i])
            unlink_win(r, &r->hash[i]);
}

void cf_rc_free(struct cf *cf)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    clear(r);
    pthread_cond_destroy(&r->landed);
    pthread_mutex_destroy(&r->lock);
    free(r);
    cf->rc = NULL;
}

void cf_rc_configure(struct cf *cf, int on, int pages, size_t max)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->pages = on ? pages : 0;
    r->max = max;
    if (!r->pages)
        clear(r);
    evict(r);
    pthread_mutex_unlock(&r->lock);
}

void cf_rc_changed(struct cf *cf, fuse_ino_t ino)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    unsigned b = bucket(ino);
    pthread_mutex_lock(&r->lock);
    r->gen[b]++;
    for (struct win *w; (w = r->by_bucket[b]);)
        unlink_win(r, slot(r, w->ino, w->start));
    pthread_mutex_unlock(&r->lock);
}

void cf_rc_forget_all(struct cf *cf)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    r->epoch++;
    clear(r);
    pthread_mutex_unlock(&r->lock);
}

int cf_rc_current(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    int ok = plan_current(r, ino, plan);
    pthread_mutex_unlock(&r->lock);
    return ok;
}

int cf_rc_read(struct cf *cf, fuse_ino_t ino, int open_flags, uint64_t off, size_t size, char *out,
               size_t *n, struct cf_rc_window *plan)
{
    struct cf_rc *r = cf->rc;
    if (!r || (open_flags & O_DIRECT) || !cf_known_is_leased(cf, ino))
        return 0;
    pthread_mutex_lock(&r->lock);
    size_t win = (size_t)r->pages * UNIT;
    if (!win || size >= win || off % win + size > win) {
        pthread_mutex_unlock(&r->lock);
        return 0; /* off, or a read the window does not contain */
    }
    uint64_t start = off - off % win;
    struct win **pp = slot(r, ino, start), *w = *pp;
    if (w && fresh(r, w) && (w->len == win || off + size <= start + w->len)) {
        /* a window cut short by the end of the file holds what it holds */
        size_t from = (size_t)(off - start);
        *n = from < w->len ? (w->len - from < size ? w->len - from : size) : 0;
        memcpy(out, w->data + from, *n);
        w->prev->next = w->next; /* most recently used */
        w->next->prev = w->prev;
        w->next = r->lru.next;
        w->prev = &r->lru;
        r->lru.next->prev = w;
        r->lru.next = w;
        r->hits++;
        pthread_mutex_unlock(&r->lock);
        return 1;
    }
    plan->start = start;
    plan->len = win;
    plan->gen = r->gen[bucket(ino)];
    plan->epoch = r->epoch;
    r->misses++;
    pthread_mutex_unlock(&r->lock);
    return 2;
}

void cf_rc_fill(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan, const char *data,
                size_t len)
{
    struct cf_rc *r = cf->rc;
    if (!r || len > plan->len || !cf_known_is_leased(cf, ino))
        return;
    struct win *w = malloc(sizeof(*w) + len);
    if (!w)
        return;
    w->ino = ino;
    w->start = plan->start;
    w->gen = plan->gen;
    w->epoch = plan->epoch;
    w->len = len;
    memcpy(w->data, data, len);
    pthread_mutex_lock(&r->lock);
    struct win **pp = slot(r, ino, plan->start);
    if (!fresh(r, w) || len > r->max || (size_t)r->pages * UNIT != plan->len) {
        pthread_mutex_unlock(&r->lock); /* changed while it was read */
        free(w);
        return;
    }
    if (*pp)
        unlink_win(r, pp); /* *pp is now the rest of the chain */
    w->hnext = *pp;
    *pp = w;
    struct win **bl = &r->by_bucket[bucket(ino)];
    if ((w->bnext = *bl))
        w->bnext->bpp = &w->bnext;
    *bl = w;
    w->bpp = bl;
    w->next = r->lru.next;
    w->prev = &r->lru;
    r->lru.next->prev = w;
    r->lru.next = w;
    r->bytes += len;
    r->fetched += len;
    struct dens *d = &r->dens[bucket(ino) % DENS];
    if (!dens_of(d, ino, plan))
        *d = (struct dens){.ino = ino, .gen = plan->gen, .epoch = plan->epoch, .eof = UINT64_MAX};
    d->fetched++;
    if (len < plan->len && plan->start + len < d->eof)
        d->eof = plan->start + len;
    evict(r);
    pthread_mutex_unlock(&r->lock);
}

/* Under the lock: a fresh window of ino at start is held. */
static int held(struct cf_rc *r, fuse_ino_t ino, uint64_t start)
{
    struct win *w = *slot(r, ino, start);
    return w && fresh(r, w);
}

/* Under the lock: ino's window at start was fetched under d's lease. */
static int known(struct cf_rc *r, const struct dens *d, fuse_ino_t ino, uint64_t start)
{
    return held(r, ino, start) || covered(d, start / ((size_t)r->pages * UNIT));
}

/* Under the lock: the slot of the read ahead of ino at start, or -1. */
static int fly_slot(const struct cf_rc *r, fuse_ino_t ino, uint64_t start)
{
    for (int i = 0; i < AHEAD_FLY; i++)
        if (r->fly[i].ino == ino && r->fly[i].start == start)
            return i;
    return -1;
}

static int flying(const struct cf_rc *r, fuse_ino_t ino, uint64_t start)
{
    return fly_slot(r, ino, start) >= 0;
}

static int closing(const struct cf_rc *r, uint64_t fh)
{
    for (int i = 0; i < r->nclosing; i++)
        if (r->closing[i] == fh)
            return 1;
    return 0;
}

int cf_rc_ahead_plan(struct cf *cf, fuse_ino_t ino, uint64_t fh, const struct cf_rc_window *miss,
                     const struct cf_rc_window *landed, struct cf_rc_window *out)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    const struct cf_rc_window *from = landed ? landed : miss;
    const struct dens *d = &r->dens[bucket(ino) % DENS];
    uint64_t win = from->len, start = from->start;
    /* a landed window's slot is handed on to the next window, or freed
     * below: its handle never looks idle in between */
    int mine = landed ? fly_slot(r, ino, start) : -1, n = 0;
    if (!dens_of(d, ino, from) || d->fetched < AHEAD_MIN || (size_t)r->pages * UNIT != win ||
        !plan_current(r, ino, from) || closing(r, fh) ||
        !(landed || (start >= win && known(r, d, ino, start - win)) ||
          known(r, d, ino, start + win)))
        goto out;
    for (int k = 1; k <= AHEAD_SCAN && n < AHEAD_N; k++) {
        uint64_t s = start + (uint64_t)k * win;
        /* a sweep stops where stored windows are no longer remembered */
        if (s >= d->eof || (landed && s / win >= COVER_BITS))
            break;
        if (held(r, ino, s) || flying(r, ino, s) || covered(d, s / win))
            continue;
        int i = mine;
        if (i >= 0)
            mine = -1;
        else
            for (i = 0; i < AHEAD_FLY && r->fly[i].ino;)
                i++;
        if (i == AHEAD_FLY)
            break;
        r->fly[i] = (struct fly){
            .ino = ino, .start = s, .len = win, .fh = fh, .gen = from->gen, .epoch = from->epoch};
        out[n++] =
            (struct cf_rc_window){.start = s, .len = win, .gen = from->gen, .epoch = from->epoch};
    }
    r->ahead += (uint64_t)n;
out:
    if (mine >= 0) {
        r->fly[mine].ino = 0;
        pthread_cond_broadcast(&r->landed);
    }
    pthread_mutex_unlock(&r->lock);
    return n;
}

void cf_rc_stored(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    struct dens *d = &r->dens[bucket(ino) % DENS];
    uint64_t n = plan->start / plan->len;
    if (dens_of(d, ino, plan) && plan_current(r, ino, plan) && n < COVER_BITS)
        d->cover[n / 8] |= (uint8_t)(1u << (n % 8));
    pthread_mutex_unlock(&r->lock);
}

void cf_rc_opened(struct cf *cf, fuse_ino_t ino)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    struct dens *d = &r->dens[bucket(ino) % DENS];
    if (d->ino == ino)
        memset(d->cover, 0, sizeof(d->cover));
    pthread_mutex_unlock(&r->lock);
}

int cf_rc_wait_ahead(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *miss,
                     struct cf_rc_waiter *w)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    int i = fly_slot(r, ino, miss->start);
    /* the same window: a change of the window's size leaves the start */
    int ok = i >= 0 && !r->fly[i].landed && r->fly[i].len == miss->len &&
             r->fly[i].gen == miss->gen && r->fly[i].epoch == miss->epoch &&
             plan_current(r, ino, miss);
    if (ok) {
        w->next = r->fly[i].waiters;
        r->fly[i].waiters = w;
        r->waited++;
    }
    pthread_mutex_unlock(&r->lock);
    return ok;
}

struct cf_rc_waiter *cf_rc_landed(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    struct cf_rc *r = cf->rc;
    pthread_mutex_lock(&r->lock);
    struct cf_rc_waiter *w = NULL;
    int i = fly_slot(r, ino, plan->start);
    if (i >= 0) {
        r->fly[i].landed = 1;
        w = r->fly[i].waiters;
        r->fly[i].waiters = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    return w;
}

void cf_rc_ahead_done(struct cf *cf, fuse_ino_t ino, const struct cf_rc_window *plan)
{
    struct cf_rc *r = cf->rc;
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < AHEAD_FLY; i++)
        if (r->fly[i].ino == ino && r->fly[i].start == plan->start) {
            r->fly[i].ino = 0;
            break;
        }
    pthread_cond_broadcast(&r->landed);
    pthread_mutex_unlock(&r->lock);
}

void cf_rc_release_wait(struct cf *cf, uint64_t fh)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    int marked = 0;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < AHEAD_FLY && !busy; i++)
            busy = r->fly[i].ino && r->fly[i].fh == fh;
        if (!busy)
            break;
        /* at most AHEAD_FLY handles have reads in flight, so there is room */
        if (!marked && r->nclosing < AHEAD_FLY) {
            r->closing[r->nclosing++] = fh; /* a landing read starts no next one */
            marked = 1;
        }
        pthread_cond_wait(&r->landed, &r->lock);
    }
    for (int i = 0; marked && i < r->nclosing; i++)
        if (r->closing[i] == fh) {
            r->closing[i] = r->closing[--r->nclosing];
            break;
        }
    pthread_mutex_unlock(&r->lock);
}

size_t cf_rc_format(struct cf *cf, char *buf, size_t n)
{
    struct cf_rc *r = cf->rc;
    int len = 0;
    if (r) {
        pthread_mutex_lock(&r->lock);
        len = snprintf(buf, n,
                       "FUSE read cache: %llu reads answered, %llu bytes fetched, %zu of %zu "
                       "bytes held (window %d KiB), %llu windows read ahead, %llu reads "
                       "waited for one\n",
                       (unsigned long long)r->hits, (unsigned long long)r->fetched, r->bytes,
                       r->max, r->pages * (int)(UNIT / 1024), (unsigned long long)r->ahead,
                       (unsigned long long)r->waited);
        pthread_mutex_unlock(&r->lock);
    }
    return cf_fmt_len(len, n);
}

void cf_rc_report(struct cf *cf, struct rpc_buf *b)
{
    struct cf_rc *r = cf->rc;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    uint64_t hits = r->hits, misses = r->misses, bytes = r->bytes;
    pthread_mutex_unlock(&r->lock);
    cf_put_counter(b, "read_cache_hits", hits);
    cf_put_counter(b, "read_cache_misses", misses);
    cf_put_counter(b, "read_cache_bytes", bytes);
}
