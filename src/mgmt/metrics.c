/* cairnd's metrics endpoint (docs/metrics.md): GET /metrics over HTTP/1.x
 * answers the counters of this server's bricks in Prometheus' text format.
 *
 * Off unless cairnd is started with --metrics ADDR[:PORT]. Who may scrape
 * follows the management interface's rule: this host only, unless
 * --metrics-allow lists other addresses (auth.allow's patterns).
 *
 * One thread accepts; each connection gets a thread of its own (at most
 * METRICS_CONNS at once, others are answered 503), which reads one request
 * head within METRICS_READ_MS, answers it and closes. A scrape asks each
 * running brick of this server for its monitor counters (STATS with
 * RPC_STATS_MONITOR), all at once on connections of their own, and waits
 * METRICS_BRICK_MS at most for their answers. None of this takes m->lock but to copy the brick
 * list, so a slow or stuck scraper, or a stuck brick, delays nothing else of cairnd. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../rpc/conn.h"
#include "../rpc/opinfo.h"
#include "../rpc/tls.h"
#include "http.h"
#include "mgmt.h"
#include "shd.h"

#define METRICS_CONNS 8
#define METRICS_READ_MS 5000
#define METRICS_WRITE_MS 10000
#define METRICS_BRICK_MS 3000
#define SHD_KEYS 6

static int n_conns; /* connections being served (atomic) */

struct scraper {
    struct mgmt *m;
    int fd;
    char addr[INET6_ADDRSTRLEN];
    int local;
};

/* One brick as a scrape sees it. */
struct mbrick {
    char vol[MGMT_VOLNAME_MAX + 1];
    char name[NET_HOST_MAX + PATH_MAX + 2]; /* host:path, the brick label */
    struct net_addr addr;
    pid_t pid;
    unsigned restarts;
    struct rpc_frame *reply; /* the STATS MONITOR answer; NULL: down or silent */
    struct rpc_tls_ctx *tls; /* server.ssl: a reference; NULL: plain */
};

/* The bricks this server serves in started volumes, under m->lock. */
static int snapshot(struct mgmt *m, struct mbrick **out)
{
    int n = 0, cap = 0;
    struct mbrick *t = NULL;
    pthread_mutex_lock(&m->lock);
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        if (v->status != MGMT_VOL_STARTED)
            continue;
        char why[256];
        struct rpc_tls_ctx *tls = mgmt_brick_tls(v, why, sizeof(why));
        for (int i = 0; i < v->n_bricks; i++) {
            const struct mgmt_brick *b = &v->bricks[i];
            if (!b->local)
                continue;
            if (n == cap) {
                struct mbrick *nt = realloc(t, (size_t)(cap = cap ? cap * 2 : 8) * sizeof(*t));
                if (!nt)
                    break;
                t = nt;
            }
            struct mbrick *x = &t[n++];
            memset(x, 0, sizeof(*x));
            snprintf(x->vol, sizeof(x->vol), "%s", v->name);
            snprintf(x->name, sizeof(x->name), "%s:%s", b->host, b->path);
            snprintf(x->addr.host, sizeof(x->addr.host), "%s", b->host);
            x->addr.port = b->port;
            x->pid = b->pid;
            x->restarts = b->restarts;
            if ((x->tls = tls))
                rpc_tls_ctx_get(tls);
        }
        rpc_tls_ctx_put(tls);
    }
    pthread_mutex_unlock(&m->lock);
    *out = t;
    return n;
}

/* The questions of one scrape, asked of every brick at once. */
struct asking {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int pending; /* calls whose callback has not run */
};

struct question {
    struct asking *a;
    struct mbrick *b;
};

static void answer_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct question *q = arg;
    struct asking *a = q->a;
    pthread_mutex_lock(&a->lock);
    if (status == 0 && reply) {
        q->b->reply = reply;
        *take = 1;
    } else {
        log_debug("metrics: brick %s did not answer STATS: %s", q->b->name, strerror(-status));
    }
    if (--a->pending == 0)
        pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

/* Asks every running brick of t for its monitor counters, all at once,
 * and waits METRICS_BRICK_MS at most: a stopped or wedged brick costs a
 * scrape that long once, however many there are. Fills each reply. */
