/* The Raft instance of a pooled cairnd (libraft with its libuv I/O and TCP
 * transport), on a thread of its own running a libuv loop.
 *
 * Other threads never touch struct raft: they queue a request (apply an
 * entry, add or remove a server) and wake the loop with uv_async_send; the
 * request's callback runs on the loop thread and wakes the waiter. The FSM
 * callbacks hand entries to the applier thread and never take m->lock, so a
 * slow command cannot stall heartbeats. */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "pool.h"
#include "pool_auth.h"
#include "raft_auth.h"

#define TICK_MS 100
#define REQ_WAIT_MS 10000
/* A voter joins after catching up; on loopback that is quick. */
#define ADD_WAIT_MS 20000

enum req_kind { R_APPLY, R_ADD, R_REMOVE };

struct req {
    struct req *next;
    enum req_kind kind;
    uint64_t id;
    char addr[NET_HOST_MAX + 8];
    struct raft_buffer buf;
    int done, status, abandoned, stage;
    char errmsg[256];
    struct raft_apply apply;
    struct raft_change change;
    struct mgmt_pool *pool;
};

struct mgmt_pool {
    struct mgmt *m;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t async;
    uv_timer_t timer;
    struct raft raft;
    struct raft_io io;
    struct raft_auth *transport; /* TCP, each connection authenticated */
    struct raft_fsm fsm;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct req *head, *tail;
    int stopping, closing, ready, start_rc;
    char start_err[256];
    struct mgmt_pool_info info;
    char dir[PATH_MAX + 16];
    char addr[NET_HOST_MAX + 8];
    uint64_t id;
    int bootstrap;
};

static void raft_dir(const struct mgmt *m, char *out, size_t len)
{
    snprintf(out, len, "%s/raft", m->workdir);
}

