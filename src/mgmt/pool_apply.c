/* The state transition (mgmt_apply), committing entries (directly or through
 * Raft), and the applier thread that applies what Raft committed.
 *
 * Generations: m->gen counts the entries applied to the state since the
 * pool's history began; the state on disk carries it. After a restart Raft
 * replays its log from the last snapshot; the applier counts along and skips
 * the entries the saved state already holds, so a replay never applies an
 * entry twice. A pool's first entry (IMPORT) and every snapshot carry the
 * generation of the state they hold. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "../lib/dirs.h"
#include "../lib/log.h"
#include "../lib/net.h"
#include "elastic.h"
#include "pool.h"

#define RESULTS 64
#define COMMIT_WAIT_MS 15000

struct item {
    struct item *next;
    int restore;
    size_t len;
    uint8_t data[];
};

struct result {
    uint64_t token;
    int rc;
    char text[256];
};

struct mgmt_applier {
    pthread_t thread;
    pthread_mutex_t q;
    pthread_cond_t qc;
    struct item *head, *tail;
    int busy, stop;
    uint64_t counter; /* generation the log has reached (see above) */
    struct result res[RESULTS];
    unsigned next_res;
};

#define REFUSE(code, ...)                                                                          \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return code;                                                                               \
    } while (0)

static struct mgmt_vol *vol_by_id(struct mgmt *m, const struct rpc_msg *e, char *name, char *err,
                                  size_t errlen)
{
    char id[GFID_STRLEN + 1] = "";
    name[0] = 0;
    rpc_bytes_str(&e->name, name, MGMT_VOLNAME_MAX + 1);
    rpc_bytes_str(&e->id, id, sizeof(id));
    struct mgmt_vol *v = mgmt_vol_find(m, name);
    if (!v || (id[0] && strcmp(v->id, id) != 0)) {
        snprintf(err, errlen, "Volume %s does not exist", name);
        return NULL;
    }
    return v;
}

static void save_vol(struct mgmt *m, struct mgmt_vol *v, uint64_t gen)
{
    v->gen = gen;
    m->gen = gen;
    mgmt_vol_save(m->workdir, v);
    mgmt_pool_save(m);
    mgmt_notify_volume(m, v->name);
}

static int apply_create(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                        size_t errlen)
{
    struct mgmt_vol *v;
    char why[256];
    if (mgmt_vol_parse((const char *)e->data.p, e->data.len, &v, why, sizeof(why)) < 0)
        REFUSE(-EINVAL, "bad volume record: %s", why);
    struct mgmt_vol *old = mgmt_vol_find(m, v->name);
    if (old) {
        int same = strcmp(old->id, v->id) == 0;
        mgmt_vol_free(v);
        if (same)
            return 0; /* a replay of this very create */
        REFUSE(-EEXIST, "Volume %s already exists", old->name);
    }
    /* A concurrent create may have taken a brick since this one was checked. */
    for (struct mgmt_vol *o = m->vols; o; o = o->next)
        for (int j = 0; j < o->n_bricks; j++)
            for (int i = 0; i < v->n_bricks; i++)
                if (strcmp(o->bricks[j].host, v->bricks[i].host) == 0 &&
                    strcmp(o->bricks[j].path, v->bricks[i].path) == 0) {
                    snprintf(err, errlen, "%s:%s is already part of volume %s", v->bricks[i].host,
                             v->bricks[i].path, o->name);
                    mgmt_vol_free(v);
                    return -EEXIST;
                }
    mgmt_vol_insert(m, v);
    mgmt_mark_local(m);
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        if (!b->local)
            continue;
        /* checked to be creatable before the commit; a failure now is a
         * race (something put in the way since), and `volume start` then
         * finds no marker */
        int rc = dirs_make(b->path);
        if (rc < 0)
            log_error("volume %s: cannot create brick directory %s:%s: %s", v->name, b->host,
                      b->path, strerror(-rc));
        else if (mgmt_brickinfo_write(v, b) < 0)
            log_error("volume %s: cannot write the marker of brick %s:%s", v->name, b->host,
                      b->path);
    }
    save_vol(m, v, gen);
    log_info("created volume %s (%s) with %d brick(s)", v->name, v->id, v->n_bricks);
    return 0;
}

