/* The brick server in process, over TCP on 127.0.0.1: handshake rules,
 * operations over the wire, compound requests, a waiting lock that leaves
 * the connection responsive, locks released when a connection closes,
 * malformed frames on one connection that close it without touching the
 * others or the disk, requests queued on a connection that closed, and a
 * disk that stalls. */
#include <sys/socket.h>

#include "../../src/brick/server.h"
#include "test_brick_util.h"

static struct net_addr addr;

static struct rpc_conn *dial(void)
{
    int fd = net_connect(&addr, 2000);
    if (fd < 0)
        return NULL;
    struct rpc_conn *c = rpc_conn_new(fd, NULL, NULL, "brick");
    if (c && rpc_conn_start(c) < 0) {
        rpc_conn_put(c);
        return NULL;
    }
    return c;
}

static void hang_up(struct rpc_conn *c)
{
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
}

/* Calls op with args; returns the status, *out (optional) the reply. */
static int call(struct rpc_conn *c, uint16_t op, const struct rpc_msg *args, struct rpc_frame **out)
{
    struct rpc_buf b;
    struct rpc_frame *r = NULL;
    rpc_buf_init(&b);
    if (args)
        rpc_msg_encode(args, &b);
    int rc = rpc_conn_call_sync(c, op, &b, &r, 5000);
    rpc_buf_free(&b);
    if (out)
        *out = r;
    else if (r)
        rpc_frame_free(r);
    return rc;
}

static int handshake(struct rpc_conn *c, const char *vol, const char *path, struct rpc_frame **out)
{
    struct rpc_msg m = tb_msg(path);
    rpc_set_str(&m, RPC_T_NAME, &m.name, vol);
    RPC_SET(&m, features, RPC_T_FEATURES, 0);
    return call(c, RPC_OP_HANDSHAKE, &m, out);
}

static char *snapshot(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && find . -path ./.cairn -prune -o -printf '%%p %%y %%m %%s %%U\\n' | sort",
             dir);
    FILE *p = popen(cmd, "r");
    static char bufs[2][65536];
    static int which;
    char *buf = bufs[which++ & 1];
    size_t n = p ? fread(buf, 1, sizeof(bufs[0]) - 1, p) : 0;
    buf[n] = 0;
    if (p)
        pclose(p);
    return buf;
}

/* Raw bytes on a fresh socket (then EOF when hang_up); returns 1 when the
 * server closes it. */
static int raw_closes(const void *data, size_t len, int hang_up)
{
    int fd = net_connect(&addr, 2000);
    if (fd < 0)
        return 0;
    net_write_all(fd, data, len);
    if (hang_up)
        shutdown(fd, SHUT_WR);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[256];
    int closed = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            closed = 1;
            break;
        }
        if (n < 0)
            break;
    }
    close(fd);
    return closed;
}

static void frame_bytes(uint8_t *out, uint16_t op, const struct rpc_buf *body, uint32_t crc_xor)
{
    struct rpc_hdr h = {.magic = RPC_MAGIC,
                        .version = RPC_VERSION,
                        .kind = RPC_KIND_REQUEST,
                        .opcode = op,
                        .reqid = 7,
                        .body_len = (uint32_t)body->len,
                        .body_crc = rpc_crc32c(0, body->data, body->len) ^ crc_xor};
    rpc_hdr_encode(&h, out);
    memcpy(out + RPC_HDR_LEN, body->data, body->len);
}

