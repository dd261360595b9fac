/* Volume changes applied to a running mount, without remounting and without
 * touching open files: the management connection (client/volwatch.c) hands
 * over each newer layout; the client's live options take effect at once
 * (network.ping-timeout in every protocol client layer, the kernel cache
 * times for later replies, the log level). A changed brick list is adopted
 * by the running stack (client/stack.c cl_stack_adopt: bricks replaced,
 * copies added); one it cannot adopt (other distribute sets) is reported,
 * for a remount: the stack is not rebuilt under open files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/volwatch.h"
#include "../lib/log.h"
#include "bridge.h"

#define MGMT_TIMEOUT_MS 10000

struct cf_live {
    struct cf *cf;
    const struct cf_config *cfg;
    struct cl_volinfo vol; /* bricks the stack serves; options last applied */
    struct cl_volwatch *watch;
    int gone;                 /* cairnd said the volume is not served */
    char reported_layout[64]; /* layout last reported as changed (its generation) */
};

static int opt_changed(const struct opt_set *old, const struct opt_set *new, const char *name)
{
    return strcmp(opt_value(old, name), opt_value(new, name)) != 0;
}

static void set_timeout(double *field, const char *name, const struct opt_set *opts)
{
    double d = (double)opt_int(opts, name);
    __atomic_store(field, &d, __ATOMIC_RELAXED);
    log_info("option %s now %g s", name, d);
}

