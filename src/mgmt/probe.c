/* Whether this server's brick processes answer: a thread keeps one
 * connection to each running brick and asks it every PROBE_EVERY_MS, with
 * a HANDSHAKE (answered by the brick's reader thread, as a ping is, but
 * refused with EIO while the brick's disk stalls: server.c). A process
 * that exists but has left a question unanswered, or refused, for
 * PROBE_ANSWER_MS (stopped with SIGSTOP, wedged, its disk stalled) is
 * offline for `volume status`.
 *
 * Only the display follows: the supervisor restarts processes that died,
 * never one that is merely silent (a brick stopped in a debugger, or by a
 * test, comes back as it was when continued).
 *
 * `volume status` only reads what the thread found: it never waits for a
 * brick. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/client.h"
#include "../lib/log.h"
#include "../rpc/conn.h"
#include "mgmt.h"

#define PROBE_EVERY_MS 1000
#define PROBE_ANSWER_MS 2000
#define PROBE_PASS_MS 250
#define PROBE_CONNECT_MS 500

struct probe {
    struct probe *next;
    char id[GFID_STRLEN];
    char name[NET_HOST_MAX + PATH_MAX + 2]; /* host:path, for the log */
    struct net_addr addr;
    char vol[MGMT_VOLNAME_MAX + 1];
    pid_t pid;
    int refs;          /* the table's, and one per question in flight */
    uint64_t asked_ms; /* since when an answer is owed (0: none): the oldest
                        * question unanswered, or the first failed connect */
    int inflight;      /* questions sent and not yet answered or failed */
    /* the probe thread's alone: */
    struct rpc_conn *c;
    uint64_t sent_ms;
    int silent, seen;
};

/* The table; every field above "the probe thread's alone" under the lock.
 * Only the probe thread adds and removes entries. */
static pthread_mutex_t probes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct probe *probes;

static void probe_put(struct probe *p)
{
    pthread_mutex_lock(&probes_lock);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&probes_lock);
    if (last)
        free(p);
}

static void answer_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct probe *p = arg;
    (void)take;
    pthread_mutex_lock(&probes_lock);
    p->inflight--;
    /* Any answer but the refusal of a brick whose disk stalls (another,
     * such as auth.allow not listing this server, comes from a brick that
     * runs); none at all when reply is NULL (the connection failed). */
    if (reply && status != -EIO)
        p->asked_ms = 0;
    pthread_mutex_unlock(&probes_lock);
    probe_put(p);
}

static void drop_conn(struct probe *p)
{
    if (!p->c)
        return;
    rpc_conn_close(p->c, 0);
    rpc_conn_put(p->c);
    p->c = NULL;
}

struct target {
    char id[GFID_STRLEN];
    char vol[MGMT_VOLNAME_MAX + 1];
    char name[NET_HOST_MAX + PATH_MAX + 2];
    struct net_addr addr;
    pid_t pid;
};

/* The running bricks of this server, read under m->lock. */
static int targets(struct mgmt *m, struct target **out)
{
    int n = 0, cap = 0;
    struct target *t = NULL;
    pthread_mutex_lock(&m->lock);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++) {
            const struct mgmt_brick *b = &v->bricks[i];
            if (!b->local || b->pid <= 0)
                continue;
            if (n == cap) {
                struct target *nt = realloc(t, (size_t)(cap = cap ? cap * 2 : 8) * sizeof(*t));
                if (!nt)
                    break;
                t = nt;
            }
            struct target *x = &t[n++];
            snprintf(x->id, sizeof(x->id), "%s", b->id);
            snprintf(x->vol, sizeof(x->vol), "%s", v->name);
            snprintf(x->name, sizeof(x->name), "%s:%s", b->host, b->path);
            snprintf(x->addr.host, sizeof(x->addr.host), "%s", b->host);
            x->addr.port = b->port;
            x->pid = b->pid;
        }
    pthread_mutex_unlock(&m->lock);
    *out = t;
    return n;
}

/* Makes the table match the running bricks: a brick restarted (another
 * pid or port) starts over. */
