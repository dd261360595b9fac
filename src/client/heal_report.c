/* heal info: each child's index entries and what state they are in, in
 * GlusterFS's layout (docs/cli.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "heal_int.h"

static enum cl_heal_state classify(struct hctx *h, const char *path, const gfid_t *g)
{
    struct cl__heal_view v;
    if (cl__heal_view(h, path, g, &v) < 0)
        return CL_HEAL_ST_HEALING;
    if (v.have && !v.sources)
        return CL_HEAL_ST_SPLIT;
    return CL_HEAL_ST_PENDING;
}

int cl_heal_report(struct cl_layer **children, char **names, int n, int arbiter, int mode,
                   FILE *out, unsigned *split_total)
{
    struct hctx h = {.ch = children, .n = n, .arbiter = arbiter};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        fprintf(out, "Brick %s\n", names[i] ? names[i] : "?");
        char *idx = NULL;
        size_t len;
        int r = cl_proto_connected(children[i]) ? cl__heal_read_index(children[i], &idx, &len)
                                                : -ENOTCONN;
        if (r < 0) {
            const char *why = r == -ENOTCONN ? "Transport endpoint is not connected" : strerror(-r);
            if (mode == 1)
                fprintf(out, "Status: %s\nTotal Number of entries: -\n\n", why);
            else
                fprintf(out, "Status: %s\nNumber of entries: -\n\n", why);
            rc = r;
            continue;
        }
        unsigned total = 0, cnt[3] = {0};
        for (char *line = idx, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = 0;
            char *sp = strchr(line, ' ');
            gfid_t g;
            enum cl_heal_state s = CL_HEAL_ST_PENDING;
            int named = sp && sp[1] == '/';
            if (sp)
                *sp = 0;
            if (named && gfid_parse(line, &g) == 0)
                s = classify(&h, sp + 1, &g);
            total++;
            cnt[s]++;
            if (mode == 1 || (mode == 2 && s != CL_HEAL_ST_SPLIT))
                continue;
            if (named)
                fprintf(out, "%s", sp + 1);
            else
                fprintf(out, "<gfid:%s>", line);
            if (mode == 0 && s == CL_HEAL_ST_SPLIT)
                fprintf(out, " - Is in split-brain");
            else if (mode == 0 && s == CL_HEAL_ST_HEALING)
                fprintf(out, " - Possibly undergoing heal");
            fprintf(out, "\n");
        }
        free(idx);
        if (split_total)
            *split_total += cnt[CL_HEAL_ST_SPLIT];
        fprintf(out, "Status: Connected\n");
        if (mode == 1)
            fprintf(out,
                    "Total Number of entries: %u\nNumber of entries in heal pending: %u\n"
                    "Number of entries in split-brain: %u\n"
                    "Number of entries possibly healing: %u\n\n",
                    total, cnt[CL_HEAL_ST_PENDING], cnt[CL_HEAL_ST_SPLIT], cnt[CL_HEAL_ST_HEALING]);
        else if (mode == 2)
            fprintf(out, "Number of entries in split-brain: %u\n\n", cnt[CL_HEAL_ST_SPLIT]);
        else
            fprintf(out, "Number of entries: %u\n\n", total);
    }
    return rc;
}

int cl_heal_info(struct cl_layer **children, char **names, int n, FILE *out)
{
    return cl_heal_report(children, names, n, 0, 0, out, NULL);
}
