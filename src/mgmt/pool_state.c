/* The pool's replicated state outside the volumes: this server's identity
 * (DIR/uuid), the peers and the generation (DIR/pool.info), and the whole
 * state as one text (a Raft snapshot, or the first entry of a new pool). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/log.h"
#include "elastic.h"
#include "pool.h"

uint64_t mgmt_raft_id(const char *uuid)
{
    gfid_t g;
    uint64_t id = 0;
    if (gfid_parse(uuid, &g) == 0)
        memcpy(&id, &g, sizeof(id));
    id &= 0x7fffffffffffffffull; /* printed signed by some tools */
    return id ? id : 1;
}

static int write_atomic(const char *path, const char *text)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = mgmt_write_all(fd, text, strlen(text));
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        log_error("cannot write %s: %s", path, strerror(-rc));
    }
    return rc;
}

static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    for (ssize_t r; buf; n += (size_t)r) {
        if (n == cap) {
            char *nb = cap < (16u << 20) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) {
            r = 0;
            continue;
        }
        if (r <= 0)
            break;
    }
    close(fd);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

static int parse_peer(const char *val, struct mgmt_peer *p)
{
    char uuid[64], raft[NET_HOST_MAX + 8], host[NET_HOST_MAX];
    unsigned long long id;
    unsigned port;
    if (sscanf(val, "%63s %llu %u %263s %255s", uuid, &id, &port, raft, host) != 5)
        return -EINVAL;
    gfid_t g;
    if (strlen(uuid) != GFID_STRLEN - 1 || gfid_parse(uuid, &g) < 0 || port == 0 || port > 65535 ||
        id == 0)
        return -EINVAL;
    memset(p, 0, sizeof(*p));
    strcpy(p->uuid, uuid);
    p->raft_id = id;
    p->port = (uint16_t)port;
    snprintf(p->raft_addr, sizeof(p->raft_addr), "%s", raft);
    snprintf(p->host, sizeof(p->host), "%s", host);
    return 0;
}

/* Peers, then the pool-wide options (`volume set all`) as option=NAME=VALUE. */
static void format_peers(FILE *f, const struct mgmt *m)
{
    for (int i = 0; i < m->n_peers; i++) {
        const struct mgmt_peer *p = &m->peers[i];
        fprintf(f, "peer=%s %llu %u %s %s\n", p->uuid, (unsigned long long)p->raft_id, p->port,
                p->raft_addr, p->host);
    }
    for (size_t i = 0; i < m->pool_opts.n; i++)
        fprintf(f, "option=%s=%s\n", m->pool_opts.kv[i].name, m->pool_opts.kv[i].value);
}

int mgmt_pool_save(struct mgmt *m)
{
    char *buf = NULL, path[PATH_MAX + 16];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;
    fprintf(f, "# cairnd pool state; edit only while cairnd is stopped\n");
    fprintf(f, "version=1\ngeneration=%llu\n", (unsigned long long)m->gen);
    format_peers(f, m);
    if (fclose(f) != 0) {
        free(buf);
        return -ENOMEM;
    }
    char *text = malloc(len + 32);
    if (!text) {
        free(buf);
        return -ENOMEM;
    }
    snprintf(text, len + 32, "%schecksum=%08x\n", buf, rpc_crc32c(0, buf, len));
    free(buf);
    snprintf(path, sizeof(path), "%s/pool.info", m->workdir);
    int rc = write_atomic(path, text);
    free(text);
    return rc;
}