static void reconcile(const struct target *t, int n)
{
    struct probe *gone = NULL;
    pthread_mutex_lock(&probes_lock);
    for (struct probe *p = probes; p; p = p->next)
        p->seen = 0;
    for (int i = 0; i < n; i++) {
        struct probe *p = probes;
        while (p && strcmp(p->id, t[i].id) != 0)
            p = p->next;
        if (p && (p->pid != t[i].pid || p->addr.port != t[i].addr.port))
            p->seen = 0; /* replaced below */
        else if (p) {
            p->seen = 1;
            continue;
        }
        struct probe *np = calloc(1, sizeof(*np));
        if (!np)
            continue;
        snprintf(np->id, sizeof(np->id), "%s", t[i].id);
        snprintf(np->vol, sizeof(np->vol), "%s", t[i].vol);
        snprintf(np->name, sizeof(np->name), "%s", t[i].name);
        np->addr = t[i].addr;
        np->pid = t[i].pid;
        np->refs = 1;
        np->seen = 1;
        np->next = probes;
        probes = np;
    }
    for (struct probe **pp = &probes; *pp;) {
        struct probe *p = *pp;
        if (p->seen) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        p->next = gone;
        gone = p;
    }
    pthread_mutex_unlock(&probes_lock);
    while (gone) {
        struct probe *p = gone;
        gone = p->next;
        drop_conn(p);
        probe_put(p);
    }
}

/* One brick: connects when needed, asks when due, logs a change of
 * state. */
static void probe_one(struct probe *p, uint64_t now)
{
    int rc;
    if (p->c && !rpc_conn_is_open(p->c))
        drop_conn(p);
    if (!p->c) {
        char why[256];
        int err = 0;
        p->c =
            cl_mgmt_dial(&p->addr, PROBE_CONNECT_MS, NULL, NULL, p->name, &err, why, sizeof(why));
        if (!p->c && err != -ECONNREFUSED && err != -ETIMEDOUT && err != -EHOSTUNREACH)
            log_warn("probing %s: %s", p->name, why);
        if (p->c && rpc_conn_start(p->c) < 0)
            drop_conn(p);
        if (!p->c) {
            pthread_mutex_lock(&probes_lock);
            if (!p->asked_ms)
                p->asked_ms = now;
            pthread_mutex_unlock(&probes_lock);
        }
    }
    pthread_mutex_lock(&probes_lock);
    int send = p->c && p->inflight == 0 && now - p->sent_ms >= PROBE_EVERY_MS;
    if (send) {
        p->inflight++;
        p->refs++;
        if (!p->asked_ms)
            p->asked_ms = now;
    }
    int silent = p->asked_ms && now - p->asked_ms >= PROBE_ANSWER_MS;
    uint64_t since = p->asked_ms;
    pthread_mutex_unlock(&probes_lock);
    if (send) {
        p->sent_ms = now;
        struct rpc_buf body;
        rpc_buf_init(&body);
        rpc_put_str(&body, RPC_T_NAME, p->vol);
        rc = rpc_conn_call(p->c, RPC_OP_HANDSHAKE, &body, answer_cb, p);
        rpc_buf_free(&body);
        if (rc < 0) {
            pthread_mutex_lock(&probes_lock);
            p->inflight--;
            pthread_mutex_unlock(&probes_lock);
            probe_put(p);
        }
    }
    if (silent && !p->silent)
        log_warn("brick %s (pid %d) has not answered for %llu ms: shown offline", p->name,
                 (int)p->pid, (unsigned long long)(now - since));
    else if (!silent && p->silent)
        log_info("brick %s (pid %d) answers again", p->name, (int)p->pid);
    p->silent = silent;
}

static void *probe_main(void *arg)
{
    struct mgmt *m = arg;
    while (!m->stopping) {
        struct target *t = NULL;
        int n = targets(m, &t);
        reconcile(t, n);
        free(t);
        uint64_t now = net_now_ms();
        /* Only this thread changes the list: it walks it unlocked. */
        for (struct probe *p = probes; p; p = p->next)
            probe_one(p, now);
        struct timespec ts = {0, PROBE_PASS_MS * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    return NULL;
}

int mgmt_probe_start(struct mgmt *m)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, probe_main, m);
    if (rc)
        return -rc;
    pthread_detach(t);
    return 0;
}

int mgmt_brick_online(const struct mgmt_brick *b)
{
    if (b->pid <= 0 || kill(b->pid, 0) < 0)
        return 0;
    uint64_t now = net_now_ms();
    int ok = 1; /* not probed yet: the process runs */
    pthread_mutex_lock(&probes_lock);
    for (struct probe *p = probes; p; p = p->next)
        if (p->pid == b->pid && strcmp(p->id, b->id) == 0)
            ok = !p->asked_ms || now - p->asked_ms < PROBE_ANSWER_MS;
    pthread_mutex_unlock(&probes_lock);
    return ok;
}
