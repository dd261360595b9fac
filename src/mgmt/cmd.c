/* The CLI command table: dispatches `cairn ...` command lines to their
 * handlers in cmd_volume.c, cmd_opts.c and cmd_info.c. */
#include <string.h>

#include "pool.h"
#include "shd.h"

struct cmd {
    const char *word; /* after "volume" */
    int (*run)(struct mgmt *m, int argc, char **argv, FILE *out);
    const char *usage;
    const char *help;
};

static const struct cmd volume_cmds[] = {
    {"create", mgmt_cmd_create,
     "volume create <NEW-VOLNAME> [replica <COUNT> [arbiter 1]] [transport tcp] <NEW-BRICK> ... "
     "[force]",
     "create a new volume of the given bricks (HOST:/abs/path; missing directories are made)"},
    {"start", mgmt_cmd_start, "volume start <VOLNAME> [force]", "start a volume's bricks"},
    {"stop", mgmt_cmd_stop, "volume stop <VOLNAME> [force]", "stop a volume's bricks"},
    {"delete", mgmt_cmd_delete, "volume delete <VOLNAME>", "delete a stopped volume"},
    {"info", mgmt_cmd_info, "volume info [all|<VOLNAME>]", "list information of volumes"},
    {"list", mgmt_cmd_list, "volume list", "list all volumes"},
    {"status", mgmt_cmd_status, "volume status [all|<VOLNAME>] [detail]",
     "show the brick processes of volumes"},
    {"set", mgmt_cmd_set, "volume set <VOLNAME> <KEY> <VALUE> [<KEY> <VALUE>] ...",
     "set volume options (`volume set help` lists them)"},
    {"get", mgmt_cmd_get, "volume get <VOLNAME> <KEY|all>", "show volume options"},
    {"reset", mgmt_cmd_reset, "volume reset <VOLNAME> [<KEY>|all] [force]",
     "reset options to their defaults"},
    {"heal", mgmt_cmd_heal,
     "volume heal <VOLNAME> [enable | disable | full | info [summary | split-brain] | statistics | "
     "split-brain {bigger-file <FILE> | latest-mtime <FILE> | source-brick <HOSTNAME:BRICKNAME> "
     "[<FILE>]}]",
     "self-heal: enable/disable the self-heal daemon, crawl statistics (info, full and "
     "split-brain run in the CLI)"},
    {NULL, NULL, NULL, NULL},
};

void mgmt_print_help(FILE *out)
{
    for (const struct cmd *c = volume_cmds; c->word; c++)
        fprintf(out, "%s - %s\n", c->usage, c->help);
    fprintf(out, "volume set <VOLNAME> group virt|metadata-cache|small-file - apply an option "
                 "profile\n");
    fprintf(out, "volume set help - list every volume option\n");
    fprintf(out, "volume profile <VOLNAME> {start|stop|info [cumulative|incremental|clear]} - "
                 "requests per operation on every brick (run by the CLI)\n");
    fprintf(out, "peer probe <HOSTNAME>[:<PORT>] - add a server to the trusted pool\n");
    fprintf(out, "peer detach <HOSTNAME> [force] - remove a server from the pool\n");
    fprintf(out, "peer status - list the other servers of the pool\n");
    fprintf(out, "pool list - list every server of the pool\n");
    fprintf(out, "help - show this list\n");
    fprintf(out, "--version - show the version\n");
}

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
        mgmt_print_help(out);
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
        mgmt_print_help(out);
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
                fprintf(out, "Usage:\n%s\n", c->usage);
                rc = 1;
            }
            return rc;
        }
    fprintf(out, "unrecognized word: %s (position 1)\n", args[1]);
    return 1;
}
