/* The pool secret and its challenge-response (src/mgmt/pool_auth.h), and
 * the Raft transport that runs it before libraft sees a connection
 * (src/mgmt/raft_auth.h): the right secret is accepted, a wrong one, a
 * replayed answer or proof, a truncated or garbage handshake are refused,
 * without a crash; the secret file is 0600 and read back alike. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/mgmt/pool_auth.h"
#include "../../src/mgmt/raft_auth.h"
#include "check.h"

static const uint8_t key1[POOL_SECRET_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
static const uint8_t key2[POOL_SECRET_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12};

/* A whole exchange; the status of each step. */
static void exchange(const uint8_t *ckey, const uint8_t *skey, int *answered, int *proved)
{
    struct pool_auth c, s;
    uint8_t hello[POOL_HELLO_LEN], answer[POOL_ANSWER_LEN], proof[POOL_PROOF_LEN] = {0};
    CHECK_EQ(pool_auth_connect(&c, ckey, hello), 0);
    CHECK_EQ(pool_auth_accept(&s, skey, hello, sizeof(hello), answer), 0);
    *answered = pool_auth_answered(&c, answer, sizeof(answer), proof);
    *proved = pool_auth_proved(&s, proof, sizeof(proof));
}

static void test_exchange(void)
{
    int a, p;
    exchange(key1, key1, &a, &p);
    CHECK_EQ(a, 0);
    CHECK_EQ(p, 0);
    /* either side with another secret */
    exchange(key2, key1, &a, &p);
    CHECK_EQ(a, -EACCES);
    CHECK_EQ(p, -EACCES);
    exchange(key1, key2, &a, &p);
    CHECK_EQ(a, -EACCES);
    CHECK_EQ(p, -EACCES);
}

static void test_replay(void)
{
    struct pool_auth c, s, c2, s2;
    uint8_t hello[POOL_HELLO_LEN], answer[POOL_ANSWER_LEN], proof[POOL_PROOF_LEN];
    uint8_t hello2[POOL_HELLO_LEN], answer2[POOL_ANSWER_LEN], proof2[POOL_PROOF_LEN];
    CHECK_EQ(pool_auth_connect(&c, key1, hello), 0);
    CHECK_EQ(pool_auth_accept(&s, key1, hello, sizeof(hello), answer), 0);
    CHECK_EQ(pool_auth_answered(&c, answer, sizeof(answer), proof), 0);
    CHECK_EQ(pool_auth_proved(&s, proof, sizeof(proof)), 0);
    /* an eavesdropper replays the hello and then the proof it saw: the
     * acceptor's nonce is new, the old proof worthless */
    CHECK_EQ(pool_auth_accept(&s2, key1, hello, sizeof(hello), answer2), 0);
    CHECK(memcmp(answer, answer2, POOL_NONCE_LEN) != 0);
    CHECK_EQ(pool_auth_proved(&s2, proof, sizeof(proof)), -EACCES);
    /* an impostor acceptor replays an old answer to a new connector */
    CHECK_EQ(pool_auth_connect(&c2, key1, hello2), 0);
    CHECK_EQ(pool_auth_answered(&c2, answer, sizeof(answer), proof2), -EACCES);
    /* an acceptor's answer is no connector's proof (the labels differ) */
    CHECK_EQ(pool_auth_accept(&s2, key1, hello, sizeof(hello), answer2), 0);
    CHECK_EQ(pool_auth_proved(&s2, answer2 + POOL_NONCE_LEN, POOL_PROOF_LEN), -EACCES);
    /* a proof is taken once: a second one, right or wrong, is refused */
    CHECK_EQ(pool_auth_proved(&s, proof, sizeof(proof)), -EPROTO);
    CHECK_EQ(pool_auth_accept(&s2, key1, hello, sizeof(hello), answer2), 0);
    CHECK_EQ(pool_auth_proved(&s2, proof, sizeof(proof)), -EACCES);
    CHECK_EQ(pool_auth_proved(&s2, proof, sizeof(proof)), -EPROTO);
    pool_auth_clear(&c);
    pool_auth_clear(&s);
}

