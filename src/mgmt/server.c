/* cairnd's RPC service: CLI commands (MGMT_CLI) and volume layouts for
 * clients (MGMT_GETVOL). Each connection's requests are handled on its reader
 * thread, one at a time, under the state lock. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "../lib/log.h"
#include "../rpc/conn.h"
#include "pool.h"
#include "pool_auth.h"

#define MAX_ARGS 256

struct peer {
    struct mgmt *m;
    char addr[INET6_ADDRSTRLEN];
    int local;                      /* connected from one of this server's addresses */
    char vol[MGMT_VOLNAME_MAX + 1]; /* the volume of its last GETVOL, "" before */
    struct pool_auth auth;          /* the pool handshake, while under way */
    int pool_proved;                /* it proved it knows the pool secret */
};

static void reply_text(struct rpc_conn *c, const struct rpc_frame *f, int status, const char *text,
                       int cli_status)
{
    struct rpc_buf b;
    rpc_buf_init(&b);
    if (text)
        rpc_put_str(&b, RPC_T_TEXT, text);
    if (cli_status >= 0)
        rpc_put_u64(&b, RPC_T_STATUS, (uint64_t)cli_status);
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, status, &b);
    rpc_buf_free(&b);
}

static void handle_cli(struct peer *p, struct rpc_conn *c, struct rpc_frame *f)
{
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    struct rpc_iter it;
    struct rpc_field fld;
    rpc_iter_init(&it, f->body, f->hdr.body_len);
    while (rpc_iter_next(&it, &fld) > 0) {
        if (fld.tag != RPC_T_ARG)
            continue;
        if (argc == MAX_ARGS || memchr(fld.val, 0, fld.len)) {
            reply_text(c, f, 0, "Too many or malformed arguments", 1);
            goto out;
        }
        if (!(argv[argc] = strndup((const char *)fld.val, fld.len))) {
            reply_text(c, f, -ENOMEM, NULL, -1);
            goto out;
        }
        argc++;
    }
    argv[argc] = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        reply_text(c, f, -ENOMEM, NULL, -1);
        goto out;
    }
    /* Commands from other hosts are refused, except what the servers of a
     * pool ask each other (pool_rpc.c). */
    int status = mgmt_cli_dispatch(p->m, argc, argv, out, p->addr, p->local, p->pool_proved);
    fclose(out);
    reply_text(c, f, 0, text, status);
    free(text);
out:
    for (int i = 0; i < argc; i++)
        free(argv[i]);
}

/* The pool handshake (pool_auth.h), as the acceptor: a connection that
 * completes it may send internal commands. */
static void handle_pool_hello(struct peer *p, struct rpc_conn *c, struct rpc_frame *f)
{
    uint8_t key[POOL_SECRET_LEN], answer[POOL_ANSWER_LEN];
    p->pool_proved = 0;
    if (pool_secret_get(key) < 0) { /* a lone server, or a pool without a secret */
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, -ENOKEY, NULL);
        return;
    }
    int rc = rpc_has(&f->msg, RPC_T_DATA)
                 ? pool_auth_accept(&p->auth, key, f->msg.data.p, f->msg.data.len, answer)
                 : -EPROTO;
    OPENSSL_cleanse(key, sizeof(key));
    if (rc < 0) {
        log_warn("refusing the pool handshake of %s: malformed hello", p->addr);
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, -EPROTO, NULL);
        return;
    }
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_bytes(&b, RPC_T_DATA, answer, sizeof(answer));
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, 0, &b);
    rpc_buf_free(&b);
}

static void handle_pool_prove(struct peer *p, struct rpc_conn *c, struct rpc_frame *f)
{
    int rc = rpc_has(&f->msg, RPC_T_DATA)
                 ? pool_auth_proved(&p->auth, f->msg.data.p, f->msg.data.len)
                 : -EPROTO;
    pool_auth_clear(&p->auth);
    p->pool_proved = rc == 0;
    if (rc < 0)
        log_warn("refusing the pool handshake of %s: %s", p->addr,
                 rc == -EACCES ? "it does not know the pool secret (not a server of this pool)"
                               : "no hello before, or a malformed proof");
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, rc < 0 ? -EACCES : 0, NULL);
}

