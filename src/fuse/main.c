/* cairn-fuse: mounts a Cairn volume through FUSE.
 *
 * Order matters: the volume is fetched (from the spec's server, else from
 * each backup server in turn; a stopped or unknown volume fails here, on
 * stderr, with exit status 1) and the mount is made before the process
 * daemonizes, so `mount` returns only when the mount exists. Brick
 * connections and the management connection that hears about volume changes
 * (live.c) are made after daemonizing, since threads do not survive fork().
 * SIGTERM/SIGINT end the session and unmount; SIGHUP reopens the log file.
 *
 * Every user may use the mount, as on a local disk: allow_other, with the
 * kernel checking permissions (default_permissions); -o no-allow-other
 * keeps it to the mounter (cf_decide_access). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../client/volwatch.h"
#include "../lib/log.h"
#include "../lib/memtrim.h"
#include "bridge.h"

#define FETCH_TIMEOUT_MS 10000
#define MAX_IO (1u << 20)
/* Freed memory goes back to the system once more than 32 MiB, and more
 * than is in use, is free; looked at every 2 s (../lib/memtrim.c). */
#define TRIM_PERIOD_MS 2000
#define TRIM_SLACK (32u << 20)
/* What fusermount3 reads to let users other than root set allow_other. */
#define FUSE_CONF "/etc/fuse.conf"

void cf_init(void *userdata, struct fuse_conn_info *conn)
{
    unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS |
                    FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_DONT_MASK | FUSE_CAP_READDIRPLUS |
                    FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_POSIX_ACL | FUSE_CAP_ASYNC_DIO;
    conn->want |= want & conn->capable;
    /* Kept off on purpose. WRITEBACK_CACHE: two mounts would stop seeing
     * each other's writes. HANDLE_KILLPRIV: the brick writes as root, which
     * keeps set-id bits, so the kernel must clear them itself. */
    conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_HANDLE_KILLPRIV);
    conn->max_write = MAX_IO;
    conn->max_read = 0;
    if (conn->max_readahead > MAX_IO)
        conn->max_readahead = MAX_IO;
    conn->time_gran = 1;
    log_info("FUSE protocol %u.%u, capabilities 0x%x of 0x%x", conn->proto_major, conn->proto_minor,
             conn->want, conn->capable);
}

/* The handlers that may meet a squashed caller check it first (squash.c). */
static const struct fuse_lowlevel_ops cf_ops = {
    .init = cf_init,
    .lookup = cf_sq_lookup,
    .forget = cf_forget,
    .forget_multi = cf_forget_multi,
    .getattr = cf_getattr,
    .setattr = cf_sq_setattr,
    .readlink = cf_readlink,
    .mknod = cf_sq_mknod,
    .mkdir = cf_sq_mkdir,
    .unlink = cf_sq_unlink,
    .rmdir = cf_sq_rmdir,
    .symlink = cf_sq_symlink,
    .rename = cf_sq_rename,
    .link = cf_sq_link,
    .open = cf_sq_open,
    .read = cf_read,
    .write = cf_write,
    .flush = cf_flush,
    .release = cf_release,
    .fsync = cf_fsync,
    .opendir = cf_sq_opendir,
    .readdir = cf_readdir,
    .releasedir = cf_releasedir,
    .fsyncdir = cf_fsyncdir,
    .statfs = cf_statfs,
    .setxattr = cf_sq_setxattr,
    .getxattr = cf_getxattr,
    .listxattr = cf_listxattr,
    .removexattr = cf_sq_removexattr,
    .create = cf_sq_create,
    .getlk = cf_getlk,
    .setlk = cf_setlk,
    .flock = cf_flock,
    .fallocate = cf_fallocate,
    .readdirplus = cf_readdirplus,
    .lseek = cf_lseek,
};

