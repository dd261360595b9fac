/* The pool's state transition (mgmt_apply) on a lone struct mgmt: every
 * entry kind, the refusals every server makes alike, idempotent replays,
 * generations, the whole-state text, and which commands count as changes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/mgmt/pool.h"
#include "check.h"

#define HOST "127.0.0.7"

static struct mgmt m = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int apply(struct rpc_buf *e, char *err, size_t errlen)
{
    int rc = mgmt_apply(&m, e->data, e->len, err, errlen);
    rpc_buf_free(e);
    return rc;
}

static void create_entry(struct rpc_buf *e, const char *name, const char *id, const char *path)
{
    struct mgmt_vol v = {0};
    struct mgmt_brick b = {0};
    snprintf(v.name, sizeof(v.name), "%s", name);
    snprintf(v.id, sizeof(v.id), "%s", id);
    snprintf(b.id, sizeof(b.id), "%s", "0a0a0a0a-0000-4000-8000-000000000001");
    snprintf(b.host, sizeof(b.host), HOST);
    snprintf(b.path, sizeof(b.path), "%s", path);
    v.bricks = &b;
    v.n_bricks = 1;
    char *text = mgmt_vol_format(&v);
    rpc_buf_init(e);
    rpc_put_u64(e, RPC_T_OP, MGMT_E_VOL_CREATE);
    rpc_put_str(e, RPC_T_DATA, text);
    free(text);
}

static void vol_entry(struct rpc_buf *e, enum mgmt_entry_kind k, const char *name, const char *id)
{
    rpc_buf_init(e);
    rpc_put_u64(e, RPC_T_OP, k);
    rpc_put_str(e, RPC_T_NAME, name);
    rpc_put_str(e, RPC_T_ID, id);
}

/* Server quorum counts as GlusterFS's: ceil(total * ratio%), else more
 * than half; a lone server always has it. */
static void test_quorum_met(void)
{
    CHECK(mgmt_quorum_met(1, 1, -1));
    CHECK(mgmt_quorum_met(2, 3, -1));
    CHECK(!mgmt_quorum_met(1, 3, -1));
    CHECK(!mgmt_quorum_met(2, 4, -1));
    CHECK(mgmt_quorum_met(3, 4, -1));
    CHECK(mgmt_quorum_met(1, 2, 50)); /* ceil(1.0) */
    CHECK(!mgmt_quorum_met(1, 2, 51));
    CHECK(mgmt_quorum_met(2, 3, 51)); /* ceil(1.53) = 2 */
    CHECK(!mgmt_quorum_met(2, 3, 67));
    CHECK(mgmt_quorum_met(3, 3, 100));
    CHECK(mgmt_quorum_met(0, 3, 0));
}

