/* How a command finds its way through the pool, and what servers ask each
 * other.
 *
 * Commands that change the state run on the pool's Raft leader: any other
 * server forwards them there ("__fwd" + the command line) and relays the
 * answer, so every server answers every command alike. Reads run where they
 * arrive, after catching up with the leader's generation when the leader is
 * reachable (otherwise they show the last known state).
 *
 * Internal commands (first word "__...") travel as MGMT_CLI between cairnds:
 * __hello, __join and __leave manage membership; __check-bricks,
 * __prepare-start, __sync, __status and __import (volume import's check,
 * convert and placement steps, import.h) do brick work on the server that
 * owns the bricks; __gen reports the applied generation. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <raft.h>

#include "../client/client.h"
#include "../lib/log.h"
#include "../rpc/conn.h"
#include "import.h"
#include "pool.h"
#include "pool_auth.h"

#define PEER_CONNECT_MS 2000
#define PEER_CALL_MS 30000
#define LEADER_WAIT_MS 3000
#define SYNC_WAIT_MS 10000

/* The pool handshake as the connector (pool_auth.h), first on a new
 * connection to another cairnd. 0: proved, or this server has no secret (a
 * pool formed before secrets: the other side judges by address as before),
 * or the other has none and may (stranger: the probe of a lone server);
 * -EACCES: that cairnd does not prove it knows this pool's secret, so
 * nothing goes to it (it could be anyone who took a member's address); or
 * a transport error. */
static int prove_membership(struct rpc_conn *c, const char *host, int stranger, int timeout_ms)
{
    uint8_t key[POOL_SECRET_LEN], hello[POOL_HELLO_LEN], proof[POOL_PROOF_LEN];
    struct pool_auth a;
    if (pool_secret_get(key) < 0)
        return 0;
    int rc = pool_auth_connect(&a, key, hello);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc < 0)
        return rc;
    struct rpc_buf body;
    struct rpc_frame *r = NULL;
    rpc_buf_init(&body);
    rpc_put_bytes(&body, RPC_T_DATA, hello, sizeof(hello));
    rc = rpc_conn_call_sync(c, RPC_OP_MGMT_POOL_HELLO, &body, &r, timeout_ms);
    rpc_buf_free(&body);
    if ((rc == -ENOKEY || rc == -ENOSYS) && stranger) {
        rc = 0; /* no secret there (ENOSYS: a cairnd from before secrets) */
        goto out;
    }
    if (rc == -ENOKEY || rc == -ENOSYS)
        rc = -EACCES; /* a member always has the secret */
    if (rc == 0)
        rc = r && rpc_has(&r->msg, RPC_T_DATA)
                 ? pool_auth_answered(&a, r->msg.data.p, r->msg.data.len, proof)
                 : -EPROTO;
    if (rc == -EACCES || rc == -EPROTO) {
        log_warn("cairnd %s does not know this pool's secret: it is not a server of this pool "
                 "(or has another pool's secret); nothing sent to it",
                 host);
        rc = -EACCES;
    }
    if (rc < 0)
        goto out;
    rpc_frame_free(r);
    r = NULL;
    rpc_buf_init(&body);
    rpc_put_bytes(&body, RPC_T_DATA, proof, sizeof(proof));
    rc = rpc_conn_call_sync(c, RPC_OP_MGMT_POOL_PROVE, &body, &r, timeout_ms);
    rpc_buf_free(&body);
    if (rc == -EACCES)
        log_warn("cairnd %s refused this server's proof of the pool secret: it has another "
                 "pool's secret",
                 host);
out:
    pool_auth_clear(&a);
    rpc_frame_free(r);
    return rc;
}

