/* Connections over TLS (src/rpc/tls.c) on real sockets, with certificates
 * made by tests/tls/make-certs.sh: calls and large bodies both ways, the
 * peer's name, and each refusal with its reason (a plain client, a plain
 * server, a foreign CA, an expired or revoked certificate, a truncated
 * handshake, garbage after the handshake), the server staying usable. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/lib/log.h"
#include "../../src/lib/net.h"
#include "../../src/rpc/conn.h"
#include "../../src/rpc/tls.h"
#include "check.h"

static char dir[] = "/tmp/cairn-tls-XXXXXX";
static struct rpc_tls_ctx *server_ctx; /* server.pem, CA, CRL */
static char seen_name[256];
static int server_closed;

static void server_request_cb(struct rpc_conn *c, struct rpc_frame *f, void *ctx)
{
    const char *n = rpc_conn_tls_name(c);
    snprintf(seen_name, sizeof(seen_name), "%s", n ? n : "(none)");
    /* echo DATA back */
    struct rpc_buf b;
    rpc_buf_init(&b);
    if (rpc_has(&f->msg, RPC_T_DATA))
        rpc_put_bytes(&b, RPC_T_DATA, f->msg.data.p, f->msg.data.len);
    rpc_conn_reply(c, f->hdr.reqid, f->hdr.opcode, 0, &b);
    rpc_buf_free(&b);
    rpc_frame_free(f);
}

static void server_closed_cb(struct rpc_conn *c, int reason, void *ctx)
{
    __atomic_add_fetch(&server_closed, 1, __ATOMIC_SEQ_CST);
}

static const struct rpc_conn_ops server_ops = {.request_cb = server_request_cb,
                                               .closed_cb = server_closed_cb};

static void path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static struct rpc_tls_ctx *ctx_for(const char *name, const char *ca, const char *crl, int server,
                                   char *err, size_t errlen)
{
    char key[256], cert[256], cap[256], crlp[256];
    snprintf(key, sizeof(key), "%s/%s.key", dir, name);
    snprintf(cert, sizeof(cert), "%s/%s.pem", dir, name);
    path(cap, sizeof(cap), ca);
    if (crl)
        path(crlp, sizeof(crlp), crl);
    struct rpc_tls_conf conf = {.key = key, .cert = cert, .ca = cap, .crl = crl ? crlp : NULL};
    return rpc_tls_ctx_new(&conf, server, err, errlen);
}

/* A server connection on one end of a socket pair; the other end is
 * returned. */
static int serve(struct rpc_tls_ctx *x, struct rpc_conn **server)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    *server = rpc_conn_new(sv[0], &server_ops, NULL, "test-client");
    if (x)
        rpc_conn_require_tls(*server, x, "this test server requires TLS");
    rpc_conn_start(*server);
    return sv[1];
}

/* Echoes len bytes through c; 0 when they come back equal. */
static int echo(struct rpc_conn *c, size_t len)
{
    uint8_t *data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 7 + len);
    struct rpc_buf b;
    rpc_buf_init(&b);
    rpc_put_bytes(&b, RPC_T_DATA, data, len);
    struct rpc_frame *r = NULL;
    int rc = rpc_conn_call_sync(c, RPC_OP_WRITE, &b, &r, 5000);
    rpc_buf_free(&b);
    if (rc == 0 && (!r || r->msg.data.len != len || memcmp(r->msg.data.p, data, len)))
        rc = -EIO;
    rpc_frame_free(r);
    free(data);
    return rc;
}

/* A TLS client named name (trusting ca) against the server; returns the
 * handshake's result and its reason in err. On success *out is the
 * started connection. */
static int tls_client(const char *name, const char *ca, struct rpc_conn **out, char *err,
                      size_t errlen)
{
    struct rpc_conn *s;
    int fd = serve(server_ctx, &s);
    char cerr[256];
    struct rpc_tls_ctx *x = ctx_for(name, ca, NULL, 0, cerr, sizeof(cerr));
    CHECK(x != NULL);
    struct rpc_tls *t = NULL;
    int rc = rpc_tls_connect(x, fd, 5000, &t, err, errlen);
    rpc_tls_ctx_put(x);
    if (rc < 0) {
        close(fd);
        rpc_conn_put(s);
        return rc;
    }
    struct rpc_conn *c = rpc_conn_new(fd, NULL, NULL, "test-server");
    rpc_conn_set_tls(c, t);
    rpc_conn_start(c);
    rpc_conn_put(s); /* its reader keeps it while the connection lives */
    *out = c;
    return 0;
}

