/* Brick processes: spawning cairn-brickd, port allocation, stopping, and the
 * supervisor that restarts a brick process that died. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../client/client.h"
#include "../rpc/conn.h"
#include "../rpc/tls.h"
#include "mgmt.h"
#include "shd.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define STABLE_MS 60000     /* a brick up this long restarts with the minimum delay */
#define LISTEN_WAIT_MS 3000 /* how long volume start waits for a brick to listen */

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void mgmt_brick_log_path(const struct mgmt *m, const struct mgmt_brick *b, char *out, size_t len)
{
    /* A file name is at most NAME_MAX bytes: a deeper brick keeps the end
     * of its path, after its id (which tells two such bricks apart). */
    enum { KEEP = NAME_MAX - 4 - GFID_STRLEN }; /* ".log", the id and its '-' */
    char name[PATH_MAX];
    const char *p = b->path;
    size_t n = 0;
    while (*p == '/')
        p++;
    for (; *p && n + 1 < sizeof(name); p++)
        name[n++] = *p == '/' ? '-' : *p;
    name[n] = 0;
    if (n + 4 > NAME_MAX)
        snprintf(out, len, "%s/logs/bricks/%s-%s.log", m->workdir, b->id, name + n - KEEP);
    else
        snprintf(out, len, "%s/logs/bricks/%s.log", m->workdir, n ? name : "root");
}

static void pid_path(const struct mgmt *m, const struct mgmt_brick *b, char *out, size_t len)
{
    snprintf(out, len, "%s/run/bricks/%s.pid", m->workdir, b->id);
}

static int port_taken(struct mgmt *m, const struct mgmt_brick *self, uint16_t port,
                      const uint16_t *avoid, int n_avoid)
{
    for (int i = 0; i < n_avoid; i++)
        if (avoid[i] == port)
            return 1;
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++)
            if (&v->bricks[i] != self && v->bricks[i].pid && v->bricks[i].port == port)
                return 1;
    struct net_addr a = m->listen;
    a.port = port;
    int fd = net_listen(&a, 1);
    if (fd < 0)
        return 1;
    close(fd);
    return 0;
}

/* Keeps the brick's previous port when it is free, so clients that know it
 * reconnect without asking cairnd again. */
int mgmt_brick_alloc_port(struct mgmt *m, struct mgmt_brick *b, const uint16_t *avoid, int n_avoid)
{
    if (b->port >= m->port_min && b->port <= m->port_max &&
        !port_taken(m, b, b->port, avoid, n_avoid))
        return 0;
    for (unsigned p = m->port_min; p <= m->port_max; p++)
        if (!port_taken(m, b, (uint16_t)p, avoid, n_avoid)) {
            b->port = (uint16_t)p;
            return 0;
        }
    return -EADDRINUSE;
}

static void write_pid_file(const struct mgmt *m, const struct mgmt_brick *b)
{
    char path[PATH_MAX + 64], text[32];
    pid_path(m, b, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_warn("cannot write %s: %s", path, strerror(errno));
        return;
    }
    int n = snprintf(text, sizeof(text), "%d\n", (int)b->pid);
    if (mgmt_write_all(fd, text, (size_t)n) < 0)
        log_warn("cannot write %s", path);
    close(fd);
}

