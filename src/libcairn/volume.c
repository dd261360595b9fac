/* Opening and closing a volume, and applying its live changes: the layout
 * comes from cairnd (the spec's server, else each backup server in turn,
 * as the mount fetches it), the stack is built once, and a management
 * connection (client/volwatch.c) hands over each newer layout. Live
 * options are applied to the stack's layers; a changed brick layout is
 * only reported (the stack is not rebuilt under open handles, as in the
 * mount). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../client/volspec.h"
#include "../lib/log.h"
#include "internal.h"

#define DEFAULT_TIMEOUT_MS 10000

struct open_opts {
    struct net_addr servers[CL_MAX_MGMT_SERVERS];
    int n_servers;
    int ping_ms, timeout_ms;
    int log_level;
    char log_file[4096];
    char ssl_key[4096], ssl_cert[4096], ssl_ca[4096]; /* "": /etc/ssl/cairn.* */
    int mgmt_ssl;                                     /* -1: secure-access decides */
};

const char *cairn_version(void)
{
    return "1.0";
}

static void set_err(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, a, b);
}

static int parse_secs(const char *v, int max, int *ms)
{
    int64_t sec;
    if (!v || opt_parse_time(v, &sec) < 0 || sec < 1 || sec > max)
        return -EINVAL;
    *ms = (int)sec * 1000;
    return 0;
}

static int parse_one(struct open_opts *o, char *kv, char *err, size_t errlen)
{
    char *v = strchr(kv, '=');
    if (v)
        *v++ = 0;
    int rc = -EINVAL;
    if (!strcmp(kv, "backup-servers") || !strcmp(kv, "backup-volfile-servers")) {
        int n = 0;
        if (v && (rc = cl_servers_parse(v, o->servers + 1, CL_MAX_MGMT_SERVERS - 1, &n)) == 0)
            o->n_servers = 1 + n;
    } else if (!strcmp(kv, "ping-timeout")) {
        rc = parse_secs(v, 1800, &o->ping_ms);
    } else if (!strcmp(kv, "timeout")) {
        rc = parse_secs(v, 3600, &o->timeout_ms);
    } else if (!strcmp(kv, "log-level")) {
        if (v && (o->log_level = log_parse_level(v)) >= 0)
            rc = 0;
    } else if (!strcmp(kv, "log-file")) {
        if (v && *v && strlen(v) < sizeof(o->log_file)) {
            strcpy(o->log_file, v);
            rc = 0;
        }
    } else if (!strcmp(kv, "mgmt-ssl")) {
        if (v && (!strcmp(v, "on") || !strcmp(v, "off"))) {
            o->mgmt_ssl = !strcmp(v, "on");
            rc = 0;
        }
    } else if (!strcmp(kv, "ssl-key") || !strcmp(kv, "ssl-cert") || !strcmp(kv, "ssl-ca")) {
        char *slot = kv[4] == 'k' ? o->ssl_key : kv[5] == 'e' ? o->ssl_cert : o->ssl_ca;
        if (v && *v && strlen(v) < sizeof(o->ssl_key)) {
            strcpy(slot, v);
            rc = 0;
        }
    }
    if (rc < 0)
        set_err(err, errlen, "invalid option '%s%s'", kv, v ? "=..." : "");
    return rc;
}

static int parse_options(const char *options, struct open_opts *o, char *err, size_t errlen)
{
    if (!options || !*options)
        return 0;
    char *copy = strdup(options), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *kv = strtok_r(copy, ",", &save); kv && rc == 0; kv = strtok_r(NULL, ",", &save))
        rc = parse_one(o, kv, err, errlen);
    free(copy);
    return rc;
}

/* The process's umask, read without changing it (umask(2) would, racing
 * with the program's other threads). */
static mode_t process_umask(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    unsigned m = 022;
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Umask: %o", &m) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)(m & 0777);
}

static void changed_cb(const struct cl_volinfo *v, void *ctx)
{
    struct cairn_vol *vol = ctx;
    if (vol->gone) {
        log_info("volume %s is started again (generation %llu)", v->name,
                 (unsigned long long)v->gen);
        vol->gone = 0;
    }
    char why[256] = "";
    struct cl_stack_params sp = {.ping_timeout_ms = vol->ping_ms, .subdir = vol->subdir};
    if (!cl_volinfo_same_bricks(&vol->info, v) &&
        (cl_stack_adopt(vol->stack, &vol->info, v, &sp, why, sizeof(why)) < 0 ||
         cl_volinfo_take_bricks(&vol->info, v) < 0)) {
        if (vol->reported_layout_gen != v->gen)
            log_warn("volume %s: layout changed (generation %llu: %d bricks, this handle uses "
                     "%d: %s); open the volume again to use it",
                     v->name, (unsigned long long)v->gen, v->n_bricks, vol->info.n_bricks,
                     why[0] ? why : "out of memory");
        vol->reported_layout_gen = v->gen;
    }
    if (!opt_set_differ(&vol->info.opts, &v->opts))
        return;
    struct opt_set eff, copy;
    int rc = cl_stack_effective_options(&v->opts, vol->ping_ms, &eff);
    if (rc == 0) {
        cl_layer_reconfigure_all(vol->stack, &eff);
        opt_set_free(&eff);
        rc = opt_set_copy(&copy, &v->opts);
    }
    if (rc < 0) {
        log_error("out of memory applying the options of volume %s", v->name);
        return;
    }
    opt_set_free(&vol->info.opts);
    vol->info.opts = copy;
    log_info("volume %s: options of generation %llu applied", v->name, (unsigned long long)v->gen);
}