static void test_server(const char *dir, struct brick *b)
{
    struct rpc_conn *c = dial();
    CHECK(c != NULL);
    if (!c)
        return;
    struct rpc_frame *r;
    /* before the handshake: only PING */
    CHECK_EQ(call(c, RPC_OP_PING, NULL, NULL), 0);
    struct rpc_msg m = tb_msg("/");
    CHECK_EQ(call(c, RPC_OP_LOOKUP, &m, NULL), -EACCES);
    CHECK_EQ(handshake(c, "wrongvol", dir, &r), -ENOENT);
    CHECK(r && rpc_has(&r->msg, RPC_T_TEXT));
    rpc_frame_free(r);
    CHECK_EQ(handshake(c, "testvol", "/some/other/path", NULL), -ENOENT);
    CHECK_EQ(call(c, RPC_OP_LOOKUP, &m, NULL), -EACCES);
    CHECK_EQ(handshake(c, "testvol", dir, &r), 0);
    CHECK(r && rpc_has(&r->msg, RPC_T_ID) && r->msg.id.len == strlen(b->id));
    rpc_frame_free(r);

    /* operations */
    m = tb_msg("/dir");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    CHECK_EQ(call(c, RPC_OP_MKDIR, &m, &r), 0);
    CHECK(r && gfid_equal(&r->msg.attr.gfid, &g));
    rpc_frame_free(r);
    m = tb_msg("/dir/file");
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0644);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    CHECK_EQ(call(c, RPC_OP_CREATE, &m, &r), 0);
    uint64_t fh = r ? r->msg.fh : 0;
    rpc_frame_free(r);
    static uint8_t big[1 << 20];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 7);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 0);
    rpc_set_bytes(&m, RPC_T_DATA, &m.data, big, sizeof(big));
    CHECK_EQ(call(c, RPC_OP_WRITE, &m, &r), 0);
    CHECK(r && r->msg.size == sizeof(big) && r->msg.attr.size == sizeof(big));
    rpc_frame_free(r);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, offset, RPC_T_OFFSET, 1000);
    RPC_SET(&m, size, RPC_T_SIZE, 2u << 20);
    CHECK_EQ(call(c, RPC_OP_READ, &m, &r), 0);
    CHECK(r && r->msg.data.len == sizeof(big) - 1000 &&
          !memcmp(r->msg.data.p, big + 1000, sizeof(big) - 1000));
    rpc_frame_free(r);
    CHECK_EQ(call(c, 77, &m, NULL), -ENOSYS);

    /* a waiting lock on a second connection: that connection stays
     * responsive, and the lock comes when the first connection closes */
    struct rpc_conn *c2 = dial();
    CHECK_EQ(handshake(c2, "testvol", NULL, NULL), 0);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    RPC_SET(&m, owner, RPC_T_OWNER, 1);
    m.lock.type = 1;
    m.lock.len = 0;
    m.present |= 1ull << RPC_T_LOCK;
    CHECK_EQ(call(c, RPC_OP_SETLK, &m, NULL), 0);
    m = tb_msg("/dir/file");
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR);
    CHECK_EQ(call(c2, RPC_OP_OPEN, &m, &r), 0);
    uint64_t fh2 = r ? r->msg.fh : 0;
    rpc_frame_free(r);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh2);
    RPC_SET(&m, owner, RPC_T_OWNER, 2);
    RPC_SET(&m, flags, RPC_T_FLAGS, 1);
    m.lock.type = 1;
    m.present |= 1ull << RPC_T_LOCK;
    struct rpc_buf lb;
    rpc_buf_init(&lb);
    rpc_msg_encode(&m, &lb);
    struct rpc_frame *lr = NULL;
    /* the wait outlasts a short client timeout: the brick is still waiting */
    CHECK_EQ(rpc_conn_call_sync(c2, RPC_OP_SETLK, &lb, &lr, 300), -ETIMEDOUT);
    CHECK_EQ(call(c2, RPC_OP_PING, NULL, NULL), 0);
    m = tb_msg("/dir");
    CHECK_EQ(call(c2, RPC_OP_LOOKUP, &m, NULL), 0); /* workers are free */
    hang_up(c);                                     /* drops its lock */
    c = NULL;
    /* the pending wait is granted to owner 2, so a new request by the same
     * owner succeeds at once */
    usleep(100 * 1000);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh2);
    RPC_SET(&m, owner, RPC_T_OWNER, 2);
    m.lock.type = 1;
    m.present |= 1ull << RPC_T_LOCK;
    CHECK_EQ(call(c2, RPC_OP_SETLK, &m, NULL), 0);
    rpc_buf_free(&lb);

    /* malformed frames on other connections: closed, nothing executed */
    char *before = snapshot(dir);
    struct rpc_buf body;
    rpc_buf_init(&body);
    rpc_put_str(&body, RPC_T_PATH, "/victim");
    uint8_t raw[512];
    memset(raw, 0, sizeof(raw));
    frame_bytes(raw, RPC_OP_LOOKUP, &body, 0);
    raw[0] ^= 0xff; /* bad magic */
    CHECK(raw_closes(raw, RPC_HDR_LEN + body.len, 0));
    rpc_buf_reset(&body);
    rpc_put_str(&body, RPC_T_PATH, "/victim");
    rpc_put_u64(&body, RPC_T_MODE, S_IFDIR | 0755);
    rpc_put_bytes(&body, RPC_T_GFID, g.b, 16);
    frame_bytes(raw, RPC_OP_MKDIR, &body, 1); /* bad checksum */
    CHECK(raw_closes(raw, RPC_HDR_LEN + body.len, 0));
    frame_bytes(raw, RPC_OP_MKDIR, &body, 0);
    raw[RPC_HDR_LEN + 1] = 0x7f; /* unknown tag, checksum recomputed */
    struct rpc_buf tmp = {.data = raw + RPC_HDR_LEN, .len = body.len};
    frame_bytes(raw, RPC_OP_MKDIR, &tmp, 0);
    CHECK(raw_closes(raw, RPC_HDR_LEN + body.len, 0));
    memset(raw, 0xff, 64); /* garbage */
    CHECK(raw_closes(raw, 64, 0));
    CHECK(raw_closes(raw, 7, 1)); /* truncated, then EOF */
    rpc_buf_free(&body);
    /* the good connection still works and the disk did not change */
    m = tb_msg("/dir/file");
    CHECK_EQ(call(c2, RPC_OP_LOOKUP, &m, NULL), 0);
    CHECK_STR(snapshot(dir), before);
    hang_up(c2);
}

