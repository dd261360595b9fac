/* Leases: which client connections cache what, and recalling them before a
 * change by another client is answered (docs/consistency.md).
 *
 * Exclusive leases: a new directory is its creator's (asked with MKDIR),
 * and a file opened for writing is its opener's (asked with OPEN or
 * CREATE) while no other connection has it open; the holder writes behind
 * under it. Another connection's request reaching such a path (or listing
 * the directory of such a file) is held until the lease is returned
 * (brick_lease_admit); no exclusive lease on that path is granted then
 * for LEASE_COOLDOWN_MS after a change, LEASE_LOOK_COOLDOWN_MS after a
 * look (park). A file's lease is shared again when its
 * holder's last handle of it closes.
 *
 * A lease is keyed by a request path. It covers the object's attributes and
 * extended attributes and, for a directory, its entries (so a client may
 * cache both the positive and the negative result of a lookup in it). A
 * request with LEASE asks for leases on PATH and on its parent (READDIR: the
 * directory and each entry listed); they are registered before the request
 * reads anything, so a change applied later finds them and recalls them.
 * The reply says which were granted (RPC_LEASE_NAME: the parent's too).
 *
 * A change (after it is applied) recalls the leases of every other
 * connection on the paths it touches and holds its own reply until each
 * holder has answered with LEASE_RETURN, or until the recall timeout passes
 * (the holder loses its lease, and a warning is logged). Waiting never
 * blocks a thread: the reply is parked and sent by whoever resolves the last
 * recall (a RETURN, a closed connection, or the timer).
 *
 * The requester's own lease on a path another connection also holds is
 * dropped, with a recall the requester is not waited for: two clients that
 * both change one directory then never wait for each other's recalls, which
 * could otherwise deadlock through the kernels' directory locks. After a
 * conflict no lease on that path is granted for LEASE_COOLDOWN_MS, so
 * clients sharing a directory stop caching it instead of recalling on every
 * change; the files in it keep their own leases. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../rpc/opinfo.h"
#include "../lib/statedump.h"
#include "brick.h"
#include "lease_table.h"

#define LEASE_COOLDOWN_MS 1000
/* After a look held for an exclusive holder's recall, no exclusive lease on
 * that path for this long: the looker caches what it was shown, and a
 * writer that still has the file open takes it back soon after (it asks
 * again while writing, docs/consistency.md, "Write-behind in a shared
 * directory"). Shorter than the interval of a lister's loop (`ls` every
 * second), or the writer would never get it back. */
#define LEASE_LOOK_COOLDOWN_MS 250
#define LEASE_RECALL_MS_DEFAULT 5000
/* Paths tracked at most; beyond, no new leases are granted. */
#define LEASE_MAX_PATHS (1u << 20)
#define XDIRS 1024

struct lease_wait;

/* A request of another connection held until an exclusive lease is
 * returned (it is run then, by the server's runner). */
struct parked {
    struct parked *next;
    struct brick_conn *bc; /* a reference */
    struct rpc_frame *f;
};

struct lease_wait {
    struct brick_conn *bc; /* a reference */
    uint16_t opcode;
    uint64_t reqid;
    int rc, ready, pending;
    int abandoned; /* the request answered by itself: free at pending 0 */
    struct rpc_buf out;
    char text[256];
};

/* What resolving holders released: replies to send and requests to run,
 * once the table lock is dropped (resolved_run). */
struct resolved {
    struct lease_wait **w;
    int n;
    struct parked *p, **p_tail;
};

#define RESOLVED_INIT(r)                                                                           \
    {                                                                                              \
        .w = NULL, .n = 0, .p = NULL, .p_tail = &(r).p                                             \
    }

struct brick_leases {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct brick_ltab t;
    uint64_t seq; /* changes seen, for READDIR grants */
    int n_excl;   /* exclusive holders (read without the lock as a hint) */
    /* Exclusive leases on files, counted by a hash of their directory: a
     * listing of one by another connection recalls them first. */
    unsigned xdirs[XDIRS];
    brick_lease_runner runner;
    int recall_ms;
    int stop;
    pthread_t timer;
};

/* A recall to send once the table lock is dropped. */
struct recall {
    struct brick_conn *bc; /* a reference */
    char *path;
    char name[NAME_MAX + 1];
};

