/* The CLI's own connections to bricks (volume heal, volume profile). A
 * brick that is down refuses the connection at once; one that is alive but
 * loaded, or stopped, gets the volume's network.ping-timeout to answer, as
 * a mount does, so that a busy brick is not reported as "not connected". */
#include "../client/client.h"
#include "cli.h"

struct cl_layer *cli_brick_connect(const struct cl_volinfo *v, int i)
{
    const struct cl_brickinfo *b = &v->bricks[i];
    struct cl_proto_params pp = {
        .addr = b->addr,
        .volume = v->name,
        .brick_path = b->path,
        .ping_timeout_ms = (int)opt_int(&v->opts, "network.ping-timeout") * 1000,
    };
    return cl_proto_new(&pp);
}
