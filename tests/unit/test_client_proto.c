/* The protocol client layer against a real cairn-brickd started here:
 * operations round trip, a killed brick fails operations with ENOTCONN within
 * the ping timeout instead of hanging, a stopped (SIGSTOP) brick with
 * ETIMEDOUT, a restarted brick is reconnected, and handles of the old
 * connection are refused. When cairn-brickd was not built, the connection
 * behaviour (handshake, reconnect, timeouts) is tested against cairnd, which
 * answers the handshake and pings and refuses brick opcodes with ENOSYS. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/client/client.h"
#include "../../src/lib/log.h"
#include "check.h"

#define PING_MS 2000

static char brickd[4096], brickdir[] = "/tmp/cl-proto-XXXXXX";
static int use_cairnd;
static char listen_addr[64];
static pid_t brick_pid;

/* SIGSTOP is delivered asynchronously: wait until the process is stopped,
 * or a request sent right away may still be answered. */
static void freeze_brick(void)
{
    char path[64], buf[512];
    kill(brick_pid, SIGSTOP);
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)brick_pid);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't'))
            return;
        usleep(2000);
    }
}

static int start_brick(void)
{
    brick_pid = fork();
    if (brick_pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        if (use_cairnd)
            execl(brickd, brickd, "--foreground", "--listen", listen_addr, "--workdir", brickdir,
                  "--log-level", "error", (char *)NULL);
        else
            execl(brickd, brickd, "--volume", "t", "--brick-path", brickdir, "--listen",
                  listen_addr, "--log-level", "warning", (char *)NULL);
        _exit(127);
    }
    struct net_addr a;
    net_parse_addr(listen_addr, 0, &a);
    for (int i = 0; i < 100; i++) {
        int fd = net_connect(&a, 200);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        usleep(50000);
    }
    return -1;
}

static void stop_brick(int sig)
{
    kill(brick_pid, sig);
    waitpid(brick_pid, NULL, 0);
}

static struct cl_op *op_new(uint16_t opcode, const char *path)
{
    struct cl_op *op = calloc(1, sizeof(*op));
    cl_op_init(op, opcode, NULL, NULL);
    if (path)
        rpc_set_str(&op->args, RPC_T_PATH, &op->args.path, path);
    return op;
}

static int run(struct cl_layer *l, struct cl_op *op)
{
    int rc = cl_op_run(l, op);
    return rc;
}

static void op_free(struct cl_op *op)
{
    cl_op_release(op);
    free(op);
}