struct recalls {
    struct recall *v;
    int n, cap;
    struct resolved res; /* own leases dropped by a conflict */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void wait_free(struct lease_wait *w)
{
    rpc_buf_free(&w->out);
    brick_conn_put(w->bc);
    free(w);
}

static void wait_send(struct lease_wait *w)
{
    if (w->abandoned) {
        wait_free(w);
        return;
    }
    brick_send_reply(w->bc, w->opcode, w->reqid, w->rc, &w->out, w->text);
    rpc_buf_free(&w->out);
    brick_conn_put(w->bc);
    free(w);
}

/* h's lease is shared from now on. Under L->lock. */
static void unexcl(struct brick_leases *L, struct holder *h)
{
    if (h->excl) {
        h->excl = 0;
        L->n_excl--;
    }
    if (h->xdir) {
        L->xdirs[h->xdir - 1]--;
        h->xdir = 0;
    }
}

/* One holder is resolved: its waits lose one pending recall (complete ones
 * go to res), and the requests parked on it go to res. Under L->lock. */
/* w waits for one thing fewer; a complete wait goes to res. Under L->lock. */
static void wait_less(struct lease_wait *w, struct resolved *res)
{
    if (--w->pending == 0 && (w->ready || w->abandoned)) {
        struct lease_wait **d = realloc(res->w, (size_t)(res->n + 1) * sizeof(*d));
        if (d) {
            res->w = d;
            d[res->n++] = w;
        }
    }
}

static void holder_resolve(struct brick_leases *L, struct holder *h, struct resolved *res)
{
    for (int i = 0; i < h->n_waits; i++)
        wait_less(h->waits[i], res);
    free(h->waits);
    h->waits = NULL;
    h->n_waits = h->cap_waits = 0;
    if (h->parked) {
        *res->p_tail = h->parked;
        while (*res->p_tail)
            res->p_tail = &(*res->p_tail)->next;
        h->parked = NULL;
    }
    unexcl(L, h);
}

/* Holder i of l is gone; l goes at the reap if nothing else holds it. */
static void holder_remove(struct brick_leases *L, struct lease *l, int i, struct resolved *res)
{
    if (l->h[i].recalling) { /* returned, revoked, or its connection ended */
        uint64_t now = now_ms();
        brick_stats_count(BRICK_C_LEASE_RECALLS_ENDED, 1);
        brick_stats_count(BRICK_C_LEASE_RECALL_MS,
                          now > l->h[i].recalled_ms ? now - l->h[i].recalled_ms : 0);
    }
    holder_resolve(L, &l->h[i], res);
    l->h[i] = l->h[--l->n];
    if (l->n == 0)
        brick_ltab_put(&L->t, l);
}

/* Nodes that became unused are freed before the lock is dropped, when no
 * loop over them is running. */
static void unlock(struct brick_leases *L)
{
    if (L->t.reap)
        brick_ltab_reap(&L->t, now_ms());
    pthread_mutex_unlock(&L->lock);
}

static void resolved_run(struct brick *b, struct resolved *res)
{
    for (int i = 0; i < res->n; i++)
        wait_send(res->w[i]);
    free(res->w);
    brick_lease_runner run = NULL;
    if (b->leases) {
        pthread_mutex_lock(&b->leases->lock);
        run = b->leases->runner;
        unlock(b->leases);
    }
    for (struct parked *p = res->p, *nx; p; p = nx) {
        nx = p->next;
        if (run) {
            run(b, p->bc, p->f);
        } else {
            rpc_frame_free(p->f);
            brick_conn_put(p->bc);
        }
        free(p);
    }
}

/* l is for the timer to watch (a cool-down, a recall); it wakes for the
 * first. Under L->lock. */
static void watch(struct brick_leases *L, struct lease *l)
{
    if (brick_ltab_watch(&L->t, l))
        pthread_cond_broadcast(&L->cond);
}

/* No lease on l's path is granted for LEASE_COOLDOWN_MS after a change by
 * connection `by`, except `by`'s exclusive lease on a file (grant_file).
 * Under L->lock. */
static void cool(struct brick_leases *L, struct lease *l, const struct brick_conn *by, uint64_t now)
{
    l->cooldown_until_ms = now + LEASE_COOLDOWN_MS;
    l->shared_ok = 0;
    l->cool_by = by;
    watch(L, l);
}

/* No exclusive lease on l's path for LEASE_LOOK_COOLDOWN_MS (a shared one
 * is still granted, unless the path cools down entirely already, which
 * this does not cut short). Under L->lock. */
static void cool_excl(struct brick_leases *L, struct lease *l, uint64_t now)
{
    if (l->cooldown_until_ms <= now) {
        l->shared_ok = 1;
        l->cool_by = NULL;
    }
    l->excl_until_ms = now + LEASE_LOOK_COOLDOWN_MS;
    if (l->cooldown_until_ms < l->excl_until_ms)
        l->cooldown_until_ms = l->excl_until_ms;
    watch(L, l);
}

/* Looks at l for the timer: recalls past their deadline are revoked (their
 * holders removed, into res); l leaves the timed list when nothing of it
 * is timed any more. The next deadline of l lowers *next. */
static void timer_check(struct brick_leases *L, struct lease *l, uint64_t now, uint64_t *next,
                        struct resolved *res)
{
    int timed = l->cooldown_until_ms > now;
    if (timed && l->cooldown_until_ms < *next)
        *next = l->cooldown_until_ms;
    for (int i = 0; i < l->n; i++) {
        struct holder *h = &l->h[i];
        if (!h->recalling)
            continue;
        if (h->deadline_ms > now) {
            timed = 1;
            if (h->deadline_ms < *next)
                *next = h->deadline_ms;
            continue;
        }
        log_warn("client %s did not return its lease on %s within %d ms: revoked", h->bc->peer,
                 l->path, L->recall_ms);
        brick_stats_count(BRICK_C_LEASE_REVOCATIONS, 1);
        holder_remove(L, l, i, res);
        i--;
    }
    if (!timed)
        brick_ltab_unwatch(&L->t, l); /* freed at the reap if unused */
}

static void *timer_main(void *arg)
{
    struct brick *b = arg;
    struct brick_leases *L = b->leases;
    pthread_mutex_lock(&L->lock);
    while (!L->stop) {
        brick_ltab_reap(&L->t, now_ms());
        if (!L->t.timed) {
            pthread_cond_wait(&L->cond, &L->lock);
            continue;
        }
        uint64_t now = now_ms(), next = now + 1000;
        struct resolved res = RESOLVED_INIT(res);
        for (struct lease *l = L->t.timed, *nl; l; l = nl) {
            nl = l->t_next; /* nothing is freed before the reap */
            timer_check(L, l, now, &next, &res);
        }
        if (res.n || res.p) {
            unlock(L);
            resolved_run(b, &res);
            pthread_mutex_lock(&L->lock);
            continue;
        }
        brick_ltab_reap(&L->t, now);
        struct timespec ts;
        net_deadline(&ts, CLOCK_MONOTONIC, next > now ? next - now : 1);
        pthread_cond_timedwait(&L->cond, &L->lock, &ts);
    }
    unlock(L);
    return NULL;
}

int brick_leases_init(struct brick *b)
{
    struct brick_leases *L = calloc(1, sizeof(*L));
    if (!L)
        return -ENOMEM;
    int rc = brick_ltab_init(&L->t, LEASE_MAX_PATHS);
    L->recall_ms = LEASE_RECALL_MS_DEFAULT;
    net_cond_init_mono(&L->cond);
    pthread_mutex_init(&L->lock, NULL);
    b->leases = L;
    if (rc < 0 || pthread_create(&L->timer, NULL, timer_main, b) != 0) {
        brick_ltab_fini(&L->t);
        pthread_cond_destroy(&L->cond);
        pthread_mutex_destroy(&L->lock);
        free(L);
        b->leases = NULL;
        return -ENOMEM;
    }
    return 0;
}

void brick_leases_fini(struct brick *b)
{
    struct brick_leases *L = b->leases;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    L->stop = 1;
    pthread_cond_broadcast(&L->cond);
    unlock(L);
    pthread_join(L->timer, NULL);
    struct resolved res = RESOLVED_INIT(res);
    for (size_t k = 0; k < L->t.nb; k++)
        for (struct lease *l = L->t.b[k]; l; l = l->next) {
            for (int i = 0; i < l->n; i++)
                holder_resolve(L, &l->h[i], &res);
            l->n = 0;
        }
    brick_ltab_fini(&L->t);
    L->runner = NULL; /* parked requests are dropped with the brick */
    resolved_run(b, &res);
    pthread_cond_destroy(&L->cond);
    pthread_mutex_destroy(&L->lock);
    free(L);
    b->leases = NULL;
}

void brick_lease_set_runner(struct brick *b, brick_lease_runner run)
{
    struct brick_leases *L = b->leases;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    L->runner = run;
    unlock(L);
}

void brick_lease_set_recall_timeout(struct brick *b, int ms)
{
    struct brick_leases *L = b->leases;
    if (!L || ms <= 0)
        return;
    pthread_mutex_lock(&L->lock);
    L->recall_ms = ms;
    unlock(L);
}

/* ---- paths of a request ---- */

static int bytes_path(const struct rpc_bytes *p, const char **s, size_t *len)
{
    if (!p->p || p->len == 0 || p->p[0] != '/')
        return 0;
    *s = (const char *)p->p;
    *len = p->len;
    return 1;
}

/* ---- granting ---- */

static int holds(const struct lease *l, const struct brick_conn *bc)
{
    for (int i = 0; i < l->n; i++)
        if (l->h[i].bc == bc)
            return i;
    return -1;
}

/* Registers bc on path; 0, or -EAGAIN while the path cools down after a
 * conflict (unless past_cool), -ENOMEM. Under L->lock. */
static int grant_one_as(struct brick_leases *L, struct brick_conn *bc, const char *p, size_t len,
                        uint64_t now, int past_cool)
{
    struct lease *l = brick_ltab_find_or_add(&L->t, p, len);
    if (!l)
        return -ENOSPC;
    if (l->cooldown_until_ms > now && !l->shared_ok && !past_cool)
        return -EAGAIN;
    int i = holds(l, bc);
    if (i >= 0)
        return l->h[i].recalling ? -EAGAIN : 0;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 2;
        struct holder *h = realloc(l->h, (size_t)cap * sizeof(*h));
        if (!h) {
            if (l->n == 0)
                brick_ltab_put(&L->t, l);
            return -ENOMEM;
        }
        l->h = h;
        l->cap = cap;
    }
    l->h[l->n++] = (struct holder){.bc = bc};
    brick_stats_count(BRICK_C_LEASE_GRANTS, 1);
    return 0;
}