static void ask_bricks(struct mbrick *t, int n)
{
    struct asking a = {.pending = 0};
    pthread_mutex_init(&a.lock, NULL);
    net_cond_init_mono(&a.cond);
    struct rpc_conn **conns = calloc((size_t)n + 1, sizeof(*conns));
    struct question *qs = calloc((size_t)n + 1, sizeof(*qs));
    if (!conns || !qs)
        goto out;
    uint64_t end = net_now_ms() + METRICS_BRICK_MS;
    struct rpc_buf body;
    rpc_buf_init(&body);
    rpc_put_u64(&body, RPC_T_FLAGS, RPC_STATS_MONITOR);
    for (int i = 0; i < n; i++) {
        struct mbrick *b = &t[i];
        uint64_t now = net_now_ms();
        if (b->pid <= 0 || !b->addr.port || now >= end)
            continue;
        char why[256];
        int err = 0;
        if (!(conns[i] = rpc_conn_dial(&b->addr, (int)(end - now), b->tls, NULL, NULL, b->name,
                                       &err, why, sizeof(why))))
            continue;
        if (rpc_conn_start(conns[i]) < 0)
            continue;
        qs[i] = (struct question){.a = &a, .b = b};
        pthread_mutex_lock(&a.lock);
        a.pending++;
        pthread_mutex_unlock(&a.lock);
        if (rpc_conn_call(conns[i], RPC_OP_STATS, &body, answer_cb, &qs[i]) < 0) {
            pthread_mutex_lock(&a.lock);
            a.pending--;
            pthread_mutex_unlock(&a.lock);
        }
    }
    rpc_buf_free(&body);
    struct timespec ts;
    net_deadline(&ts, CLOCK_MONOTONIC, end > net_now_ms() ? end - net_now_ms() : 0);
    pthread_mutex_lock(&a.lock);
    while (a.pending > 0 && pthread_cond_timedwait(&a.cond, &a.lock, &ts) == 0)
        ;
    pthread_mutex_unlock(&a.lock);
    /* Closing fails the calls still pending; their callbacks run on the
     * readers' threads, and are waited for before qs goes. */
    for (int i = 0; i < n; i++)
        if (conns[i])
            rpc_conn_close(conns[i], -ETIMEDOUT);
    pthread_mutex_lock(&a.lock);
    while (a.pending > 0)
        pthread_cond_wait(&a.cond, &a.lock);
    pthread_mutex_unlock(&a.lock);
    for (int i = 0; i < n; i++)
        if (conns[i])
            rpc_conn_put(conns[i]);
out:
    free(conns);
    free(qs);
    pthread_mutex_destroy(&a.lock);
    pthread_cond_destroy(&a.cond);
}

/* A label value with \, " and newline escaped. */
static void put_label(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(out, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", out);
        else
            fputc(*s, out);
    }
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{volume="V",brick="B"[,op="OP"] with the brace left open. */
static void sample(FILE *out, const char *name, const struct mbrick *b, const char *op)
{
    fprintf(out, "%s{volume=\"", name);
    put_label(out, b->vol);
    fputs("\",brick=\"", out);
    put_label(out, b->name);
    if (op)
        fprintf(out, "\",op=\"%s", op);
    fputc('"', out);
}

static void errno_name(unsigned e, char *buf, size_t len)
{
    const char *n = strerrorname_np((int)e);
    if (n)
        snprintf(buf, len, "%s", n);
    else
        snprintf(buf, len, "E%u", e);
}

typedef void (*opstat_fn)(FILE *out, const struct mbrick *b, const char *op,
                          const struct rpc_msg *s);

/* Calls fn for each OPSTAT of each brick that answered. */
static void each_opstat(FILE *out, const struct mbrick *t, int n, opstat_fn fn)
{
    for (int i = 0; i < n; i++) {
        if (!t[i].reply)
            continue;
        struct rpc_iter it;
        struct rpc_field f;
        rpc_iter_init(&it, t[i].reply->body, t[i].reply->hdr.body_len);
        while (rpc_iter_next(&it, &f) > 0) {
            struct rpc_msg s;
            if (f.tag != RPC_T_OPSTAT || rpc_msg_decode(f.val, f.len, &s, NULL) < 0 ||
                !rpc_has(&s, RPC_T_OP) || !rpc_has(&s, RPC_T_CALLS))
                continue;
            fn(out, &t[i], rpc_op_name(s.op), &s);
        }
    }
}

static void put_requests(FILE *out, const struct mbrick *b, const char *op, const struct rpc_msg *s)
{
    sample(out, "cairn_brick_requests_total", b, op);
    fprintf(out, "} %llu\n", (unsigned long long)s->calls);
}

static void put_histogram(FILE *out, const struct mbrick *b, const char *op,
                          const struct rpc_msg *s)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, s->body, s->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg x;
        if (f.tag != RPC_T_BUCKET || rpc_msg_decode(f.val, f.len, &x, NULL) < 0)
            continue;
        sample(out, "cairn_brick_request_duration_seconds_bucket", b, op);
        fprintf(out, ",le=\"%g\"} %llu\n", (double)x.nsec / 1e9, (unsigned long long)x.calls);
    }
    sample(out, "cairn_brick_request_duration_seconds_bucket", b, op);
    fprintf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)s->calls);
    sample(out, "cairn_brick_request_duration_seconds_sum", b, op);
    fprintf(out, "} %.9f\n", rpc_has(s, RPC_T_NSEC) ? (double)s->nsec / 1e9 : 0.0);
    sample(out, "cairn_brick_request_duration_seconds_count", b, op);
    fprintf(out, "} %llu\n", (unsigned long long)s->calls);
}