static int simple(struct cl_layer *l, uint16_t opcode, const char *path)
{
    struct cl_op *op = op_new(opcode, path);
    int rc = run(l, op);
    op_free(op);
    return rc;
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[2048];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return 1;
    self[n] = 0;
    dirname(self);
    snprintf(brickd, sizeof(brickd), "%s/../bin/cairn-brickd", self);
    if (access(brickd, X_OK) != 0) {
        snprintf(brickd, sizeof(brickd), "%s/../bin/cairnd", self);
        if (access(brickd, X_OK) != 0) {
            printf("test_client_proto: skipped: neither cairn-brickd nor cairnd is built\n");
            return check_summary("test_client_proto");
        }
        printf("test_client_proto: cairn-brickd not built; testing the connection against "
               "cairnd\n");
        use_cairnd = 1;
    }
    (void)argv;
    log_init("test", LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(brickdir))
        return 1;
    snprintf(listen_addr, sizeof(listen_addr), "127.0.0.1:%d", 25350 + getpid() % 40);
    CHECK_EQ(start_brick(), 0);

    struct cl_proto_params pp = {.volume = "t", .brick_path = brickdir, .ping_timeout_ms = PING_MS};
    net_parse_addr(listen_addr, 0, &pp.addr);
    struct cl_layer *l = cl_proto_new(&pp);
    CHECK(l != NULL);
    CHECK(cl_proto_connected(l));
    uint64_t gen1 = cl_proto_generation(l);

    /* served: 0 from a brick; cairnd refuses brick opcodes */
    int served = use_cairnd ? -ENOSYS : 0;
    uint64_t fh = 0;
    if (use_cairnd) {
        CHECK_EQ(simple(l, RPC_OP_LOOKUP, "/"), -ENOSYS);
        goto faults;
    }
    /* round trips */
    struct cl_op *op = op_new(RPC_OP_LOOKUP, "/");
    CHECK_EQ(run(l, op), 0);
    CHECK(op->reply && rpc_has(&op->reply->msg, RPC_T_ATTR) && S_ISDIR(op->reply->msg.attr.mode));
    op_free(op);

    op = op_new(RPC_OP_CREATE, "/f");
    gfid_generate(&op->args.gfid);
    op->args.present |= 1ull << RPC_T_GFID;
    RPC_SET(&op->args, mode, RPC_T_MODE, 0644);
    RPC_SET(&op->args, flags, RPC_T_FLAGS, O_RDWR | O_CREAT);
    RPC_SET(&op->args, uid, RPC_T_UID, getuid());
    RPC_SET(&op->args, gid, RPC_T_GID, getgid());
    CHECK_EQ(run(l, op), 0);
    fh = op->reply ? op->reply->msg.fh : 0;
    op_free(op);

    op = op_new(RPC_OP_WRITE, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    RPC_SET(&op->args, offset, RPC_T_OFFSET, 0);
    rpc_set_bytes(&op->args, RPC_T_DATA, &op->args.data, "hello", 5);
    CHECK_EQ(run(l, op), 0);
    CHECK(op->reply && op->reply->msg.size == 5);
    op_free(op);

    op = op_new(RPC_OP_READ, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    RPC_SET(&op->args, offset, RPC_T_OFFSET, 1);
    RPC_SET(&op->args, size, RPC_T_SIZE, 100);
    CHECK_EQ(run(l, op), 0);
    CHECK(op->reply && op->reply->msg.data.len == 4 && !memcmp(op->reply->msg.data.p, "ello", 4));
    op_free(op);

    CHECK_EQ(simple(l, RPC_OP_LOOKUP, "/nope"), -ENOENT);

faults:
    /* a killed brick: queued operations fail with ENOTCONN after the ping
     * timeout, not later, never hang */
    stop_brick(SIGKILL);
    uint64_t t0 = net_now_ms();
    int rc = simple(l, RPC_OP_LOOKUP, "/f");
    uint64_t dt = net_now_ms() - t0;
    CHECK_EQ(rc, -ENOTCONN);
    CHECK(dt <= PING_MS + 1500);
    for (int i = 0; i < 100 && cl_proto_connected(l); i++)
        usleep(10000); /* the reader notices the close just after the failure */
    CHECK(!cl_proto_connected(l));

    /* restarted: the layer reconnects by itself; old handles are refused */
    CHECK_EQ(start_brick(), 0);
    t0 = net_now_ms();
    rc = simple(l, RPC_OP_LOOKUP, "/f");
    CHECK_EQ(rc, served);
    CHECK(net_now_ms() - t0 < PING_MS + 1000);
    CHECK(cl_proto_generation(l) > gen1);
    if (use_cairnd)
        fh = (gen1 & 0xffffff) << 40 | 1; /* a handle of the first connection */
    op = op_new(RPC_OP_READ, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    RPC_SET(&op->args, offset, RPC_T_OFFSET, 0);
    RPC_SET(&op->args, size, RPC_T_SIZE, 10);
    CHECK_EQ(run(l, op), -EIO);
    op_free(op);
    op = op_new(RPC_OP_RELEASE, NULL);
    RPC_SET(&op->args, fh, RPC_T_FH, fh);
    CHECK_EQ(run(l, op), 0);
    op_free(op);

    /* a hung (stopped) brick: the call in flight fails with ETIMEDOUT
     * within about the ping timeout */
    freeze_brick();
    t0 = net_now_ms();
    rc = simple(l, RPC_OP_LOOKUP, "/f");
    dt = net_now_ms() - t0;
    CHECK(rc == -ETIMEDOUT || rc == -ENOTCONN);
    CHECK(dt >= PING_MS - 300 && dt <= PING_MS + 1500);
    kill(brick_pid, SIGCONT);
    rc = simple(l, RPC_OP_LOOKUP, "/f");
    CHECK_EQ(rc, served);

    CHECK_EQ(simple(l, RPC_OP_UNLINK, "/f"), served);
    cl_stack_destroy(l);
    stop_brick(SIGTERM);
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", brickdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", brickdir);
    return check_summary("test_client_proto");
}