static void test_good(void)
{
    struct rpc_conn *c = NULL;
    char err[256] = "";
    CHECK_EQ(tls_client("client", "ca.pem", &c, err, sizeof(err)), 0);
    if (!c)
        return;
    CHECK_STR(rpc_conn_tls_name(c), "server");
    CHECK_EQ(echo(c, 10), 0);
    CHECK_STR(seen_name, "client");
    CHECK_EQ(echo(c, 1 << 20), 0); /* many records each way */
    CHECK_EQ(echo(c, 16384 - 40), 0);
    CHECK_EQ(echo(c, 70001), 0);
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
}

/* Each refusal: the handshake fails with a reason containing want. */
static void refused(const char *name, const char *ca, const char *want)
{
    struct rpc_conn *c = NULL;
    char err[256] = "";
    int rc = tls_client(name, ca, &c, err, sizeof(err));
    CHECK(rc < 0);
    if (!strstr(err, want)) {
        fprintf(stderr, "client %s: reason '%s' lacks '%s'\n", name, err, want);
        CHECK(0);
    }
    if (c) {
        rpc_conn_close(c, 0);
        rpc_conn_put(c);
    }
}

static void test_refusals(void)
{
    refused("stranger", "ca.pem", "unknown ca");                  /* its CA is not ours */
    refused("expired", "ca.pem", "certificate expired");          /* expired in 2020 */
    refused("revoked", "ca.pem", "certificate revoked");          /* in the server's CRL */
    refused("client", "other-ca.pem", "certificate was refused"); /* we do not trust the server */
}

static void test_plain_client(void)
{
    struct rpc_conn *s;
    int fd = serve(server_ctx, &s);
    struct rpc_conn *c = rpc_conn_new(fd, NULL, NULL, "test-server");
    rpc_conn_start(c);
    struct rpc_frame *r = NULL;
    int rc = rpc_conn_call_sync(c, RPC_OP_LOOKUP, NULL, &r, 5000);
    CHECK_EQ(rc, -EPROTONOSUPPORT);
    char text[128] = "";
    if (r)
        rpc_bytes_str(&r->msg.text, text, sizeof(text));
    CHECK_STR(text, "this test server requires TLS");
    rpc_frame_free(r);
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
    rpc_conn_put(s);
}

static void test_plain_server(void)
{
    struct rpc_conn *s;
    int fd = serve(NULL, &s);
    char err[256] = "", cerr[256];
    struct rpc_tls_ctx *x = ctx_for("client", "ca.pem", NULL, 0, cerr, sizeof(cerr));
    struct rpc_tls *t = NULL;
    CHECK(rpc_tls_connect(x, fd, 5000, &t, err, sizeof(err)) < 0);
    CHECK(strstr(err, "closed the connection during the TLS handshake") != NULL);
    rpc_tls_ctx_put(x);
    close(fd);
    rpc_conn_put(s);
}

/* A client that stops halfway through its handshake, and one that sends
 * garbage once TLS is up: the server closes each, and serves the next. */
static void test_truncated_and_garbage(void)
{
    int before = __atomic_load_n(&server_closed, __ATOMIC_SEQ_CST);
    struct rpc_conn *s;
    int fd = serve(server_ctx, &s);
    static const uint8_t partial[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01};
    CHECK_EQ(net_write_all(fd, partial, sizeof(partial)), 0);
    close(fd);
    rpc_conn_put(s);

    char err[256];
    /* frames that are not Cairn's, inside TLS */
    {
        struct rpc_conn *s2;
        int fd2 = serve(server_ctx, &s2);
        char cerr[256];
        struct rpc_tls_ctx *x = ctx_for("client", "ca.pem", NULL, 0, cerr, sizeof(cerr));
        struct rpc_tls *t = NULL;
        CHECK_EQ(rpc_tls_connect(x, fd2, 5000, &t, err, sizeof(err)), 0);
        if (t) {
            uint8_t g[64];
            memset(g, 'G', sizeof(g));
            struct iovec v = {g, sizeof(g)};
            CHECK_EQ(rpc_tls_writev(t, &v, 1), 0);
            uint8_t b[16];
            CHECK(rpc_tls_read(t, b, sizeof(b)) < 0); /* the server hangs up */
            rpc_tls_free(t);
        }
        close(fd2);
        rpc_tls_ctx_put(x);
        rpc_conn_put(s2);
    }
    /* junk records under a session */
    {
        struct rpc_conn *s3;
        int fd3 = serve(server_ctx, &s3);
        char cerr[256];
        struct rpc_tls_ctx *x = ctx_for("client", "ca.pem", NULL, 0, cerr, sizeof(cerr));
        struct rpc_tls *t = NULL;
        CHECK_EQ(rpc_tls_connect(x, fd3, 5000, &t, err, sizeof(err)), 0);
        static const uint8_t junk[] = {0x17, 0x03, 0x03, 0x00, 0x18, 1,  2,  3,  4,  5,
                                       6,    7,    8,    9,    10,   11, 12, 13, 14, 15,
                                       16,   17,   18,   19,   20,   21, 22, 23, 24};
        CHECK_EQ(net_write_all(fd3, junk, sizeof(junk)), 0);
        if (t) {
            uint8_t b[16];
            CHECK(rpc_tls_read(t, b, sizeof(b)) < 0);
            rpc_tls_free(t);
        }
        close(fd3);
        rpc_tls_ctx_put(x);
        rpc_conn_put(s3);
    }
    for (int i = 0; i < 100 && __atomic_load_n(&server_closed, __ATOMIC_SEQ_CST) < before + 3; i++)
        usleep(50 * 1000);
    CHECK(__atomic_load_n(&server_closed, __ATOMIC_SEQ_CST) >= before + 3);
    test_good(); /* still serving */
}

