/* Self-heal daemons: one cairn-shd process per started replicated volume
 * with a brick on this server (cluster.self-heal-daemon on), supervised like
 * the brick processes: restarted with backoff when it dies, stopped when the
 * volume stops, is deleted or turns the option off, and when cairnd exits.
 *
 * The table lives here, keyed by volume id, so that the volume structures
 * the pool replaces on every state change need not carry it. Everything runs
 * under m->lock (the supervisor thread calls mgmt_shd_supervise). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "mgmt.h"
#include "shd.h"

#define SHD_BACKOFF_MIN_MS 1000
#define SHD_BACKOFF_MAX_MS 30000
#define SHD_STABLE_MS 60000
#define SHD_MAX 64

struct shd {
    char vol_id[GFID_STRLEN];
    char vol_name[MGMT_VOLNAME_MAX + 1];
    pid_t pid;
    uint64_t started_ms, retry_ms;
    unsigned backoff_ms, restarts;
};

static struct shd shds[SHD_MAX];

void mgmt_shd_stats_path(const struct mgmt *m, const char *volname, char *out, size_t len)
{
    if (snprintf(out, len, "%s/run/shd-%s.stats", m->workdir, volname) >= (int)len && len)
        out[0] = 0;
}

static int wanted(const struct mgmt_vol *v)
{
    /* replicated and dispersed volumes (whose daemon rebuilds fragments) */
    if (v->status != MGMT_VOL_STARTED || v->replica < 2 ||
        !opt_bool(&v->opts, "cluster.self-heal-daemon"))
        return 0;
    for (int i = 0; i < v->n_bricks; i++)
        if (v->bricks[i].local)
            return 1;
    return 0;
}

static void shd_kill(struct shd *s)
{
    if (!s->pid)
        return;
    int status;
    kill(s->pid, SIGTERM);
    uint64_t end = net_now_ms() + MGMT_STOP_TIMEOUT_MS;
    int done = 0;
    while (net_now_ms() < end) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            done = 1;
            break;
        }
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (!done) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
    }
    log_info("stopped the self-heal daemon of volume %s (pid %d)", s->vol_name, (int)s->pid);
    s->pid = 0;
}

