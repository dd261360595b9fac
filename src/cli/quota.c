/* cairn volume quota NAME list|list-objects [PATH...]: each limited
 * directory's usage, in GlusterFS's layout (docs/quota.md). Run by the CLI
 * itself as a client of the bricks (QUOTA, op 86), like `volume profile`:
 * the limits come from cairnd's GETVOL, the counts from every brick. A
 * replica set counts as its fullest copy (a brick healing catches up to
 * it); the sets' bytes and files add up, directories are on every set and
 * count once. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../lib/quota.h"
#include "../lib/xml.h"
#include "cli.h"

struct usage {
    int64_t bytes, files, dirs;
    int seen; /* some brick of every set answered for it */
};

/* Asks brick i for its counts and merges them into u (per limit of q). */
static int ask_brick(const struct cl_volinfo *v, int i, const struct quota_limits *q,
                     struct usage *set_u)
{
    struct cl_layer *l = cli_brick_connect(v, i);
    if (!l)
        return -ENOMEM;
    struct cl_op op;
    cl_op_init(&op, RPC_OP_QUOTA, NULL, NULL);
    int rc = cl_op_run(l, &op);
    if (rc == 0) {
        struct rpc_iter it;
        struct rpc_field f;
        rpc_iter_init(&it, op.reply->msg.body, op.reply->msg.body_len);
        while (rpc_iter_next(&it, &f) > 0) {
            struct rpc_msg m;
            char path[4096];
            if (f.tag != RPC_T_QUOTA || rpc_msg_decode(f.val, f.len, &m, NULL) < 0 ||
                !rpc_has(&m, RPC_T_PATH) || rpc_bytes_str(&m.path, path, sizeof(path)) < 0)
                continue;
            for (int k = 0; k < q->n; k++) {
                if (strcmp(q->l[k].path, path))
                    continue;
                struct usage *u = &set_u[k];
                int64_t b = (int64_t)m.size, fi = (int64_t)m.calls, d = (int64_t)m.offset;
                if (b > u->bytes)
                    u->bytes = b;
                if (fi > u->files)
                    u->files = fi;
                if (d > u->dirs)
                    u->dirs = d;
                u->seen = 1;
            }
        }
    }
    cl_op_release(&op);
    cl_layer_destroy_tree(l);
    return rc;
}

static const char *yes(int b)
{
    return b ? "Yes" : "No";
}

