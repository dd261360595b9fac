/* The CLI command table: dispatches `cairn ...` command lines to their
 * handlers in cmd_volume.c, cmd_opts.c and cmd_info.c, in text or, with
 * --xml, as GlusterFS's XML documents (docs/cli.md). */
#include <stdlib.h>
#include <string.h>

#include "../lib/commands.h"
#include "../lib/xml.h"
#include "pool.h"
#include "shd.h"

struct cmd {
    const char *word; /* after "volume"; usage and help in lib/commands.c */
    int (*run)(struct mgmt *m, int argc, char **argv, FILE *out);
    /* --xml: the command's own XML document (NULL: run wrapped) */
    int (*xml)(struct mgmt *m, int argc, char **argv, FILE *out);
};

static const struct cmd volume_cmds[] = {
    {"create", mgmt_cmd_create, NULL},
    {"import", mgmt_cmd_import, NULL},
    {"start", mgmt_cmd_start, NULL},
    {"stop", mgmt_cmd_stop, NULL},
    {"delete", mgmt_cmd_delete, NULL},
    {"info", mgmt_cmd_info, mgmt_xml_info},
    {"list", mgmt_cmd_list, NULL},
    {"status", mgmt_cmd_status, mgmt_xml_status},
    {"set", mgmt_cmd_set, NULL},
    {"get", mgmt_cmd_get, NULL},
    {"reset", mgmt_cmd_reset, NULL},
    {"heal", mgmt_cmd_heal, NULL},
    {"add-brick", mgmt_cmd_bricks, NULL},
    {"replace-brick", mgmt_cmd_bricks, NULL},
    {"reset-brick", mgmt_cmd_bricks, NULL},
    {"remove-brick", mgmt_cmd_bricks, NULL},
    {"statedump", mgmt_cmd_statedump, NULL},
    {"quota", mgmt_cmd_quota, NULL},
    {NULL, NULL, NULL},
};

static int run_text(struct mgmt *m, int n, char **args, FILE *out);

/* A command without an XML form of its own, in --xml mode: its text in
 * <output>, or as <opErrstr> when it failed (GlusterFS's generic shape). */
static int run_wrapped(struct mgmt *m, int n, char **args, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        xml_error_doc(out, XML_ERRNO_INTERNAL, "out of memory");
        return 1;
    }
    int rc = run_text(m, n, args, f);
    fclose(f);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        text[--len] = 0;
    if (rc != 0)
        xml_error_doc(out, XML_ERRNO_INTERNAL, text);
    else
        xml_output_doc(out, text);
    free(text);
    return rc;
}

int mgmt_cli_run(struct mgmt *m, int argc, char **argv, FILE *out)
{
    /* GlusterFS scripts pass --mode=script; there are no prompts to skip.
     * --xml may come anywhere, as with gluster. */
    char *args[argc + 1];
    int n = 0, xml = 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--xml") == 0)
            xml = 1;
        else if (strcmp(argv[i], "--mode=script") != 0)
            args[n++] = argv[i];
    args[n] = NULL;
    if (!xml)
        return run_text(m, n, args, out);
    for (const struct cmd *c = volume_cmds; c->word; c++)
        if (n >= 2 && c->xml && strcmp(args[0], "volume") == 0 && strcmp(args[1], c->word) == 0) {
            int rc = c->xml(m, n, args, out);
            if (rc == 2) { /* wrong arguments */
                char usage[512];
                snprintf(usage, sizeof(usage), "Usage: %s", cmd_volume_usage(c->word));
                xml_error_doc(out, XML_ERRNO_INTERNAL, usage);
                rc = 1;
            }
            return rc;
        }
    return run_wrapped(m, n, args, out);
}

/* Runs a command line (flags removed) with its text output. */
static int run_text(struct mgmt *m, int n, char **args, FILE *out)
{
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