int mgmt_peer_call(const char *host, uint16_t port, int argc, const char *const *argv, char **text,
                   int timeout_ms)
{
    struct net_addr a;
    if (text)
        *text = NULL;
    snprintf(a.host, sizeof(a.host), "%s", host);
    a.port = port;
    char why[256];
    int rc = 0;
    struct rpc_conn *c =
        cl_mgmt_dial(&a, timeout_ms < PEER_CONNECT_MS ? timeout_ms : PEER_CONNECT_MS, NULL, NULL,
                     host, &rc, why, sizeof(why));
    if (!c) {
        if (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -EHOSTUNREACH)
            log_warn("cannot reach cairnd %s: %s", host, why);
        return rc;
    }
    if (rpc_conn_start(c) < 0) {
        rpc_conn_put(c);
        return -ENOMEM;
    }
    int stranger = argc > 0 && (strcmp(argv[0], "__hello") == 0 || strcmp(argv[0], "__join") == 0);
    if ((rc = prove_membership(c, host, stranger,
                               timeout_ms < PEER_CONNECT_MS ? timeout_ms : PEER_CONNECT_MS)) < 0) {
        rpc_conn_close(c, 0);
        rpc_conn_put(c);
        return rc; /* nothing was sent */
    }
    struct rpc_buf body;
    rpc_buf_init(&body);
    for (int i = 0; i < argc; i++)
        rpc_put_str(&body, RPC_T_ARG, argv[i]);
    struct rpc_frame *r = NULL;
    rc = rpc_conn_call_sync(c, RPC_OP_MGMT_CLI, &body, &r, timeout_ms);
    rpc_buf_free(&body);
    if (rc == 0 && r) {
        rc = rpc_has(&r->msg, RPC_T_STATUS) ? (int)r->msg.status : 1;
        if (text && rpc_has(&r->msg, RPC_T_TEXT))
            *text = strndup((const char *)r->msg.text.p, r->msg.text.len);
    } else if (rc == 0) {
        rc = -EPROTO;
    } else if (rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -ECONNRESET) {
        rc = -ECONNABORTED; /* sent, but no answer: the command may have run */
    }
    rpc_frame_free(r);
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
    return rc;
}

/* Calls a peer with m->lock released. */
static int call_peer_unlocked(struct mgmt *m, const struct mgmt_peer *p, int argc,
                              const char *const *argv, char **text, int timeout_ms)
{
    char host[NET_HOST_MAX];
    uint16_t port = p->port;
    snprintf(host, sizeof(host), "%s", p->host);
    pthread_mutex_unlock(&m->lock);
    int rc = mgmt_peer_call(host, port, argc, argv, text, timeout_ms);
    pthread_mutex_lock(&m->lock);
    return rc;
}

/* ---- brick work on the owning server ---- */

static int path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    if (strcmp(outer, "/") == 0)
        return 1;
    return strncmp(inner, outer, n) == 0 && (inner[n] == 0 || inner[n] == '/');
}

/* A new copy starts empty (heal fills it; a file already there under the
 * same id would be taken as healed): 0, or -ENOTEMPTY with err. */
static int dir_empty(const char *path, int but_private, char *err, size_t errlen)
{
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "Cannot read brick directory %s: %s", path, strerror(errno));
        return -errno;
    }
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            !(but_private && strcmp(de->d_name, ".cairn") == 0)) {
            snprintf(err, errlen,
                     "Brick directory %s is not empty (%s): a new copy starts empty and is "
                     "filled by heal; empty it first",
                     path, de->d_name);
            rc = -ENOTEMPTY;
        }
    closedir(d);
    return rc;
}

int mgmt_local_check_bricks(struct mgmt *m, const char *volname, int force, int n, char **paths,
                            char *err, size_t errlen)
{
    char host[NET_HOST_MAX];
    snprintf(host, sizeof(host), "%s", m->listen.host);
    for (int i = 0; i < n; i++) {
        const char *path = paths[i];
        char real[PATH_MAX], r[PATH_MAX];
        struct stat st, root;
        int missing, rc;
        if ((rc = mgmt_brick_dir_usable(path, path, &st, &missing, err, errlen)) < 0)
            return rc;
        if (force >= MGMT_CHECK_FILL && !missing &&
            (rc = dir_empty(path, force == MGMT_CHECK_RESET, err, errlen)) < 0)
            return rc;
        if (force == MGMT_CHECK_RESET)
            continue; /* the volume's own brick: its marker and place stay */
        mgmt_brick_canonical(path, real);
        for (struct mgmt_vol *o = m->vols; o; o = o->next)
            for (int j = 0; j < o->n_bricks; j++) {
                if (!o->bricks[j].local)
                    continue;
                mgmt_brick_canonical(o->bricks[j].path, r);
                if (strcmp(r, real) == 0 || path_within(real, r) || path_within(r, real)) {
                    snprintf(err, errlen, "The brick %s overlaps with the brick %s:%s of volume %s",
                             path, o->bricks[j].host, o->bricks[j].path, o->name);
                    return -EEXIST;
                }
            }
        char oname[MGMT_VOLNAME_MAX + 1], oid[64];
        rc = missing ? -ENOENT : mgmt_brickinfo_read(path, oname, sizeof(oname), oid, sizeof(oid));
        if (rc == 0) {
            snprintf(err, errlen,
                     "%s is already part of a volume (%s, id %s); if that volume is gone, remove "
                     "%s/.cairn/brick.info to reuse the directory",
                     path, oname, oid, path);
            return -EEXIST;
        }
        if (rc != -ENOENT && rc != -ENOTDIR) {
            snprintf(err, errlen, "Cannot read %s/.cairn/brick.info: %s", path, strerror(-rc));
            return rc;
        }
        if (!force && stat("/", &root) == 0 && root.st_dev == st.st_dev) {
            snprintf(err, errlen,
                     "The brick %s is being created in the root partition. It is recommended "
                     "that you don't use the system's root partition for storage backend. Or use "
                     "'force' at the end of the command if you want to override this behavior.",
                     path);
            return -EINVAL;
        }
        if (!missing && access(path, W_OK) < 0) {
            snprintf(err, errlen, "Brick directory %s is not writable (%s)", path, strerror(errno));
            return -EACCES;
        }
    }
    (void)volname;
    return 0;
}