static int apply_delete(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                        size_t errlen)
{
    char name[MGMT_VOLNAME_MAX + 1];
    struct mgmt_vol *v = vol_by_id(m, e, name, err, errlen);
    if (!v)
        return -ENOENT;
    if (v->status == MGMT_VOL_STARTED)
        REFUSE(-EBUSY, "Volume %s has been started.Volume needs to be stopped before deletion.",
               name);
    for (int i = 0; i < v->n_bricks; i++) {
        mgmt_brick_kill(m, &v->bricks[i]);
        if (v->bricks[i].local)
            mgmt_brickinfo_remove(v->bricks[i].path, v->id);
    }
    mgmt_vol_remove(m->workdir, v->name);
    mgmt_vol_unlink(m, v);
    log_info("deleted volume %s (%s)", v->name, v->id);
    mgmt_vol_free(v);
    m->gen = gen;
    mgmt_pool_save(m);
    mgmt_notify_volume(m, name);
    return 0;
}

static int apply_status(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                        size_t errlen)
{
    char name[MGMT_VOLNAME_MAX + 1];
    struct mgmt_vol *v = vol_by_id(m, e, name, err, errlen);
    if (!v)
        return -ENOENT;
    if (e->mode > MGMT_VOL_STOPPED)
        REFUSE(-EINVAL, "bad volume status %llu", (unsigned long long)e->mode);
    v->status = (enum mgmt_vol_status)e->mode;
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, e->body, e->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg b;
        char id[GFID_STRLEN + 1];
        if (f.tag != RPC_T_BRICK || rpc_msg_decode(f.val, f.len, &b, NULL) < 0 ||
            rpc_bytes_str(&b.id, id, sizeof(id)) < 0 || !b.port || b.port > 65535)
            continue;
        for (int i = 0; i < v->n_bricks; i++)
            if (strcmp(v->bricks[i].id, id) == 0)
                v->bricks[i].port = (uint16_t)b.port;
    }
    save_vol(m, v, gen);
    log_info("volume %s is now %s", v->name, mgmt_status_name(v->status));
    return 0;
}

static int apply_opts(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                      size_t errlen)
{
    char name[MGMT_VOLNAME_MAX + 1];
    struct mgmt_vol *v = vol_by_id(m, e, name, err, errlen);
    if (!v)
        return -ENOENT;
    struct opt_set next = {0};
    int live = 0;
    if (!(e->flags & 1))
        for (size_t i = 0; i < v->opts.n; i++)
            if (opt_set_put(&next, v->opts.kv[i].name, v->opts.kv[i].value) < 0)
                goto nomem;
    if (e->flags & 1)
        for (size_t i = 0; i < v->opts.n; i++) {
            const struct opt_def *d = opt_find(v->opts.kv[i].name);
            live |= d && d->live;
        }
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, e->body, e->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg o;
        char key[256], val[1024];
        if (f.tag != RPC_T_OPTION || rpc_msg_decode(f.val, f.len, &o, NULL) < 0 ||
            rpc_bytes_str(&o.name, key, sizeof(key)) < 0)
            continue;
        const struct opt_def *d = opt_find(key);
        if (!d)
            continue; /* unknown to this version: never applied, on any server */
        int has = rpc_has(&o, RPC_T_DATA) && rpc_bytes_str(&o.data, val, sizeof(val)) == 0;
        char norm[1024], why[512];
        if (has && opt_validate(key, val, norm, sizeof(norm), why, sizeof(why)) < 0) {
            /* an entry logged by a version that accepted it */
            log_warn("volume %s: ignoring %s=%s (%s)", v->name, key, val, why);
            continue;
        }
        if (opt_set_put(&next, opt_canonical(key), has ? val : NULL) < 0)
            goto nomem;
        live |= d->live;
    }
    opt_set_free(&v->opts);
    v->opts = next;
    save_vol(m, v, gen);
    if (live && v->status == MGMT_VOL_STARTED)
        mgmt_bricks_reconfigure(m, v);
    return 0;
nomem:
    opt_set_free(&next);
    REFUSE(-ENOMEM, "out of memory");
}