/* The client's own live options, mount options first. */
static void apply_client_options(struct cf_live *l, const struct opt_set *old,
                                 const struct opt_set *new)
{
    const struct cf_config *cfg = l->cfg;
    const char *ping = "network.ping-timeout";
    if (opt_changed(old, new, ping)) {
        if (cfg->ping_timeout_ms > 0)
            log_info("option %s is now %s s on the volume; this mount keeps %d s (mount option "
                     "ping-timeout)",
                     ping, opt_value(new, ping), cfg->ping_timeout_ms / 1000);
        else
            log_info("option %s now %lld s", ping, (long long)opt_int(new, ping));
    }
    if (opt_changed(old, new, "server.statedump-path"))
        cf_statedump_set_dir(l->cf, opt_value(new, "server.statedump-path"));
    const char *attr = "client.attribute-timeout";
    if (opt_changed(old, new, attr)) {
        if (cfg->attr_timeout >= 0)
            log_info("option %s is now %s s on the volume; this mount keeps %g s (mount option "
                     "attribute-timeout)",
                     attr, opt_value(new, attr), cfg->attr_timeout);
        else
            set_timeout(&l->cf->attr_timeout, attr, new);
    }
    const char *entry = "client.entry-timeout";
    if (opt_changed(old, new, entry)) {
        if (cfg->entry_timeout >= 0)
            log_info("option %s is now %s s on the volume; this mount keeps %g s (mount option "
                     "entry-timeout)",
                     entry, opt_value(new, entry), cfg->entry_timeout);
        else
            set_timeout(&l->cf->entry_timeout, entry, new);
    }
    if (opt_changed(old, new, "client.leases") ||
        opt_changed(old, new, "client.lease-cache-timeout")) {
        cf_lease_configure(l->cf, opt_bool(new, "client.leases"),
                           (double)opt_int(new, "client.lease-cache-timeout"));
        log_info("leases now %s, cache timeout %lld s",
                 opt_bool(new, "client.leases") ? "on" : "off",
                 (long long)opt_int(new, "client.lease-cache-timeout"));
    }
    if (opt_changed(old, new, "client.write-back") ||
        opt_changed(old, new, "client.write-back-size") ||
        opt_changed(old, new, "client.write-back-files")) {
        cf_wb_configure(l->cf, opt_bool(new, "client.write-back"),
                        (size_t)opt_int(new, "client.write-back-size"),
                        (size_t)opt_int(new, "client.write-back-files"));
        log_info("write-back now %s", opt_bool(new, "client.write-back") ? "on" : "off");
    }
    if (opt_changed(old, new, "performance.write-behind") ||
        opt_changed(old, new, "performance.write-behind-window-size") ||
        opt_changed(old, new, "performance.aggregate-size") ||
        opt_changed(old, new, "performance.write-behind-trickling-writes") ||
        opt_changed(old, new, "performance.strict-o-direct") ||
        opt_changed(old, new, "client.write-back-size")) {
        cf_wbh_configure(l->cf, new);
        log_info("write-behind now %s, window %lld bytes, aggregate %lld bytes, trickling %s",
                 opt_bool(new, "performance.write-behind") ? "on" : "off",
                 (long long)opt_int(new, "performance.write-behind-window-size"),
                 (long long)opt_int(new, "performance.aggregate-size"),
                 opt_bool(new, "performance.write-behind-trickling-writes") ? "on" : "off");
    }
    if (opt_changed(old, new, "performance.read-ahead") ||
        opt_changed(old, new, "performance.read-ahead-page-count") ||
        opt_changed(old, new, "performance.cache-size")) {
        cf_rc_configure(l->cf, opt_bool(new, "performance.read-ahead"),
                        (int)opt_int(new, "performance.read-ahead-page-count"),
                        (size_t)opt_int(new, "performance.cache-size"));
        log_info("read-ahead now %s, window %lld x 128 KiB, cache %lld bytes",
                 opt_bool(new, "performance.read-ahead") ? "on" : "off",
                 (long long)opt_int(new, "performance.read-ahead-page-count"),
                 (long long)opt_int(new, "performance.cache-size"));
    }
    if (opt_changed(old, new, "server.root-squash") || opt_changed(old, new, "server.all-squash") ||
        opt_changed(old, new, "server.anonuid") || opt_changed(old, new, "server.anongid"))
        cf_squash_configure(l->cf, new);
    const char *lvl = "diagnostics.client-log-level";
    if (opt_changed(old, new, lvl)) {
        int level = log_parse_level(opt_value(new, lvl));
        if (cfg->log_level >= 0) {
            log_info("option %s is now %s on the volume; this mount keeps its mount option "
                     "log-level",
                     lvl, opt_value(new, lvl));
        } else if (level < 0) {
            log_warn("option %s: unknown level '%s'; ignored", lvl, opt_value(new, lvl));
        } else if (level > (int)log_get_level()) {
            /* log the change at the more verbose of the two levels */
            log_set_level((enum log_level)level);
            log_info("option %s now %s", lvl, opt_value(new, lvl));
        } else {
            log_info("option %s now %s", lvl, opt_value(new, lvl));
            log_set_level((enum log_level)level);
        }
    }
}

/* A changed brick list, adopted by the running stack when it can be
 * (docs/elastic.md): 0, or -errno (logged) when a remount is needed. */
static int adopt_bricks(struct cf_live *l, const struct cl_volinfo *v)
{
    char why[256];
    struct cl_stack_params sp = {.ping_timeout_ms = l->cfg->ping_timeout_ms,
                                 .subdir = l->cfg->subdir};
    int rc = cl_stack_adopt(l->cf->stack, &l->vol, v, &sp, why, sizeof(why));
    if (rc == 0)
        rc = cl_volinfo_take_bricks(&l->vol, v);
    if (rc < 0) {
        log_warn("volume %s: cannot use the bricks of generation %llu without a remount: %s",
                 v->name, (unsigned long long)v->gen, why);
        return rc;
    }
    log_info("volume %s: now on the bricks of generation %llu (%d bricks, replica %d%s)", v->name,
             (unsigned long long)v->gen, v->n_bricks, v->replica, v->arbiter ? ", arbiter" : "");
    return 0;
}