int mgmt_owner_check_bricks(struct mgmt *m, const char *owner_uuid, const char *volname, int force,
                            int n, char **paths, char *err, size_t errlen)
{
    struct mgmt_peer *p = owner_uuid ? mgmt_peer_find_uuid(m, owner_uuid) : NULL;
    if (!p || mgmt_peer_is_self(m, p))
        return mgmt_local_check_bricks(m, volname, force, n, paths, err, errlen);
    const char **argv = calloc((size_t)n + 3, sizeof(*argv));
    if (!argv) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    argv[0] = "__check-bricks";
    argv[1] = volname;
    argv[2] = force == MGMT_CHECK_FILL    ? "fill"
              : force == MGMT_CHECK_RESET ? "reset"
              : force                     ? "force"
                                          : "-";
    for (int i = 0; i < n; i++)
        argv[3 + i] = paths[i];
    char *text = NULL, host[NET_HOST_MAX];
    snprintf(host, sizeof(host), "%s", p->host);
    int rc = call_peer_unlocked(m, p, n + 3, argv, &text, PEER_CALL_MS);
    free(argv);
    if (rc < 0)
        snprintf(err, errlen, "Host %s is not reachable: %s", host, strerror(-rc));
    else if (rc > 0)
        snprintf(err, errlen, "%s", text ? text : "brick check failed");
    if (rc > 0)
        err[strcspn(err, "\n")] = 0;
    free(text);
    return rc < 0 ? rc : rc > 0 ? -EINVAL : 0;
}

/* An import walks a whole brick: wait as long as it takes. */
#define IMPORT_CALL_MS (24 * 3600 * 1000)

int mgmt_owner_import(struct mgmt *m, const struct mgmt_brick *b, const char *step,
                      const struct mgmt_import_brick *ib, const char *volid, char *out,
                      size_t outlen)
{
    struct mgmt_peer *p = m->n_peers ? mgmt_peer_for_host(m, b->host) : NULL;
    if (!p || mgmt_peer_is_self(m, p)) {
        /* the walk runs without the state lock (the caller holds cmd_lock,
         * so no other change interleaves): it may take long */
        pthread_mutex_unlock(&m->lock);
        int rc = strcmp(step, "check") == 0
                     ? mgmt_import_check(ib, out, out, outlen)
                     : mgmt_import_convert(ib, volid, out, outlen, out, outlen);
        pthread_mutex_lock(&m->lock);
        return rc < 0 ? -EINVAL : 0;
    }
    char index[16], replica[16], n[16];
    snprintf(index, sizeof(index), "%d", ib->index);
    snprintf(replica, sizeof(replica), "%d", ib->replica);
    snprintf(n, sizeof(n), "%d", ib->n_bricks);
    const char *argv[] = {"__import",
                          step,
                          index,
                          replica,
                          n,
                          ib->force ? "force" : "-",
                          ib->keep ? "keep" : "-",
                          volid && *volid ? volid : "-",
                          ib->path};
    char *text = NULL, host[NET_HOST_MAX];
    snprintf(host, sizeof(host), "%s", p->host);
    int rc = call_peer_unlocked(m, p, 9, argv, &text, IMPORT_CALL_MS);
    if (rc < 0)
        snprintf(out, outlen, "Host %s is not reachable: %s", host, strerror(-rc));
    else
        snprintf(out, outlen, "%s", text ? text : rc ? "import failed" : "");
    out[strcspn(out, "\n")] = 0;
    free(text);
    return rc < 0 ? rc : rc > 0 ? -EINVAL : 0;
}

