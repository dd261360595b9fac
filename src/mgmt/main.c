/* cairnd: the management daemon. Keeps the volume store, runs the brick
 * processes of started volumes, and answers the CLI and clients. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "../client/client.h"
#include "../lib/log.h"
#include "../rpc/tls.h"
#include "daemon.h"
#include "pool.h"
#include "shd.h"

static struct mgmt the_mgmt = {.lock = PTHREAD_MUTEX_INITIALIZER,
                               .cond = PTHREAD_COND_INITIALIZER,
                               .cmd_lock = PTHREAD_MUTEX_INITIALIZER};

static void stop_cb(int sig)
{
    the_mgmt.stopping = 1;
}

/* logrotate's signal: cairnd's own file at once, its children's through the
 * supervisor (bricks.c). */
static void hup_cb(int sig)
{
    (void)log_reopen();
    the_mgmt.reopen_logs = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cairnd [--foreground] [--listen ADDR[:PORT]] [--workdir DIR]\n"
            "              [--log-file FILE] [--log-level LEVEL] [--pid-file FILE]\n"
            "              [--brick-ports MIN-MAX] [--raft-port PORT]\n"
            "              [--metrics ADDR[:PORT]] [--metrics-allow PATTERNS]\n"
            "              [--ssl-key FILE] [--ssl-cert FILE] [--ssl-ca FILE]\n"
            "       cairnd --help | --version\n"
            "Defaults: --listen 0.0.0.0:%d, --workdir /var/lib/cairnd, brick ports %d-%d,\n"
            "raft port: the listen port + 1000 (used once the server is in a pool).\n"
            "--metrics serves Prometheus metrics at http://ADDR:PORT/metrics (port %d by\n"
            "default; off without it) to this host, and to the addresses --metrics-allow\n"
            "lists (auth.allow's patterns, e.g. 10.0.0.*,192.168.1.0/24).\n"
            "Without --foreground cairnd daemonizes and logs to DIR/cairnd.log.\n"
            "Under systemd (Type=notify) it reports READY=1 once it listens and the\n"
            "bricks of started volumes answer. SIGHUP reopens the log files of cairnd,\n"
            "its bricks and self-heal daemons; SIGTERM stops them all.\n"
            "--ssl-key, --ssl-cert, --ssl-ca: this server's TLS key, certificate and CA\n"
            "certificates (default /etc/ssl/cairn.key, .pem, .ca), used by its bricks of\n"
            "volumes with server.ssl on and its connections to them (docs/security.md).\n",
            CAIRN_MGMT_PORT, CAIRN_BRICK_PORT_MIN, CAIRN_BRICK_PORT_MAX, CAIRN_METRICS_PORT);
}

static int find_brickd(struct mgmt *m)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n < 0)
        return -errno;
    exe[n] = 0;
    snprintf(m->brickd, sizeof(m->brickd), "%s/cairn-brickd", dirname(exe));
    return 0;
}

static int make_dirs(const char *workdir)
{
    static const char *const sub[] = {"", "/vols", "/logs", "/logs/bricks", "/run", "/run/bricks"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        char p[PATH_MAX + 16];
        if (snprintf(p, sizeof(p), "%s%s", workdir, sub[i]) >= (int)sizeof(p)) {
            fprintf(stderr, "cairnd: workdir path too long\n");
            return -ENAMETOOLONG;
        }
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "cairnd: cannot create %s: %s\n", p, strerror(errno));
            return -errno;
        }
    }
    return 0;
}

static int parse_ports(const char *s, struct mgmt *m)
{
    unsigned lo, hi;
    char extra;
    if (sscanf(s, "%u-%u%c", &lo, &hi, &extra) != 2 || lo == 0 || lo > hi || hi > 65535)
        return -EINVAL;
    m->port_min = (uint16_t)lo;
    m->port_max = (uint16_t)hi;
    return 0;
}