static int shd_spawn(struct mgmt *m, struct mgmt_vol *v, struct shd *s)
{
    char exe[PATH_MAX], mgmt_addr[NET_HOST_MAX + 8], logfile[PATH_MAX + 128], stats[PATH_MAX + 128],
        level[16];
    snprintf(exe, sizeof(exe), "%s", m->brickd);
    char *slash = strrchr(exe, '/');
    snprintf(slash ? slash + 1 : exe, sizeof(exe) - (size_t)(slash ? slash + 1 - exe : 0),
             "cairn-shd");
    if (access(exe, X_OK) < 0) {
        log_error("cannot start the self-heal daemon of volume %s: %s is missing", v->name, exe);
        return -ENOENT;
    }
    struct net_addr a = m->listen;
    if (strcmp(a.host, "0.0.0.0") == 0 || strcmp(a.host, "::") == 0)
        snprintf(a.host, sizeof(a.host), "127.0.0.1");
    net_format_addr(&a, mgmt_addr, sizeof(mgmt_addr));
    if (snprintf(logfile, sizeof(logfile), "%s/logs/shd-%s.log", m->workdir, v->name) >=
        (int)sizeof(logfile))
        return -ENAMETOOLONG;
    mgmt_shd_stats_path(m, v->name, stats, sizeof(stats));
    snprintf(level, sizeof(level), "%s", opt_value(&v->opts, "diagnostics.brick-log-level"));
    char *argv[24 + 2 * 64];
    int k = 0;
    argv[k++] = exe;
    argv[k++] = "--volume";
    argv[k++] = v->name;
    argv[k++] = "--mgmt";
    argv[k++] = mgmt_addr;
    argv[k++] = "--log-file";
    argv[k++] = logfile;
    argv[k++] = "--log-level";
    argv[k++] = level;
    argv[k++] = "--stats-file";
    argv[k++] = stats;
    /* this server's TLS files, for a volume with client.ssl on */
    const char *tls[][2] = {
        {"--ssl-key", m->ssl_key}, {"--ssl-cert", m->ssl_cert}, {"--ssl-ca", m->ssl_ca}};
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++)
        if (*tls[i][1]) {
            argv[k++] = (char *)tls[i][0];
            argv[k++] = (char *)tls[i][1];
        }
    argv[k++] = "--mgmt-ssl"; /* this cairnd's choice, not the default state directory's */
    argv[k++] = m->mgmt_tls ? "on" : "off";
    for (int i = 0; i < v->n_bricks && k < (int)(sizeof(argv) / sizeof(argv[0])) - 3; i++)
        if (v->bricks[i].local) {
            argv[k++] = "--brick-id";
            argv[k++] = v->bricks[i].id;
        }
    argv[k] = NULL;
    int logfd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        /* A cairnd killed with -9 takes its shd along: the next cairnd
         * starts its own. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        setsid();
        if (nullfd >= 0)
            dup2(nullfd, 0);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int err = errno;
    if (logfd >= 0)
        close(logfd);
    if (nullfd >= 0)
        close(nullfd);
    if (pid < 0) {
        log_error("cannot fork the self-heal daemon of volume %s: %s", v->name, strerror(err));
        return -err;
    }
    s->pid = pid;
    s->started_ms = net_now_ms();
    log_info("started the self-heal daemon of volume %s: pid %d", v->name, (int)pid);
    return 0;
}

static struct shd *find(const char *vol_id)
{
    for (int i = 0; i < SHD_MAX; i++)
        if (shds[i].vol_id[0] && strcmp(shds[i].vol_id, vol_id) == 0)
            return &shds[i];
    return NULL;
}

void mgmt_shd_supervise(struct mgmt *m)
{
    uint64_t now = net_now_ms();
    /* Daemons whose volume went away, stopped or no longer wants one. */
    for (int i = 0; i < SHD_MAX; i++) {
        struct shd *s = &shds[i];
        if (!s->vol_id[0])
            continue;
        struct mgmt_vol *v = NULL;
        for (struct mgmt_vol *x = m->vols; x && !v; x = x->next)
            if (strcmp(x->id, s->vol_id) == 0)
                v = x;
        int status;
        if (s->pid && waitpid(s->pid, &status, WNOHANG) == s->pid) {
            uint64_t ran = now - s->started_ms;
            if (ran >= SHD_STABLE_MS || s->backoff_ms == 0)
                s->backoff_ms = SHD_BACKOFF_MIN_MS;
            else if (s->backoff_ms < SHD_BACKOFF_MAX_MS)
                s->backoff_ms *= 2;
            s->retry_ms = now + s->backoff_ms;
            log_warn("the self-heal daemon of volume %s (pid %d) died with %s %d; restarting it "
                     "in %u ms",
                     s->vol_name, (int)s->pid, WIFSIGNALED(status) ? "signal" : "status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), s->backoff_ms);
            s->pid = 0;
        }
        if (!v || !wanted(v) || m->stopping) {
            shd_kill(s);
            memset(s, 0, sizeof(*s));
        }
    }
    if (m->stopping)
        return;
    for (struct mgmt_vol *v = m->vols; v; v = v->next) {
        if (!wanted(v))
            continue;
        struct shd *s = find(v->id);
        if (!s) {
            for (int i = 0; i < SHD_MAX && !s; i++)
                if (!shds[i].vol_id[0])
                    s = &shds[i];
            if (!s)
                continue;
            snprintf(s->vol_id, sizeof(s->vol_id), "%s", v->id);
        }
        snprintf(s->vol_name, sizeof(s->vol_name), "%s", v->name);
        if (!s->pid && now >= s->retry_ms) {
            s->restarts++;
            if (shd_spawn(m, v, s) < 0) {
                s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : SHD_BACKOFF_MIN_MS;
                if (s->backoff_ms > SHD_BACKOFF_MAX_MS)
                    s->backoff_ms = SHD_BACKOFF_MAX_MS;
                s->retry_ms = now + s->backoff_ms;
            }
        }
    }
}

void mgmt_shd_stop_all(struct mgmt *m)
{
    for (int i = 0; i < SHD_MAX; i++)
        if (shds[i].vol_id[0]) {
            shd_kill(&shds[i]);
            memset(&shds[i], 0, sizeof(shds[i]));
        }
}

void mgmt_shd_signal_all(int sig)
{
    for (int i = 0; i < SHD_MAX; i++)
        if (shds[i].pid)
            kill(shds[i].pid, sig);
}

pid_t mgmt_shd_pid(const char *vol_id)
{
    struct shd *s = find(vol_id);
    return s ? s->pid : 0;
}