/* Whether the brick answers on its port. */
static int brick_listening(const struct mgmt *m, const struct mgmt_brick *b)
{
    struct net_addr a;
    snprintf(a.host, sizeof(a.host), "%s", b->host);
    a.port = b->port;
    int fd = net_connect(&a, 200);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void reconf_brick(const struct mgmt_vol *v, struct mgmt_brick *b,
                         const struct rpc_buf *body);
struct rpc_tls_ctx *mgmt_brick_tls(const struct mgmt_vol *v, char *why, size_t whylen)
{
    struct rpc_tls_ctx *tls = NULL;
    if (opt_bool(&v->opts, "server.ssl") && cl_tls_ctx(&v->opts, 1, &tls, why, whylen) < 0)
        log_warn("volume %s: %s", v->name, why);
    return tls;
}

static void reconf_body(const struct mgmt_vol *v, struct rpc_buf *body);

static pid_t spawn(struct mgmt *m, struct mgmt_vol *v, struct mgmt_brick *b)
{
    char listen[NET_HOST_MAX + 8], logfile[PATH_MAX + 64], level[16], threads[16];
    struct net_addr la = m->listen;
    la.port = b->port;
    net_format_addr(&la, listen, sizeof(listen));
    mgmt_brick_log_path(m, b, logfile, sizeof(logfile));
    snprintf(level, sizeof(level), "%s", opt_value(&v->opts, "diagnostics.brick-log-level"));
    snprintf(threads, sizeof(threads), "%lld",
             (long long)opt_int(&v->opts, "performance.io-thread-count"));
    char depth[16];
    snprintf(depth, sizeof(depth), "%lld", (long long)opt_int(&v->opts, "ssl.certificate-depth"));
    char *argv[32] = {m->brickd, "--volume",   v->name, "--brick-path",
                      b->path,   "--listen",   listen,  "--brick-id",
                      b->id,     "--log-file", logfile, "--log-level",
                      level,     "--threads",  threads, NULL};
    int argc = 15;
    /* server.ssl: the brick takes TLS only, with this server's files */
    if (opt_bool(&v->opts, "server.ssl")) {
        argv[argc++] = "--ssl";
        argv[argc++] = "--ssl-depth";
        argv[argc++] = depth;
        const char *pairs[][2] = {{"--ssl-key", m->ssl_key},
                                  {"--ssl-cert", m->ssl_cert},
                                  {"--ssl-ca", m->ssl_ca},
                                  {"--ssl-crl", opt_value(&v->opts, "ssl.crl-path")},
                                  {"--ssl-cipher-list", opt_value(&v->opts, "ssl.cipher-list")}};
        for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
            if (*pairs[i][1]) {
                argv[argc++] = (char *)pairs[i][0];
                argv[argc++] = (char *)pairs[i][1];
            }
        argv[argc] = NULL;
    }
    /* The brick's stdout/stderr go to its log too, so a crash message is kept. */
    int logfd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
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
    if (pid < 0)
        return -err;
    return pid;
}

int mgmt_brick_spawn(struct mgmt *m, struct mgmt_vol *v, struct mgmt_brick *b)
{
    if (b->pid)
        return 0;
    /* `volume reset-brick ... start`: down until its commit. */
    if (v->reset_id[0] && strcmp(v->reset_id, b->id) == 0)
        return 0;
    /* Server quorum lost: quorum.c starts it when the quorum is back. */
    if (mgmt_quorum_blocks(m, v)) {
        log_info("brick %s:%s of volume %s waits for server quorum", b->host, b->path, v->name);
        return 0;
    }
    /* The port first: a started volume's layout names a port for every
     * brick, even one whose process cannot run. */
    int rc = mgmt_brick_alloc_port(m, b, NULL, 0);
    if (rc < 0) {
        log_error("no free port in %u-%u for brick %s:%s", m->port_min, m->port_max, b->host,
                  b->path);
        return rc;
    }
    if (access(m->brickd, X_OK) < 0) {
        log_error("cannot start brick %s:%s: %s is missing or not executable", b->host, b->path,
                  m->brickd);
        return -ENOENT;
    }
    pid_t pid = spawn(m, v, b);
    if (pid < 0) {
        log_error("cannot fork brick %s:%s: %s", b->host, b->path, strerror((int)-pid));
        return (int)pid;
    }
    b->pid = pid;
    b->started_ms = net_now_ms();
    write_pid_file(m, b);
    log_info("started brick %s:%s of volume %s: pid %d, port %u", b->host, b->path, v->name,
             (int)pid, b->port);
    /* Wait until it listens, so `volume start` reports a brick that cannot
     * come up, and so clients asking right after find it. */
    uint64_t deadline = net_now_ms() + LISTEN_WAIT_MS;
    while (net_now_ms() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            log_error("brick %s:%s (pid %d) exited at start with %s %d; see its log", b->host,
                      b->path, (int)pid, WIFSIGNALED(status) ? "signal" : "status",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            b->pid = 0;
            b->retry_ms = net_now_ms() + BACKOFF_MIN_MS;
            return -ECHILD;
        }
        if (brick_listening(m, b)) {
            struct rpc_buf body;
            reconf_body(v, &body);
            reconf_brick(v, b, &body);
            rpc_buf_free(&body);
            return 0;
        }
        sleep_ms(20);
    }
    log_warn("brick %s:%s (pid %d) is not listening on port %u after %d ms", b->host, b->path,
             (int)pid, b->port, LISTEN_WAIT_MS);
    return 0;
}

void mgmt_brick_kill(struct mgmt *m, struct mgmt_brick *b)
{
    if (!b->pid)
        return;
    pid_t pid = b->pid;
    int status = 0, done = 0;
    kill(pid, SIGTERM);
    for (uint64_t end = net_now_ms() + MGMT_STOP_TIMEOUT_MS; net_now_ms() < end;) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            done = 1;
            break;
        }
        sleep_ms(10);
    }
    if (!done) {
        log_warn("brick %s:%s (pid %d) ignored SIGTERM for %d ms: killing it", b->host, b->path,
                 (int)pid, MGMT_STOP_TIMEOUT_MS);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    log_info("stopped brick %s:%s (pid %d)", b->host, b->path, (int)pid);
    char path[PATH_MAX + 64];
    pid_path(m, b, path, sizeof(path));
    unlink(path);
    b->pid = 0;
    b->backoff_ms = 0;
}

