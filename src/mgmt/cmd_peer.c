/* peer probe | detach | status, pool list: forming the trusted pool.
 *
 * A probe turns a lone server into a pool: it starts a Raft log holding its
 * own state (bootstrap, then an IMPORT entry), asks the probed server to
 * join (it starts an empty Raft instance), adds it as a voter, and commits
 * its peer record. Probes and detaches run on the leader (pool_rpc.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "../lib/log.h"
#include "pool.h"
#include "pool_auth.h"

#define HELLO_MS 5000
#define CLOCK_SKEW_MAX 60 /* seconds two servers' clocks may differ */

struct hello {
    char uuid[GFID_STRLEN + 8];
    char raft[NET_HOST_MAX + 8];
    unsigned raft_port;
    int peers, volumes;
    long long clock;
};

static void copy(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

static int parse_hello(const char *text, struct hello *h)
{
    memset(h, 0, sizeof(*h));
    for (const char *p = text; p && *p;) {
        size_t n = strcspn(p, "\n");
        char line[NET_HOST_MAX + 32];
        snprintf(line, sizeof(line), "%.*s", (int)n, p);
        if (strncmp(line, "uuid=", 5) == 0)
            copy(h->uuid, sizeof(h->uuid), line + 5);
        else if (strncmp(line, "raft=", 5) == 0)
            copy(h->raft, sizeof(h->raft), line + 5);
        else if (strncmp(line, "raft-port=", 10) == 0)
            h->raft_port = (unsigned)atoi(line + 10);
        else if (strncmp(line, "peers=", 6) == 0)
            h->peers = atoi(line + 6);
        else if (strncmp(line, "volumes=", 8) == 0)
            h->volumes = atoi(line + 8);
        else if (strncmp(line, "clock=", 6) == 0)
            h->clock = atoll(line + 6);
        p += n;
        if (*p)
            p++;
    }
    gfid_t g;
    return strlen(h->uuid) == GFID_STRLEN - 1 && gfid_parse(h->uuid, &g) == 0 ? 0 : -EPROTO;
}

/* The name other servers know this one by. */
static void self_host(const struct mgmt *m, char *out, size_t len)
{
    if (strcmp(m->listen.host, "0.0.0.0") != 0 && strcmp(m->listen.host, "::") != 0) {
        snprintf(out, len, "%s", m->listen.host);
        return;
    }
    if (gethostname(out, len) < 0)
        snprintf(out, len, "localhost");
}

static int call_unlocked(struct mgmt *m, const char *host, uint16_t port, int argc,
                         const char *const *argv, char **text, int ms)
{
    pthread_mutex_unlock(&m->lock);
    int rc = mgmt_peer_call(host, port, argc, argv, text, ms);
    pthread_mutex_lock(&m->lock);
    return rc;
}

static void peer_entry(struct rpc_buf *e, enum mgmt_entry_kind kind, const struct mgmt_peer *p)
{
    rpc_buf_init(e);
    rpc_put_u64(e, RPC_T_OP, kind);
    rpc_put_str(e, RPC_T_ID, p->uuid);
    if (kind == MGMT_E_PEER_ADD) {
        rpc_put_str(e, RPC_T_HOST, p->host);
        rpc_put_u64(e, RPC_T_PORT, p->port);
        rpc_put_u64(e, RPC_T_OFFSET, p->raft_id);
        rpc_put_str(e, RPC_T_PATH, p->raft_addr);
    }
}

/* A lone server becomes a pool of one: a Raft log whose first entry is its
 * whole state, this server's peer record included. */
static int make_pool(struct mgmt *m, char *err, size_t errlen)
{
    struct mgmt_peer self = {0};
    snprintf(self.uuid, sizeof(self.uuid), "%s", m->uuid);
    self.raft_id = mgmt_raft_id(m->uuid);
    self_host(m, self.host, sizeof(self.host));
    self.port = m->listen.port;
    snprintf(self.raft_addr, sizeof(self.raft_addr), "%s:%u", self.host,
             m->raft_port ? m->raft_port : (unsigned)(m->listen.port + 1000));
    mgmt_pool_wipe(m);
    /* The pool's secret (pool_auth.h): every server it takes in gets it
     * with its __join. */
    int rc = mgmt_raft_dir_make(m);
    if (rc == 0)
        rc = pool_secret_create(m->workdir);
    if (rc < 0) {
        snprintf(err, errlen, "cannot make the pool secret in %.200s/raft: %s", m->workdir,
                 strerror(-rc));
        mgmt_pool_wipe(m);
        return rc;
    }
    pthread_mutex_unlock(&m->lock);
    rc = mgmt_pool_start(m, 1, self.raft_addr, err, errlen);
    uint64_t leader = rc == 0 ? mgmt_pool_wait_leader(m->pool, 5000) : 0;
    pthread_mutex_lock(&m->lock);
    if (rc == 0 && leader != self.raft_id) {
        snprintf(err, errlen, "the new pool elected no leader");
        rc = -EAGAIN;
    }
    if (rc == 0) {
        struct mgmt_peer *np = malloc(sizeof(*np));
        char *text = NULL;
        if (np) {
            *np = self;
            free(m->peers);
            m->peers = np;
            m->n_peers = 1;
            text = mgmt_state_format(m);
        }
        if (!text) {
            rc = -ENOMEM;
            snprintf(err, errlen, "out of memory");
        } else {
            struct rpc_buf e;
            rpc_buf_init(&e);
            rpc_put_u64(&e, RPC_T_OP, MGMT_E_IMPORT);
            rpc_put_str(&e, RPC_T_DATA, text);
            free(text);
            rc = mgmt_commit(m, &e, err, errlen);
            rpc_buf_free(&e);
        }
    }
    if (rc < 0) {
        free(m->peers);
        m->peers = NULL;
        m->n_peers = 0;
        pthread_mutex_unlock(&m->lock);
        mgmt_pool_stop(m);
        pthread_mutex_lock(&m->lock);
        mgmt_pool_wipe(m);
        return rc;
    }
    mgmt_pool_save(m);
    log_info("pool: this server started a pool (raft %s)", self.raft_addr);
    return 0;
}

static int probe(struct mgmt *m, const char *arg, FILE *out)
{
    struct net_addr a;
    char err[512];
    if (net_parse_addr(arg, CAIRN_MGMT_PORT, &a) < 0) {
        fprintf(out, "peer probe: failed: %s is not a valid HOST[:PORT]\n", arg);
        return 1;
    }
    if (mgmt_host_is_local(m, a.host) == 1 && a.port == m->listen.port) {
        fprintf(out, "peer probe: success. Probe on localhost not needed\n");
        return 0;
    }
    char *text = NULL;
    const char *hello_argv[] = {"__hello"};
    int rc = call_unlocked(m, a.host, a.port, 1, hello_argv, &text, HELLO_MS);
    struct hello h;
    if (rc != 0 || !text || parse_hello(text, &h) < 0) {
        free(text);
        if (rc < 0)
            fprintf(out,
                    "peer probe: failed: Probe returned with %s (is cairnd running on %s:%u?)\n",
                    strerror(-rc), a.host, a.port);
        else
            fprintf(out, "peer probe: failed: %s:%u did not answer as a cairnd\n", a.host, a.port);
        return 1;
    }
    free(text);
    if (strcmp(h.uuid, m->uuid) == 0) {
        fprintf(out, "peer probe: success. Probe on localhost not needed\n");
        return 0;
    }
    if (mgmt_peer_find_uuid(m, h.uuid)) {
        fprintf(out, "peer probe: success. Host %s port %u already in peer list\n", a.host, a.port);
        return 0;
    }
    if (h.peers > 0 || h.volumes > 0) {
        fprintf(out,
                "peer probe: failed: %s is either already part of another cluster or having "
                "volumes configured\n",
                a.host);
        return 1;
    }
    long long skew = h.clock - ((long long)time(NULL) + m->clock_skew_test);
    if (skew > CLOCK_SKEW_MAX || skew < -CLOCK_SKEW_MAX) {
        fprintf(out,
                "peer probe: failed: the clock of %s differs from this server's by %lld s (more "
                "than %d s); synchronise the servers' clocks (NTP) first\n",
                a.host, skew, CLOCK_SKEW_MAX);
        return 1;
    }
    struct mgmt_peer np = {0};
    snprintf(np.uuid, sizeof(np.uuid), "%.*s", GFID_STRLEN - 1, h.uuid);
    np.raft_id = mgmt_raft_id(h.uuid);
    snprintf(np.host, sizeof(np.host), "%s", a.host);
    np.port = a.port;
    if (h.raft[0])
        snprintf(np.raft_addr, sizeof(np.raft_addr), "%s", h.raft);
    else
        snprintf(np.raft_addr, sizeof(np.raft_addr), "%s:%u", a.host, h.raft_port);
    if (mgmt_peer_find_raft(m, np.raft_id)) {
        fprintf(out, "peer probe: failed: %s has the same server id as a member\n", a.host);
        return 1;
    }
    if (!m->pool && make_pool(m, err, sizeof(err)) < 0) {
        fprintf(out, "peer probe: failed: cannot start the pool's log: %s\n", err);
        return 1;
    }
    /* The probed server gets the pool's secret here (over TLS with
     * secure-access; otherwise the probe is the moment of trust). A pool
     * formed before secrets has none to give. */
    char secret[2 * POOL_SECRET_LEN + 1];
    int has_secret = pool_secret_hex(secret, sizeof(secret)) == 0;
    const char *join_argv[] = {"__join", np.raft_addr, secret};
    text = NULL;
    rc = call_unlocked(m, a.host, a.port, has_secret ? 3 : 2, join_argv, &text, 15000);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc != 0) {
        fprintf(out, "peer probe: failed: %s could not join: %s\n", a.host,
                rc < 0 ? strerror(-rc)
                : text ? strtok(text, "\n")
                       : "refused");
        free(text);
        return 1;
    }
    free(text);
    struct mgmt_pool *p = m->pool;
    pthread_mutex_unlock(&m->lock);
    rc = mgmt_pool_add_voter(p, np.raft_id, np.raft_addr, err, sizeof(err));
    pthread_mutex_lock(&m->lock);
    if (rc == 0) {
        struct rpc_buf e;
        peer_entry(&e, MGMT_E_PEER_ADD, &np);
        rc = mgmt_commit(m, &e, err, sizeof(err));
        rpc_buf_free(&e);
    }
    if (rc < 0) {
        const char *leave_argv[] = {"__leave", np.uuid};
        char why[256];
        pthread_mutex_unlock(&m->lock);
        mgmt_pool_remove(p, np.raft_id, why, sizeof(why));
        mgmt_peer_call(a.host, a.port, 2, leave_argv, NULL, 10000);
        pthread_mutex_lock(&m->lock);
        fprintf(out, "peer probe: failed: %s could not be added to the pool: %s\n", a.host, err);
        return 1;
    }
    log_info("pool: %s (%s) joined", np.host, np.uuid);
    fprintf(out, "peer probe: success\n");
    return 0;
}