/* A volume's new brick list (elastic.h). Every server swaps the list; the
 * owner of a brick that left stops it, the owner of a new one makes its
 * directory, marker and fill file (its process starts with the status
 * entry that follows, which names its port). A brick reset-started is
 * stopped by its owner and kept down until its commit. */
static int apply_bricks(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                        size_t errlen)
{
    char name[MGMT_VOLNAME_MAX + 1], why[256];
    struct mgmt_vol *v = vol_by_id(m, e, name, err, errlen), *nv;
    if (!v)
        return -ENOENT;
    if (mgmt_vol_parse((const char *)e->data.p, e->data.len, &nv, why, sizeof(why)) < 0)
        REFUSE(-EINVAL, "bad volume record: %s", why);
    if (strcmp(nv->id, v->id) != 0 || strcmp(nv->name, v->name) != 0) {
        mgmt_vol_free(nv);
        REFUSE(-EINVAL, "volume record of another volume");
    }
    /* A concurrent change may have taken a new brick since it was checked. */
    for (int i = 0; i < nv->n_bricks; i++) {
        if (!mgmt_elastic_is_new(v, &nv->bricks[i]))
            continue;
        for (struct mgmt_vol *o = m->vols; o; o = o->next) {
            int j = mgmt_elastic_find(o, nv->bricks[i].host, nv->bricks[i].path);
            if (j >= 0 && (o != v || !v->reset_id[0] || strcmp(o->bricks[j].id, v->reset_id))) {
                snprintf(err, errlen, "%s:%s is already part of volume %s", nv->bricks[i].host,
                         nv->bricks[i].path, o->name);
                mgmt_vol_free(nv);
                return -EEXIST;
            }
        }
    }
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        int stays = 0;
        for (int j = 0; j < nv->n_bricks; j++)
            if (strcmp(nv->bricks[j].id, b->id) == 0) {
                struct mgmt_brick *n = &nv->bricks[j];
                n->pid = b->pid;
                n->started_ms = b->started_ms;
                n->retry_ms = b->retry_ms;
                n->backoff_ms = b->backoff_ms;
                n->restarts = b->restarts;
                stays = 1;
            }
        int reset_now = strcmp(nv->reset_id, b->id) == 0 && strcmp(v->reset_id, b->id) != 0;
        if (!stays || reset_now) {
            mgmt_brick_kill(m, b);
            log_info("volume %s: brick %s:%s %s", v->name, b->host, b->path,
                     stays ? "stopped for reset-brick" : "left the volume");
        }
        if (!stays && b->local && mgmt_elastic_find(nv, b->host, b->path) < 0)
            mgmt_brickinfo_remove(b->path, v->id);
    }
    struct mgmt_vol old = *v;
    v->bricks = nv->bricks;
    v->n_bricks = nv->n_bricks;
    v->replica = nv->replica;
    v->arbiter = nv->arbiter;
    v->redundancy = nv->redundancy;
    snprintf(v->reset_id, sizeof(v->reset_id), "%s", nv->reset_id);
    v->place = nv->place;
    v->place_prev = nv->place_prev;
    nv->place = old.place;
    nv->place_prev = old.place_prev;
    nv->bricks = old.bricks;
    nv->n_bricks = old.n_bricks;
    mgmt_mark_local(m);
    /* sets the volume had: a new brick beyond them starts a new set (add-brick of whole sets),
     * empty, with nothing to heal it from */
    int set = v->replica > 1 ? v->replica : 1, had = nv->n_bricks / set;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        if (!b->local || !mgmt_elastic_is_new(nv, b))
            continue;
        if (v->place && nv->place && i / set >= had) {
            int rc = mgmt_brick_prepare_set(v, b);
            if (rc < 0)
                log_error("volume %s: cannot prepare new brick %s:%s: %s", v->name, b->host,
                          b->path, strerror(-rc));
            else
                log_info("volume %s: new brick %s:%s of new set %d", v->name, b->host, b->path,
                         i / set);
            continue;
        }
        int reset = mgmt_elastic_find(nv, b->host, b->path) >= 0;
        int rc = mgmt_brick_prepare_fill(v, b, mgmt_elastic_member(v, i), reset);
        if (rc < 0)
            log_error("volume %s: cannot prepare new brick %s:%s: %s", v->name, b->host, b->path,
                      strerror(-rc));
        else
            log_info("volume %s: new brick %s:%s (member %d of its set), to be filled by heal",
                     v->name, b->host, b->path, mgmt_elastic_member(v, i));
    }
    mgmt_vol_free(nv);
    save_vol(m, v, gen);
    return 0;
}