static void changed_cb(const struct cl_volinfo *v, void *ctx)
{
    struct cf_live *l = ctx;
    if (l->gone) {
        log_info("volume %s is started again (generation %llu)", v->name,
                 (unsigned long long)v->gen);
        l->gone = 0;
    }
    if (!cl_volinfo_same_bricks(&l->vol, v) && adopt_bricks(l, v) < 0) {
        char sig[64];
        snprintf(sig, sizeof(sig), "%llu", (unsigned long long)v->gen);
        if (strcmp(sig, l->reported_layout) != 0)
            log_warn("volume %s: layout changed (generation %llu: %d bricks, this mount uses %d "
                     "as they were at mount time); remount to use it",
                     v->name, (unsigned long long)v->gen, v->n_bricks, l->vol.n_bricks);
        snprintf(l->reported_layout, sizeof(l->reported_layout), "%s", sig);
    } else {
        l->reported_layout[0] = 0;
    }
    if (!opt_set_differ(&l->vol.opts, &v->opts))
        return;
    apply_client_options(l, &l->vol.opts, &v->opts);
    struct opt_set eff, copy = {0};
    int rc = cl_stack_effective_options(&v->opts, l->cfg->ping_timeout_ms, &eff);
    if (rc == 0) {
        cl_layer_reconfigure_all(l->cf->stack, &eff);
        opt_set_free(&eff);
        rc = opt_set_copy(&copy, &v->opts);
    }
    if (rc < 0) {
        log_error("out of memory applying the options of volume %s", v->name);
        opt_set_free(&copy);
        return;
    }
    opt_set_free(&l->vol.opts);
    l->vol.opts = copy;
}

static void gone_cb(const char *text, void *ctx)
{
    struct cf_live *l = ctx;
    l->gone = 1;
    log_warn("cairnd says: %s; the mount stays, and works again once the volume is started", text);
}

void cf_put_counter(struct rpc_buf *b, const char *name, uint64_t value)
{
    size_t mark = rpc_put_begin(b, RPC_T_COUNTER);
    rpc_put_str(b, RPC_T_NAME, name);
    rpc_put_u64(b, RPC_T_CALLS, value);
    rpc_put_end(b, mark);
}

/* The mount's counters for cairnd's metrics (docs/metrics.md, per mounted
 * client): its write-back queue, read cache and resident memory. */
static void report_cb(struct rpc_buf *b, void *ctx)
{
    struct cf_live *l = ctx;
    rpc_put_str(b, RPC_T_PATH, l->cfg->mountpoint);
    cf_wb_report(l->cf, b);
    cf_rc_report(l->cf, b);
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size, rss;
    if (f && fscanf(f, "%llu %llu", &size, &rss) == 2)
        cf_put_counter(b, "resident_bytes", rss * (uint64_t)sysconf(_SC_PAGESIZE));
    if (f)
        fclose(f);
}

int cf_live_start(struct cf *cf, const struct cf_config *cfg, const struct net_addr *servers, int n,
                  int first, struct cl_volinfo *vol)
{
    struct cf_live *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->cf = cf;
    l->cfg = cfg;
    l->vol = *vol;
    memset(vol, 0, sizeof(*vol));
    struct cl_volwatch_params p = {
        .servers = servers,
        .n_servers = n,
        .first = first,
        .volume = l->vol.name,
        .subdir = cfg->subdir,
        .gen = l->vol.gen,
        .timeout_ms = MGMT_TIMEOUT_MS,
        .changed_cb = changed_cb,
        .gone_cb = gone_cb,
        .report_cb = report_cb,
        .ctx = l,
    };
    cf->live = l;
    if (!(l->watch = cl_volwatch_start(&p))) {
        cf->live = NULL;
        cl_volinfo_free(&l->vol);
        free(l);
        return -ENOMEM;
    }
    return 0;
}

void cf_live_stop(struct cf *cf)
{
    struct cf_live *l = cf->live;
    if (l && l->watch) {
        cl_volwatch_stop(l->watch);
        l->watch = NULL;
    }
}

void cf_live_free(struct cf *cf)
{
    struct cf_live *l = cf->live;
    if (!l)
        return;
    cf_live_stop(cf);
    cl_volinfo_free(&l->vol);
    free(l);
    cf->live = NULL;
}