/* A connection closed with requests still queued behind a slow one (a
 * client that gave up on a brick stopped or stalled, which then works
 * through its backlog): what was queued is dropped, and nothing of the
 * connection outlives it. Here, with one worker held by a stalled fsync, a
 * leased LOOKUP queued behind it used to register a lease after the
 * connection's leases were released; another client's change in that
 * directory then recalled it on the freed connection (a crash, or a reply
 * held for the recall timeout). */
static void test_backlog_after_close(const char *dir)
{
    struct rpc_conn *a = dial(), *b = dial();
    CHECK(a && b);
    if (!a || !b)
        return;
    CHECK_EQ(handshake(a, "testvol", dir, NULL), 0);
    CHECK_EQ(handshake(b, "testvol", dir, NULL), 0);
    struct rpc_msg m = tb_msg("/d");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    CHECK_EQ(call(b, RPC_OP_MKDIR, &m, NULL), 0);
    m = tb_msg("/d/f");
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0644);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    struct rpc_frame *r = NULL;
    CHECK_EQ(call(a, RPC_OP_CREATE, &m, &r), 0);
    uint64_t fh = r ? r->msg.fh : 0;
    rpc_frame_free(r);

    brick_fault_stall(BVFS_FSYNC, 300, 0, 0);
    struct rpc_buf body;
    rpc_buf_init(&body);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    rpc_msg_encode(&m, &body);
    CHECK_EQ(rpc_conn_call(a, RPC_OP_FSYNC, &body, NULL, NULL), 0); /* holds the worker */
    rpc_buf_reset(&body);
    struct rpc_msg s = tb_msg("/d/x");
    RPC_SET(&s, op, RPC_T_OP, RPC_OP_LOOKUP);
    RPC_SET(&s, lease, RPC_T_LEASE, RPC_LEASE_READ);
    size_t mark = rpc_put_begin(&body, RPC_T_SUB);
    rpc_msg_encode(&s, &body);
    rpc_put_end(&body, mark);
    CHECK_EQ(rpc_conn_call(a, RPC_OP_COMPOUND, &body, NULL, NULL), 0); /* queued behind */
    rpc_buf_free(&body);
    usleep(50 * 1000);
    hang_up(a);
    usleep(600 * 1000); /* the fsync ends; the queued request is dropped */

    /* a change in /d: no recall to the connection that went away, so the
     * reply comes at once */
    m = tb_msg("/d/y");
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFDIR | 0755);
    struct rpc_buf mb;
    rpc_buf_init(&mb);
    rpc_msg_encode(&m, &mb);
    CHECK_EQ(rpc_conn_call_sync(b, RPC_OP_MKDIR, &mb, NULL, 2000), 0);
    rpc_buf_free(&mb);
    CHECK_EQ(call(b, RPC_OP_PING, NULL, NULL), 0);
    CHECK_EQ(brick_fault_reset(), 1u);
    hang_up(b);
}