/* Parses peer=, option= and generation= lines of text into peers/opts/gen. */
static int parse_pool_lines(char *text, struct mgmt_peer **peers, int *n, struct opt_set *opts,
                            uint64_t *gen, char *err, size_t errlen)
{
    int lineno = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (*line == '#' || strncmp(line, "version=1", 9) == 0 ||
            strncmp(line, "checksum=", 9) == 0)
            continue;
        if (strncmp(line, "generation=", 11) == 0) {
            *gen = strtoull(line + 11, NULL, 10);
        } else if (strncmp(line, "peer=", 5) == 0) {
            struct mgmt_peer *np = realloc(*peers, (size_t)(*n + 1) * sizeof(**peers));
            if (!np)
                return -ENOMEM;
            *peers = np;
            if (parse_peer(line + 5, &np[*n]) < 0) {
                snprintf(err, errlen, "line %d: bad peer \"%.80s\"", lineno, line + 5);
                return -EINVAL;
            }
            (*n)++;
        } else if (strncmp(line, "option=", 7) == 0) {
            char *eq = strchr(line + 7, '=');
            if (!eq) {
                snprintf(err, errlen, "line %d: bad option \"%.80s\"", lineno, line + 7);
                return -EINVAL;
            }
            *eq = 0;
            if (opt_set_put(opts, line + 7, eq + 1) < 0)
                return -ENOMEM;
        } else {
            snprintf(err, errlen, "line %d: unknown key \"%.40s\"", lineno, line);
            return -EINVAL;
        }
    }
    return 0;
}

static int load_uuid(struct mgmt *m, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/uuid", m->workdir);
    char *text = slurp(path, &len);
    gfid_t g;
    if (text) {
        text[strcspn(text, "\n")] = 0;
        if (strlen(text) != GFID_STRLEN - 1 || gfid_parse(text, &g) < 0) {
            snprintf(err, errlen, "%s is corrupted", path);
            free(text);
            return -EINVAL;
        }
        strcpy(m->uuid, text);
        free(text);
        return 0;
    }
    gfid_generate(&g);
    gfid_format(&g, m->uuid);
    char line[GFID_STRLEN + 2];
    snprintf(line, sizeof(line), "%s\n", m->uuid);
    int rc = write_atomic(path, line);
    if (rc < 0)
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
    return rc;
}

int mgmt_pool_load(struct mgmt *m, char *err, size_t errlen)
{
    int rc = load_uuid(m, err, errlen);
    if (rc < 0)
        return rc;
    char path[PATH_MAX + 16];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/pool.info", m->workdir);
    char *text = slurp(path, &len);
    if (!text)
        return errno == ENOENT ? 0 : -errno;
    const char *ck = len >= 19 ? strstr(text, "checksum=") : NULL;
    if (!ck || strtoul(ck + 9, NULL, 16) != rpc_crc32c(0, text, (size_t)(ck - text))) {
        snprintf(err, errlen, "%s is corrupted: checksum mismatch or truncated", path);
        free(text);
        return -EINVAL;
    }
    char why[256];
    rc = parse_pool_lines(text, &m->peers, &m->n_peers, &m->pool_opts, &m->gen, why, sizeof(why));
    free(text);
    if (rc < 0)
        snprintf(err, errlen, "%s is corrupted: %s", path, why);
    return rc;
}

struct mgmt_peer *mgmt_peer_find_uuid(struct mgmt *m, const char *uuid)
{
    for (int i = 0; i < m->n_peers; i++)
        if (strcmp(m->peers[i].uuid, uuid) == 0)
            return &m->peers[i];
    return NULL;
}

struct mgmt_peer *mgmt_peer_find_raft(struct mgmt *m, uint64_t raft_id)
{
    for (int i = 0; i < m->n_peers; i++)
        if (m->peers[i].raft_id == raft_id)
            return &m->peers[i];
    return NULL;
}

int mgmt_peer_is_self(const struct mgmt *m, const struct mgmt_peer *p)
{
    return strcmp(p->uuid, m->uuid) == 0;
}

static int same_host(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ra, *rb;
    if (getaddrinfo(a, NULL, &hints, &ra) != 0)
        return 0;
    if (getaddrinfo(b, NULL, &hints, &rb) != 0) {
        freeaddrinfo(ra);
        return 0;
    }
    int same = 0;
    for (struct addrinfo *x = ra; x && !same; x = x->ai_next)
        for (struct addrinfo *y = rb; y && !same; y = y->ai_next) {
            if (x->ai_family != y->ai_family)
                continue;
            if (x->ai_family == AF_INET)
                same = ((struct sockaddr_in *)x->ai_addr)->sin_addr.s_addr ==
                       ((struct sockaddr_in *)y->ai_addr)->sin_addr.s_addr;
            else if (x->ai_family == AF_INET6)
                same = memcmp(&((struct sockaddr_in6 *)x->ai_addr)->sin6_addr,
                              &((struct sockaddr_in6 *)y->ai_addr)->sin6_addr, 16) == 0;
        }
    freeaddrinfo(ra);
    freeaddrinfo(rb);
    return same;
}

