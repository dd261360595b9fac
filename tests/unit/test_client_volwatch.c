/* The mount's management connection (client/volwatch.c) against small fake
 * cairnd servers over real TCP on 127.0.0.87-90: the first fetch skips an
 * unreachable server and stops at a server's refusal; the watcher passes
 * newer generations only, reports a stopped volume once, and moves to the
 * backup server when its server goes away. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../src/client/volwatch.h"
#include "../../src/rpc/conn.h"
#include "check.h"

#define PORT 25281

struct fake {
    struct net_addr addr;
    int lfd, stop;
    pthread_t thread;
    pthread_mutex_t lock;
    struct rpc_conn *sub; /* the last GETVOL's connection, one reference */
    int getvols;
    uint64_t gen;
    int refuse; /* answer GETVOL with -ESRCH */
    const char *ping;
};

static void layout(struct rpc_buf *b, uint64_t gen, const char *ping)
{
    rpc_put_str(b, RPC_T_NAME, "vw");
    rpc_put_str(b, RPC_T_ID, "vol-id");
    rpc_put_u64(b, RPC_T_GEN, gen);
    size_t mark = rpc_put_begin(b, RPC_T_BRICK);
    rpc_put_str(b, RPC_T_HOST, "127.0.0.87");
    rpc_put_u64(b, RPC_T_PORT, 24999);
    rpc_put_str(b, RPC_T_PATH, "/b");
    rpc_put_str(b, RPC_T_ID, "brick-id");
    rpc_put_end(b, mark);
    mark = rpc_put_begin(b, RPC_T_OPTION);
    rpc_put_str(b, RPC_T_NAME, "network.ping-timeout");
    rpc_put_str(b, RPC_T_DATA, ping);
    rpc_put_end(b, mark);
}

static void request_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    struct fake *fk = ctx;
    struct rpc_buf b;
    rpc_buf_init(&b);
    int status = 0;
    if (f->hdr.opcode == RPC_OP_MGMT_GETVOL) {
        pthread_mutex_lock(&fk->lock);
        fk->getvols++;
        if (fk->refuse) {
            status = -ESRCH;
            rpc_put_str(&b, RPC_T_TEXT, "Volume vw is not started");
        } else {
            layout(&b, fk->gen, fk->ping);
            if (fk->sub)
                rpc_conn_put(fk->sub);
            rpc_conn_get(c);
            fk->sub = c;
        }
        pthread_mutex_unlock(&fk->lock);
    } else if (f->hdr.opcode != RPC_OP_PING) {
        status = -ENOSYS;
    }
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, status, &b);
    rpc_buf_free(&b);
    rpc_frame_free(f);
}

static void srv_closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    struct fake *fk = ctx;
    pthread_mutex_lock(&fk->lock);
    if (fk->sub == c) {
        fk->sub = NULL;
        rpc_conn_put(c);
    }
    pthread_mutex_unlock(&fk->lock);
    rpc_conn_put(c); /* the accept loop's reference */
}

static const struct rpc_conn_ops srv_ops = {.request_cb = request_cb, .closed_cb = srv_closed_cb};