static int grant_one(struct brick_leases *L, struct brick_conn *bc, const char *p, size_t len,
                     uint64_t now)
{
    return grant_one_as(L, bc, p, len, now, 0);
}

void brick_lease_pre(struct brick_req *r)
{
    struct brick_leases *L = r->b->leases;
    r->lease_ok = 0;
    r->lease_name = 0;
    if (!L || !r->bc->rc || !rpc_has(r->in, RPC_T_LEASE) || !(r->in->lease & RPC_LEASE_READ) ||
        !rpc_op_is(r->opcode, RPC_OPF_LEASE))
        return;
    const struct rpc_bytes *pb = r->opcode == RPC_OP_LINK ? &r->in->path2 : &r->in->path;
    const char *p;
    size_t len;
    if (!bytes_path(pb, &p, &len))
        return;
    uint64_t now = now_ms();
    pthread_mutex_lock(&L->lock);
    r->lease_seq = L->seq;
    r->lease_excl = 0;
    int rc = grant_one(L, r->bc, p, len, now);
    /* A new directory is the creator's alone. */
    if (rc == 0 && r->opcode == RPC_OP_MKDIR && (r->in->lease & RPC_LEASE_EXCL)) {
        struct lease *l = brick_ltab_find(&L->t, p, len);
        if (l && l->n == 1 && l->h[0].bc == r->bc && !l->h[0].excl && l->cooldown_until_ms <= now) {
            l->h[0].excl = 1;
            L->n_excl++;
            r->lease_excl = 1;
        } else if (l && l->n == 1 && l->h[0].bc == r->bc) {
            /* Still this client's alone from a directory of that name it
             * removed (a removal does not end the lease on the path). */
            r->lease_excl = 1;
        }
    }
    /* The parent's lease covers the name (an entry the client caches);
     * attributes and extended attributes need the object's alone. A parent
     * cooling down after a conflict leaves the object's lease standing: its
     * attributes and data are still cached, its name is not. */
    int parent = rpc_op_is(r->opcode, RPC_OPF_LEASE_PARENT);
    size_t pl = brick_ltab_parent_len(p, len);
    /* The root of a directory mount has no parent its client can name,
     * nor could it return a lease on one (confine.c). */
    int name =
        rc == 0 &&
        (!parent || (brick_confine_inside(r->bc, p, pl) && grant_one(L, r->bc, p, pl, now) == 0));
    unlock(L);
    r->lease_ok = rc == 0;
    r->lease_name = name;
}