static void gone_cb(const char *text, void *ctx)
{
    struct cairn_vol *vol = ctx;
    vol->gone = 1;
    log_warn("cairnd says: %s; calls fail until the volume is started again", text);
}

static int errno_of_fetch(int rc, const char *err)
{
    /* cairnd's answer for an unknown or stopped volume */
    if (rc < 0 && err && (strstr(err, "does not exist") || strstr(err, "not started")))
        return -ENOENT;
    return rc;
}

int cairn_vol_open(const char *spec, const char *options, cairn_vol_t **out, char *err,
                   size_t errlen)
{
    struct open_opts o = {
        .timeout_ms = DEFAULT_TIMEOUT_MS, .log_level = -1, .n_servers = 1, .mgmt_ssl = -1};
    char why[512] = "";
    const char *bad;
    if (err && errlen)
        err[0] = 0;
    if (!out)
        return -EINVAL;
    *out = NULL;
    struct cairn_vol *vol = calloc(1, sizeof(*vol));
    if (!vol)
        return -ENOMEM;
    int rc = cl_volspec_parse_dir(spec, &o.servers[0], vol->name, sizeof(vol->name), vol->subdir,
                                  sizeof(vol->subdir), &bad);
    if (rc < 0) {
        set_err(err, errlen, "'%s': %s", spec ? spec : "(null)", bad);
        goto fail;
    }
    if ((rc = parse_options(options, &o, err, errlen)) < 0)
        goto fail;
    static int logged;
    if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        log_init("libcairn", LOG_WARN);
    if (o.log_level >= 0)
        log_set_level((enum log_level)o.log_level);
    if (o.log_file[0] && (rc = log_open(o.log_file)) < 0) {
        set_err(err, errlen, "cannot open log file %s: %s", o.log_file, strerror(-rc));
        goto fail;
    }
    /* the TLS files are process-wide, like logging; given ones replace them */
    if (o.ssl_key[0] || o.ssl_cert[0] || o.ssl_ca[0])
        cl_tls_set_files(o.ssl_key, o.ssl_cert, o.ssl_ca);
    if (o.mgmt_ssl >= 0)
        cl_tls_set_mgmt(o.mgmt_ssl);
    int used = 0;
    rc = cl_volume_fetch_any(o.servers, o.n_servers, vol->name, vol->subdir, o.timeout_ms,
                             &vol->info, &used, why, sizeof(why));
    if (rc < 0) {
        rc = errno_of_fetch(rc, why);
        set_err(err, errlen, "%s%s", why, "");
        goto fail;
    }
    if ((rc = cl_subdir_check(&vol->info, vol->subdir, o.timeout_ms, why, sizeof(why))) < 0) {
        if (err && errlen && strcmp(vol->subdir, "/"))
            snprintf(err, errlen, "directory %s of volume %s: %s", vol->subdir, vol->name, why);
        else if (err && errlen)
            snprintf(err, errlen, "volume %s: %s", vol->name, why);
        goto fail;
    }
    vol->ping_ms = o.ping_ms;
    vol->umask = process_umask();
    pthread_mutex_init(&vol->lock, NULL);
    pthread_cond_init(&vol->idle, NULL);
    struct cl_stack_params sp = {.ping_timeout_ms = o.ping_ms, .subdir = vol->subdir};
    rc = cl_stack_build(&vol->info, &sp, &vol->stack, why, sizeof(why));
    if (rc < 0) {
        set_err(err, errlen, "%s%s", why, "");
        goto fail_locks;
    }
    struct cl_volwatch_params wp = {
        .servers = o.servers,
        .n_servers = o.n_servers,
        .first = used,
        .volume = vol->name,
        .subdir = vol->subdir,
        .gen = vol->info.gen,
        .timeout_ms = o.timeout_ms,
        .changed_cb = changed_cb,
        .gone_cb = gone_cb,
        .ctx = vol,
    };
    if (!(vol->watch = cl_volwatch_start(&wp)))
        log_error("volume %s: cannot keep the management connection: option changes will not "
                  "reach this handle",
                  vol->name);
    *out = vol;
    return 0;
fail_locks:
    pthread_mutex_destroy(&vol->lock);
    pthread_cond_destroy(&vol->idle);
fail:
    cl_volinfo_free(&vol->info);
    free(vol);
    return rc;
}

void cairn_vol_close(cairn_vol_t *vol)
{
    if (!vol)
        return;
    if (vol->watch)
        cl_volwatch_stop(vol->watch);
    pthread_mutex_lock(&vol->lock);
    while (vol->inflight)
        pthread_cond_wait(&vol->idle, &vol->lock);
    pthread_mutex_unlock(&vol->lock);
    cairn__close_leftovers(vol);
    cl_stack_destroy(vol->stack);
    cl_volinfo_free(&vol->info);
    pthread_mutex_destroy(&vol->lock);
    pthread_cond_destroy(&vol->idle);
    free(vol);
}

const char *cairn_vol_name(const cairn_vol_t *vol)
{
    return vol ? vol->name : NULL;
}

mode_t cairn_umask(cairn_vol_t *vol, mode_t mask)
{
    return __atomic_exchange_n(&vol->umask, mask & 0777, __ATOMIC_RELAXED);
}
