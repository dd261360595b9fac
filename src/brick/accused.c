/* Accusations: the members of its replica set this brick holds marks
 * against, and telling every client when that set changes
 * (docs/replication.md, "Reads come from a good copy").
 *
 * A mark on an object (version.c) names the set members that missed a
 * change of it, so their copies of it may be stale. The brick keeps, for
 * every object in its heal index, the bits of its marks (by gfid), and for
 * each member's bit how many objects carry it; the union of the bits (the dirty bit
 * aside, which accuses nobody) is the brick's accusation mask. Clients read
 * only from members no brick accuses.
 *
 * When a change makes the mask grow, every client connection is told
 * (ACCUSED, with a sequence number) before the change is answered, and the
 * change's reply waits until every connection but the requester's has
 * answered ACCUSED_SEEN, gone away, or let features.lease-recall-timeout
 * pass. So once a change has returned to its caller, no client reads it from
 * a copy that missed it. When the mask shrinks (a heal cleared the last mark
 * against a member) clients are told without waiting. The handshake's reply
 * carries the mask, and the bits are rebuilt from the index when the brick
 * starts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "brick.h"

struct acc_obj {
    struct acc_obj *next;
    gfid_t g;
    uint32_t bits; /* its marks as on disk, the dirty bit included */
};

struct acc_sub {
    struct brick_conn *bc; /* a reference */
    uint64_t seen;         /* the highest GEN it answered */
};

/* A reply waiting until the connections in wait have seen gen. */
struct acc_hold {
    struct acc_hold *next;
    struct lease_wait *w;
    uint64_t gen, deadline_ms;
    struct brick_conn **wait; /* references */
    int n;
};

struct brick_accused {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct acc_obj **tab;
    size_t nb, count;
    uint32_t counts[32];
    uint32_t mask;      /* atomic reads: the union of the kept bits */
    uint32_t published; /* atomic reads: the mask clients were last told */
    uint64_t gen;
    struct acc_sub *subs;
    int n_subs, cap_subs;
    struct acc_hold *holds;
    int stop;
    pthread_t timer;
};

static void fini_struct(struct brick_accused *A);

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static size_t slot_of(const struct brick_accused *A, const gfid_t *g)
{
    uint64_t h;
    memcpy(&h, g->b + 8, sizeof(h)); /* ids are random (v4) */
    return (size_t)(h % A->nb);
}

static uint32_t accusing(uint32_t bits)
{
    return bits & ~RPC_PENDING_DIRTY;
}

static void count_bits(struct brick_accused *A, uint32_t bits, int d)
{
    for (int i = 0; i < 32; i++)
        if (bits >> i & 1) {
            A->counts[i] = (uint32_t)((int)A->counts[i] + d);
            if (A->counts[i])
                A->mask |= 1u << i;
            else
                A->mask &= ~(1u << i);
        }
}

static void grow(struct brick_accused *A)
{
    size_t nb = A->nb * 2;
    struct acc_obj **t = calloc(nb, sizeof(*t));
    if (!t)
        return; /* longer chains, still correct */
    for (size_t k = 0; k < A->nb; k++)
        for (struct acc_obj *o = A->tab[k], *nx; o; o = nx) {
            nx = o->next;
            uint64_t h;
            memcpy(&h, o->g.b + 8, sizeof(h));
            size_t s = (size_t)(h % nb);
            o->next = t[s];
            t[s] = o;
        }
    free(A->tab);
    A->tab = t;
    A->nb = nb;
}