static int pid_is_brick(pid_t pid, const struct mgmt_brick *b)
{
    char path[64], cmd[8192];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    cmd[n] = 0;
    /* argv[0] is the brickd path; the brick id follows --brick-id. */
    int is_brickd = 0, has_id = 0;
    for (char *p = cmd; p < cmd + n; p += strlen(p) + 1) {
        if (strcmp(p, b->id) == 0)
            has_id = 1;
        if (strstr(p, "cairn-brickd"))
            is_brickd = 1;
    }
    return is_brickd && has_id;
}

void mgmt_bricks_kill_stale(struct mgmt *m)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++) {
            struct mgmt_brick *b = &v->bricks[i];
            char path[PATH_MAX + 64], text[32] = {0};
            pid_path(m, b, path, sizeof(path));
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, text, sizeof(text) - 1);
            close(fd);
            pid_t pid = n > 0 ? (pid_t)atoi(text) : 0;
            if (pid > 0 && pid_is_brick(pid, b)) {
                log_info("stopping brick %s:%s (pid %d) left by a previous cairnd", b->host,
                         b->path, (int)pid);
                kill(pid, SIGTERM);
                uint64_t end = net_now_ms() + MGMT_STOP_TIMEOUT_MS;
                while (kill(pid, 0) == 0 && pid_is_brick(pid, b) && net_now_ms() < end)
                    sleep_ms(10);
                if (kill(pid, 0) == 0 && pid_is_brick(pid, b))
                    kill(pid, SIGKILL);
            }
            unlink(path);
        }
}

static void supervise_once(struct mgmt *m)
{
    uint64_t now = net_now_ms();
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++) {
            struct mgmt_brick *b = &v->bricks[i];
            int status;
            /* Another server's brick, or one of a volume stopped from another
             * server: the state says what should run here. */
            if (!b->local || (!b->pid && mgmt_quorum_blocks(m, v)))
                continue;
            if (b->pid && v->status != MGMT_VOL_STARTED) {
                mgmt_brick_kill(m, b);
                continue;
            }
            if (b->pid && waitpid(b->pid, &status, WNOHANG) == b->pid) {
                uint64_t ran = now - b->started_ms;
                if (ran >= STABLE_MS || b->backoff_ms == 0)
                    b->backoff_ms = BACKOFF_MIN_MS;
                else if (b->backoff_ms < BACKOFF_MAX_MS)
                    b->backoff_ms *= 2;
                if (b->backoff_ms > BACKOFF_MAX_MS)
                    b->backoff_ms = BACKOFF_MAX_MS;
                b->retry_ms = now + b->backoff_ms;
                log_warn("brick %s:%s of volume %s (pid %d) died with %s %d after %llu ms; "
                         "restarting it in %u ms",
                         b->host, b->path, v->name, (int)b->pid,
                         WIFSIGNALED(status) ? "signal" : "status",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                         (unsigned long long)ran, b->backoff_ms);
                b->pid = 0;
            }
            if (v->status == MGMT_VOL_STARTED && !b->pid && now >= b->retry_ms && !m->stopping) {
                b->restarts++;
                if (mgmt_brick_spawn(m, v, b) < 0) {
                    if (b->backoff_ms < BACKOFF_MAX_MS)
                        b->backoff_ms = b->backoff_ms ? b->backoff_ms * 2 : BACKOFF_MIN_MS;
                    b->retry_ms = net_now_ms() + b->backoff_ms;
                }
            }
        }
}