/* Over TCP, where the kernel may take the records (kernel TLS): data
 * flows either way; whether kTLS engaged is printed, not required. */
static struct rpc_conn *tcp_server;

static void *accept_main(void *arg)
{
    int sfd = accept(*(int *)arg, NULL, NULL);
    tcp_server = rpc_conn_new(sfd, &server_ops, NULL, "tcp-client");
    rpc_conn_require_tls(tcp_server, server_ctx, "TLS");
    rpc_conn_start(tcp_server);
    return NULL;
}

static void test_tcp_ktls(void)
{
    struct net_addr a = {.host = "127.0.0.1", .port = 0};
    int l = net_listen(&a, 4);
    CHECK(l >= 0);
    if (l < 0)
        return;
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    getsockname(l, (struct sockaddr *)&sin, &sl);
    a.port = ntohs(sin.sin_port);
    pthread_t th;
    pthread_create(&th, NULL, accept_main, &l);
    char err[256] = "", cerr[256];
    struct rpc_tls_ctx *x = ctx_for("client", "ca.pem", NULL, 0, cerr, sizeof(cerr));
    int rc = 0;
    struct rpc_conn *c = rpc_conn_dial(&a, 5000, x, NULL, NULL, "tcp", &rc, err, sizeof(err));
    pthread_join(th, NULL);
    CHECK(c != NULL);
    if (c) {
        rpc_conn_start(c);
        CHECK_EQ(echo(c, 3 << 20), 0);
        int k = rpc_conn_tls_ktls(c);
        printf("kernel TLS on TCP: send %s, receive %s\n", k & 1 ? "yes" : "no",
               k & 2 ? "yes" : "no");
        rpc_conn_close(c, 0);
        rpc_conn_put(c);
    } else {
        fprintf(stderr, "dial: %s\n", err);
    }
    rpc_conn_put(tcp_server);
    rpc_tls_ctx_put(x);
    close(l);
}

static void test_names(void)
{
    CHECK(rpc_tls_name_allowed("*", "anyone"));
    CHECK(rpc_tls_name_allowed("", "anyone"));
    CHECK(rpc_tls_name_allowed("alpha,client", "client"));
    CHECK(rpc_tls_name_allowed("alpha, cl*", "client"));
    CHECK(!rpc_tls_name_allowed("alpha,beta", "client"));
    CHECK(!rpc_tls_name_allowed("clients", "client"));
}

static void test_bad_files(void)
{
    char err[256] = "";
    struct rpc_tls_conf conf = {.key = "/nonexistent/k", .cert = "/nonexistent/c", .ca = "/x"};
    CHECK(rpc_tls_ctx_new(&conf, 1, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "/nonexistent/c") != NULL);
    CHECK(ctx_for("client", "ca.pem", "nonexistent-crl", 1, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "CRL") != NULL);
}

int main(void)
{
    log_init("test", LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *src = getenv("CAIRN_SRC");
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/tests/tls/make-certs.sh %s", src ? src : ".", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed (run from the source tree, or set CAIRN_SRC)\n", cmd);
        return 1;
    }
    char err[256] = "";
    server_ctx = ctx_for("server", "ca.pem", "crl.pem", 1, err, sizeof(err));
    if (!server_ctx) {
        fprintf(stderr, "server context: %s\n", err);
        return 1;
    }
    test_names();
    test_bad_files();
    test_good();
    test_refusals();
    test_plain_client();
    test_plain_server();
    test_truncated_and_garbage();
    test_tcp_ktls();
    rpc_tls_ctx_put(server_ctx);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    return check_summary("test_rpc_tls");
}