int mgmt_owner_import_step(struct mgmt *m, const struct mgmt_brick *b, int argc,
                           const char *const *argv, char **text)
{
    struct mgmt_peer *p = m->n_peers ? mgmt_peer_for_host(m, b->host) : NULL;
    *text = NULL;
    if (!p || mgmt_peer_is_self(m, p)) {
        pthread_mutex_unlock(&m->lock);
        int rc = mgmt_import_cmd(argc, argv, text);
        pthread_mutex_lock(&m->lock);
        return rc;
    }
    const char **full = calloc((size_t)argc + 1, sizeof(*full));
    if (!full)
        return -ENOMEM;
    full[0] = "__import";
    memcpy(full + 1, argv, (size_t)argc * sizeof(*argv));
    char host[NET_HOST_MAX];
    snprintf(host, sizeof(host), "%s", p->host);
    int rc = call_peer_unlocked(m, p, argc + 1, full, text, IMPORT_CALL_MS);
    free(full);
    if (rc == 0)
        return 0;
    char why[NET_HOST_MAX + 512];
    if (rc < 0)
        snprintf(why, sizeof(why), "Host %s is not reachable: %s", host, strerror(-rc));
    else
        snprintf(why, sizeof(why), "%.500s", *text ? *text : "import step failed");
    why[strcspn(why, "\n")] = 0;
    free(*text);
    *text = strdup(why);
    return rc < 0 ? rc : -EINVAL;
}

static void spawn_error(struct mgmt *m, struct mgmt_vol *v, struct mgmt_brick *b, int rc, char *err,
                        size_t errlen)
{
    char log[PATH_MAX + 64];
    mgmt_brick_log_path(m, b, log, sizeof(log));
    if (rc == -ENOENT)
        snprintf(err, errlen, "%.900s is missing or not executable", m->brickd);
    else if (rc == -EADDRINUSE)
        snprintf(err, errlen, "no free brick port in %u-%u", m->port_min, m->port_max);
    else
        snprintf(err, errlen, "Brick %.200s:%.300s did not start; see %.400s and the cairnd log",
                 b->host, b->path, log);
}

/* Checks and ports for this server's bricks of v; writes "ID PORT" lines. */
static int local_prepare_start(struct mgmt *m, struct mgmt_vol *v, int force, FILE *ports,
                               char *err, size_t errlen)
{
    uint16_t chosen[v->n_bricks + 1];
    int n = 0;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        if (!b->local)
            continue;
        if (!force && mgmt_check_brick_dir(v, b, err, errlen) < 0)
            return -ENOENT;
        /* The port is chosen here and spawned on after the start commits. */
        struct mgmt_brick tmp = *b;
        if (!b->pid && mgmt_brick_alloc_port(m, &tmp, chosen, n) < 0) {
            snprintf(err, errlen, "no free brick port in %u-%u", m->port_min, m->port_max);
            return -EADDRINUSE;
        }
        chosen[n++] = tmp.port;
        fprintf(ports, "%s %u\n", b->id, tmp.port);
    }
    return 0;
}