static void put_errors(FILE *out, const struct mbrick *b, const char *op, const struct rpc_msg *s)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, s->body, s->body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg x;
        if (f.tag != RPC_T_ERRSTAT || rpc_msg_decode(f.val, f.len, &x, NULL) < 0)
            continue;
        char name[32];
        errno_name((unsigned)x.err, name, sizeof(name));
        sample(out, "cairn_brick_errors_total", b, op);
        fprintf(out, ",errno=\"%s\"} %llu\n", name, (unsigned long long)x.calls);
    }
}

/* The bytes of op (READ or WRITE) on b, 0 when none. */
static uint64_t op_bytes(const struct mbrick *b, unsigned op)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, b->reply->body, b->reply->hdr.body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg s;
        if (f.tag == RPC_T_OPSTAT && rpc_msg_decode(f.val, f.len, &s, NULL) == 0 && s.op == op)
            return rpc_has(&s, RPC_T_SIZE) ? s.size : 0;
    }
    return 0;
}

/* The brick-wide COUNTER named name, or -1 when absent. */
static long long brick_counter(const struct mbrick *b, const char *name)
{
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, b->reply->body, b->reply->hdr.body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg s;
        if (f.tag == RPC_T_COUNTER && rpc_msg_decode(f.val, f.len, &s, NULL) == 0 &&
            rpc_has(&s, RPC_T_NAME) && s.name.len == strlen(name) &&
            memcmp(s.name.p, name, s.name.len) == 0)
            return (long long)s.calls;
    }
    return -1;
}

struct per_brick {
    const char *metric, *type, *help;
    unsigned op;         /* op_bytes of it, when counter is NULL */
    const char *counter; /* a brick-wide COUNTER */
};

static const struct per_brick per_brick[] = {
    {"cairn_brick_read_bytes_total", "counter", "Bytes read from the brick by READ requests.",
     RPC_OP_READ, NULL},
    {"cairn_brick_written_bytes_total", "counter", "Bytes written to the brick by WRITE requests.",
     RPC_OP_WRITE, NULL},
    {"cairn_brick_heal_pending_entries", "gauge",
     "Objects in the brick's heal index (what volume heal info lists).", 0, "heal_pending"},
    {"cairn_brick_lease_grants_total", "counter", "Leases granted to clients by the brick.", 0,
     "lease_grants"},
    {"cairn_brick_lease_recalls_total", "counter", "Lease recalls the brick sent to clients.", 0,
     "lease_recalls"},
    {"cairn_brick_lease_revocations_total", "counter",
     "Leases the brick revoked because their holder did not return them in time.", 0,
     "lease_revocations"},
};

/* What this server's self-heal daemon of a volume last wrote about one of
 * its bricks (cairn-shd's statistics file, read by `volume heal VOL
 * statistics` too). */
struct shdrow {
    char vol[MGMT_VOLNAME_MAX + 1];
    char brick[NET_HOST_MAX + PATH_MAX + 2];
    long long v[SHD_KEYS];
};

static const char *const shd_keys[SHD_KEYS] = {"crawls", "total_healed", "total_copied",
                                               "failed", "split",        "end"};

