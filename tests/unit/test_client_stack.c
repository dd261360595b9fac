/* The client stack's shape for each kind of volume (stack.c), the order in
 * which a tree of layers is stopped and destroyed (layer.c), and the options
 * the layers are configured with. Bricks point at a loopback port bound but
 * not listening (connections are refused): protocol clients are made all the
 * same and keep trying in the background. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/client/client.h"
#include "check.h"

static int closed_port;

/* A port of 127.0.0.1 that refuses connections while fd stays open. */
static int bind_closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        perror("binding a loopback port");
        return -1;
    }
    closed_port = ntohs(a.sin_port);
    return fd;
}

static void make_vol(struct cl_volinfo *v, int n_bricks, int replica, int arbiter)
{
    memset(v, 0, sizeof(*v));
    v->name = strdup("t");
    v->id = strdup("00000000-0000-0000-0000-000000000000");
    v->n_bricks = n_bricks;
    v->replica = replica;
    v->arbiter = arbiter;
    v->bricks = calloc((size_t)n_bricks, sizeof(*v->bricks));
    for (int i = 0; i < n_bricks; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/b%d", i);
        snprintf(v->bricks[i].addr.host, sizeof(v->bricks[i].addr.host), "127.0.0.1");
        v->bricks[i].addr.port = closed_port;
        v->bricks[i].path = strdup(path);
        v->bricks[i].id = strdup(path);
    }
    opt_set_put(&v->opts, "network.ping-timeout", "3");
}

/* "name(child,child)" of the tree under l. */
static void shape(const struct cl_layer *l, char *out, size_t len)
{
    size_t n = strlen(out);
    snprintf(out + n, len - n, "%s", l->name);
    if (!l->n_children)
        return;
    n = strlen(out);
    snprintf(out + n, len - n, "(");
    for (int i = 0; i < l->n_children; i++) {
        if (i) {
            n = strlen(out);
            snprintf(out + n, len - n, ",");
        }
        shape(l->children[i], out, len);
    }
    n = strlen(out);
    snprintf(out + n, len - n, ")");
}

static void check_shape(int n_bricks, int replica, const char *want)
{
    struct cl_volinfo v;
    make_vol(&v, n_bricks, replica, 0);
    struct cl_stack_params sp = {.ping_timeout_ms = 1000};
    struct cl_layer *top = NULL;
    char err[256] = "";
    int rc = cl_stack_build(&v, &sp, &top, err, sizeof(err));
    CHECK_EQ(rc, 0);
    if (rc == 0) {
        char got[1024] = "";
        shape(top, got, sizeof(got));
        CHECK_STR(got, want);
        cl_stack_destroy(top);
    }
    cl_volinfo_free(&v);
}

static void test_shapes(void)
{
    /* shard is always on top: files sharded once stay readable when the
     * option is turned off */
    check_shape(1, 1, "features/shard(protocol/client)");
    check_shape(3, 3, "features/shard(replicate(protocol/client,protocol/client,protocol/client))");
    check_shape(2, 1, "features/shard(distribute(protocol/client,protocol/client))");
    check_shape(6, 3,
                "features/shard(distribute(replicate(protocol/client,protocol/client,protocol/"
                "client),replicate(protocol/client,protocol/client,protocol/client)))");
}

static void test_bad_layouts(void)
{
    struct cl_volinfo v;
    make_vol(&v, 5, 3, 0);
    struct cl_layer *top = NULL;
    char err[256] = "";
    CHECK_EQ(cl_stack_build(&v, NULL, &top, err, sizeof(err)), -ENOTSUP);
    CHECK(strstr(err, "5 bricks do not make") != NULL);
    CHECK(top == NULL);
    cl_volinfo_free(&v);

    make_vol(&v, 0, 1, 0);
    CHECK_EQ(cl_stack_build(&v, NULL, &top, err, sizeof(err)), -ENOTSUP);
    cl_volinfo_free(&v);
}

/* ---- teardown order, with fake layers that log their calls ---- */

static char calls[256];

static void log_call(const char *what, const struct cl_layer *l)
{
    size_t n = strlen(calls);
    snprintf(calls + n, sizeof(calls) - n, "%s%s ", what, l->name);
}

static void fake_stop(struct cl_layer *l)
{
    log_call("stop:", l);
}

static void fake_destroy(struct cl_layer *l)
{
    log_call("destroy:", l);
    free(l->children);
    free(l);
}

static void fake_submit(struct cl_layer *l, struct cl_op *op)
{
    (void)l;
    cl_op_complete(op, -ENOSYS, NULL);
}

static void fake_reconfigure(struct cl_layer *l, const struct opt_set *opts)
{
    (void)opts;
    log_call("conf:", l);
}

static struct cl_layer *fake(const char *name, int stops, struct cl_layer *a, struct cl_layer *b)
{
    struct cl_layer *l = calloc(1, sizeof(*l));
    l->name = name;
    l->submit = fake_submit;
    l->reconfigure = fake_reconfigure;
    l->stop = stops ? fake_stop : NULL;
    l->destroy = fake_destroy;
    if (a) {
        l->children = calloc(2, sizeof(*l->children));
        l->children[l->n_children++] = a;
        if (b)
            l->children[l->n_children++] = b;
    }
    return l;
}

static void test_teardown_order(void)
{
    struct cl_layer *top =
        fake("D", 1, fake("R1", 1, fake("P1", 0, NULL, NULL), NULL), fake("R2", 1, NULL, NULL));
    calls[0] = 0;
    struct opt_set none = {0};
    cl_layer_reconfigure_all(top, &none);
    CHECK_STR(calls, "conf:P1 conf:R1 conf:R2 conf:D ");
    calls[0] = 0;
    cl_layer_destroy_tree(top);
    /* every layer stopped, parents first, before anything is destroyed;
     * then children are destroyed before their parents */
    CHECK_STR(calls, "stop:D stop:R1 stop:R2 destroy:P1 destroy:R1 destroy:R2 destroy:D ");
    cl_layer_destroy_tree(NULL);

    struct cl_op op;
    struct cl_layer *one = fake("X", 0, NULL, NULL);
    cl_op_init(&op, RPC_OP_LOOKUP, NULL, NULL);
    CHECK_EQ(cl_op_run(one, &op), -ENOSYS);
    cl_layer_destroy_tree(one);
}

static void test_effective_options(void)
{
    struct opt_set vol = {0}, eff;
    opt_set_put(&vol, "network.ping-timeout", "42");
    opt_set_put(&vol, "client.write-back", "off");
    CHECK_EQ(cl_stack_effective_options(&vol, 0, &eff), 0);
    CHECK_STR(opt_value(&eff, "network.ping-timeout"), "42");
    CHECK_STR(opt_value(&eff, "client.write-back"), "off");
    opt_set_free(&eff);
    CHECK_EQ(cl_stack_effective_options(&vol, 7000, &eff), 0);
    CHECK_STR(opt_value(&eff, "network.ping-timeout"), "7");
    CHECK_STR(opt_value(&eff, "client.write-back"), "off");
    opt_set_free(&eff);
    CHECK_EQ(cl_stack_effective_options(&vol, 300, &eff), 0);
    CHECK_STR(opt_value(&eff, "network.ping-timeout"), "1");
    opt_set_free(&eff);
    opt_set_free(&vol);
}

int main(void)
{
    int fd = bind_closed_port();
    if (fd < 0)
        return 1;
    test_shapes();
    test_bad_layouts();
    test_teardown_order();
    test_effective_options();
    close(fd);
    return check_summary("test_client_stack");
}