/* Parses "ID PORT" lines into BRICK fields of an entry. */
static void ports_to_entry(const char *text, struct rpc_buf *entry)
{
    char id[64];
    unsigned port;
    for (const char *p = text; p && *p;) {
        if (sscanf(p, "%63s %u", id, &port) == 2 && port && port <= 65535) {
            size_t mark = rpc_put_begin(entry, RPC_T_BRICK);
            rpc_put_str(entry, RPC_T_ID, id);
            rpc_put_u64(entry, RPC_T_PORT, port);
            rpc_put_end(entry, mark);
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
}

/* The distinct owners of v's bricks (peers, or NULL for this server alone). */
static int owners(struct mgmt *m, struct mgmt_vol *v, struct mgmt_peer **out, int max)
{
    int n = 0;
    if (m->n_peers == 0)
        return 0;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_peer *p = mgmt_peer_for_host(m, v->bricks[i].host);
        if (!p)
            continue;
        int seen = 0;
        for (int j = 0; j < n; j++)
            seen |= out[j] == p;
        if (!seen && n < max)
            out[n++] = p;
    }
    return n;
}

/* Asks every owner of v's bricks to check them and name their ports; adds
 * BRICK {ID, PORT} fields to entry. */
int mgmt_prepare_start_entry(struct mgmt *m, const char *volname, int force, struct rpc_buf *entry,
                             char *err, size_t errlen)
{
    struct mgmt_vol *v = mgmt_vol_find(m, volname);
    if (!v) {
        snprintf(err, errlen, "Volume %s does not exist", volname);
        return -ENOENT;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = local_prepare_start(m, v, force, f, err, errlen);
    fclose(f);
    if (rc == 0)
        ports_to_entry(text, entry);
    free(text);
    if (rc < 0)
        return rc;
    struct mgmt_peer *own[64];
    int n = owners(m, v, own, 64);
    for (int i = 0; i < n; i++) {
        if (mgmt_peer_is_self(m, own[i]))
            continue;
        /* the owner first catches up with this server's state */
        char g[32];
        snprintf(g, sizeof(g), "%llu", (unsigned long long)m->gen);
        const char *argv[] = {"__prepare-start", volname, force ? "force" : "-", g};
        char host[NET_HOST_MAX];
        snprintf(host, sizeof(host), "%s", own[i]->host);
        text = NULL;
        rc = call_peer_unlocked(m, own[i], 4, argv, &text, PEER_CALL_MS);
        if (rc < 0 && force) {
            /* its bricks start when it is back: the volume is started */
            log_warn("volume %s: %s is not reachable; starting without its bricks", volname, host);
            free(text);
            continue;
        }
        if (rc < 0)
            snprintf(err, errlen, "Host %s is not reachable: %s", host, strerror(-rc));
        else if (rc > 0)
            snprintf(err, errlen, "%s", text ? text : "brick check failed");
        else
            ports_to_entry(text, entry);
        free(text);
        if (rc != 0) {
            err[strcspn(err, "\n")] = 0;
            return rc < 0 ? rc : -EINVAL;
        }
    }
    return 0;
}

/* Makes this server's bricks of volname match its status: spawns or kills. */
static int local_sync(struct mgmt *m, const char *volname, char *err, size_t errlen)
{
    struct mgmt_vol *v = mgmt_vol_find(m, volname);
    int rc = 0;
    if (!v)
        return 0;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        if (!b->local)
            continue;
        if (v->status != MGMT_VOL_STARTED) {
            mgmt_brick_kill(m, b);
            continue;
        }
        b->backoff_ms = 0;
        b->retry_ms = 0;
        int src = mgmt_brick_spawn(m, v, b);
        if (src < 0 && rc == 0) {
            spawn_error(m, v, b, src, err, errlen);
            rc = src;
        }
    }
    return rc;
}

int mgmt_owners_sync(struct mgmt *m, const char *volname, uint64_t gen, int force, char *err,
                     size_t errlen)
{
    int first = 0;
    char why[1024];
    err[0] = 0;
    int rc = local_sync(m, volname, why, sizeof(why));
    if (rc < 0) {
        first = rc;
        snprintf(err, errlen, "%s", why);
    }
    struct mgmt_vol *v = mgmt_vol_find(m, volname);
    struct mgmt_peer *own[64];
    int n = v ? owners(m, v, own, 64) : 0;
    struct mgmt_peer copy[64];
    for (int i = 0; i < n; i++)
        copy[i] = *own[i];
    for (int i = 0; i < n; i++) {
        if (mgmt_peer_is_self(m, &copy[i]))
            continue;
        char g[32], *text = NULL;
        snprintf(g, sizeof(g), "%llu", (unsigned long long)gen);
        const char *argv[] = {"__sync", volname, g};
        rc = call_peer_unlocked(m, &copy[i], 3, argv, &text, PEER_CALL_MS);
        if (rc < 0 && force)
            log_warn("volume %s: %s is not reachable; it catches up when it is back", volname,
                     copy[i].host);
        else if (rc != 0 && first == 0) {
            if (rc < 0)
                snprintf(err, errlen, "Host %s is not reachable: %s", copy[i].host, strerror(-rc));
            else
                snprintf(err, errlen, "%s", text ? text : "brick sync failed");
            err[strcspn(err, "\n")] = 0;
            first = rc < 0 ? rc : -EIO;
        }
        free(text);
    }
    return first;
}

/* ---- internal commands, run on this server ---- */

static int bad(FILE *out, const char *what)
{
    fprintf(out, "%s\n", what);
    return 1;
}

static void self_raft_addr(struct mgmt *m, const char *host, char *out, size_t len)
{
    uint16_t port = m->raft_port ? m->raft_port : (uint16_t)(m->listen.port + 1000);
    snprintf(out, len, "%s:%u", host, port);
}

static int cmd_hello(struct mgmt *m, FILE *out)
{
    char raft[NET_HOST_MAX + 8] = "";
    int n = 0;
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        n++;
    if (strcmp(m->listen.host, "0.0.0.0") != 0 && strcmp(m->listen.host, "::") != 0)
        self_raft_addr(m, m->listen.host, raft, sizeof(raft));
    int leader = 0;
    if (m->pool) {
        struct mgmt_pool_info info;
        mgmt_pool_info(m->pool, &info);
        leader = info.state == RAFT_LEADER;
    }
    fprintf(out, "leader=%d\ngeneration=%llu\n", leader, (unsigned long long)m->gen);
    fprintf(out, "uuid=%s\nraft=%s\nraft-port=%u\npeers=%d\nvolumes=%d\nclock=%lld\n", m->uuid,
            raft, m->raft_port ? m->raft_port : (unsigned)(m->listen.port + 1000),
            m->n_peers > 1 ? m->n_peers : 0, n, (long long)time(NULL) + m->clock_skew_test);
    return 0;
}

static int cmd_join(struct mgmt *m, int argc, char **argv, FILE *out)
{
    char err[512];
    if (argc != 2 && argc != 3)
        return bad(out, "usage: __join RAFT-ADDRESS [SECRET]");
    if (m->pool || m->n_peers > 1 || m->vols)
        return bad(out, "this server is already part of a pool or has volumes");
    mgmt_state_clear(m);
    mgmt_pool_wipe(m);
    /* the pool's secret, from the probe; none from a pool formed before
     * secrets (or a cairnd from then) */
    int src = argc == 3 ? mgmt_raft_dir_make(m) : 0;
    if (src == 0 && argc == 3)
        src = pool_secret_store_hex(m->workdir, argv[2]);
    if (src < 0) {
        mgmt_pool_wipe(m);
        fprintf(out, "cannot keep the pool secret: %s\n",
                src == -EINVAL ? "malformed" : strerror(-src));
        return 1;
    }
    pthread_mutex_unlock(&m->lock);
    int rc = mgmt_pool_start(m, 0, argv[1], err, sizeof(err));
    pthread_mutex_lock(&m->lock);
    if (rc < 0) {
        mgmt_pool_wipe(m);
        fprintf(out, "cannot start raft: %s\n", err);
        return 1;
    }
    log_info("pool: joining a pool as %s", argv[1]);
    fprintf(out, "joined\n");
    return 0;
}

static int cmd_leave(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 2 || strcmp(argv[1], m->uuid) != 0)
        return bad(out, "usage: __leave MY-UUID");
    pthread_mutex_unlock(&m->lock);
    mgmt_pool_stop(m);
    pthread_mutex_lock(&m->lock);
    mgmt_pool_wipe(m);
    mgmt_state_clear(m);
    log_info("pool: detached from the pool; this server is on its own now");
    fprintf(out, "left\n");
    return 0;
}