/* `volume set all`: options of the whole pool (opt_def.pool). */
static int apply_pool_opts(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                           size_t errlen)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, e->body, e->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg o;
        char key[256], val[1024], norm[1024], why[512];
        if (f.tag != RPC_T_OPTION || rpc_msg_decode(f.val, f.len, &o, NULL) < 0 ||
            rpc_bytes_str(&o.name, key, sizeof(key)) < 0)
            continue;
        const struct opt_def *d = opt_find(key);
        if (!d || !d->pool)
            continue;
        int has = rpc_has(&o, RPC_T_DATA) && rpc_bytes_str(&o.data, val, sizeof(val)) == 0;
        if (has && opt_validate(key, val, norm, sizeof(norm), why, sizeof(why)) < 0) {
            log_warn("pool: ignoring %s=%s (%s)", key, val, why);
            continue;
        }
        if (opt_set_put(&m->pool_opts, d->name, has ? norm : NULL) < 0)
            REFUSE(-ENOMEM, "out of memory");
        log_info("pool: %s %s%s", d->name, has ? "set to " : "reset", has ? norm : "");
    }
    m->gen = gen;
    mgmt_pool_save(m);
    return 0;
}

static int apply_peer(struct mgmt *m, const struct rpc_msg *e, uint64_t gen, char *err,
                      size_t errlen)
{
    char uuid[GFID_STRLEN];
    if (rpc_bytes_str(&e->id, uuid, sizeof(uuid)) < 0)
        REFUSE(-EINVAL, "bad peer id");
    struct mgmt_peer *p = mgmt_peer_find_uuid(m, uuid);
    if (e->op == MGMT_E_PEER_DEL) {
        if (!p)
            REFUSE(-ENOENT, "peer %s is not part of the pool", uuid);
        int i = (int)(p - m->peers);
        memmove(p, p + 1, (size_t)(m->n_peers - i - 1) * sizeof(*p));
        m->n_peers--;
    } else {
        struct mgmt_peer np = {0};
        memcpy(np.uuid, uuid, sizeof(np.uuid));
        np.raft_id = e->offset;
        np.port = (uint16_t)e->port;
        if (rpc_bytes_str(&e->host, np.host, sizeof(np.host)) < 0 ||
            rpc_bytes_str(&e->path, np.raft_addr, sizeof(np.raft_addr)) < 0 || !np.raft_id ||
            !np.port)
            REFUSE(-EINVAL, "bad peer record");
        if (!p) {
            struct mgmt_peer *n = realloc(m->peers, (size_t)(m->n_peers + 1) * sizeof(*n));
            if (!n)
                REFUSE(-ENOMEM, "out of memory");
            m->peers = n;
            p = &m->peers[m->n_peers++];
        }
        *p = np;
    }
    m->gen = gen;
    mgmt_mark_local(m);
    mgmt_pool_save(m);
    log_info("pool: peer %s %s", uuid, e->op == MGMT_E_PEER_DEL ? "removed" : "added");
    return 0;
}