static void *accept_main(void *arg)
{
    struct fake *fk = arg;
    while (!__atomic_load_n(&fk->stop, __ATOMIC_RELAXED)) {
        struct pollfd p = {.fd = fk->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept4(fk->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct rpc_conn *c = rpc_conn_new(fd, &srv_ops, fk, "client");
        if (c && rpc_conn_start(c) < 0)
            rpc_conn_put(c);
    }
    return NULL;
}

static int fake_start(struct fake *fk, const char *host, uint64_t gen, const char *ping)
{
    memset(fk, 0, sizeof(*fk));
    snprintf(fk->addr.host, sizeof(fk->addr.host), "%s", host);
    fk->addr.port = PORT;
    fk->gen = gen;
    fk->ping = ping;
    pthread_mutex_init(&fk->lock, NULL);
    fk->lfd = net_listen(&fk->addr, 16);
    CHECK(fk->lfd >= 0);
    if (fk->lfd < 0)
        return -1;
    pthread_create(&fk->thread, NULL, accept_main, fk);
    return 0;
}

/* The server goes away: no more accepts, its connections closed. */
static void fake_stop(struct fake *fk)
{
    __atomic_store_n(&fk->stop, 1, __ATOMIC_RELAXED);
    pthread_join(fk->thread, NULL);
    close(fk->lfd);
    pthread_mutex_lock(&fk->lock);
    struct rpc_conn *c = fk->sub;
    if (c)
        rpc_conn_get(c);
    pthread_mutex_unlock(&fk->lock);
    if (c) {
        rpc_conn_close(c, -ECONNRESET);
        rpc_conn_put(c);
    }
}

static int fake_notify(struct fake *fk, struct rpc_buf *b)
{
    pthread_mutex_lock(&fk->lock);
    int rc = fk->sub ? rpc_conn_notify(fk->sub, RPC_OP_MGMT_GETVOL, b) : -ENOTCONN;
    pthread_mutex_unlock(&fk->lock);
    return rc;
}

static int fake_subscribed(struct fake *fk)
{
    pthread_mutex_lock(&fk->lock);
    int r = fk->sub != NULL;
    pthread_mutex_unlock(&fk->lock);
    return r;
}

/* ---- what the watcher reported ---- */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static int n_changed, n_gone;
static uint64_t last_gen;
static char last_ping[32], last_gone[128];

static void changed_cb(const struct cl_volinfo *v, void *ctx)
{
    pthread_mutex_lock(&seen_lock);
    n_changed++;
    last_gen = v->gen;
    snprintf(last_ping, sizeof(last_ping), "%s", opt_value(&v->opts, "network.ping-timeout"));
    pthread_mutex_unlock(&seen_lock);
}

static void gone_cb(const char *text, void *ctx)
{
    pthread_mutex_lock(&seen_lock);
    n_gone++;
    snprintf(last_gone, sizeof(last_gone), "%s", text);
    pthread_mutex_unlock(&seen_lock);
}

static int seen(int *counter)
{
    pthread_mutex_lock(&seen_lock);
    int v = *counter;
    pthread_mutex_unlock(&seen_lock);
    return v;
}

static int wait_for(int *counter, int want)
{
    for (int i = 0; i < 500 && seen(counter) < want; i++)
        usleep(10000);
    return seen(counter);
}

static void sleep_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

int main(void)
{
    struct fake a, b, refuser;
    if (fake_start(&a, "127.0.0.87", 5, "10") < 0 || fake_start(&b, "127.0.0.88", 8, "7") < 0 ||
        fake_start(&refuser, "127.0.0.90", 1, "10") < 0)
        return check_summary("test_client_volwatch");
    refuser.refuse = 1;
    struct net_addr down = {.host = "127.0.0.89", .port = PORT};
    char err[256];
    struct cl_volinfo v;
    int used = -1;

    /* the first fetch: an unreachable server is skipped */
    struct net_addr list1[] = {down, a.addr};
    CHECK_EQ(cl_volume_fetch_any(list1, 2, "vw", NULL, 2000, &v, &used, err, sizeof(err)), 0);
    CHECK_EQ(used, 1);
    CHECK_EQ(v.gen, 5);
    CHECK_EQ(v.n_bricks, 1);
    CHECK_STR(opt_value(&v.opts, "network.ping-timeout"), "10");
    cl_volinfo_free(&v);
    /* a server's refusal ends the search (every server answers alike) */
    struct net_addr list2[] = {refuser.addr, a.addr};
    int before = a.getvols;
    CHECK_EQ(cl_volume_fetch_any(list2, 2, "vw", NULL, 2000, &v, &used, err, sizeof(err)), -ESRCH);
    CHECK_STR(err, "Volume vw is not started");
    CHECK_EQ(a.getvols, before);
    /* nothing reachable: the reason names the last server */
    struct net_addr list3[] = {down};
    CHECK(cl_volume_fetch_any(list3, 1, "vw", NULL, 2000, &v, &used, err, sizeof(err)) < 0);
    CHECK(strstr(err, "127.0.0.89:25281") != NULL);

    /* the watcher: subscribed to a, b as the backup */
    struct net_addr servers[] = {a.addr, b.addr};
    struct cl_volwatch_params p = {.servers = servers,
                                   .n_servers = 2,
                                   .first = 0,
                                   .volume = "vw",
                                   .gen = 5,
                                   .timeout_ms = 2000,
                                   .changed_cb = changed_cb,
                                   .gone_cb = gone_cb};
    struct cl_volwatch *w = cl_volwatch_start(&p);
    CHECK(w != NULL);
    if (!w)
        return check_summary("test_client_volwatch");
    for (int i = 0; i < 500 && !fake_subscribed(&a); i++)
        sleep_ms(10);
    CHECK(fake_subscribed(&a));
    sleep_ms(100);
    CHECK_EQ(seen(&n_changed), 0); /* generation 5 is what the caller has */

    struct rpc_buf nb;
    rpc_buf_init(&nb);
    layout(&nb, 4, "99"); /* older: ignored */
    CHECK_EQ(fake_notify(&a, &nb), 0);
    rpc_buf_free(&nb);
    rpc_buf_init(&nb);
    layout(&nb, 6, "3");
    CHECK_EQ(fake_notify(&a, &nb), 0);
    rpc_buf_free(&nb);
    CHECK_EQ(wait_for(&n_changed, 1), 1);
    CHECK_EQ(last_gen, 6);
    CHECK_STR(last_ping, "3");

    /* stopped: reported once, even when told twice */
    for (uint64_t gen = 7; gen <= 8; gen++) {
        rpc_buf_init(&nb);
        rpc_put_str(&nb, RPC_T_NAME, "vw");
        rpc_put_u64(&nb, RPC_T_GEN, gen);
        rpc_put_str(&nb, RPC_T_TEXT, "Volume vw is not started");
        CHECK_EQ(fake_notify(&a, &nb), 0);
        rpc_buf_free(&nb);
    }
    CHECK_EQ(wait_for(&n_gone, 1), 1);
    sleep_ms(100);
    CHECK_EQ(seen(&n_gone), 1);
    CHECK_STR(last_gone, "Volume vw is not started");

    /* a goes away: the watcher moves to b, whose layout (generation 9) is
     * newer than the last it passed (8) */
    b.gen = 9;
    fake_stop(&a);
    CHECK_EQ(wait_for(&n_changed, 2), 2);
    CHECK_EQ(last_gen, 9);
    CHECK_STR(last_ping, "7");
    CHECK(fake_subscribed(&b));

    /* stopped while b is up: no callback afterwards */
    cl_volwatch_stop(w);
    int after = seen(&n_changed);
    rpc_buf_init(&nb);
    layout(&nb, 10, "5");
    fake_notify(&b, &nb);
    rpc_buf_free(&nb);
    sleep_ms(100);
    CHECK_EQ(seen(&n_changed), after);

    fake_stop(&b);
    fake_stop(&refuser);
    sleep_ms(50); /* the fakes' readers finish */
    return check_summary("test_client_volwatch");
}