static int cmd_status(struct mgmt *m, int argc, char **argv, FILE *out)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        if (argc == 2 && strcmp(argv[1], v->name) != 0)
            continue;
        for (int i = 0; i < v->n_bricks; i++) {
            struct mgmt_brick *b = &v->bricks[i];
            if (b->local && mgmt_brick_online(b))
                fprintf(out, "%s %u %d\n", b->id, b->port, (int)b->pid);
        }
    }
    return 0;
}

int mgmt_cmd_internal(struct mgmt *m, int argc, char **argv, FILE *out)
{
    char err[1024];
    const char *w = argv[0];
    if (strcmp(w, "__hello") == 0)
        return cmd_hello(m, out);
    if (strcmp(w, "__join") == 0)
        return cmd_join(m, argc, argv, out);
    if (strcmp(w, "__leave") == 0)
        return cmd_leave(m, argc, argv, out);
    if (strcmp(w, "__gen") == 0) {
        fprintf(out, "%llu\n", (unsigned long long)m->gen);
        return 0;
    }
    if (strcmp(w, "__status") == 0)
        return cmd_status(m, argc, argv, out);
    if (strcmp(w, "__statedump") == 0)
        return mgmt_cmd_statedump_local(m, argc, argv, out);
    if (strcmp(w, "__check-bricks") == 0) {
        if (argc < 4)
            return bad(out, "usage: __check-bricks VOLNAME force|- PATH...");
        int mode = strcmp(argv[2], "force") == 0   ? 1
                   : strcmp(argv[2], "fill") == 0  ? MGMT_CHECK_FILL
                   : strcmp(argv[2], "reset") == 0 ? MGMT_CHECK_RESET
                                                   : 0;
        if (mgmt_local_check_bricks(m, argv[1], mode, argc - 3, argv + 3, err, sizeof(err)) < 0)
            return bad(out, err);
        return 0;
    }
    if (strcmp(w, "__import") == 0 && argc > 1 && strncmp(argv[1], "place-", 6) == 0) {
        char *text = NULL;
        /* a step walks or changes a whole brick: without the state lock */
        pthread_mutex_unlock(&m->lock);
        int rc = mgmt_import_cmd(argc - 1, (const char *const *)argv + 1, &text);
        pthread_mutex_lock(&m->lock);
        if (rc < 0)
            bad(out, text ? text : strerror(-rc));
        else if (text)
            fputs(text, out);
        free(text);
        return rc < 0 ? 1 : 0;
    }
    if (strcmp(w, "__import") == 0) {
        if (argc != 9 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "convert") != 0))
            return bad(out, "usage: __import check|convert INDEX REPLICA BRICKS force|- keep|- "
                            "VOLID|- PATH");
        struct mgmt_import_brick ib = {argv[8],
                                       atoi(argv[2]),
                                       atoi(argv[3]),
                                       atoi(argv[4]),
                                       strcmp(argv[5], "force") == 0,
                                       strcmp(argv[6], "keep") == 0};
        char text[PATH_MAX + 1024];
        /* the walk runs without the state lock: it may take long */
        pthread_mutex_unlock(&m->lock);
        int rc = strcmp(argv[1], "check") == 0
                     ? mgmt_import_check(&ib, text, text, sizeof(text))
                     : mgmt_import_convert(&ib, argv[7], text, sizeof(text), text, sizeof(text));
        pthread_mutex_lock(&m->lock);
        return rc < 0 ? bad(out, text) : (fprintf(out, "%s\n", text), 0);
    }
    if (strcmp(w, "__prepare-start") == 0) {
        if (argc != 4)
            return bad(out, "usage: __prepare-start VOLNAME force|- GEN");
        if (mgmt_wait_gen(m, strtoull(argv[3], NULL, 10), SYNC_WAIT_MS) < 0)
            return bad(out, "this server has not caught up with the pool in time");
        struct mgmt_vol *v = mgmt_vol_find(m, argv[1]);
        if (!v)
            return bad(out, "no such volume here");
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
            return bad(out, "out of memory");
        int rc = local_prepare_start(m, v, strcmp(argv[2], "force") == 0, f, err, sizeof(err));
        fclose(f);
        if (rc == 0)
            fputs(text, out);
        free(text);
        return rc < 0 ? bad(out, err) : 0;
    }
    if (strcmp(w, "__sync") == 0) {
        if (argc != 3)
            return bad(out, "usage: __sync VOLNAME GEN");
        uint64_t gen = strtoull(argv[2], NULL, 10);
        if (mgmt_wait_gen(m, gen, SYNC_WAIT_MS) < 0)
            return bad(out, "this server has not caught up with the pool in time");
        if (local_sync(m, argv[1], err, sizeof(err)) < 0)
            return bad(out, err);
        return 0;
    }
    fprintf(out, "unrecognized word: %s (position 0)\n", w);
    return 1;
}