int main(int argc, char **argv)
{
    struct mgmt *m = &the_mgmt;
    const char *listen = "0.0.0.0", *workdir = "/var/lib/cairnd", *log_file = NULL;
    const char *pid_file = NULL, *metrics = NULL, *metrics_allow = NULL;
    int foreground = 0, level = LOG_INFO, ready_fd = -1;
    char err[PATH_MAX + 256], pidpath[PATH_MAX + 16];
    static const struct option longopts[] = {
        {"foreground", no_argument, NULL, 'f'},
        {"listen", required_argument, NULL, 'l'},
        {"workdir", required_argument, NULL, 'w'},
        {"log-file", required_argument, NULL, 'L'},
        {"log-level", required_argument, NULL, 'v'},
        {"pid-file", required_argument, NULL, 'p'},
        {"brick-ports", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"raft-port", required_argument, NULL, 'r'},
        {"clock-skew-test", required_argument, NULL, 'k'},
        {"metrics", required_argument, NULL, 'M'},
        {"metrics-allow", required_argument, NULL, 'A'},
        {"ssl-key", required_argument, NULL, 'K'},
        {"ssl-cert", required_argument, NULL, 'C'},
        {"ssl-ca", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    m->port_min = CAIRN_BRICK_PORT_MIN;
    m->port_max = CAIRN_BRICK_PORT_MAX;
    int c;
    while ((c = getopt_long(argc, argv, "fl:w:L:v:p:b:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            foreground = 1;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'w':
            workdir = optarg;
            break;
        case 'L':
            log_file = optarg;
            break;
        case 'p':
            pid_file = optarg;
            break;
        case 'v':
            if ((level = log_parse_level(optarg)) < 0) {
                fprintf(stderr, "cairnd: unknown log level %s\n", optarg);
                return 1;
            }
            break;
        case 'b':
            if (parse_ports(optarg, m) < 0) {
                fprintf(stderr, "cairnd: --brick-ports wants MIN-MAX, got %s\n", optarg);
                return 1;
            }
            break;
        case 'r': {
            char *end;
            long port = strtol(optarg, &end, 10);
            if (*end || port <= 0 || port > 65535) {
                fprintf(stderr, "cairnd: --raft-port wants a port number, got %s\n", optarg);
                return 1;
            }
            m->raft_port = (uint16_t)port;
            break;
        }
        case 'k': /* tests: pretend this server's clock is off by that many seconds */
            m->clock_skew_test = strtoll(optarg, NULL, 10);
            break;
        case 'M':
            metrics = optarg;
            break;
        case 'A':
            metrics_allow = optarg;
            break;
        case 'K':
        case 'C':
        case 'T': {
            char *slot = c == 'K' ? m->ssl_key : c == 'C' ? m->ssl_cert : m->ssl_ca;
            if (!*optarg || strlen(optarg) >= PATH_MAX) {
                fprintf(stderr, "cairnd: bad TLS file name %s\n", optarg);
                return 1;
            }
            /* the bricks start elsewhere (the state directory): absolute */
            if (*optarg != '/' && realpath(optarg, slot))
                break;
            snprintf(slot, PATH_MAX, "%s", optarg);
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("cairnd %s\n", MGMT_VERSION);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 1;
    }
    log_init("cairnd", (enum log_level)level);
    cl_tls_set_files(m->ssl_key, m->ssl_cert, m->ssl_ca);
    if (net_parse_addr(listen, CAIRN_MGMT_PORT, &m->listen) < 0) {
        fprintf(stderr, "cairnd: bad listen address %s\n", listen);
        return 1;
    }
    struct net_addr maddr;
    if (metrics && net_parse_addr(metrics, CAIRN_METRICS_PORT, &maddr) < 0) {
        fprintf(stderr, "cairnd: bad metrics address %s\n", metrics);
        return 1;
    }
    char norm[1024];
    /* auth.reject's check: a list of address patterns (empty allowed) */
    if (metrics_allow &&
        (!*metrics_allow || strchr(metrics_allow, '/') == metrics_allow ||
         opt_validate("auth.reject", metrics_allow, norm, sizeof(norm), err, sizeof(err)) < 0)) {
        fprintf(stderr, "cairnd: --metrics-allow wants address patterns, got %s\n", metrics_allow);
        return 1;
    }
    if (!realpath(workdir, m->workdir)) {
        if (mkdir(workdir, 0755) < 0 || !realpath(workdir, m->workdir)) {
            fprintf(stderr, "cairnd: cannot create workdir %s: %s\n", workdir, strerror(errno));
            return 1;
        }
    }
    if (make_dirs(m->workdir) < 0)
        return 1;
    int lockfd = mgmt_lock_workdir(m->workdir, err, sizeof(err));
    if (lockfd < 0) {
        fprintf(stderr, "cairnd: %s\n", err);
        return 1;
    }
    if (find_brickd(m) < 0) {
        fprintf(stderr, "cairnd: cannot find my own executable\n");
        return 1;
    }
    /* Management TLS: decided by this server's state directory alone. */
    char secure[sizeof(m->workdir) + 32];
    if (snprintf(secure, sizeof(secure), "%s/%s", m->workdir, MGMT_SECURE_ACCESS) >=
        (int)sizeof(secure)) {
        fprintf(stderr, "cairnd: workdir path too long\n");
        return 1;
    }
    cl_tls_set_mgmt(access(secure, F_OK) == 0);
    if (cl_tls_mgmt_on()) {
        struct rpc_tls_conf conf = {.key = m->ssl_key, .cert = m->ssl_cert, .ca = m->ssl_ca};
        struct rpc_tls_ctx *probe = NULL;
        if (!(m->mgmt_tls = rpc_tls_ctx_new(&conf, 1, err, sizeof(err))) ||
            cl_tls_mgmt_ctx(&probe, err, sizeof(err)) < 0) {
            fprintf(stderr, "cairnd: %s exists but TLS cannot start: %.400s\n", secure, err);
            return 1;
        }
        rpc_tls_ctx_put(probe);
    }
    /* The store first: a damaged one is refused before anyone can
     * connect (a client probing the port must not find it open). */
    if (mgmt_pool_load(m, err, sizeof(err)) < 0 || mgmt_store_load(m, err, sizeof(err)) < 0) {
        fprintf(stderr, "cairnd: %s\n", err);
        return 1;
    }
    int lfd = net_listen(&m->listen, 128);
    if (lfd < 0) {
        fprintf(stderr, "cairnd: cannot listen on %s:%u: %s\n", m->listen.host, m->listen.port,
                strerror(-lfd));
        return 1;
    }
    int mfd = -1;
    if (metrics && (mfd = net_listen(&maddr, 16)) < 0) {
        fprintf(stderr, "cairnd: cannot listen for metrics on %s:%u: %s\n", maddr.host, maddr.port,
                strerror(-mfd));
        return 1;
    }
    if (!foreground) {
        if (mgmt_daemonize(&ready_fd) < 0) {
            fprintf(stderr, "cairnd: cannot daemonize: %s\n", strerror(errno));
            return 1;
        }
        if (!log_file) {
            if (snprintf(err, sizeof(err), "%s/cairnd.log", m->workdir) < (int)sizeof(err))
                log_file = err;
        }
    }
    if (log_file && log_open(log_file) < 0) {
        fprintf(stderr, "cairnd: cannot open log file %s: %s\n", log_file, strerror(errno));
        mgmt_report_ready(&ready_fd, 0);
        return 1;
    }
    if (!pid_file) {
        if (snprintf(pidpath, sizeof(pidpath), "%s/cairnd.pid", m->workdir) < (int)sizeof(pidpath))
            pid_file = pidpath;
    }
    if (pid_file && mgmt_write_pid_file(pid_file) < 0)
        log_warn("cannot write pid file %s: %s", pid_file, strerror(errno));

    struct sigaction sa = {.sa_handler = stop_cb};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction hup = {.sa_handler = hup_cb, .sa_flags = SA_RESTART};
    sigemptyset(&hup.sa_mask);
    sigaction(SIGHUP, &hup, NULL);

    log_info("cairnd %s starting: listening on %s:%u, workdir %s%s", MGMT_VERSION, m->listen.host,
             m->listen.port, m->workdir, m->mgmt_tls ? ", management TLS (secure-access)" : "");
    pthread_mutex_lock(&m->lock);
    m->server_quorum = -1; /* bricks under server quorum wait for the first count */
    mgmt_bricks_kill_stale(m);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        if (v->status == MGMT_VOL_STARTED)
            for (int i = 0; i < v->n_bricks; i++)
                if (v->bricks[i].local && mgmt_brick_spawn(m, v, &v->bricks[i]) < 0)
                    log_warn("brick %s:%s of volume %s did not start; retrying later",
                             v->bricks[i].host, v->bricks[i].path, v->name);
    pthread_mutex_unlock(&m->lock);
    if (mgmt_pool_exists(m)) {
        /* A member of a pool: its last known state is loaded; Raft brings the
         * rest (entries committed while it was away). */
        if (mgmt_pool_start(m, 0, NULL, err, sizeof(err)) < 0) {
            log_error("cannot rejoin the pool: %s", err);
            mgmt_report_ready(&ready_fd, 0);
            return 1;
        }
    }
    if (mfd >= 0 && mgmt_metrics_start(m, mfd, metrics_allow) < 0) {
        log_error("cannot start the metrics endpoint");
        mgmt_report_ready(&ready_fd, 0);
        return 1;
    }
    if (mgmt_supervisor_start(m) < 0 || mgmt_probe_start(m) < 0 || mgmt_quorum_start(m) < 0 ||
        mgmt_quota_start(m) < 0) {
        log_error("cannot start the brick supervisor");
        mgmt_report_ready(&ready_fd, 0);
        return 1;
    }
    mgmt_report_ready(&ready_fd, 1);
    /* systemd's readiness (NOTIFY_SOCKET; nothing without it): the port
     * listens and the bricks of started volumes answer, so units ordered
     * after cairnd.service (mounts of a local volume) find them. */
    sd_notifyf(0, "READY=1\nSTATUS=listening on %s:%u", m->listen.host, m->listen.port);

    int rc = mgmt_server_run(m, lfd);
    if (rc < 0)
        log_error("accept loop failed: %s", strerror(-rc));
    /* Stopping cairnd stops the bricks it runs: nothing is left without a
     * supervisor. */
    log_info("cairnd stopping");
    sd_notify(0, "STOPPING=1\nSTATUS=stopping its bricks");
    mgmt_pool_stop(m);
    pthread_mutex_lock(&m->lock);
    m->stopping = 1;
    mgmt_shd_stop_all(m);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++)
            mgmt_brick_kill(m, &v->bricks[i]);
    if (pid_file)
        unlink(pid_file);
    log_info("cairnd stopped");
    return rc < 0 ? 1 : 0;
}