static void handle_getvol(struct peer *p, struct rpc_conn *c, struct rpc_frame *f)
{
    char name[MGMT_VOLNAME_MAX + 1], text[RPC_PATH_MAX + 256];
    if (!rpc_has(&f->msg, RPC_T_NAME) || rpc_bytes_str(&f->msg.name, name, sizeof(name)) < 0) {
        reply_text(c, f, -EINVAL, "volume name missing or too long", -1);
        return;
    }
    /* A mount of a directory of the volume names it: auth.allow may list
     * who may mount which directory (its existence is the bricks' to say). */
    char dirbuf[RPC_PATH_MAX];
    const char *dir = NULL;
    if (rpc_has(&f->msg, RPC_T_SUBDIR)) {
        if (rpc_bytes_str(&f->msg.subdir, dirbuf, sizeof(dirbuf)) < 0 ||
            !opt_dir_valid(dirbuf, strlen(dirbuf))) {
            reply_text(c, f, -EINVAL, "malformed directory of the volume", -1);
            return;
        }
        dir = strcmp(dirbuf, "/") ? dirbuf : NULL;
    }
    struct mgmt *m = p->m;
    pthread_mutex_lock(&m->lock);
    struct mgmt_vol *v = mgmt_vol_find(m, name);
    if (!v) {
        pthread_mutex_unlock(&m->lock);
        snprintf(text, sizeof(text), "Volume %s does not exist", name);
        reply_text(c, f, -ENOENT, text, -1);
        return;
    }
    if (!opt_addr_allowed_dir(opt_value(&v->opts, "auth.allow"), opt_value(&v->opts, "auth.reject"),
                              dir, p->addr)) {
        pthread_mutex_unlock(&m->lock);
        log_warn("refusing the layout of volume %s%s to %s (auth.allow/auth.reject)", name,
                 dir ? dir : "", p->addr);
        if (dir)
            snprintf(text, sizeof(text),
                     "Access to directory %s of volume %s is not allowed from %s", dir, name,
                     p->addr);
        else
            snprintf(text, sizeof(text), "Access to volume %s is not allowed from %s", name,
                     p->addr);
        reply_text(c, f, -EACCES, text, -1);
        return;
    }
    if (v->status != MGMT_VOL_STARTED) {
        pthread_mutex_unlock(&m->lock);
        snprintf(text, sizeof(text), "Volume %s is not started", name);
        reply_text(c, f, -ESRCH, text, -1);
        return;
    }
    struct rpc_buf b;
    rpc_buf_init(&b);
    mgmt_layout_body(v, &b);
    /* The connection now hears about changes of this volume (notify.c). */
    mgmt_notify_subscribe(m, c, v->name, p->addr, dir);
    snprintf(p->vol, sizeof(p->vol), "%s", v->name);
    pthread_mutex_unlock(&m->lock);
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, 0, &b);
    rpc_buf_free(&b);
}

static void request_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    struct peer *p = ctx;
    switch (f->hdr.opcode) {
    case RPC_OP_MGMT_CLI:
        handle_cli(p, c, f);
        break;
    case RPC_OP_MGMT_GETVOL:
        handle_getvol(p, c, f);
        break;
    case RPC_OP_MGMT_POOL_HELLO:
        handle_pool_hello(p, c, f);
        break;
    case RPC_OP_MGMT_POOL_PROVE:
        handle_pool_prove(p, c, f);
        break;
    case RPC_OP_MGMT_CLIENT_STATS: /* a mount's counters, for the metrics */
        if (p->vol[0])
            mgmt_metrics_client_report(p, p->vol, p->addr, &f->msg);
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, p->vol[0] ? 0 : -EINVAL, NULL);
        break;
    case RPC_OP_PING: /* mounts keep their connection and check it is alive */
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, 0, NULL);
        break;
    case RPC_OP_HANDSHAKE: {
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_put_u64(&b, RPC_T_FEATURES, 0);
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, 0, &b);
        rpc_buf_free(&b);
        break;
    }
    default:
        rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, -ENOSYS, NULL);
    }
    rpc_frame_free(f);
}

static void closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    struct peer *p = ctx;
    mgmt_notify_unsubscribe(p->m, c);
    mgmt_metrics_client_gone(p);
    pool_auth_clear(&p->auth);
    free(ctx);
    rpc_conn_put(c); /* the reference rpc_conn_new gave the accept loop */
}

static const struct rpc_conn_ops ops = {
    .request_cb = request_cb,
    .closed_cb = closed_cb,
};

int mgmt_addr_is_local(const struct sockaddr_storage *ss)
{
    struct sockaddr_storage a = *ss;
    socklen_t len;
    if (a.ss_family == AF_INET) {
        ((struct sockaddr_in *)&a)->sin_port = 0;
        len = sizeof(struct sockaddr_in);
    } else {
        ((struct sockaddr_in6 *)&a)->sin6_port = 0;
        len = sizeof(struct sockaddr_in6);
    }
    int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = bind(fd, (struct sockaddr *)&a, len) == 0;
    close(fd);
    return ok;
}

static void accept_one(struct mgmt *m, int lfd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            log_warn("accept: %s", strerror(errno));
        return;
    }
    net_tune(fd);
    struct peer *p = calloc(1, sizeof(*p));
    if (!p) {
        close(fd);
        return;
    }
    p->m = m;
    char name[INET6_ADDRSTRLEN + 16];
    uint16_t port = 0;
    if (ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, p->addr, sizeof(p->addr));
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, p->addr, sizeof(p->addr));
        port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    p->local = mgmt_addr_is_local(&ss);
    snprintf(name, sizeof(name), "%s:%u", p->addr, port);
    struct rpc_conn *c = rpc_conn_new(fd, &ops, p, name);
    if (!c) {
        free(p);
        return;
    }
    if (m->mgmt_tls)
        rpc_conn_require_tls(c, m->mgmt_tls,
                             "this cairnd requires TLS (secure-access is set): the CLI needs "
                             "--ssl (or /var/lib/cairnd/secure-access), a mount mgmt-ssl=on");
    if (rpc_conn_start(c) < 0) {
        log_warn("cannot serve %s: no thread", name);
        rpc_conn_put(c);
        free(p);
    }
}

int mgmt_server_run(struct mgmt *m, int fd)
{
    while (!m->stopping) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, 500);
        if (n > 0)
            accept_one(m, fd);
        else if (n < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}