/* ---- routing ---- */

static int is_internal(const char *w)
{
    return strncmp(w, "__", 2) == 0;
}

/* The leader's cairnd, or NULL when this server leads; *none when there is
 * no leader. Waits a little for an election. m->lock not held. */
static int find_leader(struct mgmt *m, struct mgmt_peer *leader, int *self)
{
    struct mgmt_pool *p = m->pool;
    uint64_t id = mgmt_pool_wait_leader(p, LEADER_WAIT_MS);
    if (!id)
        return -EAGAIN;
    *self = id == mgmt_raft_id(m->uuid);
    if (*self)
        return 0;
    pthread_mutex_lock(&m->lock);
    struct mgmt_peer *lp = mgmt_peer_find_raft(m, id);
    if (lp)
        *leader = *lp;
    pthread_mutex_unlock(&m->lock);
    return lp ? 0 : -EAGAIN;
}

static void no_quorum(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int n = m->n_peers;
    fprintf(out,
            "%s %s: failed: the pool has no quorum (no leader reachable among its %d servers; "
            "a majority must be up): changes are refused, `volume info` shows the last known "
            "state\n",
            argv[0], argc > 1 ? argv[1] : "", n);
}

static int run_here(struct mgmt *m, int argc, char **argv, FILE *out, int mutating)
{
    if (mutating)
        pthread_mutex_lock(&m->cmd_lock);
    pthread_mutex_lock(&m->lock);
    int rc = mgmt_cli_run(m, argc, argv, out);
    pthread_mutex_unlock(&m->lock);
    if (mutating)
        pthread_mutex_unlock(&m->cmd_lock);
    return rc;
}