/* READDIR: a lease on each entry listed, granted only when nothing changed
 * on the brick while the directory was read (a change to an entry between
 * its stat and its registration would otherwise go unrecalled). */
static int grant_entries(struct brick_req *r, const char *dir, size_t dlen)
{
    struct brick_leases *L = r->b->leases;
    struct rpc_iter it;
    struct rpc_field f;
    char path[PATH_MAX];
    uint64_t now = now_ms();
    int ok = 1;
    pthread_mutex_lock(&L->lock);
    rpc_iter_init(&it, r->out->data, r->out->len);
    while (ok && rpc_iter_next(&it, &f) > 0) {
        if (f.tag != RPC_T_DIRENT)
            continue;
        struct rpc_iter in;
        struct rpc_field g;
        rpc_iter_init(&in, f.val, f.len);
        while (rpc_iter_next(&in, &g) > 0) {
            if (g.tag != RPC_T_NAME)
                continue;
            if ((g.len == 1 && g.val[0] == '.') || (g.len == 2 && !memcmp(g.val, "..", 2)))
                break;
            size_t base = dlen == 1 ? 0 : dlen;
            if (base + 1 + g.len >= sizeof(path)) {
                ok = 0;
                break;
            }
            memcpy(path, dir, base);
            path[base] = '/';
            memcpy(path + base + 1, g.val, g.len);
            ok = grant_one(L, r->bc, path, base + 1 + g.len, now) == 0;
            break;
        }
    }
    if (L->seq != r->lease_seq)
        ok = 0;
    unlock(L);
    return ok;
}

/* ---- recalls ---- */

static void add_recall(struct recalls *rs, struct brick_conn *bc, const char *path,
                       const char *name, size_t name_len)
{
    if (!bc->rc)
        return;
    if (rs->n == rs->cap) {
        int cap = rs->cap ? rs->cap * 2 : 4;
        struct recall *v = realloc(rs->v, (size_t)cap * sizeof(*v));
        if (!v)
            return;
        rs->v = v;
        rs->cap = cap;
    }
    struct recall *c = &rs->v[rs->n];
    if (!(c->path = strdup(path)))
        return;
    if (name_len > NAME_MAX)
        name_len = 0;
    memcpy(c->name, name, name_len);
    c->name[name_len] = 0;
    c->bc = bc;
    brick_conn_get(bc);
    rs->n++;
}

static struct lease_wait *wait_of(struct brick_req *r)
{
    struct brick_req *top = r->top ? r->top : r;
    if (!top->lease_wait) {
        struct lease_wait *w = calloc(1, sizeof(*w));
        if (!w)
            return NULL;
        rpc_buf_init(&w->out);
        w->bc = top->bc;
        brick_conn_get(w->bc);
        w->opcode = top->opcode;
        w->reqid = top->reqid;
        top->lease_wait = w;
    }
    return top->lease_wait;
}

/* Recalls the leases of every connection but r's on l; r's reply waits
 * until they are returned. Under L->lock. */
static void recall_others(struct brick_leases *L, struct brick_req *r, struct lease *l,
                          const char *name, size_t name_len, struct recalls *rs, uint64_t now)
{
    for (int i = 0; i < l->n; i++) {
        struct holder *h = &l->h[i];
        if (h->bc == r->bc)
            continue;
        if (!h->recalling) {
            h->recalling = 1;
            h->recalled_ms = now;
            h->deadline_ms = now + (uint64_t)L->recall_ms;
            add_recall(rs, h->bc, l->path, name, name_len);
            watch(L, l);
        }
        struct lease_wait *w = h->bc->rc ? wait_of(r) : NULL;
        if (!w)
            continue;
        if (h->n_waits == h->cap_waits) {
            int cap = h->cap_waits ? h->cap_waits * 2 : 2;
            struct lease_wait **v = realloc(h->waits, (size_t)cap * sizeof(*v));
            if (!v)
                continue;
            h->waits = v;
            h->cap_waits = cap;
        }
        h->waits[h->n_waits++] = w;
        w->pending++;
    }
}

/* The change by r touched lease l (an entry name of it when name_len > 0).
 * force: the requester's own lease goes too, even alone (a rename moves the
 * paths its lease names). Under L->lock. */
static void conflict(struct brick_leases *L, struct brick_req *r, struct lease *l, const char *name,
                     size_t name_len, int force, struct recalls *rs, uint64_t now)
{
    int self = holds(l, r->bc);
    int others = l->n - (self >= 0);
    if (others == 0 && !force)
        return;
    cool(L, l, r->bc, now);
    recall_others(L, r, l, name, name_len, rs, now);
    if (self >= 0) {
        add_recall(rs, r->bc, l->path, name, name_len);
        holder_resolve(L, &l->h[self], &rs->res);
        l->h[self] = l->h[--l->n];
    }
}

static void touch(struct brick_leases *L, struct brick_req *r, const char *p, size_t len,
                  const char *name, size_t name_len, struct recalls *rs, uint64_t now)
{
    struct lease *l = brick_ltab_find(&L->t, p, len);
    if (l)
        conflict(L, r, l, name, name_len, 0, rs, now);
}

