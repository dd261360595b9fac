/* Fetching a volume's layout from cairnd (MGMT_GETVOL). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "client.h"
#include "distribute.h"

void cl_volinfo_free(struct cl_volinfo *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n_bricks; i++) {
        free(v->bricks[i].path);
        free(v->bricks[i].id);
    }
    free(v->bricks);
    free(v->name);
    free(v->id);
    free(v->place);
    free(v->place_prev);
    opt_set_free(&v->opts);
    memset(v, 0, sizeof(*v));
}

static struct cl_place *place_dup(const struct cl_place *p)
{
    struct cl_place *c = p ? malloc(sizeof(*c)) : NULL;
    if (c)
        *c = *p;
    return c;
}

int cl_volinfo_take_bricks(struct cl_volinfo *dst, const struct cl_volinfo *src)
{
    struct cl_place *place = place_dup(src->place), *prev = place_dup(src->place_prev);
    if ((src->place && !place) || (src->place_prev && !prev)) {
        free(place);
        free(prev);
        return -ENOMEM;
    }
    struct cl_brickinfo *b = calloc((size_t)src->n_bricks + 1, sizeof(*b));
    int n = 0;
    for (; b && n < src->n_bricks; n++) {
        b[n].addr = src->bricks[n].addr;
        b[n].path = strdup(src->bricks[n].path);
        b[n].id = strdup(src->bricks[n].id);
        if (!b[n].path || !b[n].id) {
            free(b[n].path);
            free(b[n].id);
            break;
        }
    }
    if (!b || n < src->n_bricks) {
        for (int i = 0; b && i < n; i++) {
            free(b[i].path);
            free(b[i].id);
        }
        free(b);
        free(place);
        free(prev);
        return -ENOMEM;
    }
    free(dst->place);
    free(dst->place_prev);
    dst->place = place;
    dst->place_prev = prev;
    for (int i = 0; i < dst->n_bricks; i++) {
        free(dst->bricks[i].path);
        free(dst->bricks[i].id);
    }
    free(dst->bricks);
    dst->bricks = b;
    dst->n_bricks = src->n_bricks;
    dst->replica = src->replica;
    dst->arbiter = src->arbiter;
    dst->redundancy = src->redundancy;
    return 0;
}

int cl_volinfo_same_bricks(const struct cl_volinfo *a, const struct cl_volinfo *b)
{
    if (a->n_bricks != b->n_bricks || a->replica != b->replica || a->arbiter != b->arbiter ||
        a->redundancy != b->redundancy)
        return 0;
    if (!a->place != !b->place || !a->place_prev != !b->place_prev ||
        (a->place && a->place->gen != b->place->gen) ||
        (a->place_prev && a->place_prev->gen != b->place_prev->gen))
        return 0;
    for (int i = 0; i < a->n_bricks; i++) {
        const struct cl_brickinfo *x = &a->bricks[i], *y = &b->bricks[i];
        if (strcmp(x->addr.host, y->addr.host) != 0 || x->addr.port != y->addr.port ||
            strcmp(x->path, y->path) != 0 || strcmp(x->id, y->id) != 0)
            return 0;
    }
    return 1;
}

static char *dup_bytes(const struct rpc_bytes *b)
{
    char *s = malloc((size_t)b->len + 1);
    if (s) {
        memcpy(s, b->p, b->len);
        s[b->len] = 0;
    }
    return s;
}

static int parse_brick(const struct rpc_field *f, struct cl_brickinfo *b)
{
    struct rpc_msg m;
    if (rpc_msg_decode(f->val, f->len, &m, NULL) < 0 || !rpc_has(&m, RPC_T_HOST) ||
        !rpc_has(&m, RPC_T_PORT) || !rpc_has(&m, RPC_T_PATH) || m.port == 0 || m.port > 65535)
        return -EPROTO;
    if (rpc_bytes_str(&m.host, b->addr.host, sizeof(b->addr.host)) < 0)
        return -EPROTO;
    b->addr.port = (uint16_t)m.port;
    b->path = dup_bytes(&m.path);
    b->id = rpc_has(&m, RPC_T_ID) ? dup_bytes(&m.id) : strdup("");
    return b->path && b->id ? 0 : -ENOMEM;
}

static int parse_option(const struct rpc_field *f, struct opt_set *s)
{
    struct rpc_msg m;
    char name[256], value[4096];
    if (rpc_msg_decode(f->val, f->len, &m, NULL) < 0 || !rpc_has(&m, RPC_T_NAME) ||
        !rpc_has(&m, RPC_T_DATA) || rpc_bytes_str(&m.name, name, sizeof(name)) < 0 ||
        rpc_bytes_str(&m.data, value, sizeof(value)) < 0 || memchr(value, 0, m.data.len))
        return -EPROTO;
    return opt_set_put(s, name, value);
}

static int parse_layout(const struct rpc_frame *r, struct cl_volinfo *v)
{
    const struct rpc_msg *m = &r->msg;
    if (!rpc_has(m, RPC_T_NAME) || m->n_brick == 0)
        return -EPROTO;
    /* Checked as sent (any u64) before anything is narrowed to int. */
    uint64_t replica = rpc_has(m, RPC_T_REPLICA) ? m->replica : 1;
    uint64_t redundancy = rpc_has(m, RPC_T_REDUNDANCY) ? m->redundancy : 0;
    v->arbiter = rpc_has(m, RPC_T_ARBITER) && m->arbiter ? 1 : 0;
    if (replica < 1 || replica > 16 || m->n_brick % (uint32_t)replica ||
        (v->arbiter && replica < 3) ||
        (redundancy && (v->arbiter || redundancy >= (replica + 1) / 2)))
        return -EPROTO; /* redundancy below half the set: 2 r < n */
    v->replica = (int)replica;
    v->redundancy = (int)redundancy;
    v->name = dup_bytes(&m->name);
    v->id = rpc_has(m, RPC_T_ID) ? dup_bytes(&m->id) : strdup("");
    v->bricks = calloc(m->n_brick, sizeof(*v->bricks));
    v->gen = rpc_has(m, RPC_T_GEN) ? m->gen : 0;
    if (!v->name || !v->id || !v->bricks)
        return -ENOMEM;
    struct rpc_iter it;
    struct rpc_field f;
    int rc;
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while ((rc = rpc_iter_next(&it, &f)) > 0) {
        if (f.tag == RPC_T_BRICK) {
            if ((uint32_t)v->n_bricks >= m->n_brick)
                return -EPROTO;
            rc = parse_brick(&f, &v->bricks[v->n_bricks]);
            v->n_bricks++;
        } else if (f.tag == RPC_T_OPTION) {
            rc = parse_option(&f, &v->opts);
        } else if (f.tag == RPC_T_PLACE || f.tag == RPC_T_PLACE_PREV) {
            struct cl_place **slot = f.tag == RPC_T_PLACE ? &v->place : &v->place_prev;
            if (*slot || !(*slot = malloc(sizeof(**slot))))
                return *slot ? -EPROTO : -ENOMEM;
            rc = cl_place_decode(f.val, f.len, *slot);
        } else {
            rc = 0;
        }
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return -EPROTO;
    /* A placement names one set per distribute set, in brick order. */
    int sets = v->n_bricks / v->replica;
    if ((v->place_prev && !v->place) || (v->place && (v->place->n != sets || v->redundancy)) ||
        (v->place_prev && v->place_prev->n > sets))
        return -EPROTO;
    return 0;
}