/* /var/log/cairn/<mountpoint with '/' as '-'>.log, as GlusterFS names it. */
static void default_log_path(const struct cf_config *cfg, char *out, size_t len)
{
    char name[PATH_MAX - 32];
    const char *m = cfg->mountpoint[1] ? cfg->mountpoint + 1 : "root";
    size_t i = 0;
    for (; m[i] && i + 1 < sizeof(name); i++)
        name[i] = m[i] == '/' ? '-' : m[i];
    name[i] = 0;
    snprintf(out, len, "/var/log/cairn/%s.log", name);
}

static int open_log(const struct cf_config *cfg)
{
    char path[PATH_MAX + 32];
    if (cfg->log_file[0]) {
        snprintf(path, sizeof(path), "%s", cfg->log_file);
    } else if (cfg->foreground) {
        return 0; /* stderr */
    } else {
        default_log_path(cfg, path, sizeof(path));
        mkdir("/var/log/cairn", 0755);
    }
    int rc = log_open(path);
    if (rc < 0)
        fprintf(stderr, "cairn-fuse: cannot open log file %s: %s\n", path, strerror(-rc));
    return rc;
}

static double pick_timeout(double set, const struct cl_volinfo *v, const char *opt)
{
    return set >= 0 ? set : (double)opt_int(&v->opts, opt);
}