static const struct {
    const char *metric, *type, *help;
} shd_metrics[SHD_KEYS] = {
    {"cairn_shd_crawls_total", "counter",
     "Index crawls the self-heal daemon finished on the brick (since the daemon started)."},
    {"cairn_shd_healed_entries_total", "counter",
     "Entries the self-heal daemon healed from the brick's index (since the daemon started)."},
    {"cairn_shd_heal_copied_bytes_total", "counter",
     "Bytes the self-heal daemon copied healing the brick's entries (since the daemon started)."},
    {"cairn_shd_heal_failed_entries", "gauge",
     "Entries whose heal failed in the daemon's last crawl of the brick."},
    {"cairn_shd_split_brain_entries", "gauge",
     "Entries in split-brain in the daemon's last crawl of the brick."},
    {"cairn_shd_last_crawl_end_timestamp_seconds", "gauge",
     "When the daemon's last crawl of the brick ended (Unix time)."},
};

/* Appends the rows of volume vol's statistics file to *rows. */
static void read_shd(struct mgmt *m, const char *vol, struct shdrow **rows, int *n, int *cap)
{
    char path[PATH_MAX + 64], line[PATH_MAX + 128];
    mgmt_shd_stats_path(m, vol, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    struct shdrow *cur = NULL;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "brick ", 6) == 0) {
            const char *name = strchr(line + 6, ' ');
            cur = NULL;
            if (!name)
                continue;
            if (*n == *cap) {
                int nc = *cap ? *cap * 2 : 8;
                struct shdrow *nr = realloc(*rows, (size_t)nc * sizeof(*nr));
                if (!nr)
                    continue;
                *rows = nr;
                *cap = nc;
            }
            cur = &(*rows)[(*n)++];
            memset(cur, 0, sizeof(*cur));
            snprintf(cur->vol, sizeof(cur->vol), "%s", vol);
            snprintf(cur->brick, sizeof(cur->brick), "%s", name + 1);
            continue;
        }
        char key[32];
        long long x;
        if (!cur || sscanf(line, "%31s %lld", key, &x) != 2)
            continue;
        for (int k = 0; k < SHD_KEYS; k++)
            if (strcmp(key, shd_keys[k]) == 0)
                cur->v[k] = x;
    }
    fclose(f);
}

static void render_shd(struct mgmt *m, FILE *out)
{
    char(*vols)[MGMT_VOLNAME_MAX + 1] = NULL;
    int nv = 0;
    pthread_mutex_lock(&m->lock);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        nv += v->status == MGMT_VOL_STARTED && v->replica >= 2;
    if (nv && (vols = calloc((size_t)nv, sizeof(*vols)))) {
        int i = 0;
        for (struct mgmt_vol *v = m->vols; v; v = v->next)
            if (v->status == MGMT_VOL_STARTED && v->replica >= 2)
                snprintf(vols[i++], sizeof(vols[0]), "%s", v->name);
    }
    pthread_mutex_unlock(&m->lock);
    struct shdrow *rows = NULL;
    int n = 0, cap = 0;
    for (int i = 0; vols && i < nv; i++)
        read_shd(m, vols[i], &rows, &n, &cap);
    for (int k = 0; k < SHD_KEYS; k++) {
        family(out, shd_metrics[k].metric, shd_metrics[k].type, shd_metrics[k].help);
        for (int i = 0; i < n; i++) {
            fprintf(out, "%s{volume=\"", shd_metrics[k].metric);
            put_label(out, rows[i].vol);
            fputs("\",brick=\"", out);
            put_label(out, rows[i].brick);
            fprintf(out, "\"} %lld\n", rows[i].v[k]);
        }
    }
    free(rows);
    free(vols);
}

/* ---- mounts' reports (MGMT_CLIENT_STATS) ---- */

#define CLIENT_COUNTERS 16

struct creport {
    struct creport *next;
    const void *key; /* the connection's (server.c's struct peer) */
    char vol[MGMT_VOLNAME_MAX + 1];
    char host[INET6_ADDRSTRLEN];
    char mount[PATH_MAX];
    int n;
    struct {
        char name[32];
        uint64_t v;
    } c[CLIENT_COUNTERS];
};

static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct creport *clients;