/* Whether a brick of some volume lives on peer p. */
static const char *peer_brick_volume(struct mgmt *m, const struct mgmt_peer *p)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++)
            if (mgmt_peer_for_host(m, v->bricks[i].host) == p)
                return v->name;
    return NULL;
}

static int detach(struct mgmt *m, const char *host, int force, FILE *out)
{
    char err[512];
    struct mgmt_peer *p = m->n_peers ? mgmt_peer_for_host(m, host) : NULL;
    if (!p && mgmt_host_is_local(m, host) != 1) {
        fprintf(out, "peer detach: failed: %s is not part of cluster\n", host);
        return 1;
    }
    if (!p || mgmt_peer_is_self(m, p)) {
        fprintf(out, "peer detach: failed: %s is localhost\n", host);
        return 1;
    }
    const char *vol = peer_brick_volume(m, p);
    if (vol && !force) {
        fprintf(out,
                "peer detach: failed: Peer %s hosts one or more bricks (volume %s). Delete those "
                "volumes first, or use 'force' to detach it anyway (its bricks stay in the "
                "volumes, unserved)\n",
                host, vol);
        return 1;
    }
    struct mgmt_peer gone = *p;
    struct rpc_buf e;
    peer_entry(&e, MGMT_E_PEER_DEL, &gone);
    int rc = mgmt_commit(m, &e, err, sizeof(err));
    rpc_buf_free(&e);
    if (rc < 0) {
        fprintf(out, "peer detach: failed: %s\n", err);
        return 1;
    }
    struct mgmt_pool *pool = m->pool;
    const char *leave_argv[] = {"__leave", gone.uuid};
    pthread_mutex_unlock(&m->lock);
    rc = pool ? mgmt_pool_remove(pool, gone.raft_id, err, sizeof(err)) : 0;
    int lrc = mgmt_peer_call(gone.host, gone.port, 2, leave_argv, NULL, 10000);
    pthread_mutex_lock(&m->lock);
    if (rc < 0)
        log_warn("pool: removing %s from the raft configuration failed: %s", gone.host, err);
    if (lrc != 0)
        log_warn("pool: %s was not told it left the pool (%s); reset its workdir before reuse",
                 gone.host, lrc < 0 ? strerror(-lrc) : "refused");
    log_info("pool: %s (%s) detached", gone.host, gone.uuid);
    fprintf(out, "peer detach: success\n");
    return 0;
}

