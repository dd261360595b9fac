/* Connections over a real socket pair: calls, pipelining from several
 * threads, replies out of order, malformed input, close and timeouts. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/lib/log.h"
#include "../../src/lib/net.h"
#include "../../src/rpc/conn.h"
#include "check.h"

/* Server behaviour: answer LOOKUP with the path echoed as TEXT and status
 * -ENOENT for "/missing"; hold GETATTR requests unanswered (a hung server). */
static struct rpc_frame *held[64];
static int n_held;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static int server_closed;

static void server_request_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    if (f->hdr.opcode == RPC_OP_GETATTR) {
        pthread_mutex_lock(&held_lock);
        held[n_held++] = f;
        pthread_mutex_unlock(&held_lock);
        return;
    }
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_bytes(&b, RPC_T_TEXT, f->msg.path.p, f->msg.path.len);
    int status = f->msg.path.len == 8 && !memcmp(f->msg.path.p, "/missing", 8) ? -ENOENT : 0;
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, status, &b);
    rpc_buf_free(&b);
    rpc_frame_free(f);
}

static void server_closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    __atomic_store_n(&server_closed, 1, __ATOMIC_SEQ_CST);
}

static const struct rpc_conn_ops server_ops = {.request_cb = server_request_cb,
                                               .closed_cb = server_closed_cb};

static int lookup(struct rpc_conn *c, const char *path, char *out, size_t outlen)
{
    struct rpc_msg m = {0};
    struct rpc_buf b;
    struct rpc_frame *r = NULL;
    rpc_set_str(&m, RPC_T_PATH, &m.path, path);
    rpc_buf_init(&b);
    rpc_msg_encode(&m, &b);
    int rc = rpc_conn_call_sync(c, RPC_OP_LOOKUP, &b, &r, 5000);
    rpc_buf_free(&b);
    if (r) {
        if (out)
            rpc_bytes_str(&r->msg.text, out, outlen);
        rpc_frame_free(r);
    }
    return rc;
}

struct worker {
    struct rpc_conn *c;
    int id, ok;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 500; i++) {
        char path[64], got[64];
        snprintf(path, sizeof(path), "/w%d/%d", w->id, i);
        if (lookup(w->c, path, got, sizeof(got)) == 0 && strcmp(path, got) == 0)
            w->ok++;
    }
    return NULL;
}

static void make_pair(struct rpc_conn **client, struct rpc_conn **server)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    *server = rpc_conn_new(sv[0], &server_ops, NULL, "test-client");
    *client = rpc_conn_new(sv[1], NULL, NULL, "test-server");
    rpc_conn_start(*server);
    rpc_conn_start(*client);
}

static void test_calls(void)
{
    struct rpc_conn *c, *s;
    char got[64];
    make_pair(&c, &s);
    CHECK_EQ(lookup(c, "/a/b", got, sizeof(got)), 0);
    CHECK_STR(got, "/a/b");
    CHECK_EQ(lookup(c, "/missing", NULL, 0), -ENOENT);

    pthread_t t[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.c = c, .id = i};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(w[i].ok, 500);
    }
    rpc_conn_close(c, 0);
    CHECK_EQ(lookup(c, "/after-close", NULL, 0), -ENOTCONN);
    rpc_conn_put(c);
    rpc_conn_put(s);
}

struct burst {
    int fd;
    struct rpc_buf *b;
};

static void *burst_writer(void *arg)
{
    struct burst *w = arg;
    CHECK_EQ(net_write_all(w->fd, w->b->data, w->b->len), 0);
    return NULL;
}

/* A burst of pipelined requests, answered inline by the reader (replies
 * gathered while more requests wait in its buffer): every reply arrives,
 * in order, the last one too (nothing stays gathered once the reader waits),
 * including replies too large to gather and more than one gathering's
 * worth. */