static const struct {
    const char *counter, *metric, *type, *help;
    double scale;
} client_metrics[] = {
    {"wb_pending_files", "cairn_client_write_back_pending_files", "gauge",
     "Files the mount made that are not on the bricks yet (write-back queue).", 1},
    {"wb_pending_bytes", "cairn_client_write_back_pending_bytes", "gauge", "Bytes of those files.",
     1},
    {"wb_oldest_ms", "cairn_client_write_back_oldest_age_seconds", "gauge",
     "Age of the oldest closed file waiting in the write-back queue (0: none).", 0.001},
    {"wb_made", "cairn_client_write_back_files_total", "counter",
     "Files the mount made by write-back since it started.", 1},
    {"read_cache_hits", "cairn_client_read_cache_hits_total", "counter",
     "Reads the mount's read cache answered.", 1},
    {"read_cache_misses", "cairn_client_read_cache_misses_total", "counter",
     "Reads the read cache could hold but did not: fetched from the bricks.", 1},
    {"read_cache_bytes", "cairn_client_read_cache_bytes", "gauge",
     "Bytes the mount's read cache holds.", 1},
    {"resident_bytes", "cairn_client_resident_memory_bytes", "gauge",
     "Resident memory of the mount's process.", 1},
};
#define N_CLIENT_METRICS (sizeof(client_metrics) / sizeof(client_metrics[0]))

void mgmt_metrics_client_report(const void *key, const char *vol, const char *addr,
                                const struct rpc_msg *msg)
{
    struct creport r;
    memset(&r, 0, sizeof(r));
    r.key = key;
    snprintf(r.vol, sizeof(r.vol), "%s", vol);
    snprintf(r.host, sizeof(r.host), "%s", addr);
    if (rpc_has(msg, RPC_T_PATH))
        rpc_bytes_str(&msg->path, r.mount, sizeof(r.mount));
    struct rpc_iter it;
    struct rpc_field f;
    rpc_iter_init(&it, msg->body, msg->body_len);
    while (rpc_iter_next(&it, &f) > 0 && r.n < CLIENT_COUNTERS) {
        struct rpc_msg s;
        if (f.tag != RPC_T_COUNTER || rpc_msg_decode(f.val, f.len, &s, NULL) < 0 ||
            !rpc_has(&s, RPC_T_NAME) || !rpc_has(&s, RPC_T_CALLS) ||
            rpc_bytes_str(&s.name, r.c[r.n].name, sizeof(r.c[r.n].name)) < 0)
            continue;
        r.c[r.n++].v = s.calls;
    }
    pthread_mutex_lock(&clients_lock);
    struct creport *mine = NULL;
    /* One series per mount: a report over a new connection (the mount
     * reconnected) replaces the old connection's. */
    for (struct creport **pp = &clients; *pp;) {
        struct creport *x = *pp;
        if (x->key == key) {
            mine = x;
        } else if (!strcmp(x->vol, r.vol) && !strcmp(x->host, r.host) &&
                   !strcmp(x->mount, r.mount)) {
            *pp = x->next;
            free(x);
            continue;
        }
        pp = &x->next;
    }
    if (!mine && (mine = malloc(sizeof(*mine)))) {
        mine->next = clients;
        clients = mine;
    }
    if (mine) {
        struct creport *next = mine->next;
        *mine = r;
        mine->next = next;
    }
    pthread_mutex_unlock(&clients_lock);
}

void mgmt_metrics_client_gone(const void *key)
{
    pthread_mutex_lock(&clients_lock);
    for (struct creport **pp = &clients; *pp; pp = &(*pp)->next)
        if ((*pp)->key == key) {
            struct creport *x = *pp;
            *pp = x->next;
            free(x);
            break;
        }
    pthread_mutex_unlock(&clients_lock);
}

static void render_clients(FILE *out)
{
    pthread_mutex_lock(&clients_lock);
    for (size_t k = 0; k < N_CLIENT_METRICS; k++) {
        family(out, client_metrics[k].metric, client_metrics[k].type, client_metrics[k].help);
        for (struct creport *x = clients; x; x = x->next)
            for (int i = 0; i < x->n; i++) {
                if (strcmp(x->c[i].name, client_metrics[k].counter) != 0)
                    continue;
                fprintf(out, "%s{volume=\"", client_metrics[k].metric);
                put_label(out, x->vol);
                fputs("\",client=\"", out);
                put_label(out, x->host);
                fputs("\",mount=\"", out);
                put_label(out, x->mount);
                if (client_metrics[k].scale == 1)
                    fprintf(out, "\"} %llu\n", (unsigned long long)x->c[i].v);
                else
                    fprintf(out, "\"} %.3f\n", (double)x->c[i].v * client_metrics[k].scale);
                break;
            }
    }
    pthread_mutex_unlock(&clients_lock);
}

