/* cairn-brickd: serves one brick of a volume. cairnd starts and supervises
 * it; it runs in the foreground and exits cleanly on SIGTERM/SIGINT. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/statedump.h"
#include "../rpc/tls.h"
#include "server.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: cairn-brickd --volume NAME --brick-path PATH --listen HOST:PORT\n"
                 "                    [--brick-id ID] [--log-file FILE] [--log-level LEVEL]\n"
                 "                    [--threads N] [--ssl [--ssl-key FILE] [--ssl-cert FILE]\n"
                 "                    [--ssl-ca FILE] [--ssl-crl PATH] [--ssl-cipher-list LIST]\n"
                 "                    [--ssl-depth N]]\n"
                 "       cairn-brickd --help\n"
                 "cairnd runs one per brick of a started volume; SIGHUP reopens the log file.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"volume", required_argument, NULL, 'v'},
        {"brick-path", required_argument, NULL, 'p'},
        {"listen", required_argument, NULL, 'l'},
        {"brick-id", required_argument, NULL, 'i'},
        {"log-file", required_argument, NULL, 'f'},
        {"log-level", required_argument, NULL, 'L'},
        {"threads", required_argument, NULL, 't'},
        {"ssl", no_argument, NULL, 's'},
        {"ssl-key", required_argument, NULL, 'K'},
        {"ssl-cert", required_argument, NULL, 'C'},
        {"ssl-ca", required_argument, NULL, 'A'},
        {"ssl-crl", required_argument, NULL, 'R'},
        {"ssl-cipher-list", required_argument, NULL, 'Y'},
        {"ssl-depth", required_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *volume = NULL, *path = NULL, *listen = NULL, *id = NULL, *logfile = NULL;
    int level = LOG_INFO, threads = 16, c, ssl = 0;
    struct rpc_tls_conf tls = {0};
    log_init("brick", LOG_INFO);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'v':
            volume = optarg;
            break;
        case 'p':
            path = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'i':
            id = optarg;
            break;
        case 'f':
            logfile = optarg;
            break;
        case 'L':
            if ((level = log_parse_level(optarg)) < 0) {
                fprintf(stderr, "cairn-brickd: bad log level %s\n", optarg);
                return 2;
            }
            break;
        case 't': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1024) {
                fprintf(stderr, "cairn-brickd: --threads takes a number from 1 to 1024\n");
                return 2;
            }
            threads = (int)n;
            break;
        }
        case 's':
            ssl = 1;
            break;
        case 'K':
            tls.key = optarg;
            break;
        case 'C':
            tls.cert = optarg;
            break;
        case 'A':
            tls.ca = optarg;
            break;
        case 'R':
            tls.crl = optarg;
            break;
        case 'Y':
            tls.ciphers = optarg;
            break;
        case 'D':
            tls.depth = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!volume || !path || !listen || optind != argc) {
        usage(stderr);
        return 2;
    }
    log_set_level((enum log_level)level);
    if (logfile && log_open(logfile) < 0) {
        fprintf(stderr, "cairn-brickd: cannot open log file %s: %s\n", logfile, strerror(errno));
        return 1;
    }
    struct net_addr addr;
    if (net_parse_addr(listen, CAIRN_BRICK_PORT_MIN, &addr) < 0) {
        log_error("bad --listen address %s", listen);
        return 2;
    }
    /* Signals are taken synchronously by the main thread; every other
     * thread inherits the blocked mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Tests only (storage.h, brick_fault_watch): faults injected on
     * demand. Never set in production; said loudly when it is. */
    const char *tf = getenv("CAIRN_TEST_FAULTS");
    int test_faults = tf && !strcmp(tf, "1");
    struct brick *b;
    char err[PATH_MAX + 256];
    int rc =
        brick_open(&b, path, volume, id, test_faults ? &brick_vfs_fault : NULL, err, sizeof(err));
    if (rc < 0) {
        log_error("cannot serve brick %s of volume %s: %s", path, volume, err);
        return 1;
    }
    if (test_faults) {
        snprintf(err, sizeof(err), "%s/%s/test-faults", path, BRICK_PRIVATE);
        log_warn("CAIRN_TEST_FAULTS=1: TEST MODE, faults are injected on demand through %s; "
                 "never set it in production",
                 err);
        if (brick_fault_watch(err) < 0)
            log_error("cannot watch %s", err);
    }
    if (ssl && !(b->tls = rpc_tls_ctx_new(&tls, 1, err, sizeof(err)))) {
        log_error("cannot serve brick %s of volume %s with TLS (server.ssl is on): %s", path,
                  volume, err);
        brick_close(b);
        return 1;
    }
    struct brick_server *s;
    if ((rc = brick_server_start(b, &addr, threads, &s)) < 0) {
        log_error("cannot listen on %s for brick %s: %s", listen, path, strerror(-rc));
        brick_close(b);
        return 1;
    }
    log_info("serving brick %s (id %s) of volume %s on %s:%u with %d threads%s", path, b->id,
             volume, addr.host, brick_server_port(s), threads, ssl ? ", TLS only" : "");
    for (;;) {
        int sig = 0;
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            int r = log_reopen();
            if (r < 0)
                log_error("SIGHUP: cannot reopen the log file: %s", strerror(-r));
            continue;
        }
        if (sig == SIGUSR1) {
            char dump[PATH_MAX + 128];
            sd_log(brick_statedump(b, dump, sizeof(dump)), dump);
            continue;
        }
        log_info("signal %d: stopping brick %s", sig, path);
        break;
    }
    brick_server_stop(s);
    brick_close(b);
    log_info("brick %s stopped", path);
    return 0;
}
