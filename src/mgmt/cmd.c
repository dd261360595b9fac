/* The CLI command table: dispatches `cairn ...` command lines to their
 * handlers in cmd_volume.c, cmd_opts.c and cmd_info.c. */
#include <string.h>

#include "../lib/commands.h"
#include "pool.h"
#include "shd.h"

struct cmd {
    const char *word; /* after "volume"; usage and help in lib/commands.c */
    int (*run)(struct mgmt *m, int argc, char **argv, FILE *out);
};

static const struct cmd volume_cmds[] = {
    {"create", mgmt_cmd_create},
    {"import", mgmt_cmd_import},
    {"start", mgmt_cmd_start},
    {"stop", mgmt_cmd_stop},
    {"delete", mgmt_cmd_delete},
    {"info", mgmt_cmd_info},
    {"list", mgmt_cmd_list},
    {"status", mgmt_cmd_status},
    {"set", mgmt_cmd_set},
    {"get", mgmt_cmd_get},
    {"reset", mgmt_cmd_reset},
    {"heal", mgmt_cmd_heal},
    {NULL, NULL},
};

int mgmt_cli_run(struct mgmt *m, int argc, char **argv, FILE *out)
{
    /* GlusterFS scripts pass --mode=script; there are no prompts to skip. */
    char *args[argc + 1];
    int n = 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--mode=script") != 0)
            args[n++] = argv[i];
    args[n] = NULL;
    if (n == 0 || strcmp(args[0], "help") == 0 || strcmp(args[0], "--help") == 0 ||
        (n == 2 && strcmp(args[0], "volume") == 0 && strcmp(args[1], "help") == 0)) {
        cmd_print_help(out);
        return n == 0 ? 1 : 0;
    }
    if (strcmp(args[0], "--version") == 0 || strcmp(args[0], "version") == 0) {
        fprintf(out, "cairnd %s\n", MGMT_VERSION);
        return 0;
    }
    if (strncmp(args[0], "__", 2) == 0)
        return mgmt_cmd_internal(m, n, args, out);
    if (strcmp(args[0], "peer") == 0)
        return mgmt_cmd_peer(m, n, args, out);
    if (strcmp(args[0], "pool") == 0)
        return mgmt_cmd_pool(m, n, args, out);
    if (strcmp(args[0], "volume") != 0) {
        fprintf(out, "unrecognized word: %s (position 0)\n", args[0]);
        return 1;
    }
    if (n == 1) {
        cmd_print_help(out);
        return 1;
    }
    if (n == 3 && strcmp(args[1], "set") == 0 && strcmp(args[2], "help") == 0) {
        opt_print_help(out);
        return 0;
    }
    for (const struct cmd *c = volume_cmds; c->word; c++)
        if (strcmp(args[1], c->word) == 0) {
            int rc = c->run(m, n, args, out);
            if (rc == 2) { /* wrong arguments */
                fprintf(out, "Usage:\n%s\n", cmd_volume_usage(c->word));
                rc = 1;
            }
            return rc;
        }
    fprintf(out, "unrecognized word: %s (position 1)\n", args[1]);
    return 1;
}