int mgmt_raft_dir_make(struct mgmt *m)
{
    char dir[PATH_MAX + 16];
    raft_dir(m, dir, sizeof(dir));
    return mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

int mgmt_pool_exists(const struct mgmt *m)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/raft/address", m->workdir);
    return access(path, F_OK) == 0;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int mgmt_pool_wipe(struct mgmt *m)
{
    char dir[PATH_MAX + 16];
    raft_dir(m, dir, sizeof(dir));
    pool_secret_forget(); /* its file, DIR/raft/secret, goes with the rest */
    if (nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

/* ---- FSM ----
 * Entries and snapshots travel with an 8-byte header ("CRNE" and the length,
 * u32 little-endian) and are zero-padded to a multiple of 8 bytes: libraft
 * 0.15 sends entries of other lengths to followers misaligned (the entry
 * after one of odd length arrives shifted). */

#define WRAP_LEN 8

static size_t wrapped_len(size_t len)
{
    return (len + WRAP_LEN + 7) & ~(size_t)7;
}

static void *wrap(const void *data, size_t len)
{
    uint8_t *p = raft_calloc(1, wrapped_len(len));
    if (!p)
        return NULL;
    memcpy(p, "CRNE", 4);
    rpc_le32(p + 4, (uint32_t)len);
    memcpy(p + WRAP_LEN, data, len);
    return p;
}

static const uint8_t *unwrap(const struct raft_buffer *buf, size_t *len)
{
    const uint8_t *p = buf->base;
    if (buf->len < WRAP_LEN || memcmp(p, "CRNE", 4) != 0 || rpc_get32(p + 4) > buf->len - WRAP_LEN)
        return NULL;
    *len = rpc_get32(p + 4);
    return p + WRAP_LEN;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    struct mgmt_pool *p = fsm->data;
    size_t len;
    const uint8_t *data = unwrap(buf, &len);
    if (data)
        mgmt_applier_push(p->m, data, len, 0);
    else
        log_error("pool: ignoring a log entry that is not Cairn's (%zu bytes, %02x%02x%02x%02x...)",
                  (size_t)buf->len, buf->len > 3 ? ((uint8_t *)buf->base)[0] : 0,
                  buf->len > 3 ? ((uint8_t *)buf->base)[1] : 0,
                  buf->len > 3 ? ((uint8_t *)buf->base)[2] : 0,
                  buf->len > 3 ? ((uint8_t *)buf->base)[3] : 0);
    *result = NULL;
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    struct mgmt_pool *p = fsm->data;
    struct mgmt *m = p->m;
    /* The snapshot must hold everything Raft has handed to the FSM. */
    mgmt_applier_drain(m);
    pthread_mutex_lock(&m->lock);
    char *text = mgmt_state_format(m);
    pthread_mutex_unlock(&m->lock);
    if (!text)
        return RAFT_NOMEM;
    size_t len = strlen(text);
    *bufs = raft_malloc(sizeof(**bufs));
    void *base = wrap(text, len);
    free(text);
    if (!*bufs || !base) {
        raft_free(*bufs);
        raft_free(base);
        return RAFT_NOMEM;
    }
    (*bufs)[0].base = base;
    (*bufs)[0].len = wrapped_len(len);
    *n = 1;
    return 0;
}

static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    for (unsigned i = 0; i < *n; i++)
        raft_free((*bufs)[i].base);
    raft_free(*bufs);
    *bufs = NULL;
    *n = 0;
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    struct mgmt_pool *p = fsm->data;
    size_t len;
    const uint8_t *data = unwrap(buf, &len);
    if (!data) {
        log_error("pool: refusing a snapshot that is not Cairn's");
        return RAFT_MALFORMED;
    }
    mgmt_applier_push(p->m, data, len, 1);
    mgmt_applier_drain(p->m);
    raft_free(buf->base);
    return 0;
}

/* ---- requests ---- */

static void finish(struct req *r, int status, const char *msg)
{
    struct mgmt_pool *p = r->pool;
    pthread_mutex_lock(&p->lock);
    r->status = status;
    if (status && msg)
        snprintf(r->errmsg, sizeof(r->errmsg), "%s", msg);
    r->done = 1;
    int gone = r->abandoned;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (gone)
        free(r);
}

static void apply_cb(struct raft_apply *a, int status, void *result)
{
    struct req *r = a->data;
    finish(r, status, status ? raft_strerror(status) : NULL);
}

static void change_cb(struct raft_change *c, int status)
{
    struct req *r = c->data;
    struct mgmt_pool *p = r->pool;
    if (status == 0 && r->kind == R_ADD && r->stage == 0) {
        r->stage = 1;
        int rc = raft_assign(&p->raft, &r->change, r->id, RAFT_VOTER, change_cb);
        if (rc == 0)
            return;
        finish(r, rc, raft_errmsg(&p->raft));
        return;
    }
    finish(r, status, status ? raft_strerror(status) : NULL);
}

static void submit(struct mgmt_pool *p, struct req *r)
{
    int rc;
    if (p->closing) {
        if (r->buf.base)
            raft_free(r->buf.base);
        finish(r, RAFT_SHUTDOWN, "cairnd is leaving the pool");
        return;
    }
    switch (r->kind) {
    case R_APPLY:
        r->apply.data = r;
        rc = raft_apply(&p->raft, &r->apply, &r->buf, 1, apply_cb);
        if (rc)
            raft_free(r->buf.base);
        break;
    case R_ADD:
        r->change.data = r;
        rc = raft_add(&p->raft, &r->change, r->id, r->addr, change_cb);
        break;
    default:
        r->change.data = r;
        rc = raft_remove(&p->raft, &r->change, r->id, change_cb);
        break;
    }
    if (rc)
        finish(r, rc, raft_errmsg(&p->raft)[0] ? raft_errmsg(&p->raft) : raft_strerror(rc));
}

static void handle_close_cb(uv_handle_t *h)
{
}

static void on_raft_closed(struct raft *r)
{
    struct mgmt_pool *p = r->data;
    raft_uv_close(&p->io);
    raft_auth_free(p->transport);
    p->transport = NULL;
    uv_close((uv_handle_t *)&p->async, handle_close_cb);
    uv_close((uv_handle_t *)&p->timer, handle_close_cb);
}

static void async_cb(uv_async_t *a)
{
    struct mgmt_pool *p = a->data;
    pthread_mutex_lock(&p->lock);
    struct req *list = p->head;
    p->head = p->tail = NULL;
    int stop = p->stopping && !p->closing;
    pthread_mutex_unlock(&p->lock);
    while (list) {
        struct req *r = list;
        list = r->next;
        submit(p, r);
    }
    if (stop) {
        p->closing = 1;
        uv_timer_stop(&p->timer);
        raft_close(&p->raft, on_raft_closed);
    }
}

static void timer_cb(uv_timer_t *t)
{
    struct mgmt_pool *p = t->data;
    struct mgmt_pool_info info = {0};
    const char *addr;
    raft_id lid = 0;
    info.state = raft_state(&p->raft);
    raft_leader(&p->raft, &lid, &addr);
    info.leader_id = lid;
    for (unsigned i = 0; i < p->raft.configuration.n; i++)
        if (p->raft.configuration.servers[i].role == RAFT_VOTER)
            info.voters++;
    pthread_mutex_lock(&p->lock);
    if (p->info.leader_id != info.leader_id || p->info.state != info.state)
        log_info("pool: %s, leader %llx (%u voters)",
                 info.state == RAFT_LEADER      ? "leader"
                 : info.state == RAFT_FOLLOWER  ? "follower"
                 : info.state == RAFT_CANDIDATE ? "candidate"
                                                : "unavailable",
                 (unsigned long long)info.leader_id, info.voters);
    p->info = info;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static int setup(struct mgmt_pool *p)
{
    int rc;
    if ((rc = uv_loop_init(&p->loop)) != 0) {
        snprintf(p->start_err, sizeof(p->start_err), "uv_loop_init: %s", uv_strerror(rc));
        return -EIO;
    }
    if (!(p->transport = raft_auth_new(&p->loop))) {
        snprintf(p->start_err, sizeof(p->start_err), "raft transport: out of memory");
        return -EIO;
    }
    if ((rc = raft_uv_init(&p->io, &p->loop, p->dir, raft_auth_transport(p->transport))) != 0) {
        snprintf(p->start_err, sizeof(p->start_err), "raft storage in %.160s: %s", p->dir,
                 raft_strerror(rc));
        raft_auth_free(p->transport);
        return -EIO;
    }
    raft_uv_set_connect_retry_delay(&p->io, 200);
    p->fsm.version = 2;
    p->fsm.data = p;
    p->fsm.apply = fsm_apply;
    p->fsm.snapshot = fsm_snapshot;
    p->fsm.restore = fsm_restore;
    p->fsm.snapshot_finalize = fsm_snapshot_finalize;
    if ((rc = raft_init(&p->raft, &p->io, &p->fsm, p->id, p->addr)) != 0) {
        snprintf(p->start_err, sizeof(p->start_err), "raft_init: %s", raft_strerror(rc));
        raft_uv_close(&p->io);
        raft_auth_free(p->transport);
        return -EIO;
    }
    p->raft.data = p;
    raft_set_snapshot_threshold(&p->raft, 256);
    raft_set_snapshot_trailing(&p->raft, 64);
    if (p->bootstrap) {
        struct raft_configuration conf;
        raft_configuration_init(&conf);
        rc = raft_configuration_add(&conf, p->id, p->addr, RAFT_VOTER);
        if (rc == 0)
            rc = raft_bootstrap(&p->raft, &conf);
        raft_configuration_close(&conf);
        if (rc != 0 && rc != RAFT_CANTBOOTSTRAP) {
            snprintf(p->start_err, sizeof(p->start_err), "raft_bootstrap: %s",
                     raft_errmsg(&p->raft));
            return -EIO;
        }
    }
    if ((rc = raft_start(&p->raft)) != 0) {
        snprintf(p->start_err, sizeof(p->start_err), "raft_start: %s", raft_errmsg(&p->raft));
        return -EIO;
    }
    uv_async_init(&p->loop, &p->async, async_cb);
    p->async.data = p;
    uv_timer_init(&p->loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, timer_cb, 0, TICK_MS);
    return 0;
}

static void *pool_main(void *arg)
{
    struct mgmt_pool *p = arg;
    int rc = setup(p);
    pthread_mutex_lock(&p->lock);
    p->start_rc = rc;
    p->ready = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        return NULL;
    uv_run(&p->loop, UV_RUN_DEFAULT);
    uv_loop_close(&p->loop);
    return NULL;
}

int mgmt_pool_start(struct mgmt *m, int bootstrap, const char *self_addr, char *err, size_t errlen)
{
    char path[PATH_MAX + 32];
    struct mgmt_pool *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->m = m;
    p->id = mgmt_raft_id(m->uuid);
    p->bootstrap = bootstrap;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    raft_dir(m, p->dir, sizeof(p->dir));
    if (mkdir(p->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", p->dir, strerror(errno));
        free(p);
        return -errno;
    }
    /* DIR/raft/address: this server's Raft address, and the mark that the
     * server belongs to a pool. */
    snprintf(path, sizeof(path), "%s/address", p->dir);
    if (self_addr) {
        FILE *f = fopen(path, "we");
        if (!f || fprintf(f, "%s\n", self_addr) < 0 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
            if (f)
                fclose(f);
            free(p);
            return -EIO;
        }
        fclose(f);
        snprintf(p->addr, sizeof(p->addr), "%s", self_addr);
    } else {
        FILE *f = fopen(path, "re");
        if (!f || !fgets(p->addr, sizeof(p->addr), f)) {
            snprintf(err, errlen, "cannot read %s", path);
            if (f)
                fclose(f);
            free(p);
            return -EIO;
        }
        fclose(f);
        p->addr[strcspn(p->addr, "\n")] = 0;
    }
    /* DIR/raft/secret: the pool secret (pool_auth.h), written before by the
     * probe that made the pool or took this server in. */
    int rc = pool_secret_load(m->workdir);
    if (rc == -ENOENT)
        log_warn("pool: this pool has no secret (it was formed before cairnd had them): "
                 "the servers' consensus and internal commands are not authenticated; "
                 "docs/security.md says how to give it one");
    else if (rc < 0) {
        snprintf(err, errlen, "cannot read the pool secret %s/secret: %s", p->dir,
                 rc == -EINVAL ? "not 64 hex digits" : strerror(-rc));
        free(p);
        return rc;
    }
    rc = mgmt_applier_start(m);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the applier thread");
        free(p);
        return rc;
    }
    if ((rc = pthread_create(&p->thread, NULL, pool_main, p)) != 0) {
        mgmt_applier_stop(m);
        snprintf(err, errlen, "cannot start the raft thread");
        free(p);
        return -rc;
    }
    pthread_mutex_lock(&p->lock);
    while (!p->ready)
        pthread_cond_wait(&p->cond, &p->lock);
    rc = p->start_rc;
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        snprintf(err, errlen, "%s", p->start_err);
        pthread_join(p->thread, NULL);
        mgmt_applier_stop(m);
        free(p);
        return rc;
    }
    m->pool = p;
    log_info("pool: raft %llx on %s started (%s)", (unsigned long long)p->id, p->addr,
             bootstrap ? "new pool" : "existing log");
    return 0;
}

void mgmt_pool_stop(struct mgmt *m)
{
    struct mgmt_pool *p = m->pool;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_mutex_unlock(&p->lock);
    uv_async_send(&p->async);
    pthread_join(p->thread, NULL);
    m->pool = NULL;
    mgmt_applier_stop(m);
    /* requests still queued were never submitted */
    while (p->head) {
        struct req *r = p->head;
        p->head = r->next;
        if (r->buf.base)
            raft_free(r->buf.base);
        r->status = RAFT_SHUTDOWN;
        r->done = 1;
        if (r->abandoned)
            free(r);
    }
    log_info("pool: raft stopped");
    free(p);
}

/* Queues r and waits for it; returns the raft status (0 on success). */
static int run_req(struct mgmt_pool *p, struct req *r, int timeout_ms, char *err, size_t errlen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    r->pool = p;
    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        pthread_mutex_unlock(&p->lock);
        if (r->buf.base)
            raft_free(r->buf.base);
        free(r);
        snprintf(err, errlen, "cairnd is leaving the pool");
        return RAFT_SHUTDOWN;
    }
    if (p->tail)
        p->tail->next = r;
    else
        p->head = r;
    p->tail = r;
    pthread_mutex_unlock(&p->lock);
    uv_async_send(&p->async);
    pthread_mutex_lock(&p->lock);
    while (!r->done)
        if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
            break;
    int rc;
    if (!r->done) {
        r->abandoned = 1; /* freed by its callback */
        snprintf(err, errlen,
                 "no answer from the pool in %d s (is a majority of its servers "
                 "up?); the change may still take effect",
                 timeout_ms / 1000);
        rc = -ETIMEDOUT;
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    pthread_mutex_unlock(&p->lock);
    rc = r->status;
    if (rc)
        snprintf(err, errlen, "%s", r->errmsg[0] ? r->errmsg : raft_strerror(rc));
    free(r);
    return rc;
}

static int to_errno(int rc)
{
    if (rc < 0)
        return rc;
    switch (rc) {
    case 0:
        return 0;
    case RAFT_NOTLEADER:
    case RAFT_LEADERSHIPLOST:
        return -EAGAIN;
    case RAFT_NOMEM:
        return -ENOMEM;
    case RAFT_SHUTDOWN:
        return -ESHUTDOWN;
    default:
        return -EIO;
    }
}

int mgmt_pool_propose(struct mgmt_pool *p, const void *data, size_t len, char *err, size_t errlen)
{
    struct req *r = calloc(1, sizeof(*r));
    if (!r || !(r->buf.base = wrap(data, len))) {
        free(r);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->buf.len = wrapped_len(len);
    r->kind = R_APPLY;
    return to_errno(run_req(p, r, REQ_WAIT_MS, err, errlen));
}

int mgmt_pool_add_voter(struct mgmt_pool *p, uint64_t id, const char *addr, char *err,
                        size_t errlen)
{
    struct req *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->kind = R_ADD;
    r->id = id;
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    return to_errno(run_req(p, r, ADD_WAIT_MS, err, errlen));
}

int mgmt_pool_remove(struct mgmt_pool *p, uint64_t id, char *err, size_t errlen)
{
    struct req *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->kind = R_REMOVE;
    r->id = id;
    return to_errno(run_req(p, r, REQ_WAIT_MS, err, errlen));
}

void mgmt_pool_info(struct mgmt_pool *p, struct mgmt_pool_info *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->info;
    pthread_mutex_unlock(&p->lock);
}

uint64_t mgmt_pool_wait_leader(struct mgmt_pool *p, int timeout_ms)
{
    struct timespec ts;
    net_deadline(&ts, CLOCK_REALTIME, timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    pthread_mutex_lock(&p->lock);
    while (!p->info.leader_id)
        if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
            break;
    uint64_t id = p->info.leader_id;
    pthread_mutex_unlock(&p->lock);
    return id;
}