void brick_accused_note(struct brick *b, const gfid_t *g, uint32_t bits)
{
    struct brick_accused *A = b->accused;
    if (!A)
        return;
    uint32_t acc = accusing(bits);
    pthread_mutex_lock(&A->lock);
    struct acc_obj **pp = &A->tab[slot_of(A, g)];
    while (*pp && memcmp(&(*pp)->g, g, sizeof(*g)) != 0)
        pp = &(*pp)->next;
    struct acc_obj *o = *pp;
    if (o) {
        uint32_t had = accusing(o->bits);
        count_bits(A, had & ~acc, -1);
        count_bits(A, acc & ~had, +1);
        o->bits = bits;
        if (!bits) {
            *pp = o->next;
            free(o);
            A->count--;
        }
    } else if (bits && (o = calloc(1, sizeof(*o)))) {
        o->g = *g;
        o->bits = bits;
        o->next = A->tab[slot_of(A, g)];
        A->tab[slot_of(A, g)] = o;
        A->count++;
        count_bits(A, acc, +1);
        if (A->count > A->nb * 2)
            grow(A);
    } else if (acc) {
        /* Out of memory: accuse anyway, and never stop (a restart
         * rebuilds the counts from the index). */
        A->mask |= acc;
        for (int i = 0; i < 32; i++)
            if (acc >> i & 1)
                A->counts[i] = UINT32_MAX / 2;
    }
    pthread_mutex_unlock(&A->lock);
}

int brick_accused_waits_for(struct brick *b, const gfid_t *g, uint32_t down)
{
    struct brick_accused *A = b->accused;
    if (!A || !down)
        return 0;
    int waits = 0;
    pthread_mutex_lock(&A->lock);
    for (const struct acc_obj *o = A->tab[slot_of(A, g)]; o; o = o->next)
        if (!memcmp(&o->g, g, sizeof(*g))) {
            waits = !(o->bits & RPC_PENDING_DIRTY) && o->bits && !(o->bits & ~down);
            break;
        }
    pthread_mutex_unlock(&A->lock);
    return waits;
}

uint32_t brick_accused_mask(struct brick *b)
{
    struct brick_accused *A = b->accused;
    return A ? __atomic_load_n(&A->mask, __ATOMIC_ACQUIRE) : 0;
}

/* ---- clients ---- */

static int sub_find(const struct brick_accused *A, const struct brick_conn *bc)
{
    for (int i = 0; i < A->n_subs; i++)
        if (A->subs[i].bc == bc)
            return i;
    return -1;
}

uint32_t brick_accused_subscribe(struct brick_conn *bc, int listens, uint64_t *gen)
{
    struct brick_accused *A = bc->b->accused;
    *gen = 0;
    if (!A)
        return 0;
    pthread_mutex_lock(&A->lock);
    if (listens && bc->rc && sub_find(A, bc) < 0) {
        if (A->n_subs == A->cap_subs) {
            int cap = A->cap_subs ? A->cap_subs * 2 : 16;
            struct acc_sub *v = realloc(A->subs, (size_t)cap * sizeof(*v));
            if (v) {
                A->subs = v;
                A->cap_subs = cap;
            }
        }
        if (A->n_subs < A->cap_subs) {
            brick_conn_get(bc);
            A->subs[A->n_subs++] = (struct acc_sub){.bc = bc, .seen = 0};
        } else {
            log_warn("no memory to tell %s which copies are accused", bc->peer);
        }
    }
    /* What clients were told (with its number); a change of the mask
     * not yet published reaches this one with the others'. */
    uint32_t m = A->published;
    *gen = A->gen;
    pthread_mutex_unlock(&A->lock);
    return m;
}

/* Takes the holds that need nothing more (or whose time is up, when now is
 * not 0) off the list. Under A->lock. */