/* Path p and everything under it: a rename moves them all (force: the
 * requester's leases go too), a tree's removal removes them. */
static void touch_tree(struct brick_leases *L, struct brick_req *r, const char *p, size_t len,
                       int force, struct recalls *rs, uint64_t now)
{
    struct lease *top = brick_ltab_find(&L->t, p, len);
    for (struct lease *l = top; l; l = brick_ltab_walk_next(top, l))
        if (l->n > 0 || l->cooldown_until_ms > now) /* not a bare placeholder */
            conflict(L, r, l, "", 0, force, rs, now);
}

static void touch_entry(struct brick_leases *L, struct brick_req *r, const char *p, size_t len,
                        struct recalls *rs, uint64_t now)
{
    size_t pl = brick_ltab_parent_len(p, len);
    size_t nstart = pl == 1 ? 1 : pl + 1;
    touch(L, r, p, pl, p + nstart, len - nstart, rs, now);
    touch(L, r, p, len, "", 0, rs, now);
}

static void send_recalls(struct brick *b, struct recalls *rs)
{
    for (int i = 0; i < rs->n; i++) {
        struct recall *c = &rs->v[i];
        struct rpc_buf body;
        rpc_buf_init(&body);
        /* A confined connection names paths from its directory; it holds
         * leases only inside it (brick_lease_pre). */
        const char *p = brick_confine_out(c->bc, c->path);
        rpc_put_str(&body, RPC_T_PATH, p ? p : c->path);
        if (c->name[0])
            rpc_put_str(&body, RPC_T_NAME, c->name);
        if (!p)
            log_warn("lease on %s held outside %s by %s: not recalled", c->path, c->bc->subdir,
                     c->bc->peer);
        else if (rpc_conn_notify(c->bc->rc, RPC_OP_LEASE_RECALL, &body) < 0)
            log_debug("lease recall of %s to %s not sent", c->path, c->bc->peer);
        else
            brick_stats_count(BRICK_C_LEASE_RECALLS, 1);
        rpc_buf_free(&body);
        brick_conn_put(c->bc);
        free(c->path);
    }
    free(rs->v);
    resolved_run(b, &rs->res);
}

static int changes(uint16_t op, const struct rpc_msg *in)
{
    if (op == RPC_OP_OPEN)
        return (in->flags & O_TRUNC) != 0;
    return rpc_op_is(op, RPC_OPF_CHANGE);
}

/* The attributes of the directory whose entries a change by r altered,
 * for the client's cache of them (it holds a lease on that directory). */
static void put_parent_attr(struct brick_req *r, const char *p, size_t len)
{
    size_t pl = brick_ltab_parent_len(p, len);
    struct brick_dent *dent = NULL;
    int fd = pl <= 1 ? r->b->root_fd : brick_dircache_get(r->b, p + 1, pl - 1, &dent);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        struct rpc_attr a;
        gfid_t none = {{0}};
        rpc_attr_from_stat(&a, &st, &none);
        rpc_put_attr(r->out, RPC_T_PATTR, &a);
    }
    if (dent)
        brick_dircache_put(r->b, dent);
}

/* An OPEN or CREATE asked for the file exclusively (RPC_LEASE_EXCL, for
 * its writes to be written behind): granted when the file has one link
 * (another name would reach it without a recall), no other connection has
 * it open or holds it exclusively, and it is not cooling down after a
 * conflict. Other connections' shared leases on it are recalled, and the
 * reply waits for them. 1 when r->bc holds it exclusively (now or
 * already). Under L->lock. */
static int grant_file(struct brick_leases *L, struct brick_req *r, const char *p, size_t len,
                      const struct stat *st, struct recalls *rs, uint64_t now)
{
    if (!S_ISREG(st->st_mode) || st->st_nlink != 1 ||
        brick_spare_opens_by(r->b, st->st_dev, st->st_ino, r->bc) <= 0)
        return 0;
    struct lease *l = brick_ltab_find(&L->t, p, len);
    /* A cool-down started by r->bc's own change (its write recalled the
     * lease of a client that listed the directory) does not stop it: the
     * others' leases are recalled below anyway, and nobody changed the
     * file but r->bc. */
    int own = l && l->cooldown_until_ms > now && l->cool_by == r->bc;
    if (l && ((l->cooldown_until_ms > now && !own) || l->excl_until_ms > now))
        return 0;
    for (int i = 0; l && i < l->n; i++)
        if (l->h[i].bc != r->bc && l->h[i].excl)
            return 0;
    if (grant_one_as(L, r->bc, p, len, now, own) != 0 || !(l = brick_ltab_find(&L->t, p, len)))
        return 0;
    struct holder *h = &l->h[holds(l, r->bc)];
    if (h->recalling)
        return 0;
    recall_others(L, r, l, "", 0, rs, now);
    if (!h->excl) {
        h->excl = 1;
        L->n_excl++;
        size_t slot = brick_ltab_hash(p, brick_ltab_parent_len(p, len)) % XDIRS;
        h->xdir = (unsigned)slot + 1;
        L->xdirs[slot]++;
        L->seq++; /* a listing in progress must not lease it */
    }
    return 1;
}

/* Whether bc holds the file at p exclusively; under L->lock. */
static int holds_file(struct brick_leases *L, const struct brick_conn *bc, const char *p,
                      size_t len)
{
    struct lease *l = brick_ltab_find(&L->t, p, len);
    int i = l ? holds(l, bc) : -1;
    return i >= 0 && l->h[i].xdir && !l->h[i].recalling;
}

