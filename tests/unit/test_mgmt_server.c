/* cairnd's RPC service in-process over real TCP on 127.0.0.7: MGMT_CLI and
 * MGMT_GETVOL (layout, options, errors, auth.reject). Bricks are not spawned
 * here; the system tests do that with the real cairn-brickd. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/mgmt/mgmt.h"
#include "../../src/rpc/conn.h"
#include "check.h"

#define HOST "127.0.0.7"
#define PORT 25251

static struct mgmt m = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *server_main(void *arg)
{
    mgmt_server_run(&m, *(int *)arg);
    return NULL;
}

static struct rpc_conn *connect_mgmt(void)
{
    struct net_addr a = {.host = HOST, .port = PORT};
    int fd = net_connect(&a, 2000);
    CHECK(fd >= 0);
    if (fd < 0)
        return NULL;
    struct rpc_conn *c = rpc_conn_new(fd, NULL, NULL, "test");
    CHECK(rpc_conn_start(c) == 0);
    return c;
}

/* Runs a command over the wire; returns its exit status, text in out. */
static int cli(struct rpc_conn *c, char *out, size_t outlen, int argc, const char **argv)
{
    struct rpc_buf b;
    struct rpc_frame *r = NULL;
    rpc_buf_init(&b);
    for (int i = 0; i < argc; i++)
        rpc_put_str(&b, RPC_T_ARG, argv[i]);
    int rc = rpc_conn_call_sync(c, RPC_OP_MGMT_CLI, &b, &r, 10000);
    rpc_buf_free(&b);
    CHECK_EQ(rc, 0);
    if (rc < 0 || !r)
        return -1;
    CHECK(rpc_has(&r->msg, RPC_T_TEXT) && rpc_has(&r->msg, RPC_T_STATUS));
    rpc_bytes_str(&r->msg.text, out, outlen);
    int status = (int)r->msg.status;
    rpc_frame_free(r);
    return status;
}

static int getvol(struct rpc_conn *c, const char *name, struct rpc_frame **r)
{
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_str(&b, RPC_T_NAME, name);
    int rc = rpc_conn_call_sync(c, RPC_OP_MGMT_GETVOL, &b, r, 10000);
    rpc_buf_free(&b);
    return rc;
}

static void check_layout(struct rpc_frame *r, const char *b1, const char *b2)
{
    struct rpc_iter it;
    struct rpc_field f;
    int bricks = 0, opts = 0, ping = 0;
    CHECK_EQ(r->msg.n_brick, 2);
    rpc_iter_init(&it, r->body, r->hdr.body_len);
    while (rpc_iter_next(&it, &f) > 0) {
        struct rpc_msg sub;
        if (f.tag != RPC_T_BRICK && f.tag != RPC_T_OPTION)
            continue;
        CHECK_EQ(rpc_msg_decode(f.val, f.len, &sub, NULL), 0);
        char s[4096], d[256];
        if (f.tag == RPC_T_BRICK) {
            CHECK(rpc_has(&sub, RPC_T_HOST) && rpc_has(&sub, RPC_T_PORT) &&
                  rpc_has(&sub, RPC_T_PATH) && rpc_has(&sub, RPC_T_ID));
            rpc_bytes_str(&sub.path, s, sizeof(s));
            CHECK_STR(s, bricks == 0 ? b1 : b2);
            rpc_bytes_str(&sub.host, s, sizeof(s));
            CHECK_STR(s, HOST);
            CHECK_EQ(sub.port, 24900 + bricks);
            bricks++;
        } else {
            rpc_bytes_str(&sub.name, s, sizeof(s));
            rpc_bytes_str(&sub.data, d, sizeof(d));
            if (strcmp(s, "network.ping-timeout") == 0 && strcmp(d, "33") == 0)
                ping = 1;
            opts++;
        }
    }
    CHECK_EQ(bricks, 2);
    CHECK_EQ(opts, 1);
    CHECK(ping);
}

