/* Before mounting a directory of a volume, or any mount of a volume that
 * uses TLS: asking the bricks whether they serve it to this client, so that
 * a mount the bricks would refuse fails at once with their reason (or the
 * TLS handshake's) instead of waiting for connections that the protocol
 * client would keep retrying (proto.c). The bricks decide
 * (src/brick/confine.c, auth.ssl-allow); this only asks them the same
 * handshake early. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../lib/log.h"
#include "../rpc/conn.h"
#include "../rpc/tls.h"
#include "client.h"

/* One brick's answer to a handshake naming subdir: 0, -errno of its
 * refusal (text in why), or 1 when it did not answer. */
static int ask_one(const struct cl_volinfo *v, const struct cl_brickinfo *br, const char *subdir,
                   struct rpc_tls_ctx *tls, int timeout_ms, char *why, size_t whylen)
{
    char peer[NET_HOST_MAX + 16], err[256];
    net_format_addr(&br->addr, peer, sizeof(peer));
    int rc = 0;
    struct rpc_conn *c =
        rpc_conn_dial(&br->addr, timeout_ms, tls, NULL, NULL, peer, &rc, err, sizeof(err));
    if (!c && rc == -ENOMEM)
        return rc;
    if (!c && tls && rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -EHOSTUNREACH) {
        snprintf(why, whylen, "brick %s:%s: TLS: %s", peer, br->path, err);
        return -EACCES; /* the brick does not take this client's TLS, or has none */
    }
    if (!c)
        return 1;
    rc = rpc_conn_start(c);
    if (rc < 0) {
        rpc_conn_put(c);
        return rc;
    }
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_NAME, v->name);
    rpc_put_str(&b, RPC_T_PATH, br->path);
    if (subdir && strcmp(subdir, "/"))
        rpc_put_str(&b, RPC_T_SUBDIR, subdir);
    struct rpc_frame *reply = NULL;
    rc = rpc_conn_call_sync(c, RPC_OP_HANDSHAKE, &b, &reply, timeout_ms);
    rpc_buf_free(&b);
    if (!reply) {
        rc = 1;
    } else if (rc < 0) {
        char text[256] = "";
        if (rpc_has(&reply->msg, RPC_T_TEXT))
            rpc_bytes_str(&reply->msg.text, text, sizeof(text));
        snprintf(why, whylen, "brick %s:%s: %s", peer, br->path, *text ? text : strerror(-rc));
    }
    rpc_frame_free(reply);
    rpc_conn_close(c, -ENOTCONN);
    rpc_conn_put(c);
    return rc;
}

int cl_subdir_check(const struct cl_volinfo *v, const char *subdir, int timeout_ms, char *err,
                    size_t errlen)
{
    int answered = 0, refused = 0, first = 0;
    err[0] = 0;
    int tls_used = opt_bool(&v->opts, "client.ssl") || opt_bool(&v->opts, "server.ssl");
    if ((!subdir || !strcmp(subdir, "/")) && !tls_used)
        return 0;
    struct rpc_tls_ctx *tls = NULL;
    int rc = cl_tls_ctx(&v->opts, 0, &tls, err, errlen);
    if (rc < 0)
        return rc;
    for (int i = 0; i < v->n_bricks; i++) {
        char why[1200];
        rc = ask_one(v, &v->bricks[i], subdir, tls, timeout_ms, why, sizeof(why));
        if (rc == 1 || rc == -EIO) /* down, or its disk stalls: not an answer */
            continue;
        if (rc == -ENOMEM) {
            rpc_tls_ctx_put(tls);
            return rc;
        }
        answered++;
        if (rc == 0)
            return 0; /* a brick without it (not healed yet) is healed by the others */
        /* a file of that name lives on one replica set of a distributed
         * volume: the others have nothing there */
        if (!refused++ || (rc == -ENOTDIR && first == -ENOENT)) {
            first = rc;
            snprintf(err, errlen, "%s", why);
        }
        if (rc == -EACCES || rc == -EPROTONOSUPPORT) {
            rpc_tls_ctx_put(tls);
            return rc; /* auth.allow and TLS are the volume's: one refusal is every brick's */
        }
    }
    rpc_tls_ctx_put(tls);
    if (answered && refused == answered)
        return first;
    return 0; /* no brick answers yet: the mount waits for them, as any mount does */
}