struct mgmt_peer *mgmt_peer_for_host(struct mgmt *m, const char *host)
{
    for (int i = 0; i < m->n_peers; i++)
        if (strcmp(m->peers[i].host, host) == 0)
            return &m->peers[i];
    if (mgmt_host_is_local(m, host) == 1)
        for (int i = 0; i < m->n_peers; i++)
            if (mgmt_peer_is_self(m, &m->peers[i]))
                return &m->peers[i];
    for (int i = 0; i < m->n_peers; i++)
        if (same_host(m->peers[i].host, host))
            return &m->peers[i];
    return NULL;
}

void mgmt_mark_local(struct mgmt *m)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++) {
            struct mgmt_brick *b = &v->bricks[i];
            if (m->n_peers == 0) {
                b->local = mgmt_host_is_local(m, b->host) == 1;
                continue;
            }
            struct mgmt_peer *p = mgmt_peer_for_host(m, b->host);
            b->local = p ? mgmt_peer_is_self(m, p) : mgmt_host_is_local(m, b->host) == 1;
        }
}

char *mgmt_state_format(struct mgmt *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "generation=%llu\n", (unsigned long long)m->gen);
    format_peers(f, m);
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        char *t = mgmt_vol_format(v);
        if (!t) {
            fclose(f);
            free(buf);
            return NULL;
        }
        fprintf(f, "volume=%zu\n%s", strlen(t), t);
        free(t);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static struct mgmt_vol *find_id(struct mgmt_vol *list, const char *id)
{
    for (struct mgmt_vol *v = list; v; v = v->next)
        if (strcmp(v->id, id) == 0)
            return v;
    return NULL;
}

/* Carries the running processes of old's bricks over to v, and whether
 * server quorum stopped them. */
static void carry_runtime(struct mgmt_vol *v, struct mgmt_vol *old)
{
    v->quorum_down = old->quorum_down;
    for (int i = 0; i < v->n_bricks; i++)
        for (int j = 0; j < old->n_bricks; j++)
            if (strcmp(v->bricks[i].id, old->bricks[j].id) == 0) {
                struct mgmt_brick *b = &v->bricks[i], *o = &old->bricks[j];
                b->pid = o->pid;
                b->started_ms = o->started_ms;
                b->retry_ms = o->retry_ms;
                b->backoff_ms = o->backoff_ms;
                b->restarts = o->restarts;
                if (o->pid)
                    b->port = o->port;
                o->pid = 0;
            }
}