static void test_garbage(void)
{
    struct pool_auth c, s;
    uint8_t hello[POOL_HELLO_LEN], answer[POOL_ANSWER_LEN], proof[POOL_PROOF_LEN];
    uint8_t junk[128];
    memset(junk, 0xa5, sizeof(junk));
    CHECK_EQ(pool_auth_connect(&c, key1, hello), 0);
    for (size_t n = 0; n < sizeof(hello); n++)
        CHECK_EQ(pool_auth_accept(&s, key1, hello, n, answer), -EPROTO);
    CHECK_EQ(pool_auth_accept(&s, key1, junk, POOL_HELLO_LEN, answer), -EPROTO);
    uint8_t bad[POOL_HELLO_LEN];
    memcpy(bad, hello, sizeof(bad));
    bad[4] = POOL_AUTH_VERSION + 1;
    CHECK_EQ(pool_auth_accept(&s, key1, bad, sizeof(bad), answer), -EPROTO);
    CHECK_EQ(pool_auth_accept(&s, key1, hello, sizeof(hello) + 1, answer), -EPROTO);
    /* a proof without a hello before, or of the wrong length */
    CHECK_EQ(pool_auth_proved(&s, junk, POOL_PROOF_LEN), -EPROTO);
    CHECK_EQ(pool_auth_accept(&s, key1, hello, sizeof(hello), answer), 0);
    CHECK_EQ(pool_auth_proved(&s, junk, POOL_PROOF_LEN - 1), -EPROTO);
    /* a truncated or long answer; then none is taken any more */
    CHECK_EQ(pool_auth_answered(&c, answer, sizeof(answer) - 1, proof), -EPROTO);
    CHECK_EQ(pool_auth_answered(&c, junk, sizeof(junk), proof), -EPROTO);
    CHECK_EQ(pool_auth_answered(&c, junk, POOL_ANSWER_LEN, proof), -EACCES);
    CHECK_EQ(pool_auth_answered(&c, answer, sizeof(answer), proof), -EPROTO);
}

static void test_secret_file(void)
{
    char dir[] = "/tmp/cairn-pool-auth-XXXXXX", path[256], raft[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(raft, sizeof(raft), "%s/raft", dir);
    snprintf(path, sizeof(path), "%s/raft/secret", dir);
    CHECK_EQ(mkdir(raft, 0700), 0);
    pool_secret_forget();
    uint8_t k[POOL_SECRET_LEN], k2[POOL_SECRET_LEN];
    char hex[2 * POOL_SECRET_LEN + 1];
    CHECK_EQ(pool_secret_get(k), -ENOKEY);
    CHECK_EQ(pool_secret_load(dir), -ENOENT);
    CHECK_EQ(pool_secret_create(dir), 0);
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECK_EQ(pool_secret_get(k), 0);
    CHECK_EQ(pool_secret_hex(hex, sizeof(hex)), 0);
    CHECK_EQ(strlen(hex), 2 * POOL_SECRET_LEN);
    pool_secret_forget();
    CHECK_EQ(pool_secret_get(k2), -ENOKEY);
    CHECK_EQ(pool_secret_load(dir), 0);
    CHECK_EQ(pool_secret_get(k2), 0);
    CHECK(memcmp(k, k2, sizeof(k)) == 0);
    /* two pools' secrets differ */
    CHECK_EQ(pool_secret_create(dir), 0);
    CHECK_EQ(pool_secret_get(k2), 0);
    CHECK(memcmp(k, k2, sizeof(k)) != 0);
    /* given as hex (a __join): the same bytes */
    CHECK_EQ(pool_secret_store_hex(dir, hex), 0);
    CHECK_EQ(pool_secret_get(k2), 0);
    CHECK(memcmp(k, k2, sizeof(k)) == 0);
    CHECK_EQ(pool_secret_store_hex(dir, "abcd"), -EINVAL);
    hex[5] = 'g';
    CHECK_EQ(pool_secret_store_hex(dir, hex), -EINVAL);
    int fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, "zz\n", 3) == 3);
    close(fd);
    CHECK_EQ(pool_secret_load(dir), -EINVAL);
    unlink(path);
    rmdir(raft);
    rmdir(dir);
}

/* ---- the Raft transport on a real loop ---- */

static uv_stream_t *accepted, *connected;
static raft_id accepted_id;
static int connect_status = 1, connect_done, closed;

static void accept_cb(struct raft_uv_transport *t, raft_id id, const char *address, uv_stream_t *s)
{
    accepted = s;
    accepted_id = id;
}

static void connect_cb(struct raft_uv_connect *req, uv_stream_t *s, int status)
{
    connected = s;
    connect_status = status;
    connect_done = 1;
}

static char got[64];
static size_t got_len;

static void raw_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    buf->base = got + got_len;
    buf->len = sizeof(got) - got_len;
}

static void raw_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    if (n > 0)
        got_len += (size_t)n;
}

static void free_cb(uv_handle_t *h)
{
    raft_free(h);
}

