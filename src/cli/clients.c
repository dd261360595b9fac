/* cairn volume status NAME clients: the client connections of every brick
 * of the volume (STATS with RPC_STATS_CLIENTS), in GlusterFS's layout. Run
 * by the CLI itself as a client of the bricks, like `volume profile`; its
 * own connection to each brick is left out. Cairn has no op-version: the
 * column shows "-". */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../client/client.h"
#include "cli.h"

static const char rule[] = "----------------------------------------------";

int cli_volume_status_clients(const struct net_addr *mgmt, int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[3], "clients") != 0 || strcmp(argv[2], "all") == 0) {
        fprintf(stderr, "Usage:\nvolume status <VOLNAME> clients\n");
        return 1;
    }
    const char *name = argv[2];
    struct cl_volinfo v;
    char err[512];
    if (cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err)) < 0) {
        fprintf(stderr, "volume status: failed: %s\n", err);
        return 1;
    }
    int status = 0;
    printf("Client connections for volume %s\n%s\n", v.name, rule);
    for (int i = 0; i < v.n_bricks; i++) {
        struct cl_brickinfo *b = &v.bricks[i];
        struct cl_layer *l = cli_brick_connect(&v, i);
        if (!l) {
            status = 1;
            break;
        }
        struct cl_op op;
        cl_op_init(&op, RPC_OP_STATS, NULL, NULL);
        RPC_SET(&op.args, flags, RPC_T_FLAGS, RPC_STATS_CLIENTS);
        int rc = cl_op_run(l, &op);
        printf("Brick : %s:%s\n", b->addr.host, b->path);
        if (rc < 0) {
            printf("Brick is not connected\n%s\n", rule);
            fprintf(stderr, "Brick %s:%s: %s\n", b->addr.host, b->path,
                    rc == -ENOTCONN || rc == -ETIMEDOUT ? "not connected" : strerror(-rc));
            status = 1;
        } else {
            const struct rpc_msg *m = &op.reply->msg;
            printf("Clients connected : %u\n", m->n_client);
            printf("%-54s %10s %15s %15s\n%-54s %10s %15s %15s\n", "Hostname", "BytesRead",
                   "BytesWritten", "OpVersion", "--------", "---------", "------------",
                   "---------");
            struct rpc_iter it;
            struct rpc_field f;
            rpc_iter_init(&it, m->body, m->body_len);
            while (rpc_iter_next(&it, &f) > 0) {
                struct rpc_msg c;
                char host[NET_HOST_MAX + 16];
                if (f.tag != RPC_T_CLIENT || rpc_msg_decode(f.val, f.len, &c, NULL) < 0 ||
                    !rpc_has(&c, RPC_T_HOST) || rpc_bytes_str(&c.host, host, sizeof(host)) < 0)
                    continue;
                printf("%-54s %10" PRIu64 " %15" PRIu64 " %15s\n", host,
                       rpc_has(&c, RPC_T_SIZE) ? c.size : 0,
                       rpc_has(&c, RPC_T_OFFSET) ? c.offset : 0, "-");
            }
            printf("%s\n", rule);
        }
        cl_op_release(&op);
        cl_layer_destroy_tree(l);
    }
    cl_volinfo_free(&v);
    return status;
}