int cl_volinfo_parse(const struct rpc_frame *r, struct cl_volinfo *out)
{
    memset(out, 0, sizeof(*out));
    int rc = parse_layout(r, out);
    if (rc < 0)
        cl_volinfo_free(out);
    return rc;
}

int cl_volume_fetch(const struct net_addr *mgmt, const char *name, int timeout_ms,
                    struct cl_volinfo *out, char *err, size_t errlen)
{
    char peer[NET_HOST_MAX + 16];
    net_format_addr(mgmt, peer, sizeof(peer));
    memset(out, 0, sizeof(*out));
    char why[256];
    int rc = 0;
    struct rpc_conn *c = cl_mgmt_dial(mgmt, timeout_ms, NULL, NULL, peer, &rc, why, sizeof(why));
    if (!c) {
        snprintf(err, errlen, "cannot connect to cairnd at %s: %.180s", peer, why);
        return rc;
    }
    rc = rpc_conn_start(c);
    if (rc < 0) {
        rpc_conn_put(c);
        snprintf(err, errlen, "cannot start a connection thread: %s", strerror(-rc));
        return rc;
    }
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_NAME, name);
    struct rpc_frame *reply = NULL;
    rc = rpc_conn_call_sync(c, RPC_OP_MGMT_GETVOL, &b, &reply, timeout_ms);
    rpc_buf_free(&b);
    if (rc < 0) {
        if (reply && rpc_has(&reply->msg, RPC_T_TEXT)) {
            size_t n = reply->msg.text.len < errlen - 1 ? reply->msg.text.len : errlen - 1;
            memcpy(err, reply->msg.text.p, n);
            err[n] = 0;
        } else if (rc == -ETIMEDOUT) {
            snprintf(err, errlen, "no answer from cairnd at %s", peer);
        } else if (rc == -ENOTCONN) {
            snprintf(err, errlen, "cairnd at %s closed the connection", peer);
        } else {
            snprintf(err, errlen, "getting volume %s from %s failed: %s", name, peer,
                     strerror(-rc));
        }
        goto out;
    }
    rc = cl_volinfo_parse(reply, out);
    if (rc < 0)
        snprintf(err, errlen, "cairnd at %s sent a malformed layout of volume %s", peer, name);
out:
    rpc_frame_free(reply);
    rpc_conn_close(c, -ENOTCONN);
    rpc_conn_put(c);
    return rc;
}