int mgmt_apply(struct mgmt *m, const uint8_t *data, size_t len, char *err, size_t errlen)
{
    struct rpc_msg e;
    const char *why = NULL;
    err[0] = 0;
    if (rpc_msg_decode(data, len, &e, &why) < 0 || !rpc_has(&e, RPC_T_OP))
        REFUSE(-EINVAL, "malformed pool entry: %s", why ? why : "no kind");
    uint64_t gen = m->gen + 1;
    switch (e.op) {
    case MGMT_E_IMPORT:
        return mgmt_state_replace(m, (const char *)e.data.p, e.data.len, err, errlen);
    case MGMT_E_PEER_ADD:
    case MGMT_E_PEER_DEL:
        return apply_peer(m, &e, gen, err, errlen);
    case MGMT_E_VOL_CREATE:
        return apply_create(m, &e, gen, err, errlen);
    case MGMT_E_VOL_DELETE:
        return apply_delete(m, &e, gen, err, errlen);
    case MGMT_E_VOL_STATUS:
        return apply_status(m, &e, gen, err, errlen);
    case MGMT_E_VOL_OPTS:
        return apply_opts(m, &e, gen, err, errlen);
    case MGMT_E_POOL_OPTS:
        return apply_pool_opts(m, &e, gen, err, errlen);
    case MGMT_E_VOL_BRICKS:
        return apply_bricks(m, &e, gen, err, errlen);
    }
    REFUSE(-EINVAL, "unknown pool entry kind %llu", (unsigned long long)e.op);
}

/* ---- the applier thread ---- */

static uint64_t text_gen(const uint8_t *p, size_t len)
{
    if (len < 11 || memcmp(p, "generation=", 11) != 0)
        return 0;
    uint64_t g = 0;
    for (size_t i = 11; i < len && p[i] >= '0' && p[i] <= '9'; i++)
        g = g * 10 + (uint64_t)(p[i] - '0');
    return g;
}

static void record(struct mgmt_applier *a, uint64_t token, int rc, const char *text)
{
    if (!token)
        return;
    struct result *r = &a->res[a->next_res++ % RESULTS];
    r->token = token;
    r->rc = rc;
    snprintf(r->text, sizeof(r->text), "%s", text);
}

static void apply_item(struct mgmt *m, struct mgmt_applier *a, struct item *it)
{
    char err[512] = "";
    int rc = 0;
    struct rpc_msg e;
    const uint8_t *state = it->data;
    size_t slen = it->len;
    uint64_t token = 0;
    int full = it->restore;
    if (!full) {
        if (rpc_msg_decode(it->data, it->len, &e, NULL) < 0) {
            log_error("pool: skipping a malformed log entry");
            a->counter++;
            return;
        }
        token = rpc_has(&e, RPC_T_OWNER) ? e.owner : 0;
        if (e.op == MGMT_E_IMPORT) {
            full = 1;
            state = e.data.p;
            slen = e.data.len;
        }
    }
    if (full) {
        uint64_t g = text_gen(state, slen);
        a->counter = g;
        if (g > m->gen || (g == 0 && m->gen == 0))
            rc = mgmt_state_replace(m, (const char *)state, slen, err, sizeof(err));
        if (rc < 0)
            log_error("pool: cannot load the pool state: %s", err);
        record(a, token, rc, err);
        return;
    }
    a->counter++;
    if (a->counter <= m->gen) {
        record(a, token, 0, ""); /* the saved state already holds it */
        return;
    }
    m->gen = a->counter - 1;
    rc = mgmt_apply(m, it->data, it->len, err, sizeof(err));
    if (rc < 0) {
        /* refused alike everywhere; the generation still counts the entry */
        m->gen = a->counter;
        mgmt_pool_save(m);
        log_info("pool: entry refused: %s", err);
    }
    record(a, token, rc, err);
}

static void *applier_main(void *arg)
{
    struct mgmt *m = arg;
    struct mgmt_applier *a = m->applier;
    pthread_mutex_lock(&a->q);
    for (;;) {
        while (!a->head && !a->stop)
            pthread_cond_wait(&a->qc, &a->q);
        if (!a->head)
            break;
        struct item *it = a->head;
        a->head = it->next;
        if (!a->head)
            a->tail = NULL;
        a->busy = 1;
        pthread_mutex_unlock(&a->q);
        pthread_mutex_lock(&m->lock);
        apply_item(m, a, it);
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->lock);
        free(it);
        pthread_mutex_lock(&a->q);
        a->busy = 0;
        pthread_cond_broadcast(&a->qc);
    }
    pthread_mutex_unlock(&a->q);
    return NULL;
}