int mgmt_state_replace(struct mgmt *m, const char *text, size_t len, char *err, size_t errlen)
{
    struct mgmt_peer *peers = NULL;
    struct mgmt_vol *vols = NULL;
    int n_peers = 0, rc = 0;
    uint64_t gen = 0;
    struct opt_set opts = {0};
    const char *p = text, *end = text + len;
    char *head = NULL;
    /* the header lines run up to the first volume= */
    const char *first = strstr(text, "volume=");
    if (first && first > end)
        first = NULL;
    size_t hlen = first ? (size_t)(first - text) : len;
    head = strndup(text, hlen);
    if (!head)
        return -ENOMEM;
    rc = parse_pool_lines(head, &peers, &n_peers, &opts, &gen, err, errlen);
    free(head);
    if (rc < 0)
        goto fail;
    for (p = text + hlen; p < end;) {
        char *nl;
        unsigned long long vlen = strtoull(p + 7, &nl, 10);
        if (strncmp(p, "volume=", 7) != 0 || *nl != '\n' || vlen > (size_t)(end - nl - 1)) {
            snprintf(err, errlen, "bad volume record in the state");
            rc = -EINVAL;
            goto fail;
        }
        struct mgmt_vol *v;
        if ((rc = mgmt_vol_parse(nl + 1, vlen, &v, err, errlen)) < 0)
            goto fail;
        v->next = vols;
        vols = v;
        p = nl + 1 + vlen;
    }
    /* Bricks new to a volume this server knew (replace-, reset-, add-brick
     * applied elsewhere while this server was behind): prepared below as
     * apply_bricks prepares them, so that a new copy of this server's
     * never starts without its fill file (docs/elastic.md). */
    struct fresh {
        char vol[GFID_STRLEN], brick[GFID_STRLEN];
        int reset;
    } *fresh = NULL;
    int n_fresh = 0;
    for (struct mgmt_vol *o = m->vols; o; o = o->next) {
        struct mgmt_vol *nv = find_id(vols, o->id);
        for (int j = 0; nv && j < nv->n_bricks; j++) {
            if (!mgmt_elastic_is_new(o, &nv->bricks[j]))
                continue;
            struct fresh *f = realloc(fresh, (size_t)(n_fresh + 1) * sizeof(*f));
            if (!f)
                break; /* logged below as not prepared: no fill file, no start */
            fresh = f;
            snprintf(f[n_fresh].vol, GFID_STRLEN, "%s", nv->id);
            snprintf(f[n_fresh].brick, GFID_STRLEN, "%s", nv->bricks[j].id);
            f[n_fresh++].reset = mgmt_elastic_find(o, nv->bricks[j].host, nv->bricks[j].path) >= 0;
        }
    }
    /* Commit: volumes that disappear lose their processes and files. */
    for (struct mgmt_vol *o = m->vols; o; o = o->next) {
        struct mgmt_vol *nv = find_id(vols, o->id);
        if (nv)
            carry_runtime(nv, o);
        for (int i = 0; i < o->n_bricks; i++)
            mgmt_brick_kill(m, &o->bricks[i]);
        if (!nv || strcmp(nv->name, o->name) != 0)
            mgmt_vol_remove(m->workdir, o->name);
    }
    while (m->vols) {
        struct mgmt_vol *o = m->vols;
        mgmt_vol_unlink(m, o);
        mgmt_vol_free(o);
    }
    while (vols) {
        struct mgmt_vol *v = vols;
        vols = v->next;
        v->next = NULL;
        mgmt_vol_insert(m, v);
        mgmt_vol_save(m->workdir, v);
    }
    free(m->peers);
    m->peers = peers;
    m->n_peers = n_peers;
    opt_set_free(&m->pool_opts);
    m->pool_opts = opts;
    m->gen = gen;
    mgmt_mark_local(m);
    for (int k = 0; k < n_fresh; k++)
        for (struct mgmt_vol *v = m->vols; v; v = v->next)
            for (int i = 0; strcmp(v->id, fresh[k].vol) == 0 && i < v->n_bricks; i++) {
                struct mgmt_brick *b = &v->bricks[i];
                if (!b->local || strcmp(b->id, fresh[k].brick) != 0)
                    continue;
                int prc = mgmt_brick_prepare_fill(v, b, mgmt_elastic_member(v, i), fresh[k].reset);
                if (prc < 0)
                    log_error("volume %s: cannot prepare new brick %s:%s: %s", v->name, b->host,
                              b->path, strerror(-prc));
            }
    free(fresh);
    mgmt_pool_save(m);
    return 0;
fail:
    free(peers);
    opt_set_free(&opts);
    while (vols) {
        struct mgmt_vol *v = vols;
        vols = v->next;
        mgmt_vol_free(v);
    }
    return rc;
}

void mgmt_state_clear(struct mgmt *m)
{
    while (m->vols) {
        struct mgmt_vol *v = m->vols;
        for (int i = 0; i < v->n_bricks; i++)
            mgmt_brick_kill(m, &v->bricks[i]);
        mgmt_vol_remove(m->workdir, v->name);
        mgmt_vol_unlink(m, v);
        mgmt_vol_free(v);
    }
    free(m->peers);
    m->peers = NULL;
    m->n_peers = 0;
    opt_set_free(&m->pool_opts);
    m->gen = 0;
    mgmt_pool_save(m);
}