/* cairnd reopened its own log in the signal handler; its children get the
 * signal from here, where the brick table may be read. */
static void pass_on_sighup(struct mgmt *m)
{
    int n = 0;
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        for (int i = 0; i < v->n_bricks; i++)
            if (v->bricks[i].local && v->bricks[i].pid && kill(v->bricks[i].pid, SIGHUP) == 0)
                n++;
    mgmt_shd_signal_all(SIGHUP);
    log_info("SIGHUP: log file reopened, passed on to %d brick process%s and the self-heal "
             "daemons",
             n, n == 1 ? "" : "es");
}

static void *supervisor_main(void *arg)
{
    struct mgmt *m = arg;
    while (!m->stopping) {
        pthread_mutex_lock(&m->lock);
        if (m->reopen_logs) {
            m->reopen_logs = 0;
            pass_on_sighup(m);
        }
        supervise_once(m);
        mgmt_shd_supervise(m);
        pthread_mutex_unlock(&m->lock);
        sleep_ms(200);
    }
    return NULL;
}

int mgmt_supervisor_start(struct mgmt *m)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, supervisor_main, m);
    if (rc)
        return -rc;
    pthread_detach(t);
    return 0;
}

/* Sends the live options' effective values to one running brick
 * (RPC_OP_MGMT_RECONF). A brick that does not know the opcode gets them when
 * it restarts. */
static void reconf_brick(const struct mgmt_vol *v, struct mgmt_brick *b, const struct rpc_buf *body)
{
    struct net_addr a;
    snprintf(a.host, sizeof(a.host), "%s", b->host);
    a.port = b->port;
    char why[256];
    int err = 0;
    struct rpc_tls_ctx *tls = mgmt_brick_tls(v, why, sizeof(why));
    struct rpc_conn *c = NULL;
    if (tls || !opt_bool(&v->opts, "server.ssl"))
        c = rpc_conn_dial(&a, 1000, tls, NULL, NULL, b->path, &err, why, sizeof(why));
    rpc_tls_ctx_put(tls);
    if (!c) {
        log_warn("cannot reach brick %s:%s on port %u to reconfigure it: %s", b->host, b->path,
                 b->port, why);
        return;
    }
    if (rpc_conn_start(c) == 0) {
        int rc = rpc_conn_call_sync(c, RPC_OP_MGMT_RECONF, body, NULL, 2000);
        if (rc == -ENOSYS || rc == -EPROTO)
            log_warn("brick %s:%s does not take live options; they apply when it restarts", b->host,
                     b->path);
        else if (rc < 0)
            log_warn("reconfiguring brick %s:%s failed: %s", b->host, b->path, strerror(-rc));
        else
            log_debug("reconfigured brick %s:%s", b->host, b->path);
    }
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
}

static void reconf_body(const struct mgmt_vol *v, struct rpc_buf *body)
{
    rpc_buf_init(body);
    for (const struct opt_def *d = opt_table; d->name; d++) {
        if (!d->live)
            continue;
        size_t mark = rpc_put_begin(body, RPC_T_OPTION);
        rpc_put_str(body, RPC_T_NAME, d->name);
        rpc_put_str(body, RPC_T_DATA, opt_value(&v->opts, d->name));
        rpc_put_end(body, mark);
    }
}

void mgmt_bricks_reconfigure(struct mgmt *m, struct mgmt_vol *v)
{
    struct rpc_buf body;
    reconf_body(v, &body);
    for (int i = 0; i < v->n_bricks; i++)
        if (v->bricks[i].pid)
            reconf_brick(v, &v->bricks[i], &body);
    rpc_buf_free(&body);
}