/* Forwards a mutating command to the leader, retrying while leadership moves. */
static int forward(struct mgmt *m, int argc, char **argv, FILE *out)
{
    const char **fargv = calloc((size_t)argc + 1, sizeof(*fargv));
    if (!fargv)
        return bad(out, "out of memory");
    fargv[0] = "__fwd";
    for (int i = 0; i < argc; i++)
        fargv[i + 1] = argv[i];
    uint64_t end = net_now_ms() + 2 * LEADER_WAIT_MS;
    int status = 1;
    for (;;) {
        struct mgmt_peer leader;
        int self = 0;
        int rc = find_leader(m, &leader, &self);
        if (rc == 0 && self) {
            free(fargv);
            return run_here(m, argc, argv, out, 1);
        }
        char *text = NULL;
        if (rc == 0) {
            rc = mgmt_peer_call(leader.host, leader.port, argc + 1, fargv, &text, PEER_CALL_MS);
            if (rc == -ECONNABORTED) {
                /* Never sent twice: it may have taken effect before the
                 * leader went away. */
                fprintf(out,
                        "%s %s: failed: the pool's leader %s went away while running the "
                        "command; it took effect everywhere or nowhere: check with `volume "
                        "info`\n",
                        argv[0], argc > 1 ? argv[1] : "", leader.host);
                break;
            }
            /* 75 (EX_TEMPFAIL): that server is no longer the leader */
            if (rc >= 0 && rc != 75) {
                if (text)
                    fputs(text, out);
                free(text);
                status = rc;
                break;
            }
        }
        free(text);
        if (net_now_ms() >= end) {
            no_quorum(m, argc, argv, out);
            break;
        }
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
    free(fargv);
    return status;
}

/* Brings this server up to the leader's generation before a read. */
static void catch_up(struct mgmt *m)
{
    struct mgmt_peer leader;
    int self = 0;
    struct mgmt_pool_info info;
    mgmt_pool_info(m->pool, &info);
    if (!info.leader_id || find_leader(m, &leader, &self) < 0 || self)
        return;
    char *text = NULL;
    const char *argv[] = {"__gen"};
    if (mgmt_peer_call(leader.host, leader.port, 1, argv, &text, 1000) == 0 && text) {
        uint64_t gen = strtoull(text, NULL, 10);
        pthread_mutex_lock(&m->lock);
        mgmt_wait_gen(m, gen, 2000);
        pthread_mutex_unlock(&m->lock);
    }
    free(text);
}

static int from_peer(struct mgmt *m, const char *addr)
{
    return m->n_peers > 0 && mgmt_peer_for_host(m, addr) != NULL;
}

/* The internal commands only a server of the pool may send (the others
 * answer "unrecognized word"). */
static int members_only(const char *w)
{
    static const char *const words[] = {
        "__fwd",          "__leave",  "__gen",           "__status", "__statedump",
        "__check-bricks", "__import", "__prepare-start", "__sync",   NULL};
    for (int i = 0; words[i]; i++)
        if (strcmp(w, words[i]) == 0)
            return 1;
    return 0;
}

int mgmt_cli_dispatch(struct mgmt *m, int argc, char **argv, FILE *out, const char *addr, int local,
                      int pool_proved)
{
    if (argc > 0 && is_internal(argv[0])) {
        /* __hello and __join come from a server that is not a member yet
         * (a probe); __join is refused by a server already in a pool. */
        uint8_t key[POOL_SECRET_LEN];
        int secret = pool_secret_get(key) == 0;
        OPENSSL_cleanse(key, sizeof(key));
        pthread_mutex_lock(&m->lock);
        int allowed =
            !members_only(argv[0]) || pool_proved || (!secret && (local || from_peer(m, addr)));
        pthread_mutex_unlock(&m->lock);
        if (!allowed && secret) {
            log_warn("refusing %s from %s: it did not prove it knows the pool secret (not a "
                     "server of this pool)",
                     argv[0], addr);
            return bad(out, "Permission denied: not a server of this pool (no proof of the pool "
                            "secret)");
        }
        if (!allowed) {
            log_warn("refusing %s from %s: not a server of this pool", argv[0], addr);
            return bad(out, "Permission denied: not a server of this pool");
        }
        if (strcmp(argv[0], "__fwd") == 0) {
            if (!m->pool) /* a former pool's stale leader */
                return bad(out, "this server is not part of a pool");
            struct mgmt_pool_info info;
            mgmt_pool_info(m->pool, &info);
            if (info.leader_id != mgmt_raft_id(m->uuid) || info.state != RAFT_LEADER) {
                fprintf(out, "not the leader\n");
                return 75;
            }
            return run_here(m, argc - 1, argv + 1, out, 1);
        }
        int mut = strcmp(argv[0], "__join") == 0 || strcmp(argv[0], "__leave") == 0;
        return run_here(m, argc, argv, out, mut);
    }
    if (!local) {
        log_warn("refusing a command from %s: commands are accepted from this server only", addr);
        return bad(out, "Permission denied: cairnd accepts commands only from its own host");
    }
    int mut = mgmt_cmd_mutates(argc, argv);
    if (mut && mgmt_quorum_refuses(m, argc, argv, out))
        return 1;
    if (!m->pool)
        return run_here(m, argc, argv, out, mut);
    if (mut)
        return forward(m, argc, argv, out);
    catch_up(m);
    return run_here(m, argc, argv, out, 0);
}
