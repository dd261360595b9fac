/* cairn volume heal NAME [info|full]: run by the CLI itself, as a client of
 * the volume's bricks (the layout comes from cairnd's GETVOL). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../client/replicate.h"
#include "../lib/log.h"
#include "cli.h"

#define HEAL_CONNECT_MS 3000

int cli_volume_heal(const struct net_addr *mgmt, int argc, char **argv)
{
    const char *name = argv[2], *what = argc > 3 ? argv[3] : "";
    if (argc > 4 || (argc == 4 && strcmp(what, "info") && strcmp(what, "full"))) {
        fprintf(stderr, "Usage: volume heal <VOLNAME> [info|full]\n");
        return 1;
    }
    struct cl_volinfo v;
    char err[512];
    int rc = cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr,
                "Launching heal operation to perform index self heal on volume %s has "
                "been unsuccessful: %s\n",
                name, err);
        return 1;
    }
    if (v.replica < 2) {
        fprintf(stderr, "Volume %s is not of type replicate\n", name);
        cl_volinfo_free(&v);
        return 1;
    }
    int status = 0;
    for (int s = 0; s + v.replica <= v.n_bricks; s += v.replica) {
        struct cl_layer *ch[CL_REPL_MAX];
        char *names[CL_REPL_MAX];
        for (int i = 0; i < v.replica; i++) {
            struct cl_brickinfo *b = &v.bricks[s + i];
            struct cl_proto_params pp = {.addr = b->addr,
                                         .volume = v.name,
                                         .brick_path = b->path,
                                         .ping_timeout_ms = HEAL_CONNECT_MS};
            ch[i] = cl_proto_new(&pp);
            names[i] = malloc(strlen(b->path) + NET_HOST_MAX + 2);
            if (names[i])
                sprintf(names[i], "%s:%s", b->addr.host, b->path);
        }
        if (strcmp(what, "info") == 0) {
            /* A brick that is down is part of the answer, not a failure. */
            cl_heal_info(ch, names, v.replica, stdout);
        } else {
            struct cl_heal_stats st = {0};
            rc = cl_heal_set(ch, v.replica, v.arbiter, strcmp(what, "full") == 0, &st);
            if (rc < 0 || st.split)
                status = 1;
            if (st.split)
                fprintf(stderr, "%u entries are in split brain\n", st.split);
            if (st.pending)
                fprintf(stderr, "%u entries could not be healed now (a brick is down?)\n",
                        st.pending);
        }
        for (int i = 0; i < v.replica; i++) {
            if (ch[i])
                ch[i]->destroy(ch[i]);
            free(names[i]);
        }
    }
    if (strcmp(what, "info") != 0 && status == 0)
        printf("Launching heal operation to perform %s self heal on volume %s has been "
               "successful\n",
               strcmp(what, "full") == 0 ? "full" : "index", name);
    cl_volinfo_free(&v);
    return status;
}