static void transport_closed_cb(struct raft_uv_transport *t)
{
    closed++;
}

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static void run_until(uv_loop_t *loop, int *cond)
{
    for (int i = 0; i < 2000 && !*cond; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

/* libraft's own TCP handshake (what a process speaking raft sends first). */
static size_t raft_preamble(uint8_t *p, uint64_t id)
{
    uint64_t v[3] = {1, id, 8};
    memcpy(p, v, sizeof(v));
    memcpy(p + 24, "x:1\0\0\0\0\0", 8);
    return 32;
}

/* Whether the peer closes fd within the loop's turns (its bytes dropped). */
static int closed_by_peer(uv_loop_t *loop, int fd)
{
    for (int i = 0; i < 7000; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        char b[256];
        ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return 1;
        usleep(1000);
    }
    return 0;
}

static int raw_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? fd : -1;
}

static void test_transport(void)
{
    char dir[] = "/tmp/cairn-pool-auth-XXXXXX", raft[256], path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(raft, sizeof(raft), "%s/raft", dir);
    snprintf(path, sizeof(path), "%s/raft/secret", dir);
    mkdir(raft, 0700);
    CHECK_EQ(pool_secret_create(dir), 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    uint16_t port = free_port();
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    struct raft_auth *ra = raft_auth_new(&loop), *rb = raft_auth_new(&loop);
    struct raft_uv_transport *a = raft_auth_transport(ra), *b = raft_auth_transport(rb);
    CHECK_EQ(a->init(a, 1, addr), 0);
    CHECK_EQ(b->init(b, 2, "127.0.0.1:1"), 0);
    CHECK_EQ(a->listen(a, accept_cb), 0);

    /* a member: both sides know the secret; raft's bytes pass intact */
    struct raft_uv_connect req;
    CHECK_EQ(b->connect(b, &req, 1, addr, connect_cb), 0);
    for (int i = 0; i < 2000 && !accepted; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    run_until(&loop, &connect_done);
    CHECK(accepted != NULL);
    CHECK_EQ(accepted_id, 2);
    CHECK_EQ(connect_status, 0);
    if (accepted && connected) {
        uv_write_t w;
        uv_buf_t buf = uv_buf_init("raft bytes", 10);
        uv_read_start(accepted, raw_alloc_cb, raw_read_cb);
        uv_write(&w, connected, &buf, 1, NULL);
        for (int i = 0; i < 2000 && got_len < 10; i++) {
            uv_run(&loop, UV_RUN_NOWAIT);
            usleep(1000);
        }
        CHECK_EQ(got_len, 10);
        CHECK(memcmp(got, "raft bytes", 10) == 0);
        uv_close((uv_handle_t *)accepted, free_cb);
        uv_close((uv_handle_t *)connected, free_cb);
    }
    accepted = NULL;

    /* a process speaking raft without the pool handshake */
    uint8_t msg[256];
    int fd = raw_connect(port);
    CHECK(fd >= 0);
    size_t n = raft_preamble(msg, 666);
    memset(msg + n, 0, 96); /* what could be a raft message */
    CHECK_EQ(write(fd, msg, n + 96), (ssize_t)(n + 96));
    CHECK(closed_by_peer(&loop, fd));
    CHECK(accepted == NULL);
    close(fd);

    /* one that knows another secret: refused after its proof */
    fd = raw_connect(port);
    n = raft_preamble(msg, 667);
    struct pool_auth c;
    CHECK_EQ(pool_auth_connect(&c, key2, msg + n), 0);
    CHECK_EQ(write(fd, msg, n + POOL_HELLO_LEN), (ssize_t)(n + POOL_HELLO_LEN));
    uint8_t answer[POOL_ANSWER_LEN];
    size_t have = 0;
    for (int i = 0; i < 2000 && have < sizeof(answer); i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        ssize_t r = recv(fd, answer + have, sizeof(answer) - have, MSG_DONTWAIT);
        if (r > 0)
            have += (size_t)r;
        usleep(1000);
    }
    CHECK_EQ(have, sizeof(answer));
    uint8_t proof[POOL_PROOF_LEN];
    CHECK_EQ(pool_auth_answered(&c, answer, sizeof(answer), proof), -EACCES);
    memset(proof, 0x5a, sizeof(proof));
    CHECK_EQ(write(fd, proof, sizeof(proof)), (ssize_t)sizeof(proof));
    CHECK(closed_by_peer(&loop, fd));
    CHECK(accepted == NULL);
    close(fd);

    /* one that connects and says nothing: left open until the timeout, then
     * closed; the transport closes with it pending */
    fd = raw_connect(port);
    n = raft_preamble(msg, 668);
    CHECK_EQ(write(fd, msg, n), (ssize_t)n);
    for (int i = 0; i < 50; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    a->close(a, transport_closed_cb);
    b->close(b, transport_closed_cb);
    for (int i = 0; i < 2000 && closed < 2; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK_EQ(closed, 2);
    CHECK(accepted == NULL);
    close(fd);
    raft_auth_free(ra);
    raft_auth_free(rb);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    pool_secret_forget();
    unlink(path);
    rmdir(raft);
    rmdir(dir);
}

int main(void)
{
    test_exchange();
    test_replay();
    test_garbage();
    test_secret_file();
    test_transport();
    return check_summary("test_mgmt_pool_auth");
}