/* The whole exposition into out. */
static void render(struct mgmt *m, FILE *out)
{
    struct mbrick *t = NULL;
    int n = snapshot(m, &t);
    ask_bricks(t, n);
    family(out, "cairn_brick_up", "gauge",
           "1 when the brick's process runs and answered this scrape, else 0.");
    for (int i = 0; i < n; i++) {
        sample(out, "cairn_brick_up", &t[i], NULL);
        fprintf(out, "} %d\n", t[i].reply != NULL);
    }
    family(out, "cairn_brick_restarts_total", "counter",
           "Times cairnd restarted the brick's process since cairnd started.");
    for (int i = 0; i < n; i++) {
        sample(out, "cairn_brick_restarts_total", &t[i], NULL);
        fprintf(out, "} %u\n", t[i].restarts);
    }
    family(out, "cairn_brick_requests_total", "counter",
           "Requests the brick executed, by operation (since the brick process started).");
    each_opstat(out, t, n, put_requests);
    family(out, "cairn_brick_request_duration_seconds", "histogram",
           "Execution time of the brick's requests, by operation.");
    each_opstat(out, t, n, put_histogram);
    family(out, "cairn_brick_errors_total", "counter",
           "Requests the brick failed, by operation and errno.");
    each_opstat(out, t, n, put_errors);
    for (size_t k = 0; k < sizeof(per_brick) / sizeof(per_brick[0]); k++) {
        const struct per_brick *p = &per_brick[k];
        family(out, p->metric, p->type, p->help);
        for (int i = 0; i < n; i++) {
            if (!t[i].reply)
                continue;
            long long v =
                p->counter ? brick_counter(&t[i], p->counter) : (long long)op_bytes(&t[i], p->op);
            if (v < 0)
                continue;
            sample(out, p->metric, &t[i], NULL);
            fprintf(out, "} %lld\n", v);
        }
    }
    family(out, "cairn_brick_lease_recall_duration_seconds", "summary",
           "Time from a lease recall to its end (returned, revoked, or the holder gone).");
    for (int i = 0; i < n; i++) {
        long long ended, ms;
        if (!t[i].reply || (ended = brick_counter(&t[i], "lease_recalls_ended")) < 0 ||
            (ms = brick_counter(&t[i], "lease_recall_ms")) < 0)
            continue;
        sample(out, "cairn_brick_lease_recall_duration_seconds_sum", &t[i], NULL);
        fprintf(out, "} %.3f\n", (double)ms / 1000.0);
        sample(out, "cairn_brick_lease_recall_duration_seconds_count", &t[i], NULL);
        fprintf(out, "} %lld\n", ended);
    }
    render_shd(m, out);
    render_clients(out);
    family(out, "cairn_volume_started", "gauge",
           "1 for each volume that is started (volumes of the pool, whichever server serves "
           "them), 0 for one created or stopped.");
    pthread_mutex_lock(&m->lock);
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        fputs("cairn_volume_started{volume=\"", out);
        put_label(out, v->name);
        fprintf(out, "\"} %d\n", v->status == MGMT_VOL_STARTED);
    }
    pthread_mutex_unlock(&m->lock);
    for (int i = 0; i < n; i++) {
        if (t[i].reply)
            rpc_frame_free(t[i].reply);
        rpc_tls_ctx_put(t[i].tls);
    }
    free(t);
}

