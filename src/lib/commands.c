/* The command line's vocabulary: usage and help of every command. */
#include "commands.h"

#include <string.h>

struct cmd_usage {
    const char *word; /* after "volume"; NULL: not a volume command */
    const char *usage;
    const char *help;
};

static const struct cmd_usage cmds[] = {
    {"create",
     "volume create <NEW-VOLNAME> [replica <COUNT> [arbiter 1]] [disperse [<COUNT>]] "
     "[disperse-data <COUNT>] [redundancy <COUNT>] [transport tcp] <NEW-BRICK> ... [force]",
     "create a new volume of the given bricks (HOST:/abs/path; missing directories are made)"},
    {"import",
     "volume import <NEW-VOLNAME> [replica <COUNT> [arbiter 1]] <GLUSTERFS-BRICK> ... "
     "[keep-glusterfs] [force]",
     "make a volume of the bricks of a stopped GlusterFS volume, in place (docs/migrating.md)"},
    {"start", "volume start <VOLNAME> [force]", "start a volume's bricks"},
    {"stop", "volume stop <VOLNAME> [force]", "stop a volume's bricks"},
    {"delete", "volume delete <VOLNAME>", "delete a stopped volume"},
    {"info", "volume info [all|<VOLNAME>]", "list information of volumes"},
    {"list", "volume list", "list all volumes"},
    {"status", "volume status [all|<VOLNAME>] [detail] | <VOLNAME> clients",
     "show the brick processes of volumes, or each brick's client connections"},
    {"set", "volume set <VOLNAME> <KEY> <VALUE> [<KEY> <VALUE>] ...",
     "set volume options (`volume set help` lists them)"},
    {"get", "volume get <VOLNAME> <KEY|all>", "show volume options"},
    {"reset", "volume reset <VOLNAME> [<KEY>|all] [force]", "reset options to their defaults"},
    {"heal",
     "volume heal <VOLNAME> [enable | disable | full | info [summary | split-brain] | statistics | "
     "split-brain {bigger-file <FILE> | latest-mtime <FILE> | source-brick <HOSTNAME:BRICKNAME> "
     "[<FILE>]}]",
     "self-heal: enable/disable the self-heal daemon, crawl statistics (info, full and "
     "split-brain run in the CLI)"},
    {"add-brick",
     "volume add-brick <VOLNAME> [replica <COUNT> [arbiter 1]] <NEW-BRICK> ... [force]",
     "raise the replica count (a new copy in every replica set, filled by heal), or, without "
     "a higher count, add whole distribute sets to a volume with a placement "
     "(docs/elastic.md)"},
    {"remove-brick", "volume remove-brick <VOLNAME> replica <COUNT> <BRICK> ... force",
     "lower the replica count: one brick of every replica set leaves (stopped, its files left "
     "on disk); refused while a set has entries to heal (docs/elastic.md)"},
    {"replace-brick", "volume replace-brick <VOLNAME> <SOURCE-BRICK> <NEW-BRICK> commit force",
     "replace a brick (its server may be dead) by a new empty one, filled by heal"},
    {"reset-brick",
     "volume reset-brick <VOLNAME> <SOURCE-BRICK> {{start} | {<NEW-BRICK> commit [force]}}",
     "stop a brick (start), then bring it back empty on the same path, filled by heal (commit)"},
    {NULL,
     "volume set <VOLNAME> group "
     "virt|distributed-virt|metadata-cache|nl-cache|db-workload|small-file",
     "apply an option profile"},
    {NULL, "volume set help", "list every volume option"},
    {"profile", "volume profile <VOLNAME> {start|stop|info [cumulative|incremental|clear]}",
     "requests per operation on every brick (run by the CLI)"},
    {"statedump",
     "volume statedump <VOLNAME> [all|mem|iobuf|callpool|priv|fd|inode|history]... | "
     "<VOLNAME> client <HOSTNAME>:<PID>",
     "bricks (or one client) write their internal state to server.statedump-path"},
    {"top",
     "volume top <VOLNAME> {open|read|write|opendir|readdir|clear} [brick <brick>] "
     "[list-cnt <value>] | <VOLNAME> {read-perf|write-perf} [bs <size> count <count>] "
     "[brick <brick>] [list-cnt <value>]",
     "the paths each brick served most (run by the CLI)"},
    {"quota",
     "volume quota <VOLNAME> {enable|disable|list [<PATH> ...]|list-objects [<PATH> ...]|"
     "limit-usage <PATH> <SIZE> [<PERCENT>]|limit-objects <PATH> <NUMBER> [<PERCENT>]|"
     "remove <PATH>|remove-objects <PATH>|default-soft-limit <PERCENT>|"
     "soft-timeout <SECONDS>|hard-timeout <SECONDS>}",
     "directory quota: limits on a directory's bytes and objects (list runs in the CLI)"},
    {NULL, "peer probe <HOSTNAME>[:<PORT>]", "add a server to the trusted pool"},
    {NULL, "peer detach <HOSTNAME> [force]", "remove a server from the pool"},
    {NULL, "peer status", "list the other servers of the pool"},
    {NULL, "pool list", "list every server of the pool"},
    {NULL, "--xml volume info|status|heal <VOLNAME> info ...",
     "GlusterFS's `gluster --xml` output (--xml may also follow the command)"},
    {NULL, "help", "show this list"},
    {NULL, "--version", "show the version"},
};

const char *cmd_volume_usage(const char *word)
{
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (cmds[i].word && strcmp(cmds[i].word, word) == 0)
            return cmds[i].usage;
    return NULL;
}

void cmd_print_help(FILE *out)
{
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        fprintf(out, "%s - %s\n", cmds[i].usage, cmds[i].help);
}