int main(void)
{
    test_quorum_met();
    char dir[] = "/tmp/cairn-test-mgmtpool-XXXXXX", b1[300], b2[300], err[512], marker[400];
    const char *id1 = "11111111-1111-4111-8111-111111111111";
    const char *id2 = "22222222-2222-4222-8222-222222222222";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(m.workdir, sizeof(m.workdir), "%s/wd", dir);
    mkdir(m.workdir, 0755);
    snprintf(b1, sizeof(b1), "%s/b1", dir);
    snprintf(b2, sizeof(b2), "%s/b2", dir);
    mkdir(b1, 0755);
    mkdir(b2, 0755);
    snprintf(m.listen.host, sizeof(m.listen.host), HOST);
    m.listen.port = 25261;
    CHECK_EQ(mgmt_pool_load(&m, err, sizeof(err)), 0);
    CHECK_EQ(strlen(m.uuid), GFID_STRLEN - 1);
    struct rpc_buf e;

    /* create: the volume appears, its (local) brick gets the marker */
    create_entry(&e, "pv", id1, b1);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_EQ(m.gen, 1);
    struct mgmt_vol *v = mgmt_vol_find(&m, "pv");
    CHECK(v && v->gen == 1 && v->bricks[0].local == 1);
    snprintf(marker, sizeof(marker), "%s/.cairn/brick.info", b1);
    CHECK(access(marker, F_OK) == 0);
    /* the same entry again (a replay) changes nothing */
    create_entry(&e, "pv", id1, b1);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_EQ(m.gen, 1);
    /* another create of that name, or of that brick, is refused */
    create_entry(&e, "pv", id2, b2);
    CHECK_EQ(apply(&e, err, sizeof(err)), -EEXIST);
    CHECK_STR(err, "Volume pv already exists");
    create_entry(&e, "other", id2, b1);
    CHECK_EQ(apply(&e, err, sizeof(err)), -EEXIST);
    CHECK(strstr(err, "is already part of volume pv") != NULL);
    CHECK(mgmt_vol_find(&m, "other") == NULL);

    /* options: set two, reset one, reset all; unknown names never apply */
    vol_entry(&e, MGMT_E_VOL_OPTS, "pv", id1);
    size_t mk = rpc_put_begin(&e, RPC_T_OPTION);
    rpc_put_str(&e, RPC_T_NAME, "network.ping-timeout");
    rpc_put_str(&e, RPC_T_DATA, "42");
    rpc_put_end(&e, mk);
    mk = rpc_put_begin(&e, RPC_T_OPTION);
    rpc_put_str(&e, RPC_T_NAME, "no.such-option");
    rpc_put_str(&e, RPC_T_DATA, "1");
    rpc_put_end(&e, mk);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    v = mgmt_vol_find(&m, "pv");
    CHECK_STR(opt_value(&v->opts, "network.ping-timeout"), "42");
    CHECK(opt_set_get(&v->opts, "no.such-option") == NULL);
    CHECK_EQ(v->gen, 2);
    vol_entry(&e, MGMT_E_VOL_OPTS, "pv", id1);
    rpc_put_u64(&e, RPC_T_FLAGS, 1);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_EQ(v->opts.n, 0);

    /* an entry for a volume of the same name but another id is refused */
    vol_entry(&e, MGMT_E_VOL_STATUS, "pv", id2);
    rpc_put_u64(&e, RPC_T_MODE, MGMT_VOL_STARTED);
    CHECK_EQ(apply(&e, err, sizeof(err)), -ENOENT);
    /* status with the port the owner chose */
    vol_entry(&e, MGMT_E_VOL_STATUS, "pv", id1);
    rpc_put_u64(&e, RPC_T_MODE, MGMT_VOL_STARTED);
    mk = rpc_put_begin(&e, RPC_T_BRICK);
    rpc_put_str(&e, RPC_T_ID, v->bricks[0].id);
    rpc_put_u64(&e, RPC_T_PORT, 24950);
    rpc_put_end(&e, mk);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_EQ(v->status, MGMT_VOL_STARTED);
    CHECK_EQ(v->bricks[0].port, 24950);
    vol_entry(&e, MGMT_E_VOL_DELETE, "pv", id1);
    CHECK_EQ(apply(&e, err, sizeof(err)), -EBUSY);

    /* peers */
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_PEER_ADD);
    rpc_put_str(&e, RPC_T_ID, id2);
    rpc_put_str(&e, RPC_T_HOST, "127.0.0.8");
    rpc_put_u64(&e, RPC_T_PORT, 24810);
    rpc_put_u64(&e, RPC_T_OFFSET, mgmt_raft_id(id2));
    rpc_put_str(&e, RPC_T_PATH, "127.0.0.8:25810");
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_EQ(m.n_peers, 1);
    CHECK(mgmt_peer_find_raft(&m, mgmt_raft_id(id2)) != NULL);
    CHECK(mgmt_peer_for_host(&m, "127.0.0.8") != NULL);
    CHECK(mgmt_peer_for_host(&m, "127.0.0.9") == NULL);

    /* a pool-wide option (volume set all), validated on apply */
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, MGMT_E_POOL_OPTS);
    mk = rpc_put_begin(&e, RPC_T_OPTION);
    rpc_put_str(&e, RPC_T_NAME, "cluster.server-quorum-ratio");
    rpc_put_str(&e, RPC_T_DATA, "60");
    rpc_put_end(&e, mk);
    mk = rpc_put_begin(&e, RPC_T_OPTION); /* a volume's option: not the pool's */
    rpc_put_str(&e, RPC_T_NAME, "cluster.quorum-type");
    rpc_put_str(&e, RPC_T_DATA, "none");
    rpc_put_end(&e, mk);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK_STR(opt_set_get(&m.pool_opts, "cluster.server-quorum-ratio"), "60%");
    CHECK(opt_set_get(&m.pool_opts, "cluster.quorum-type") == NULL);

    /* the whole state survives its text form */
    uint64_t gen = m.gen;
    CHECK_EQ(gen, 6); /* refused entries do not count here (the applier counts them) */
    char *text = mgmt_state_format(&m);
    CHECK(text != NULL);
    struct mgmt copy = {.lock = PTHREAD_MUTEX_INITIALIZER};
    snprintf(copy.workdir, sizeof(copy.workdir), "%s/wd2", dir);
    mkdir(copy.workdir, 0755);
    copy.listen = m.listen;
    CHECK_EQ(mgmt_state_replace(&copy, text, strlen(text), err, sizeof(err)), 0);
    char *again = mgmt_state_format(&copy);
    CHECK(again && strcmp(text, again) == 0);
    CHECK_EQ(copy.gen, gen);
    CHECK_STR(opt_set_get(&copy.pool_opts, "cluster.server-quorum-ratio"), "60%");
    CHECK_EQ(mgmt_state_replace(&copy, "generation=1\npeer=bad\n", 22, err, sizeof(err)), -EINVAL);
    CHECK_EQ(copy.gen, gen); /* a bad state changes nothing */
    free(text);
    free(again);

    /* delete once stopped: marker gone */
    vol_entry(&e, MGMT_E_VOL_STATUS, "pv", id1);
    rpc_put_u64(&e, RPC_T_MODE, MGMT_VOL_STOPPED);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    vol_entry(&e, MGMT_E_VOL_DELETE, "pv", id1);
    CHECK_EQ(apply(&e, err, sizeof(err)), 0);
    CHECK(mgmt_vol_find(&m, "pv") == NULL);
    CHECK(access(marker, F_OK) < 0);

    /* malformed entries are refused */
    uint8_t junk[] = {1, 0, 9, 9, 9, 9};
    CHECK_EQ(mgmt_apply(&m, junk, sizeof(junk), err, sizeof(err)), -EINVAL);
    rpc_buf_init(&e);
    rpc_put_u64(&e, RPC_T_OP, 99);
    CHECK_EQ(apply(&e, err, sizeof(err)), -EINVAL);

    /* the state files hold what was applied */
    struct mgmt re = {.lock = PTHREAD_MUTEX_INITIALIZER};
    snprintf(re.workdir, sizeof(re.workdir), "%s", m.workdir);
    re.listen = m.listen;
    CHECK_EQ(mgmt_pool_load(&re, err, sizeof(err)), 0);
    CHECK_STR(re.uuid, m.uuid);
    CHECK_EQ(re.gen, m.gen);
    CHECK_EQ(re.n_peers, 1);
    CHECK_STR(opt_set_get(&re.pool_opts, "cluster.server-quorum-ratio"), "60%");

    /* which command lines are changes (forwarded to the leader) */
    char *c1[] = {"volume", "set", "v", "k", "x"}, *c2[] = {"volume", "set", "help"},
         *c3[] = {"--mode=script", "volume", "stop", "v"}, *c4[] = {"volume", "info"},
         *c5[] = {"peer", "probe", "h"}, *c6[] = {"pool", "list"};
    CHECK(mgmt_cmd_mutates(5, c1));
    CHECK(!mgmt_cmd_mutates(3, c2));
    CHECK(mgmt_cmd_mutates(4, c3));
    CHECK(!mgmt_cmd_mutates(2, c4));
    CHECK(mgmt_cmd_mutates(3, c5));
    CHECK(!mgmt_cmd_mutates(2, c6));

    mgmt_state_clear(&copy);
    free(re.peers);
    opt_set_free(&re.pool_opts);
    mgmt_state_clear(&m);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
    return check_summary("test_mgmt_pool");
}