/* A disk that stalls longer than network.ping-timeout: the brick closes
 * its connections (the request held by the disk fails for its client
 * instead of waiting), refuses handshakes with EIO while the disk holds
 * it, and serves again once it completed. */
static void test_disk_stall(const char *dir, struct brick *b)
{
    brick_set_option(b, "network.ping-timeout", "1");
    struct rpc_conn *a = dial();
    CHECK(a != NULL);
    if (!a)
        return;
    CHECK_EQ(handshake(a, "testvol", dir, NULL), 0);
    struct rpc_msg m = tb_msg("/stall");
    gfid_t g;
    gfid_generate(&g);
    tb_set_gfid(&m, &g);
    RPC_SET(&m, mode, RPC_T_MODE, S_IFREG | 0644);
    RPC_SET(&m, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    struct rpc_frame *r = NULL;
    CHECK_EQ(call(a, RPC_OP_CREATE, &m, &r), 0);
    uint64_t fh = r ? r->msg.fh : 0;
    rpc_frame_free(r);
    brick_fault_stall(BVFS_FSYNC, 3000, 0, 0);
    m = tb_msg(NULL);
    RPC_SET(&m, fh, RPC_T_FH, fh);
    /* without the watch it would wait for the disk, then succeed */
    CHECK_EQ(call(a, RPC_OP_FSYNC, &m, NULL), -ENOTCONN);
    CHECK(!rpc_conn_is_open(a));
    hang_up(a);
    struct rpc_conn *c = dial();
    CHECK(c != NULL);
    if (c) {
        r = NULL;
        CHECK_EQ(handshake(c, "testvol", dir, &r), -EIO);
        CHECK(r && rpc_has(&r->msg, RPC_T_TEXT));
        rpc_frame_free(r);
        CHECK_EQ(call(c, RPC_OP_PING, NULL, NULL), 0); /* the process answers */
        hang_up(c);
    }
    /* served again once the fsync is through */
    int rc = -EIO;
    for (int i = 0; i < 100 && rc == -EIO; i++) {
        usleep(100 * 1000);
        c = dial();
        rc = c ? handshake(c, "testvol", dir, NULL) : -ENOTCONN;
        if (c && rc == 0) {
            m = tb_msg("/stall");
            CHECK_EQ(call(c, RPC_OP_LOOKUP, &m, NULL), 0);
        }
        if (c)
            hang_up(c);
    }
    CHECK_EQ(rc, 0);
    CHECK_EQ(brick_fault_reset(), 1u);
    brick_set_option(b, "network.ping-timeout", "10");
}

int main(void)
{
    log_init("test", LOG_ERROR);
    struct tb t;
    if (tb_open(&t, NULL) < 0)
        return 1;
    struct brick_server *s = NULL;
    int rc = -1;
    for (int port = 25110; port < 25130 && rc < 0; port++) {
        net_parse_addr("127.0.0.1", (uint16_t)port, &addr);
        rc = brick_server_start(t.b, &addr, 4, &s);
    }
    CHECK_EQ(rc, 0);
    if (rc == 0) {
        test_server(t.dir, t.b);
        brick_server_stop(s);
    }
    tb_close(&t, 1);

    /* one worker, on a disk that can stall */
    if (tb_open(&t, &brick_vfs_fault) < 0)
        return 1;
    rc = -1;
    for (int port = 25130; port < 25150 && rc < 0; port++) {
        net_parse_addr("127.0.0.1", (uint16_t)port, &addr);
        rc = brick_server_start(t.b, &addr, 1, &s);
    }
    CHECK_EQ(rc, 0);
    if (rc == 0) {
        test_backlog_after_close(t.dir);
        test_disk_stall(t.dir, t.b);
        brick_server_stop(s);
    }
    tb_close(&t, 1);
    return check_summary("test_brick_server");
}