static int connected(struct mgmt *m, const struct mgmt_peer *p)
{
    if (mgmt_peer_is_self(m, p))
        return 1;
    struct net_addr a;
    snprintf(a.host, sizeof(a.host), "%s", p->host);
    a.port = p->port;
    pthread_mutex_unlock(&m->lock);
    int fd = net_connect(&a, 500);
    pthread_mutex_lock(&m->lock);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* A copy of the peers (the list may change while m->lock is released). */
static int copy_peers(struct mgmt *m, struct mgmt_peer **out)
{
    *out = NULL;
    if (!m->n_peers)
        return 0;
    *out = malloc((size_t)m->n_peers * sizeof(**out));
    if (!*out)
        return 0;
    memcpy(*out, m->peers, (size_t)m->n_peers * sizeof(**out));
    return m->n_peers;
}

static int status(struct mgmt *m, FILE *out)
{
    struct mgmt_peer *ps;
    int n = copy_peers(m, &ps), others = 0;
    for (int i = 0; i < n; i++)
        others += !mgmt_peer_is_self(m, &ps[i]);
    fprintf(out, "Number of Peers: %d\n", others);
    for (int i = 0; i < n; i++) {
        if (mgmt_peer_is_self(m, &ps[i]))
            continue;
        fprintf(out, "\nHostname: %s\nUuid: %s\nState: Peer in Cluster (%s)\n", ps[i].host,
                ps[i].uuid, connected(m, &ps[i]) ? "Connected" : "Disconnected");
    }
    free(ps);
    return 0;
}

int mgmt_cmd_pool(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 2 || strcmp(argv[1], "list") != 0) {
        fprintf(out, "Usage:\npool list\n");
        return 1;
    }
    struct mgmt_peer *ps;
    int n = copy_peers(m, &ps);
    fprintf(out, "UUID\t\t\t\t\tHostname \tState\n");
    for (int i = 0; i < n; i++)
        if (!mgmt_peer_is_self(m, &ps[i]))
            fprintf(out, "%s\t%s \t%s\n", ps[i].uuid, ps[i].host,
                    connected(m, &ps[i]) ? "Connected" : "Disconnected");
    fprintf(out, "%s\tlocalhost \tConnected\n", m->uuid);
    free(ps);
    return 0;
}