/* Logs each line of lines (options.c's notes on mount options). */
static void log_notes(const char *lines, enum log_level level)
{
    for (const char *p = lines; *p;) {
        size_t n = strcspn(p, "\n");
        log_msg(level, "%.*s", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static void warn_mounter_only(void)
{
    log_warn("only uid %u can use this mount: a user other than root may let other users in "
             "only with 'user_allow_other' in %s (-o no-allow-other says this is meant)",
             (unsigned)getuid(), FUSE_CONF);
}

/* The mount options attribute-timeout= / entry-timeout= fix the kernel's
 * cache times of this mount, leases or not: the mounter's choice, which the
 * volume options cannot make for every client (docs/consistency.md). */
static void warn_fixed_timeouts(const struct cf_config *cfg)
{
    if (cfg->attr_timeout > 0)
        log_warn("attribute-timeout=%g: the kernel keeps attributes %g s even without a lease: "
                 "other clients' changes may go unseen on this mount that long",
                 cfg->attr_timeout, cfg->attr_timeout);
    if (cfg->entry_timeout > 0)
        log_warn("entry-timeout=%g: the kernel keeps names %g s even without a lease: other "
                 "clients' creates and removals may go unseen on this mount that long",
                 cfg->entry_timeout, cfg->entry_timeout);
}

int main(int argc, char **argv)
{
    struct cf_config cfg;
    struct cl_volinfo vol;
    struct cf cf = {0};
    cl_opstats_init(&cf.stats);
    struct fuse_session *se = NULL;
    char err[512];
    int rc, status = 1;

    cf_statedump_block(); /* before any thread: all inherit it */
    log_init("cairn-fuse", LOG_INFO);
    if (cf_parse_args(argc, argv, &cfg) < 0 || cf_decide_access(&cfg, FUSE_CONF) < 0)
        return 1;
    if (cfg.mounter_only)
        warn_mounter_only(); /* on the terminal; the log gets it too, below */
    struct net_addr servers[1 + CF_MAX_BACKUPS];
    int n_servers = 1 + cfg.n_backup, used = 0;
    cl_tls_set_files(cfg.ssl_key, cfg.ssl_cert, cfg.ssl_ca);
    cl_tls_set_mgmt(cfg.mgmt_ssl);
    servers[0] = cfg.server;
    memcpy(servers + 1, cfg.backup, sizeof(cfg.backup[0]) * (size_t)cfg.n_backup);
    rc = cl_volume_fetch_any(servers, n_servers, cfg.volume, cfg.subdir, FETCH_TIMEOUT_MS, &vol,
                             &used, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "cairn-fuse: %s\n", err);
        return 1;
    }
    /* A directory the bricks would refuse fails the mount now, with their
     * reason, not after daemonizing (cl_subdir_check). */
    rc = cl_subdir_check(&vol, cfg.subdir, FETCH_TIMEOUT_MS, err, sizeof(err));
    if (rc < 0) {
        if (strcmp(cfg.subdir, "/"))
            fprintf(stderr, "cairn-fuse: cannot mount directory %s of volume %s: %s (%s)\n",
                    cfg.subdir, vol.name, err, strerror(-rc));
        else
            fprintf(stderr, "cairn-fuse: cannot mount volume %s: %s (%s)\n", vol.name, err,
                    strerror(-rc));
        cl_volinfo_free(&vol);
        return 1;
    }
    int level = cfg.log_level >= 0
                    ? cfg.log_level
                    : log_parse_level(opt_value(&vol.opts, "diagnostics.client-log-level"));
    log_set_level(level >= 0 ? (enum log_level)level : LOG_INFO);
    cf.attr_timeout = pick_timeout(cfg.attr_timeout, &vol, "client.attribute-timeout");
    cf.attr_fixed = cfg.attr_timeout >= 0;
    cf.selinux = cfg.selinux;
    cf.dio_mode = cfg.dio_mode;
    cf.entry_fixed = cfg.entry_timeout >= 0;
    cf.entry_timeout = pick_timeout(cfg.entry_timeout, &vol, "client.entry-timeout");
    if (!(cf.it = cl_itable_new())) {
        fprintf(stderr, "cairn-fuse: out of memory\n");
        goto out_vol;
    }

    char opts[sizeof(cfg.fuse_opts) + sizeof(cfg.fsname) + 64];
    snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=cairn%s%s", cfg.fsname,
             cfg.fuse_opts[0] ? "," : "", cfg.fuse_opts);
    char *fargv[] = {argv[0], "-o", opts, cfg.debug ? "-d" : NULL, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(cfg.debug ? 4 : 3, fargv);
    se = fuse_session_new(&args, &cf_ops, sizeof(cf_ops), &cf);
    if (!se) {
        fprintf(stderr, "cairn-fuse: bad FUSE options: %s\n", opts);
        fuse_opt_free_args(&args);
        goto out_it;
    }
    if (fuse_set_signal_handlers(se) != 0)
        goto out_se;
    log_reopen_on_sighup(); /* not the end of the session: logrotate sends it */
    if (cfg.io_uring)
        cf_uring_enable_kernel(); /* before the mount: the kernel offers the ring at INIT */
    if (fuse_session_mount(se, cfg.mountpoint) != 0) {
        fprintf(stderr, "cairn-fuse: mounting %s on %s failed\n", cfg.fsname, cfg.mountpoint);
        goto out_sig;
    }
    if (open_log(&cfg) < 0)
        goto out_unmount;
    char from[NET_HOST_MAX + 16];
    net_format_addr(&servers[used], from, sizeof(from));
    log_info("mounting %s (volume %s%s%s, %s:%d%s, layout from %s) on %s", cfg.fsname, vol.name,
             strcmp(cfg.subdir, "/") ? ", directory " : "",
             strcmp(cfg.subdir, "/") ? cfg.subdir : "", vol.bricks[0].addr.host,
             vol.bricks[0].addr.port, vol.bricks[0].path, from, cfg.mountpoint);
    if (cfg.mounter_only && (cfg.log_file[0] || !cfg.foreground))
        warn_mounter_only();
    warn_fixed_timeouts(&cfg);
    log_notes(cfg.notes, LOG_INFO);
    log_notes(cfg.warnings, LOG_WARN);
    if (fuse_daemonize(cfg.foreground) != 0)
        goto out_unmount;

    struct cl_stack_params sp = {.ping_timeout_ms = cfg.ping_timeout_ms, .subdir = cfg.subdir};
    if (cf_wb_init(&cf) < 0)
        log_error("out of memory: files are created on the bricks synchronously");
    cf_wb_configure(&cf, opt_bool(&vol.opts, "client.write-back"),
                    (size_t)opt_int(&vol.opts, "client.write-back-size"),
                    (size_t)opt_int(&vol.opts, "client.write-back-files"));
    cf_squash_configure(&cf, &vol.opts);
    if (cf_wbh_init(&cf) < 0)
        log_error("out of memory: every write waits for the bricks");
    cf_wbh_configure(&cf, &vol.opts);
    if (cf_rc_init(&cf) < 0)
        log_error("out of memory: no read cache");
    cf_rc_configure(&cf, opt_bool(&vol.opts, "performance.read-ahead"),
                    (int)opt_int(&vol.opts, "performance.read-ahead-page-count"),
                    (size_t)opt_int(&vol.opts, "performance.cache-size"));
    if (cf_known_init(&cf) < 0)
        log_error("out of memory: lookups in new directories will ask the bricks");
    if (cf_leases_start(&cf, se, &sp) < 0)
        log_error("cannot start the lease recall thread: caching follows the timeouts only");
    cf_lease_configure(&cf, opt_bool(&vol.opts, "client.leases"),
                       (double)opt_int(&vol.opts, "client.lease-cache-timeout"));
    rc = cl_stack_build(&vol, &sp, &cf.stack, err, sizeof(err));
    if (rc < 0) {
        log_error("%s", err);
        cf_leases_stop(&cf);
        cf_leases_free(&cf);
        cf_known_free(&cf);
        cf_wb_free(&cf);
        cf_wbh_free(&cf);
        goto out_unmount;
    }
    if (cf_lsa_init(&cf) < 0)
        log_error("cannot start the listing-ahead threads: every listing waits for the bricks");
    if (cf_statedump_start(&cf, cfg.mountpoint, vol.name,
                           opt_value(&vol.opts, "server.statedump-path")) < 0)
        log_error("cannot start the statedump thread: SIGUSR1 writes no dump");
    if (cf_live_start(&cf, &cfg, servers, n_servers, used, &vol) < 0)
        log_error("cannot keep the management connection: volume changes will not reach this "
                  "mount until it is remounted");
    if (cf_ps_start(&cf, se) < 0)
        log_error("cannot start the page-cache fill thread: read-ahead stays in this process");
    rc = memtrim_start(&cf.trim, TRIM_PERIOD_MS, TRIM_SLACK);
    if (rc == -ENOTSUP)
        log_info("sanitizer build: freed memory is not trimmed");
    else if (rc < 0)
        log_error("cannot start the memory trim thread: freed memory stays resident");
    if (cfg.io_uring && cf_uring_attach(&cf, se) < 0)
        log_error("cannot attach io_uring to the session: requests use /dev/fuse");
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    if (!lc)
        goto out_stack;
    fuse_loop_cfg_set_max_threads(lc, 16);
    fuse_loop_cfg_set_clone_fd(lc, 1);
    rc = fuse_session_loop_mt(se, lc);
    fuse_loop_cfg_destroy(lc);
    status = rc == 0 ? 0 : 1;
    log_info("unmounting %s", cfg.mountpoint);
out_stack:
    cf_statedump_stop(&cf);
    memtrim_stop(cf.trim);
    cf_uring_stop(&cf);
    cf_ps_stop(&cf);
    cf_lsa_free(&cf);
    cf_live_stop(&cf);
    cf_wb_settle_all(&cf);
    cf_wbh_settle_all(&cf);
    cf_leases_stop(&cf);
    cf_ps_free(&cf);
    cl_stack_destroy(cf.stack);
    cf_wb_free(&cf);
    cf_wbh_free(&cf);
    cf_leases_free(&cf);
    cf_known_free(&cf);
    cf_rc_free(&cf);
    cf_live_free(&cf);
out_unmount:
    fuse_session_unmount(se);
out_sig:
    fuse_remove_signal_handlers(se);
out_se:
    fuse_session_destroy(se);
    fuse_opt_free_args(&args); /* libfuse may have copied them */
out_it:
    cl_itable_free(cf.it);
out_vol:
    cl_volinfo_free(&vol);
    return status;
}