/* After an OPEN or CREATE of r->bc made handle r->opened: when it may be
 * given (ask), the file's exclusive lease. A handle of a file its
 * connection holds exclusively keeps the path, to share the lease again
 * when the connection's last handle of the file closes; so does one whose
 * request asked for it (asked), granted or not: its client asks again
 * while it is open (an OPEN whose handle it closes at once), and this
 * handle's close must then share the lease again. 1 when held. */
static int open_excl(struct brick_leases *L, struct brick_req *r, const char *p, size_t len,
                     int ask, int asked)
{
    struct brick_fh *fh;
    struct stat st;
    if (!r->opened || (!asked && !__atomic_load_n(&L->n_excl, __ATOMIC_RELAXED)) ||
        brick_fh_get(r->bc, r->opened, 0, &fh) < 0)
        return 0;
    int ok = 0;
    char *copy = NULL;
    struct recalls rs = {.res = RESOLVED_INIT(rs.res)};
    if ((!ask || fstat(fh->fd, &st) == 0) && (copy = strndup(p, len)) != NULL) {
        pthread_mutex_lock(&L->lock);
        ok = ask ? grant_file(L, r, p, len, &st, &rs, now_ms()) : holds_file(L, r->bc, p, len);
        unlock(L);
    }
    send_recalls(r->b, &rs);
    if ((ok || asked) && !fh->xpath) {
        fh->xpath = copy;
        copy = NULL;
    }
    free(copy);
    brick_fh_put(r->bc, fh);
    return ok;
}

void brick_lease_file_closed(struct brick *b, const void *owner, const char *path, dev_t dev,
                             ino_t ino)
{
    struct brick_leases *L = b->leases;
    if (!L || brick_spare_opens_by(b, dev, ino, owner) > 0)
        return;
    size_t len = strlen(path);
    pthread_mutex_lock(&L->lock);
    struct lease *l = brick_ltab_find(&L->t, path, len);
    for (int i = 0; l && i < l->n; i++)
        if (l->h[i].bc == owner && l->h[i].xdir && !l->h[i].recalling)
            unexcl(L, &l->h[i]);
    unlock(L);
}

/* The exclusive holder other than bc of the lease on p, if any; under
 * L->lock. */
static struct holder *excl_other(struct brick_leases *L, const char *p, size_t len,
                                 const struct brick_conn *bc, struct lease **lp)
{
    struct lease *l = brick_ltab_find(&L->t, p, len);
    for (int i = 0; l && i < l->n; i++)
        if (l->h[i].excl && l->h[i].bc != bc) {
            *lp = l;
            return &l->h[i];
        }
    return NULL;
}

/* An OPEN by r->bc of a file another connection holds exclusively: only
 * when the two crossed (admission holds an OPEN until such a lease is
 * returned, and a grant needs no other connection to have the file open).
 * The holder's writes reach the brick before the reply. */
static void open_recall(struct brick_leases *L, struct brick_req *r, const char *p, size_t len)
{
    if (!__atomic_load_n(&L->n_excl, __ATOMIC_RELAXED))
        return;
    struct recalls rs = {.res = RESOLVED_INIT(rs.res)};
    struct lease *l = NULL;
    pthread_mutex_lock(&L->lock);
    if (excl_other(L, p, len, r->bc, &l))
        conflict(L, r, l, "", 0, 0, &rs, now_ms());
    unlock(L);
    send_recalls(r->b, &rs);
}

void brick_lease_post(struct brick_req *r, int rc)
{
    struct brick_leases *L = r->b->leases;
    if (!L || rc < 0 || rc == BRICK_DEFERRED)
        return;
    const struct rpc_msg *in = r->in;
    const char *p = NULL, *p2 = NULL;
    size_t len = 0, len2 = 0;
    int has1 = bytes_path(&in->path, &p, &len);
    int has2 = bytes_path(&in->path2, &p2, &len2);
    if (r->lease_ok && r->opcode == RPC_OP_READDIR && has1)
        r->lease_ok = grant_entries(r, p, len);
    if (has1 && (r->opcode == RPC_OP_OPEN || r->opcode == RPC_OP_CREATE)) {
        /* A CREATE's own lease on the file is enough: its parent's may be
         * cooling down, or dropped by this very create's conflict with
         * another client listing the directory (docs/consistency.md,
         * "Write-behind in a shared directory"). Admission holds whatever
         * reaches the file by its path or lists its directory. */
        int asked = rpc_has(in, RPC_T_LEASE) && (in->lease & RPC_LEASE_EXCL);
        int ask = asked && (r->opcode == RPC_OP_OPEN || r->lease_ok);
        if (open_excl(L, r, p, len, ask, asked) && ask) {
            r->lease_excl = 1;
            r->lease_ok = 1;
        }
    }
    int name = r->lease_name || !rpc_op_is(r->opcode, RPC_OPF_LEASE_PARENT);
    if (r->lease_ok)
        rpc_put_u64(r->out, RPC_T_LEASE,
                    RPC_LEASE_READ | (r->lease_excl ? RPC_LEASE_EXCL : 0) |
                        (name ? RPC_LEASE_NAME : 0));
    if (r->lease_ok && name) {
        /* not for MAKE_FILE: the client made the file in its own cache,
         * directory attributes included, before it sent it */
        switch (r->opcode) {
        case RPC_OP_CREATE:
        case RPC_OP_MKDIR:
        case RPC_OP_MKNOD:
        case RPC_OP_SYMLINK:
        case RPC_OP_UNLINK:
        case RPC_OP_RMDIR:
            if (has1)
                put_parent_attr(r, p, len);
            break;
        case RPC_OP_LINK:
            if (has2)
                put_parent_attr(r, p2, len2);
            break;
        default:
            break;
        }
    }
    if (r->opcode == RPC_OP_OPEN && has1 && !changes(r->opcode, in)) {
        open_recall(L, r, p, len);
        return;
    }
    if (!changes(r->opcode, in))
        return;
    struct recalls rs = {.res = RESOLVED_INIT(rs.res)};
    uint64_t now = now_ms();
    pthread_mutex_lock(&L->lock);
    L->seq++;
    if (L->t.count > 0) {
        switch (r->opcode) {
        case RPC_OP_CREATE:
        case RPC_OP_MAKE_FILE:
        case RPC_OP_MKDIR:
        case RPC_OP_MKNOD:
        case RPC_OP_SYMLINK:
        case RPC_OP_UNLINK:
        case RPC_OP_RMDIR:
            if (has1)
                touch_entry(L, r, p, len, &rs, now);
            if (has1 && r->opcode == RPC_OP_RMDIR && rpc_has(in, RPC_T_DATA))
                touch_tree(L, r, p, len, 0, &rs, now); /* a tree went with it */
            break;
        case RPC_OP_LINK:
            if (has1)
                touch(L, r, p, len, "", 0, &rs, now);
            if (has2)
                touch_entry(L, r, p2, len2, &rs, now);
            break;
        case RPC_OP_RENAME:
            if (has1) {
                touch_entry(L, r, p, len, &rs, now);
                touch_tree(L, r, p, len, 1, &rs, now);
            }
            if (has2) {
                touch_entry(L, r, p2, len2, &rs, now);
                touch_tree(L, r, p2, len2, 1, &rs, now);
            }
            break;
        default:
            if (has1)
                touch(L, r, p, len, "", 0, &rs, now);
            break;
        }
    }
    unlock(L);
    send_recalls(r->b, &rs);
}

