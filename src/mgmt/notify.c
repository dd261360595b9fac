/* Clients that fetched a volume's layout (GETVOL) stay subscribed on that
 * connection: when the volume changes (start, stop, delete, options, ports)
 * every server that applies the change sends a notification (kind NOTIFY,
 * opcode MGMT_GETVOL) whose body is what GETVOL would answer now, with the
 * volume's generation (GEN). A client compares GEN with what it has. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/log.h"
#include "../client/distribute.h"
#include "../rpc/conn.h"
#include "pool.h"

#define MAX_SUBS 1024

struct sub {
    struct rpc_conn *c; /* a reference held while subscribed */
    char vol[MGMT_VOLNAME_MAX + 1];
    char addr[64];
    char *dir; /* the directory it mounts (malloc'd), NULL: the whole volume */
};

struct mgmt_notify {
    pthread_mutex_t lock; /* taken inside m->lock, never the other way */
    struct sub subs[MAX_SUBS];
    int n;
};

static struct mgmt_notify *get(struct mgmt *m)
{
    if (!m->notify) {
        struct mgmt_notify *n = calloc(1, sizeof(*n));
        if (!n)
            return NULL;
        pthread_mutex_init(&n->lock, NULL);
        m->notify = n;
    }
    return m->notify;
}

void mgmt_layout_body(const struct mgmt_vol *v, struct rpc_buf *b)
{
    rpc_put_str(b, RPC_T_NAME, v->name);
    rpc_put_str(b, RPC_T_ID, v->id);
    rpc_put_u64(b, RPC_T_GEN, v->gen);
    if (v->replica > 1) {
        rpc_put_u64(b, RPC_T_REPLICA, (uint64_t)v->replica);
        rpc_put_u64(b, RPC_T_ARBITER, (uint64_t)v->arbiter);
        if (v->redundancy)
            rpc_put_u64(b, RPC_T_REDUNDANCY, (uint64_t)v->redundancy);
    }
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *br = &v->bricks[i];
        size_t mark = rpc_put_begin(b, RPC_T_BRICK);
        rpc_put_str(b, RPC_T_HOST, br->host);
        rpc_put_u64(b, RPC_T_PORT, br->port);
        rpc_put_str(b, RPC_T_PATH, br->path);
        rpc_put_str(b, RPC_T_ID, br->id);
        rpc_put_end(b, mark);
    }
    uint8_t place[16 + 16 * CL_DHT_MAX];
    if (v->place && cl_place_encoded_len(v->place) <= sizeof(place))
        rpc_put_bytes(b, RPC_T_PLACE, place, cl_place_encode(v->place, place));
    if (v->place_prev && cl_place_encoded_len(v->place_prev) <= sizeof(place))
        rpc_put_bytes(b, RPC_T_PLACE_PREV, place, cl_place_encode(v->place_prev, place));
    for (size_t i = 0; i < v->opts.n; i++) {
        size_t mark = rpc_put_begin(b, RPC_T_OPTION);
        rpc_put_str(b, RPC_T_NAME, v->opts.kv[i].name);
        rpc_put_str(b, RPC_T_DATA, v->opts.kv[i].value);
        rpc_put_end(b, mark);
    }
}

/* Called from GETVOL with m->lock held (the caller's connection). */
void mgmt_notify_subscribe(struct mgmt *m, struct rpc_conn *c, const char *volname,
                           const char *addr, const char *dir)
{
    struct mgmt_notify *n = get(m);
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    int found = 0;
    for (int i = 0; i < n->n && !found; i++)
        found = n->subs[i].c == c && strcmp(n->subs[i].vol, volname) == 0;
    if (!found && n->n < MAX_SUBS) {
        struct sub *s = &n->subs[n->n++];
        rpc_conn_get(c);
        s->c = c;
        snprintf(s->vol, sizeof(s->vol), "%s", volname);
        snprintf(s->addr, sizeof(s->addr), "%s", addr);
        s->dir = dir && strcmp(dir, "/") ? strdup(dir) : NULL;
    }
    pthread_mutex_unlock(&n->lock);
}

void mgmt_notify_unsubscribe(struct mgmt *m, struct rpc_conn *c)
{
    struct mgmt_notify *n = m->notify;
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    for (int i = 0; i < n->n;) {
        if (n->subs[i].c == c) {
            rpc_conn_put(c);
            free(n->subs[i].dir);
            n->subs[i] = n->subs[--n->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&n->lock);
}

void mgmt_notify_volume(struct mgmt *m, const char *volname)
{
    struct mgmt_notify *n = m->notify;
    if (!n)
        return;
    struct mgmt_vol *v = mgmt_vol_find(m, volname);
    struct rpc_buf b;
    rpc_buf_init(&b);
    const char *allow = v ? opt_value(&v->opts, "auth.allow") : NULL;
    const char *reject = v ? opt_value(&v->opts, "auth.reject") : NULL;
    if (v && v->status == MGMT_VOL_STARTED) {
        mgmt_layout_body(v, &b);
    } else {
        char text[160];
        snprintf(text, sizeof(text), v ? "Volume %s is not started" : "Volume %s does not exist",
                 volname);
        rpc_put_str(&b, RPC_T_NAME, volname);
        if (v) {
            rpc_put_str(&b, RPC_T_ID, v->id);
            rpc_put_u64(&b, RPC_T_GEN, v->gen);
        } else {
            rpc_put_u64(&b, RPC_T_GEN, m->gen);
        }
        rpc_put_str(&b, RPC_T_TEXT, text);
    }
    pthread_mutex_lock(&n->lock);
    for (int i = 0; i < n->n; i++) {
        struct sub *s = &n->subs[i];
        if (strcmp(s->vol, volname) != 0 || !rpc_conn_is_open(s->c))
            continue;
        if (v && !opt_addr_allowed_dir(allow, reject, s->dir, s->addr)) {
            log_info("not notifying %s about volume %s%s: auth.allow/auth.reject", s->addr, volname,
                     s->dir ? s->dir : "");
            continue;
        }
        if (rpc_conn_notify(s->c, RPC_OP_MGMT_GETVOL, &b) < 0)
            log_debug("cannot notify %s about volume %s", s->addr, volname);
        else
            log_debug("notified %s: volume %s changed", s->addr, volname);
    }
    pthread_mutex_unlock(&n->lock);
    rpc_buf_free(&b);
}