int mgmt_cmd_peer(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc == 3 && strcmp(argv[1], "probe") == 0)
        return probe(m, argv[2], out);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "detach") == 0 &&
        (argc == 3 || strcmp(argv[3], "force") == 0))
        return detach(m, argv[2], argc == 4, out);
    if (argc == 2 && strcmp(argv[1], "status") == 0)
        return status(m, out);
    fprintf(out, "Usage:\npeer probe <HOSTNAME>[:<PORT>]\npeer detach <HOSTNAME> [force]\n"
                 "peer status\n");
    return 1;
}

int mgmt_cmd_mutates(int argc, char **argv)
{
    int i = 0;
    while (i < argc && (strcmp(argv[i], "--mode=script") == 0 || strcmp(argv[i], "--xml") == 0))
        i++;
    if (argc - i < 2)
        return 0;
    const char *a = argv[i], *b = argv[i + 1];
    if (strcmp(a, "peer") == 0)
        return strcmp(b, "probe") == 0 || strcmp(b, "detach") == 0;
    if (strcmp(a, "volume") != 0)
        return 0;
    if (strcmp(b, "set") == 0)
        return !(argc - i == 3 && strcmp(argv[i + 2], "help") == 0);
    static const char *const words[] = {"create",      "import",       "start",     "stop",
                                        "delete",      "reset",        "add-brick", "replace-brick",
                                        "reset-brick", "remove-brick", NULL};
    for (int k = 0; words[k]; k++)
        if (strcmp(b, words[k]) == 0)
            return 1;
    return 0;
}