static void test_burst_of_replies(void)
{
    enum { N = 400 };
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    struct rpc_conn *s = rpc_conn_new(sv[0], &server_ops, NULL, "burst-sender");
    rpc_conn_start(s);
    struct rpc_buf out;
    rpc_buf_init(&out);
    char path[4096];
    for (int i = 0; i < N; i++) {
        /* every 50th path is long: its echo is not gathered */
        size_t len = i % 50 == 7 ? 3000 : (size_t)snprintf(path, sizeof(path), "/burst/%d", i);
        if (i % 50 == 7)
            memset(path, 'a' + i % 26, len);
        struct rpc_msg m = {0};
        struct rpc_buf b;
        rpc_buf_init(&b);
        rpc_set_bytes(&m, RPC_T_PATH, &m.path, path, (uint32_t)len);
        rpc_msg_encode(&m, &b);
        struct rpc_hdr h = {.magic = RPC_MAGIC,
                            .version = RPC_VERSION,
                            .kind = RPC_KIND_REQUEST,
                            .opcode = RPC_OP_LOOKUP,
                            .reqid = (uint64_t)i + 1,
                            .body_len = (uint32_t)b.len,
                            .body_crc = rpc_crc32c(0, b.data, b.len)};
        uint8_t hdr[RPC_HDR_LEN];
        rpc_hdr_encode(&h, hdr);
        rpc_buf_put(&out, hdr, RPC_HDR_LEN);
        rpc_buf_put(&out, b.data, b.len);
        rpc_buf_free(&b);
    }
    /* all of it at once, from another thread (the socket buffer is
     * smaller than the burst) */
    struct burst w = {sv[1], &out};
    pthread_t t;
    pthread_create(&t, NULL, burst_writer, &w);
    size_t cap = 1 << 20, have = 0;
    uint8_t *in = malloc(cap);
    int got = 0, in_order = 1;
    while (got < N) {
        struct pollfd p = {.fd = sv[1], .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            break; /* a reply never came */
        ssize_t n = read(sv[1], in + have, cap - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        long used;
        struct rpc_frame f;
        const char *why = NULL;
        while (have > 0 && (used = rpc_frame_parse(in, have, &f, &why)) > 0) {
            in_order &= f.hdr.kind == RPC_KIND_REPLY && f.hdr.reqid == (uint64_t)got + 1 &&
                        f.hdr.status == 0;
            got++;
            free(f.body);
            memmove(in, in + used, have - (size_t)used);
            have -= (size_t)used;
        }
    }
    pthread_join(t, NULL);
    CHECK_EQ(got, N);
    CHECK(in_order);
    free(in);
    rpc_buf_free(&out);
    close(sv[1]);
    rpc_conn_put(s);
}

static void test_pending_fail_on_close(void)
{
    struct rpc_conn *c, *s;
    make_pair(&c, &s);
    /* GETATTR is held by the server: the call times out without an answer */
    CHECK_EQ(rpc_conn_call_sync(c, RPC_OP_GETATTR, NULL, NULL, 200), -ETIMEDOUT);
    /* tick with pending calls and silence closes the connection */
    uint64_t now = net_now_ms();
    rpc_conn_tick(c, now + 10000, 1000, 5000);
    CHECK(!rpc_conn_is_open(c));
    /* the server sees the close */
    for (int i = 0; i < 200 && !__atomic_load_n(&server_closed, __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    CHECK(__atomic_load_n(&server_closed, __ATOMIC_SEQ_CST));
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < n_held; i++)
        rpc_frame_free(held[i]);
    n_held = 0;
    pthread_mutex_unlock(&held_lock);
    rpc_conn_put(c);
    rpc_conn_put(s);
}

static void test_malformed_closes(void)
{
    int sv[2];
    server_closed = 0;
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    struct rpc_conn *s = rpc_conn_new(sv[0], &server_ops, NULL, "garbage-sender");
    rpc_conn_start(s);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n....";
    CHECK(write(sv[1], junk, sizeof(junk)) == (ssize_t)sizeof(junk));
    char buf[16];
    /* the server closes its end: we read EOF */
    CHECK_EQ(read(sv[1], buf, sizeof(buf)), 0);
    close(sv[1]);
    for (int i = 0; i < 200 && !__atomic_load_n(&server_closed, __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    CHECK(__atomic_load_n(&server_closed, __ATOMIC_SEQ_CST));
    rpc_conn_put(s);
}

/* Bytes waiting on fd within ms: 1, else 0. */
static int readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

/* Reads the request frames waiting on fd; their paths (or "#" for one
 * without) joined with ' ' into out. Returns how many. */
static int read_requests(int fd, char *out, size_t outlen)
{
    static uint8_t buf[1 << 20];
    size_t len = 0;
    int n = 0;
    out[0] = 0;
    while (readable(fd, 100)) {
        ssize_t r = read(fd, buf + len, sizeof(buf) - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    size_t off = 0;
    for (;;) {
        struct rpc_frame f;
        const char *why;
        long used = rpc_frame_parse(buf + off, len - off, &f, &why);
        if (used <= 0)
            break;
        char path[64] = "#";
        if (rpc_has(&f.msg, RPC_T_PATH))
            rpc_bytes_str(&f.msg.path, path, sizeof(path));
        size_t l = strlen(out);
        snprintf(out + l, outlen - l, "%s%s", l ? " " : "", path);
        free(f.body);
        off += (size_t)used;
        n++;
    }
    return n;
}

static void ignore_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void call_path(struct rpc_conn *c, const char *path, size_t data_len, int *done)
{
    struct rpc_msg m = {0};
    struct rpc_buf b;
    static uint8_t data[200 * 1024];
    rpc_set_str(&m, RPC_T_PATH, &m.path, path);
    if (data_len)
        rpc_set_bytes(&m, RPC_T_DATA, &m.data, data, (uint32_t)data_len);
    rpc_buf_init(&b);
    rpc_msg_encode(&m, &b);
    CHECK_EQ(rpc_conn_call(c, RPC_OP_LOOKUP, &b, ignore_cb, done), 0);
    rpc_buf_free(&b);
}

/* A corked thread's requests stay in the connection until rpc_cork_flush
 * or rpc_uncork, and then go together, in order; a large one goes at once,
 * after those held before it; an uncorked thread's go at once. */
static void test_corked_calls(void)
{
    int sv[2], done = 0;
    char got[256];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct rpc_conn *c = rpc_conn_new(sv[1], NULL, NULL, "raw-peer");
    rpc_conn_start(c);
    rpc_cork();
    call_path(c, "/a", 0, &done);
    call_path(c, "/b", 1000, &done);
    call_path(c, "/c", 0, &done);
    CHECK(!readable(sv[0], 50));
    rpc_cork_flush();
    CHECK_EQ(read_requests(sv[0], got, sizeof(got)), 3);
    CHECK_STR(got, "/a /b /c");
    call_path(c, "/d", 0, &done); /* still corked */
    CHECK(!readable(sv[0], 50));
    call_path(c, "/big", 100 * 1024, &done); /* past the body bound: at once */
    CHECK_EQ(read_requests(sv[0], got, sizeof(got)), 2);
    CHECK_STR(got, "/d /big");
    call_path(c, "/e", 0, &done);
    CHECK(!readable(sv[0], 50));
    rpc_uncork();
    CHECK_EQ(read_requests(sv[0], got, sizeof(got)), 1);
    CHECK_STR(got, "/e");
    call_path(c, "/f", 0, &done); /* uncorked: at once */
    CHECK_EQ(read_requests(sv[0], got, sizeof(got)), 1);
    CHECK_STR(got, "/f");
    close(sv[0]);
    for (int i = 0; i < 200 && __atomic_load_n(&done, __ATOMIC_SEQ_CST) < 7; i++)
        usleep(10000);
    CHECK_EQ(__atomic_load_n(&done, __ATOMIC_SEQ_CST), 7); /* every call failed at the close */
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
}

/* A call whose callback drops the caller's last reference (a handshake
 * that fails does): the connection is closed and its reader gone while the
 * caller is still in the call's send. A signal handler that sleeps holds
 * the sender there, blocked in a send to a peer that does not read, while
 * the peer closes; the call must not touch freed memory when the send
 * returns (ASan, in the sanitizer build, reports it if it does). */
struct held_call {
    struct rpc_conn *c;
    int rc, status;
};

static void drop_cb(void *arg, int status, struct rpc_frame *reply, int *take)
{
    struct held_call *h = arg;
    (void)reply;
    (void)take;
    __atomic_store_n(&h->status, status, __ATOMIC_SEQ_CST);
    rpc_conn_put(h->c);
}

static void *held_sender(void *arg)
{
    struct held_call *h = arg;
    struct rpc_buf b;
    rpc_buf_init(&b);
    void *big = calloc(1, 1 << 20);
    rpc_put_bytes(&b, RPC_T_DATA, big, 1 << 20);
    h->rc = rpc_conn_call(h->c, RPC_OP_WRITE, &b, drop_cb, h);
    rpc_buf_free(&b);
    free(big);
    return NULL;
}

static void doze(int sig)
{
    (void)sig;
    usleep(300 * 1000);
}

static void test_callback_drops_last_reference(void)
{
    struct sigaction sa = {.sa_handler = doze}, old;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ(sigaction(SIGUSR1, &sa, &old), 0); /* no SA_RESTART: the send sees EINTR */
    int sv[2], small = 4096;
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    struct held_call h = {.c = rpc_conn_new(sv[1], NULL, NULL, "closing-peer"), .status = 1};
    rpc_conn_start(h.c);
    pthread_t t;
    pthread_create(&t, NULL, held_sender, &h);
    CHECK(readable(sv[0], 2000)); /* the sender is in its send, blocked */
    usleep(50 * 1000);
    pthread_kill(t, SIGUSR1);
    usleep(20 * 1000);
    close(sv[0]); /* the reader fails the call; drop_cb drops the last reference */
    for (int i = 0; i < 200 && __atomic_load_n(&h.status, __ATOMIC_SEQ_CST) == 1; i++)
        usleep(10000);
    CHECK_EQ(__atomic_load_n(&h.status, __ATOMIC_SEQ_CST), -ENOTCONN);
    pthread_join(t, NULL);
    CHECK_EQ(h.rc, 0);
    sigaction(SIGUSR1, &old, NULL);
}

int main(void)
{
    log_init("test", LOG_ERROR);
    test_calls();
    test_burst_of_replies();
    test_pending_fail_on_close();
    test_malformed_closes();
    test_corked_calls();
    test_callback_drops_last_reference();
    return check_summary("test_rpc_conn");
}