int brick_lease_defer(struct brick_req *r, int rc)
{
    struct brick_leases *L = r->b->leases;
    struct lease_wait *w = r->lease_wait;
    if (!w)
        return rc;
    r->lease_wait = NULL;
    pthread_mutex_lock(&L->lock);
    w->rc = rc;
    w->ready = 1;
    if (rc != BRICK_DEFERRED && w->pending > 0) {
        rpc_buf_put(&w->out, r->out->data, r->out->len);
        snprintf(w->text, sizeof(w->text), "%s", r->text);
        unlock(L);
        return BRICK_DEFERRED;
    }
    /* Every recall was already answered, or the request answers by itself
     * later (a lock wait: not a change, so not expected here). */
    int keep = w->pending > 0;
    w->abandoned = 1;
    unlock(L);
    if (!keep)
        wait_free(w);
    return rc;
}

/* Keeps f (of bc) until holder h of l returns the lease, recalling it.
 * 1, or 0 when out of memory (f runs now: the holder's unsent work may be
 * missed). The path then cools down: for a change, entirely (the two
 * clients stop caching it); for a look (a reader after a writer that is
 * done, whose close may reach the brick after the reader's request), only
 * exclusive leases are refused, so the reader still caches it and the
 * writer cannot take it back at once. Under L->lock. */
static int park(struct brick_leases *L, struct lease *l, struct holder *h, struct brick_conn *bc,
                struct rpc_frame *f, struct recalls *rs, uint64_t now)
{
    struct parked *pk = malloc(sizeof(*pk));
    if (!pk)
        return 0;
    pk->bc = bc;
    brick_conn_get(bc);
    pk->f = f;
    pk->next = h->parked;
    h->parked = pk;
    if (!h->recalling) {
        h->recalling = 1;
        h->recalled_ms = now;
        h->deadline_ms = now + (uint64_t)L->recall_ms;
        add_recall(rs, h->bc, l->path, "", 0);
        watch(L, l);
    }
    if (changes(f->hdr.opcode, &f->msg) ||
        (f->hdr.opcode == RPC_OP_OPEN && (f->msg.flags & O_ACCMODE) != O_RDONLY))
        cool(L, l, bc, now);
    else
        cool_excl(L, l, now);
    return 1;
}

/* A listing of dir shows its files' sizes and times: files in it another
 * connection holds exclusively are all recalled, and f is kept until the
 * first returns (then admitted again, it waits for any still held). Under
 * L->lock. */
static int park_listing(struct brick_leases *L, const char *dir, size_t dlen, struct brick_conn *bc,
                        struct rpc_frame *f, struct recalls *rs, uint64_t now)
{
    if (!L->xdirs[brick_ltab_hash(dir, dlen) % XDIRS])
        return 0;
    struct lease *first = NULL, *d = brick_ltab_find(&L->t, dir, dlen);
    struct holder *fh = NULL;
    for (struct lease *l = d ? d->kid : NULL; l; l = l->sib_next) {
        for (int i = 0; i < l->n; i++) {
            struct holder *h = &l->h[i];
            if (!h->xdir || h->bc == bc)
                continue;
            if (!fh) {
                first = l;
                fh = h;
            } else if (!h->recalling) {
                h->recalling = 1;
                h->recalled_ms = now;
                h->deadline_ms = now + (uint64_t)L->recall_ms;
                add_recall(rs, h->bc, l->path, "", 0);
                watch(L, l);
                cool_excl(L, l, now);
            }
        }
    }
    return fh ? park(L, first, fh, bc, f, rs, now) : 0;
}