static struct acc_hold *take_done(struct brick_accused *A, uint64_t now)
{
    struct acc_hold *out = NULL, **pp = &A->holds;
    while (*pp) {
        struct acc_hold *h = *pp;
        int left = 0;
        for (int i = 0; i < h->n && !left; i++) {
            int s = sub_find(A, h->wait[i]);
            left = s >= 0 && A->subs[s].seen < h->gen;
        }
        if (left && now && h->deadline_ms <= now) {
            for (int i = 0; i < h->n; i++) {
                int s = sub_find(A, h->wait[i]);
                if (s >= 0 && A->subs[s].seen < h->gen)
                    log_warn("client %s did not confirm within the recall timeout that it "
                             "stopped reading accused copies (0x%x): answering without it",
                             h->wait[i]->peer, A->published);
            }
            left = 0;
        }
        if (left) {
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        h->next = out;
        out = h;
    }
    return out;
}

static void release(struct brick *b, struct acc_hold *h)
{
    while (h) {
        struct acc_hold *nx = h->next;
        brick_lease_unhold(b, h->w);
        for (int i = 0; i < h->n; i++)
            brick_conn_put(h->wait[i]);
        free(h->wait);
        free(h);
        h = nx;
    }
}

void brick_accused_conn_gone(struct brick_conn *bc)
{
    struct brick_accused *A = bc->b->accused;
    if (!A)
        return;
    pthread_mutex_lock(&A->lock);
    int s = sub_find(A, bc);
    if (s < 0) {
        pthread_mutex_unlock(&A->lock);
        return;
    }
    A->subs[s] = A->subs[--A->n_subs];
    struct acc_hold *done = take_done(A, 0);
    pthread_mutex_unlock(&A->lock);
    release(bc->b, done);
    brick_conn_put(bc);
}

int brick_op_accused_seen(struct brick_req *r)
{
    struct brick_accused *A = r->b->accused;
    if (!rpc_has(r->in, RPC_T_GEN))
        return -EINVAL;
    if (!A)
        return 0;
    pthread_mutex_lock(&A->lock);
    int s = sub_find(A, r->bc);
    if (s >= 0 && r->in->gen > A->subs[s].seen)
        A->subs[s].seen = r->in->gen;
    struct acc_hold *done = take_done(A, 0);
    pthread_mutex_unlock(&A->lock);
    release(r->b, done);
    return 0;
}

void brick_accused_publish(struct brick_req *r)
{
    struct brick *b = r->b;
    struct brick_accused *A = b->accused;
    if (!A || __atomic_load_n(&A->mask, __ATOMIC_ACQUIRE) ==
                  __atomic_load_n(&A->published, __ATOMIC_ACQUIRE))
        return;
    struct brick_req *top = r->top ? r->top : r;
    pthread_mutex_lock(&A->lock);
    uint32_t old = A->published, mask = A->mask;
    if (mask == old) {
        pthread_mutex_unlock(&A->lock);
        return;
    }
    uint64_t gen = ++A->gen;
    __atomic_store_n(&A->published, mask, __ATOMIC_RELEASE);
    int n = A->n_subs;
    struct brick_conn **to = calloc((size_t)(n ? n : 1), sizeof(*to));
    struct acc_hold *h = NULL;
    int k = 0;
    for (int i = 0; to && i < n; i++) {
        to[i] = A->subs[i].bc;
        brick_conn_get(to[i]);
    }
    /* Growth waits for every other client; the requester hears it on the
     * connection its reply takes, before the reply. */
    if (to && (mask & ~old) && (h = calloc(1, sizeof(*h))) &&
        (h->wait = calloc((size_t)(n ? n : 1), sizeof(*h->wait)))) {
        for (int i = 0; i < n; i++)
            if (to[i] != top->bc) {
                brick_conn_get(to[i]);
                h->wait[k++] = to[i];
            }
        h->n = k;
        h->gen = gen;
        h->deadline_ms = now_ms() + (uint64_t)brick_lease_recall_ms(b);
    }
    pthread_mutex_unlock(&A->lock);
    if (h && k > 0 && (h->w = brick_lease_hold(r))) {
        pthread_mutex_lock(&A->lock);
        h->next = A->holds;
        A->holds = h;
        pthread_cond_broadcast(&A->cond);
        pthread_mutex_unlock(&A->lock);
    } else if (h) {
        for (int i = 0; i < h->n; i++)
            brick_conn_put(h->wait[i]);
        free(h->wait);
        free(h);
    }
    if (mask & ~old)
        log_warn("this brick now holds marks against replica(s) 0x%x of its set: clients "
                 "stop reading their copies until heal clears them",
                 mask & ~old);
    else
        log_info("marks against replica(s) 0x%x of this set are all cleared", old & ~mask);
    struct rpc_buf body;
    rpc_buf_init(&body);
    rpc_put_u64(&body, RPC_T_PENDING, mask);
    rpc_put_u64(&body, RPC_T_GEN, gen);
    for (int i = 0; to && i < n; i++) {
        if (to[i]->rc && rpc_conn_notify(to[i]->rc, RPC_OP_ACCUSED, &body) < 0)
            log_debug("accusation notice to %s not sent", to[i]->peer);
        brick_conn_put(to[i]);
    }
    rpc_buf_free(&body);
    free(to);
}

/* Answers the replies whose clients did not confirm in time. */
static void *timer_main(void *arg)
{
    struct brick *b = arg;
    struct brick_accused *A = b->accused;
    pthread_mutex_lock(&A->lock);
    while (!A->stop) {
        if (!A->holds) {
            pthread_cond_wait(&A->cond, &A->lock);
            continue;
        }
        uint64_t now = now_ms(), next = UINT64_MAX;
        struct acc_hold *done = take_done(A, now);
        if (done) {
            pthread_mutex_unlock(&A->lock);
            release(b, done);
            pthread_mutex_lock(&A->lock);
            continue;
        }
        for (struct acc_hold *h = A->holds; h; h = h->next)
            if (h->deadline_ms < next)
                next = h->deadline_ms;
        struct timespec ts;
        net_deadline(&ts, CLOCK_MONOTONIC, next > now ? next - now : 1);
        pthread_cond_timedwait(&A->cond, &A->lock, &ts);
    }
    pthread_mutex_unlock(&A->lock);
    return NULL;
}

int brick_accused_init(struct brick *b)
{
    struct brick_accused *A = calloc(1, sizeof(*A));
    if (!A)
        return -ENOMEM;
    A->nb = 64;
    if (!(A->tab = calloc(A->nb, sizeof(*A->tab)))) {
        free(A);
        return -ENOMEM;
    }
    pthread_mutex_init(&A->lock, NULL);
    net_cond_init_mono(&A->cond);
    b->accused = A;
    /* A new copy must accuse itself before anyone can read it: no start
     * without that mark. */
    int rc = brick_version_fill(b);
    if (rc < 0) {
        log_error("%s: cannot mark this new copy as one to fill by heal: %s", b->path,
                  strerror(-rc));
        b->accused = NULL;
        fini_struct(A);
        return rc;
    }
    rc = brick_version_load(b);
    if (rc < 0)
        log_warn("%s: reading the heal index failed (%s): accusations start from what it "
                 "read",
                 b->path, strerror(-rc));
    A->published = A->mask;
    if (A->mask)
        log_info("%s: holds marks against replica(s) 0x%x of its set (%zu objects to heal)",
                 b->path, A->mask, A->count);
    if (pthread_create(&A->timer, NULL, timer_main, b) != 0) {
        b->accused = NULL;
        fini_struct(A);
        return -ENOMEM;
    }
    return 0;
}

static void fini_struct(struct brick_accused *A)
{
    for (size_t k = 0; k < A->nb; k++)
        for (struct acc_obj *o = A->tab[k], *nx; o; o = nx) {
            nx = o->next;
            free(o);
        }
    free(A->tab);
    for (int i = 0; i < A->n_subs; i++)
        brick_conn_put(A->subs[i].bc);
    free(A->subs);
    pthread_mutex_destroy(&A->lock);
    pthread_cond_destroy(&A->cond);
    free(A);
}

void brick_accused_fini(struct brick *b)
{
    struct brick_accused *A = b->accused;
    if (!A)
        return;
    pthread_mutex_lock(&A->lock);
    A->stop = 1;
    pthread_cond_broadcast(&A->cond);
    struct acc_hold *h = A->holds;
    A->holds = NULL;
    pthread_mutex_unlock(&A->lock);
    pthread_join(A->timer, NULL);
    release(b, h);
    b->accused = NULL;
    fini_struct(A);
}