int main(void)
{
    char dir[] = "/tmp/cairn-test-mgmtsrv-XXXXXX", b1[256], b2[256], text[8192];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(m.workdir, sizeof(m.workdir), "%s/wd", dir);
    mkdir(m.workdir, 0755);
    snprintf(b1, sizeof(b1), "%s/b1", dir);
    snprintf(b2, sizeof(b2), "%s/b2", dir);
    mkdir(b1, 0755);
    mkdir(b2, 0755);
    snprintf(m.listen.host, sizeof(m.listen.host), HOST);
    m.listen.port = PORT;
    m.port_min = 24900;
    m.port_max = 24910;
    char err[256];
    CHECK_EQ(mgmt_store_load(&m, err, sizeof(err)), 0);
    int lfd = net_listen(&m.listen, 16);
    CHECK(lfd >= 0);
    if (lfd < 0)
        return check_summary("test_mgmt_server");
    pthread_t t;
    pthread_create(&t, NULL, server_main, &lfd);
    struct rpc_conn *c = connect_mgmt();
    if (!c)
        return check_summary("test_mgmt_server");

    char a1[300], a2[300];
    snprintf(a1, sizeof(a1), HOST ":%s", b1);
    snprintf(a2, sizeof(a2), HOST ":%s", b2);
    const char *create[] = {"volume", "create", "gv0", a1, a2, "force"};
    CHECK_EQ(cli(c, text, sizeof(text), 6, create), 0);
    CHECK_STR(text, "volume create: gv0: success: please start the volume to access data\n");
    const char *info[] = {"--mode=script", "volume", "info", "gv0"};
    CHECK_EQ(cli(c, text, sizeof(text), 4, info), 0);
    CHECK(strstr(text, "Volume Name: gv0\nType: Distribute\n") != NULL);
    CHECK(strstr(text, "Number of Bricks: 2\nTransport-type: tcp\nBricks:\n") != NULL);
    const char *bogus[] = {"volume", "frobnicate"};
    CHECK_EQ(cli(c, text, sizeof(text), 2, bogus), 1);
    CHECK(strstr(text, "unrecognized word: frobnicate") != NULL);
    const char *set[] = {"volume", "set", "gv0", "network.ping-timeout", "33"};
    CHECK_EQ(cli(c, text, sizeof(text), 5, set), 0);

    struct rpc_frame *r = NULL;
    CHECK_EQ(getvol(c, "nope", &r), -ENOENT);
    CHECK(r && rpc_has(&r->msg, RPC_T_TEXT));
    if (r) {
        rpc_bytes_str(&r->msg.text, text, sizeof(text));
        CHECK_STR(text, "Volume nope does not exist");
    }
    rpc_frame_free(r);
    r = NULL;
    CHECK_EQ(getvol(c, "gv0", &r), -ESRCH);
    if (r) {
        rpc_bytes_str(&r->msg.text, text, sizeof(text));
        CHECK_STR(text, "Volume gv0 is not started");
    }
    rpc_frame_free(r);
    r = NULL;

    /* As if started: the layout names each brick with the port it got. */
    pthread_mutex_lock(&m.lock);
    struct mgmt_vol *v = mgmt_vol_find(&m, "gv0");
    CHECK(v != NULL);
    v->status = MGMT_VOL_STARTED;
    v->bricks[0].port = 24900;
    v->bricks[1].port = 24901;
    char volid[GFID_STRLEN];
    strcpy(volid, v->id);
    pthread_mutex_unlock(&m.lock);
    CHECK_EQ(getvol(c, "gv0", &r), 0);
    if (r) {
        rpc_bytes_str(&r->msg.name, text, sizeof(text));
        CHECK_STR(text, "gv0");
        rpc_bytes_str(&r->msg.id, text, sizeof(text));
        CHECK_STR(text, volid);
        check_layout(r, b1, b2);
    }
    rpc_frame_free(r);
    r = NULL;

    /* auth.reject covering this client refuses the layout */
    const char *reject[] = {"volume", "set", "gv0", "auth.reject", "127.0.0.0/24"};
    CHECK_EQ(cli(c, text, sizeof(text), 5, reject), 0);
    CHECK_EQ(getvol(c, "gv0", &r), -EACCES);
    rpc_frame_free(r);
    r = NULL;
    const char *reset[] = {"volume", "reset", "gv0", "auth.reject"};
    CHECK_EQ(cli(c, text, sizeof(text), 4, reset), 0);
    CHECK_EQ(getvol(c, "gv0", &r), 0);
    rpc_frame_free(r);
    r = NULL;

    /* a GETVOL without a name is an error, not a crash */
    CHECK_EQ(rpc_conn_call_sync(c, RPC_OP_MGMT_GETVOL, NULL, NULL, 5000), -EINVAL);
    /* an opcode cairnd does not serve */
    CHECK_EQ(rpc_conn_call_sync(c, RPC_OP_LOOKUP, NULL, NULL, 5000), -ENOSYS);

    pthread_mutex_lock(&m.lock);
    v->status = MGMT_VOL_STOPPED;
    pthread_mutex_unlock(&m.lock);
    const char *del[] = {"volume", "delete", "gv0"};
    CHECK_EQ(cli(c, text, sizeof(text), 3, del), 0);
    CHECK_STR(text, "volume delete: gv0: success\n");
    snprintf(text, sizeof(text), "%s/.cairn/brick.info", b1);
    CHECK(access(text, F_OK) < 0);

    rpc_conn_close(c, 0);
    rpc_conn_put(c);
    m.stopping = 1;
    pthread_join(t, NULL);
    close(lfd);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
    return check_summary("test_mgmt_server");
}
