/* The CLI's own connections to bricks (volume heal, volume profile). A
 * brick that is down refuses the connection at once; one that is alive but
 * loaded, or stopped, gets the volume's network.ping-timeout to answer, as
 * a mount does, so that a busy brick is not reported as "not connected".
 * With client.ssl on they use TLS with the CLI's files (--ssl-key...), as
 * a mount does. */
#include "../client/client.h"
#include "../lib/log.h"
#include "../rpc/tls.h"
#include "cli.h"

struct cl_layer *cli_brick_connect(const struct cl_volinfo *v, int i)
{
    const struct cl_brickinfo *b = &v->bricks[i];
    struct rpc_tls_ctx *tls = NULL;
    char why[512];
    if (cl_tls_ctx(&v->opts, 0, &tls, why, sizeof(why)) < 0)
        log_error("%s", why); /* the brick then refuses: reported as not connected */
    struct cl_proto_params pp = {
        .addr = b->addr,
        .volume = v->name,
        .brick_path = b->path,
        .ping_timeout_ms = (int)opt_int(&v->opts, "network.ping-timeout") * 1000,
        .tls = tls,
    };
    struct cl_layer *l = cl_proto_new(&pp);
    rpc_tls_ctx_put(tls); /* the layer holds its own reference */
    return l;
}