int mgmt_applier_start(struct mgmt *m)
{
    struct mgmt_applier *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    pthread_mutex_init(&a->q, NULL);
    pthread_cond_init(&a->qc, NULL);
    m->applier = a;
    int rc = pthread_create(&a->thread, NULL, applier_main, m);
    if (rc) {
        m->applier = NULL;
        free(a);
        return -rc;
    }
    return 0;
}

void mgmt_applier_stop(struct mgmt *m)
{
    struct mgmt_applier *a = m->applier;
    if (!a)
        return;
    pthread_mutex_lock(&a->q);
    a->stop = 1;
    pthread_cond_broadcast(&a->qc);
    pthread_mutex_unlock(&a->q);
    pthread_join(a->thread, NULL);
    m->applier = NULL;
    while (a->head) {
        struct item *it = a->head;
        a->head = it->next;
        free(it);
    }
    free(a);
}

void mgmt_applier_push(struct mgmt *m, const void *data, size_t len, int restore)
{
    struct mgmt_applier *a = m->applier;
    struct item *it = malloc(sizeof(*it) + len);
    if (!a || !it) {
        log_error("pool: cannot queue a committed entry: out of memory");
        free(it);
        return;
    }
    it->next = NULL;
    it->restore = restore;
    it->len = len;
    memcpy(it->data, data, len);
    pthread_mutex_lock(&a->q);
    if (a->tail)
        a->tail->next = it;
    else
        a->head = it;
    a->tail = it;
    pthread_cond_broadcast(&a->qc);
    pthread_mutex_unlock(&a->q);
}

void mgmt_applier_drain(struct mgmt *m)
{
    struct mgmt_applier *a = m->applier;
    if (!a)
        return;
    pthread_mutex_lock(&a->q);
    while ((a->head || a->busy) && !a->stop)
        pthread_cond_wait(&a->qc, &a->q);
    pthread_mutex_unlock(&a->q);
}

/* ---- committing ---- */

static void deadline_in(struct timespec *ts, int ms)
{
    net_deadline(ts, CLOCK_REALTIME, ms > 0 ? (uint64_t)ms : 0);
}

int mgmt_wait_gen(struct mgmt *m, uint64_t gen, int timeout_ms)
{
    struct timespec ts;
    deadline_in(&ts, timeout_ms);
    while (m->gen < gen)
        if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) == ETIMEDOUT)
            return m->gen >= gen ? 0 : -ETIMEDOUT;
    return 0;
}

static struct result *find_result(struct mgmt_applier *a, uint64_t token)
{
    for (int i = 0; i < RESULTS; i++)
        if (a->res[i].token == token)
            return &a->res[i];
    return NULL;
}

int mgmt_commit(struct mgmt *m, struct rpc_buf *entry, char *err, size_t errlen)
{
    err[0] = 0;
    if (entry->err)
        REFUSE(-ENOMEM, "out of memory");
    if (!m->pool) {
        int rc = mgmt_apply(m, entry->data, entry->len, err, errlen);
        pthread_cond_broadcast(&m->cond);
        return rc;
    }
    uint64_t token = 0;
    while (!token)
        if (getrandom(&token, sizeof(token), 0) != sizeof(token))
            token = (uint64_t)net_now_ms() ^ (uint64_t)(uintptr_t)entry;
    rpc_put_u64(entry, RPC_T_OWNER, token);
    struct mgmt_pool *p = m->pool;
    pthread_mutex_unlock(&m->lock);
    int rc = mgmt_pool_propose(p, entry->data, entry->len, err, errlen);
    pthread_mutex_lock(&m->lock);
    if (rc == -EAGAIN)
        REFUSE(rc, "the pool has no quorum (this server lost the leadership: a majority of the "
                   "pool's servers must be up); the change is not in force unless `volume info` "
                   "shows it later");
    if (rc < 0)
        return rc;
    struct timespec ts;
    deadline_in(&ts, COMMIT_WAIT_MS);
    struct result *r;
    while (!m->applier || !(r = find_result(m->applier, token)))
        if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) == ETIMEDOUT) {
            if (m->applier && (r = find_result(m->applier, token)))
                break;
            REFUSE(-ETIMEDOUT, "the change was committed but not applied here in time");
        }
    if (r->rc < 0)
        snprintf(err, errlen, "%s", r->text);
    return r->rc;
}