/* Reads one request head; 0 with *req, or a negative status. */
static int read_head(int fd, struct http_req *req)
{
    uint8_t buf[HTTP_HEAD_MAX];
    size_t len = 0;
    uint64_t end = net_now_ms() + METRICS_READ_MS;
    for (;;) {
        uint64_t now = net_now_ms();
        if (now >= end)
            return -408;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(end - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -408;
        ssize_t got = recv(fd, buf + len, sizeof(buf) - len, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1; /* gone: nothing to answer */
        len += (size_t)got;
        long rc = http_parse_request(buf, len, req);
        if (rc != 0)
            return rc < 0 ? (int)rc : 0;
    }
}

static void respond(int fd, int status, const char *type, const char *body, size_t len, int head)
{
    char hdr[256];
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%sConnection: close\r\n\r\n",
                     status, http_reason(status), type, len,
                     status == 405 ? "Allow: GET, HEAD\r\n" : "");
    if (net_write_all(fd, hdr, (size_t)n) == 0 && !head && len)
        net_write_all(fd, body, len);
}

static void error_reply(int fd, int status)
{
    char body[64];
    int n = snprintf(body, sizeof(body), "%d %s\n", status, http_reason(status));
    respond(fd, status, "text/plain; charset=utf-8", body, (size_t)n, 0);
}

static void serve(struct scraper *s)
{
    struct http_req req;
    int rc = read_head(s->fd, &req);
    if (rc == -1)
        return;
    if (rc < 0) {
        log_debug("metrics: refusing a request from %s: %d", s->addr, -rc);
        error_reply(s->fd, -rc);
        return;
    }
    if (strcmp(req.path, "/metrics") != 0) {
        error_reply(s->fd, 404);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        error_reply(s->fd, 503);
        return;
    }
    render(s->m, out);
    fclose(out);
    respond(s->fd, 200, "text/plain; version=0.0.4; charset=utf-8", text, len,
            req.method == HTTP_HEAD);
    free(text);
}

/* Closes after an answer: our side first, then what the peer still sends
 * is read and dropped for a moment, so that closing with unread bytes
 * (the rest of a refused request) does not reset the connection before
 * the peer has read the answer. */
static void linger_close(int fd)
{
    shutdown(fd, SHUT_WR);
    uint64_t end = net_now_ms() + 1000;
    char sink[4096];
    for (size_t total = 0; total < 65536;) {
        uint64_t now = net_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
            break;
        ssize_t got = recv(fd, sink, sizeof(sink), 0);
        if (got <= 0)
            break;
        total += (size_t)got;
    }
    close(fd);
}

static void *conn_main(void *arg)
{
    struct scraper *s = arg;
    serve(s);
    linger_close(s->fd);
    free(s);
    __atomic_sub_fetch(&n_conns, 1, __ATOMIC_RELAXED);
    return NULL;
}

struct listener {
    struct mgmt *m;
    int fd;
    char *allow; /* NULL: this host only */
};

static void accept_one(struct listener *l)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            log_warn("metrics: accept: %s", strerror(errno));
        return;
    }
    /* Writes to a scraper that stopped reading give up. */
    struct timeval tv = {METRICS_WRITE_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct scraper *s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        return;
    }
    s->m = l->m;
    s->fd = fd;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, s->addr, sizeof(s->addr));
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, s->addr, sizeof(s->addr));
    int allowed =
        mgmt_addr_is_local(&ss) || (l->allow && opt_addr_allowed(l->allow, NULL, s->addr));
    int busy = __atomic_add_fetch(&n_conns, 1, __ATOMIC_RELAXED) > METRICS_CONNS;
    pthread_t t;
    if (!allowed || busy || pthread_create(&t, NULL, conn_main, s) != 0) {
        /* Answered here, without reading: short, and the socket's buffer
         * takes it. */
        if (!allowed)
            log_warn("metrics: refusing a scrape from %s (not this host, not in "
                     "--metrics-allow)",
                     s->addr);
        error_reply(fd, allowed ? 503 : 403);
        close(fd);
        free(s);
        __atomic_sub_fetch(&n_conns, 1, __ATOMIC_RELAXED);
        return;
    }
    pthread_detach(t);
}

static void *listen_main(void *arg)
{
    struct listener *l = arg;
    while (!l->m->stopping) {
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        int n = poll(&p, 1, 500);
        if (n > 0)
            accept_one(l);
    }
    close(l->fd);
    free(l->allow);
    free(l);
    return NULL;
}

int mgmt_metrics_start(struct mgmt *m, int fd, const char *allow)
{
    struct listener *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->m = m;
    l->fd = fd;
    if (allow && !(l->allow = strdup(allow))) {
        free(l);
        return -ENOMEM;
    }
    pthread_t t;
    int rc = pthread_create(&t, NULL, listen_main, l);
    if (rc) {
        free(l->allow);
        free(l);
        return -rc;
    }
    pthread_detach(t);
    return 0;
}