int brick_lease_admit(struct brick *b, struct brick_conn *bc, struct rpc_frame *f)
{
    struct brick_leases *L = b->leases;
    if (!L || !__atomic_load_n(&L->n_excl, __ATOMIC_RELAXED) || !bc->rc ||
        rpc_op_is(f->hdr.opcode, RPC_OPF_NO_HOLD))
        return 0;
    const char *ps[2];
    size_t lens[2];
    int n = 0;
    if (bytes_path(&f->msg.path, &ps[n], &lens[n]))
        n++;
    if (bytes_path(&f->msg.path2, &ps[n], &lens[n]))
        n++;
    if (n == 0)
        return 0;
    struct recalls rs = {.res = RESOLVED_INIT(rs.res)};
    int parked = 0;
    uint64_t now = now_ms();
    pthread_mutex_lock(&L->lock);
    for (int i = 0; i < n && !parked; i++) {
        /* The object itself, and the directory holding its name. */
        size_t keys[2] = {lens[i], brick_ltab_parent_len(ps[i], lens[i])};
        for (int k = 0; k < 2 && !parked; k++) {
            struct lease *l = NULL;
            struct holder *h = excl_other(L, ps[i], keys[k], bc, &l);
            if (h)
                parked = park(L, l, h, bc, f, &rs, now);
        }
    }
    if (!parked && f->hdr.opcode == RPC_OP_READDIR && n > 0)
        parked = park_listing(L, ps[0], lens[0], bc, f, &rs, now);
    unlock(L);
    send_recalls(b, &rs);
    return parked;
}

struct lease_wait *brick_lease_hold(struct brick_req *r)
{
    struct brick_leases *L = r->b->leases;
    struct brick_req *top = r->top ? r->top : r;
    if (!L || !top->bc || !top->bc->rc)
        return NULL;
    pthread_mutex_lock(&L->lock);
    struct lease_wait *w = wait_of(r);
    if (w)
        w->pending++;
    unlock(L);
    return w;
}

void brick_lease_unhold(struct brick *b, struct lease_wait *w)
{
    struct brick_leases *L = b->leases;
    struct resolved res = RESOLVED_INIT(res);
    pthread_mutex_lock(&L->lock);
    wait_less(w, &res);
    unlock(L);
    resolved_run(b, &res);
}

int brick_lease_recall_ms(struct brick *b)
{
    struct brick_leases *L = b->leases;
    if (!L)
        return LEASE_RECALL_MS_DEFAULT;
    pthread_mutex_lock(&L->lock);
    int ms = L->recall_ms;
    pthread_mutex_unlock(&L->lock);
    return ms;
}

/* LEASE_RETURN: PATH. The holder dropped what it cached. */
int brick_op_lease_return(struct brick_req *r)
{
    struct brick_leases *L = r->b->leases;
    const char *p;
    size_t len;
    if (!bytes_path(&r->in->path, &p, &len))
        return -EINVAL;
    if (!L)
        return 0;
    struct resolved res = RESOLVED_INIT(res);
    pthread_mutex_lock(&L->lock);
    struct lease *l = brick_ltab_find(&L->t, p, len);
    int i = l ? holds(l, r->bc) : -1;
    if (i >= 0)
        holder_remove(L, l, i, &res);
    unlock(L);
    resolved_run(r->b, &res);
    return 0;
}

void brick_lease_conn_gone(struct brick_conn *bc)
{
    struct brick_leases *L = bc->b->leases;
    if (!L)
        return;
    struct resolved res = RESOLVED_INIT(res);
    pthread_mutex_lock(&L->lock);
    for (size_t k = 0; k < L->t.nb; k++)
        for (struct lease *l = L->t.b[k]; l; l = l->next) { /* freed at the reap */
            int i = holds(l, bc);
            if (i >= 0)
                holder_remove(L, l, i, &res);
        }
    unlock(L);
    resolved_run(bc->b, &res);
}

/* Leases written into one dump at most (the table may hold a million). */
#define DUMP_MAX 100000

void brick_lease_dump(struct brick *b, FILE *f)
{
    struct brick_leases *L = b->leases;
    if (!L || sd_section(f, "brick.leases", &L->lock) < 0)
        return;
    uint64_t now = now_ms();
    size_t held = 0, written = 0;
    fprintf(f, "paths-tracked=%zu\nexclusive-holders=%d\nrecall-timeout-ms=%d\n", L->t.count,
            L->n_excl, L->recall_ms);
    for (size_t k = 0; k < L->t.nb; k++)
        for (const struct lease *l = L->t.b[k]; l; l = l->next) {
            int cooling = l->cooldown_until_ms > now;
            if (!l->n && !cooling)
                continue; /* a placeholder of the tree */
            held += l->n > 0;
            if (written++ >= DUMP_MAX)
                continue;
            fprintf(f, "lease=%.*s holders=%d", (int)l->len, l->path, l->n);
            if (cooling)
                fprintf(f, " cooling-down-ms=%llu%s",
                        (unsigned long long)(l->cooldown_until_ms - now),
                        l->shared_ok ? " (exclusive only)" : "");
            fputc('\n', f);
            for (int i = 0; i < l->n; i++) {
                const struct holder *h = &l->h[i];
                fprintf(f, "lease.holder=%s %s%s", h->bc->peer, h->excl ? "exclusive" : "shared",
                        h->recalling ? " recalling" : "");
                if (h->recalling)
                    fprintf(f, " deadline-in-ms=%lld", (long long)h->deadline_ms - (long long)now);
                int parked = 0;
                for (const struct parked *p = h->parked; p; p = p->next)
                    parked++;
                fprintf(f, " parked-requests=%d held-replies=%d\n", parked, h->n_waits);
            }
        }
    fprintf(f, "paths-with-holders=%zu\n", held);
    if (written > DUMP_MAX)
        fprintf(f, "truncated=%zu leases not written\n", written - DUMP_MAX);
    pthread_mutex_unlock(&L->lock);
}