int cli_volume_quota_list(const struct net_addr *mgmt, int argc, char **argv, int xml)
{
    const char *name = argv[2];
    int objects = strcmp(argv[3], "list-objects") == 0;
    struct cl_volinfo v;
    char err[512];
    int rc = cl_volume_fetch(mgmt, name, 10000, &v, err, sizeof(err));
    if (rc < 0) {
        if (xml)
            xml_error_doc(stdout, XML_ERRNO_INTERNAL, err);
        else
            fprintf(stderr, "quota command failed : %s\n", err);
        return 1;
    }
    if (strcmp(opt_value(&v.opts, "features.quota"), "on") != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "Quota is disabled, please enable quota (volume quota %s enable)", name);
        if (xml)
            xml_error_doc(stdout, XML_ERRNO_INTERNAL, msg);
        else
            fprintf(stderr, "quota command failed : %s\n", msg);
        cl_volinfo_free(&v);
        return 1;
    }
    struct quota_limits q;
    if (quota_limits_parse(opt_value(&v.opts, "features.quota-limits"), &q, err, sizeof(err)) < 0) {
        fprintf(stderr, "quota command failed : %s\n", err);
        cl_volinfo_free(&v);
        return 1;
    }
    int status = 0;
    int per = v.replica > 1 ? v.replica : 1;
    int n_sets = v.n_bricks / per;
    struct usage *tot = calloc((size_t)q.n + 1, sizeof(*tot));
    struct usage *set_u = calloc((size_t)q.n + 1, sizeof(*set_u));
    if (!tot || !set_u) {
        fprintf(stderr, "quota command failed : out of memory\n");
        status = 1;
        goto out;
    }
    for (int k = 0; k < q.n; k++)
        tot[k].seen = 1;
    for (int s = 0; s < n_sets; s++) {
        memset(set_u, 0, sizeof(*set_u) * (size_t)q.n);
        for (int j = 0; j < per; j++) {
            int i = s * per + j;
            if (v.arbiter && j == per - 1)
                continue; /* an arbiter holds names, not data */
            int brc = ask_brick(&v, i, &q, set_u);
            if (brc < 0 && !xml)
                fprintf(stderr, "Brick %s:%s: %s\n", v.bricks[i].addr.host, v.bricks[i].path,
                        brc == -ENOTCONN || brc == -ETIMEDOUT ? "not connected" : strerror(-brc));
        }
        for (int k = 0; k < q.n; k++) {
            tot[k].bytes += set_u[k].bytes;
            tot[k].files += set_u[k].files;
            if (set_u[k].dirs > tot[k].dirs)
                tot[k].dirs = set_u[k].dirs;
            if (!set_u[k].seen)
                tot[k].seen = 0;
        }
    }
    int dsoft = (int)opt_int(&v.opts, "features.default-soft-limit");
    struct xml_writer w;
    if (xml) {
        xml_begin(&w, stdout);
        xml_op_status(&w, 0, 0, NULL);
        xml_open(&w, "volQuota", NULL, NULL);
    } else if (objects) {
        printf("                  Path                   Hard-limit   Soft-limit      Files       "
               "Dirs     Available  Soft-limit exceeded? Hard-limit exceeded?\n");
        printf("-----------------------------------------------------------------------------"
               "------------------------------------------------------------------\n");
    } else {
        printf("                  Path                   Hard-limit  Soft-limit      Used  "
               "Available  Soft-limit exceeded? Hard-limit exceeded?\n");
        printf("-----------------------------------------------------------------------------"
               "--------------------------------------------------\n");
    }
    /* the paths asked for, or every limit of the kind listed */
    int n_rows = argc > 4 ? argc - 4 : q.n;
    for (int r = 0; r < n_rows; r++) {
        char want[4096];
        struct quota_limit *l = NULL;
        int k = r;
        if (argc > 4) {
            if (quota_path_norm(argv[4 + r], want, sizeof(want)) == 0)
                l = quota_limits_find(&q, want);
            k = l ? (int)(l - q.l) : -1;
        } else {
            l = &q.l[r];
        }
        if (l && !(objects ? l->objects : l->hard))
            l = NULL;
        if (!l) {
            if (argc > 4 && !xml)
                printf("%-40s %s\n", argv[4 + r], "Limit not set");
            continue;
        }
        int64_t hard = objects ? l->objects : l->hard;
        int soft_pct =
            (objects ? l->obj_soft : l->soft) ? (objects ? l->obj_soft : l->soft) : dsoft;
        int64_t soft = (int64_t)((double)hard * soft_pct / 100.0);
        int64_t used = objects ? tot[k].files + tot[k].dirs : tot[k].bytes;
        int64_t avail = hard > used ? hard - used : 0;
        int sl = used > soft, hl = used >= hard;
        if (xml) {
            xml_open(&w, "limit", NULL, NULL);
            xml_leaf(&w, "path", l->path);
            xml_leaf_fmt(&w, "hard_limit", "%" PRId64, hard);
            xml_leaf_fmt(&w, "soft_limit_percent", "%d%%", soft_pct);
            xml_leaf_fmt(&w, "soft_limit_value", "%" PRId64, soft);
            if (objects) {
                xml_leaf_fmt(&w, "file_count", "%" PRId64, tot[k].files);
                xml_leaf_fmt(&w, "dir_count", "%" PRId64, tot[k].dirs);
                xml_leaf_fmt(&w, "available", "%" PRId64, avail);
            } else {
                xml_leaf_fmt(&w, "used_space", "%" PRId64, used);
                xml_leaf_fmt(&w, "avail_space", "%" PRId64, avail);
            }
            xml_leaf(&w, "sl_exceeded", yes(sl));
            xml_leaf(&w, "hl_exceeded", yes(hl));
            xml_close(&w);
        } else if (objects) {
            char sbuf[64];
            snprintf(sbuf, sizeof(sbuf), "%d%%(%" PRId64 ")", soft_pct, soft);
            printf("%-40s %10" PRId64 " %12s %10" PRId64 " %10" PRId64 " %13" PRId64 " %15s %20s\n",
                   l->path, hard, sbuf, tot[k].files, tot[k].dirs, avail, yes(sl), yes(hl));
        } else {
            char h[32], s[32], sbuf[64], u[32], a[32];
            quota_format_size(hard, h, sizeof(h));
            quota_format_size(soft, s, sizeof(s));
            snprintf(sbuf, sizeof(sbuf), "%d%%(%s)", soft_pct, s);
            quota_format_size(used, u, sizeof(u));
            quota_format_size(avail, a, sizeof(a));
            printf("%-40s %10s %11s %9s %10s %15s %20s\n", l->path, h, sbuf, u, a, yes(sl),
                   yes(hl));
        }
        if (!tot[k].seen)
            status = 1;
    }
    if (xml)
        xml_end(&w);
out:
    free(tot);
    free(set_u);
    quota_limits_free(&q);
    cl_volinfo_free(&v);
    return status;
}
