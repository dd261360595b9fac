/* cairn: the command line. Sends its arguments to cairnd (MGMT_CLI), prints
 * the answer and exits with the command's status. With --xml the answer is
 * GlusterFS's XML document (docs/cli.md), on stdout even for an error. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../client/client.h"
#include "../lib/commands.h"
#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/options.h"
#include "../lib/xml.h"
#include "../rpc/conn.h"
#include "cli.h"

#define CLI_VERSION "0.1.0"
#define CONNECT_TIMEOUT_MS 5000
/* volume stop waits for brick processes; leave it room. */
#define CALL_TIMEOUT_MS 120000
/* volume import walks whole bricks: as long as that takes. */
#define IMPORT_TIMEOUT_MS (24 * 3600 * 1000)

static void usage(FILE *f)
{
    fprintf(
        f, "usage: cairn [--remote-host ADDR[:PORT]] [--mode=script] [--xml] [--progress]\n"
           "             [--ssl] [--ssl-key FILE] [--ssl-cert FILE] [--ssl-ca FILE] <command> ...\n"
           "       cairn help | --help | --version | volume set help\n"
           "--ssl: talk TLS to cairnd (on by default when /var/lib/cairnd/secure-access\n"
           "       exists), with --ssl-key/--ssl-cert/--ssl-ca (default /etc/ssl/cairn.*)\n"
           "--xml: output as GlusterFS's `gluster --xml` does (volume info, volume status,\n"
           "       volume heal VOL info [summary|split-brain]; other commands in <output>)\n"
           "--progress: progress lines on stderr for volume heal VOL [full] and heal info\n"
           "       (without it: when stderr is a terminal)\n");
}

/* --xml: a failure the CLI meets itself (no daemon, no answer), as the
 * error document scripts expect on stdout; the exit status. */
static int xml_fail(int op_errno, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int xml_fail(int op_errno, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    xml_error_doc(stdout, op_errno, msg);
    return 1;
}

/* Commands the CLI answers itself, with or without a daemon: the help
 * texts. Returns the exit status, or -1 for a command for cairnd. */
static int run_locally(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[0], "volume") == 0 && strcmp(argv[1], "set") == 0 &&
        strcmp(argv[2], "help") == 0) {
        opt_print_help(stdout);
        return 0;
    }
    if ((argc == 1 && strcmp(argv[0], "help") == 0) ||
        (argc == 2 && strcmp(argv[0], "volume") == 0 && strcmp(argv[1], "help") == 0)) {
        cmd_print_help(stdout);
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    const char *remote = "127.0.0.1";
    const char *ssl_key = NULL, *ssl_cert = NULL, *ssl_ca = NULL;
    int i = 1, xml = 0, progress = 0;
    log_init("cairn", LOG_ERROR);
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--remote-host") == 0 && i + 1 < argc)
            remote = argv[++i];
        else if (strncmp(argv[i], "--remote-host=", 14) == 0)
            remote = argv[i] + 14;
        else if (strcmp(argv[i], "--mode=script") == 0)
            continue;
        else if (strcmp(argv[i], "--xml") == 0)
            xml = 1;
        else if (strcmp(argv[i], "--progress") == 0)
            progress = 1;
        else if (strcmp(argv[i], "--ssl") == 0)
            cl_tls_set_mgmt(1);
        else if (strcmp(argv[i], "--ssl-key") == 0 && i + 1 < argc)
            ssl_key = argv[++i];
        else if (strcmp(argv[i], "--ssl-cert") == 0 && i + 1 < argc)
            ssl_cert = argv[++i];
        else if (strcmp(argv[i], "--ssl-ca") == 0 && i + 1 < argc)
            ssl_ca = argv[++i];
        else if (strcmp(argv[i], "--version") == 0) {
            printf("cairn %s\n", CLI_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            cmd_print_help(stdout);
            return 0;
        } else
            break;
    }
    /* gluster also takes --xml after the command; so does --progress */
    int n = i;
    for (int j = i; j < argc; j++)
        if (strcmp(argv[j], "--xml") == 0)
            xml = 1;
        else if (strcmp(argv[j], "--progress") == 0)
            progress = 1;
        else
            argv[n++] = argv[j];
    argc = n;
    if (i == argc) {
        usage(stderr);
        return 1;
    }
    cl_tls_set_files(ssl_key, ssl_cert, ssl_ca);
    int local = run_locally(argc - i, argv + i);
    if (local >= 0)
        return local;
    struct net_addr addr;
    if (net_parse_addr(remote, CAIRN_MGMT_PORT, &addr) < 0) {
        if (xml)
            return xml_fail(EINVAL, "Invalid --remote-host %s", remote);
        fprintf(stderr, "Invalid --remote-host %s\n", remote);
        return 1;
    }
    if (argc - i >= 3 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "heal") == 0 &&
        !cli_heal_by_cairnd(argc - i, argv + i))
        return cli_volume_heal(&addr, argc - i, argv + i, xml, progress);
    if (argc - i >= 4 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "quota") == 0 &&
        (strcmp(argv[i + 3], "list") == 0 || strcmp(argv[i + 3], "list-objects") == 0))
        return cli_volume_quota_list(&addr, argc - i, argv + i, xml);
    if (argc - i >= 4 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "profile") == 0) {
        if (xml)
            return xml_fail(EOPNOTSUPP, "volume profile has no XML output; run it without --xml");
        return cli_volume_profile(&addr, argc - i, argv + i);
    }
    if (argc - i == 4 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "status") == 0 &&
        strcmp(argv[i + 3], "clients") == 0) {
        if (xml)
            return xml_fail(EOPNOTSUPP, "volume status clients has no XML output; run it without "
                                        "--xml");
        return cli_volume_status_clients(&addr, argc - i, argv + i);
    }
    if (argc - i >= 3 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "top") == 0) {
        if (xml)
            return xml_fail(EOPNOTSUPP, "volume top has no XML output; run it without --xml");
        return cli_volume_top(&addr, argc - i, argv + i);
    }
    if (argc - i >= 4 && strcmp(argv[i], "volume") == 0 &&
        strcmp(argv[i + 1], "remove-brick") == 0) {
        char why[8192]; /* names two bricks and a path */
        if (cli_remove_brick_check(&addr, argc - i, argv + i, why, sizeof(why))) {
            if (xml)
                return xml_fail(EBUSY, "%s", why);
            fprintf(stderr, "volume remove-brick commit force: failed: %s\n", why);
            return 1;
        }
    }
    char why[256];
    int err = 0;
    struct rpc_conn *c =
        cl_mgmt_dial(&addr, CONNECT_TIMEOUT_MS, NULL, NULL, remote, &err, why, sizeof(why));
    if (!c && (err == -ECONNREFUSED || err == -ETIMEDOUT || err == -EHOSTUNREACH)) {
        if (xml)
            return xml_fail(-err, "Connection failed. Please check if cairnd is running on %s:%u.",
                            addr.host, addr.port);
        fprintf(stderr, "Connection failed. Please check if cairnd is running on %s:%u.\n",
                addr.host, addr.port);
        return 1;
    }
    if (!c) {
        if (xml)
            return xml_fail(-err, "Connection to cairnd on %s:%u failed: %s", addr.host, addr.port,
                            why);
        fprintf(stderr, "Connection to cairnd on %s:%u failed: %s\n", addr.host, addr.port, why);
        return 1;
    }
    if (rpc_conn_start(c) < 0) {
        fprintf(stderr, "Out of memory\n");
        return 1;
    }
    struct rpc_buf body;
    rpc_buf_init(&body);
    if (xml) /* cairnd answers with the XML document */
        rpc_put_str(&body, RPC_T_ARG, "--xml");
    for (int j = i; j < argc; j++)
        rpc_put_str(&body, RPC_T_ARG, argv[j]);
    struct rpc_frame *reply = NULL;
    int import =
        argc - i >= 2 && strcmp(argv[i], "volume") == 0 && strcmp(argv[i + 1], "import") == 0;
    int rc = rpc_conn_call_sync(c, RPC_OP_MGMT_CLI, &body, &reply,
                                import ? IMPORT_TIMEOUT_MS : CALL_TIMEOUT_MS);
    rpc_buf_free(&body);
    int status = 1;
    if (rc < 0) {
        const char *why = rc == -ETIMEDOUT ? "no answer in time" : strerror(-rc);
        if (xml && reply && rpc_has(&reply->msg, RPC_T_TEXT))
            xml_fail(-rc, "%.*s", (int)reply->msg.text.len, reply->msg.text.p);
        else if (xml)
            xml_fail(-rc, "Request to cairnd on %s:%u failed: %s", addr.host, addr.port, why);
        else if (reply && rpc_has(&reply->msg, RPC_T_TEXT))
            fprintf(stderr, "%.*s\n", (int)reply->msg.text.len, reply->msg.text.p);
        else
            fprintf(stderr, "Request to cairnd on %s:%u failed: %s\n", addr.host, addr.port, why);
    } else if (reply) {
        status = rpc_has(&reply->msg, RPC_T_STATUS) ? (int)reply->msg.status : 1;
        const char *text = rpc_has(&reply->msg, RPC_T_TEXT) ? (const char *)reply->msg.text.p : "";
        int len = rpc_has(&reply->msg, RPC_T_TEXT) ? (int)reply->msg.text.len : 0;
        if (xml && (len < 5 || memcmp(text, "<?xml", 5) != 0)) {
            /* text from before the command ran (a pool without quorum,
             * a refusal): still a document */
            while (len > 0 && text[len - 1] == '\n')
                len--;
            char *t = strndup(text, (size_t)len);
            if (status == 0)
                xml_output_doc(stdout, t ? t : "");
            else
                xml_fail(XML_ERRNO_INTERNAL, "%s", t ? t : "out of memory");
            free(t);
        } else {
            /* an XML document goes to stdout also when it reports an error */
            FILE *out = status == 0 || xml ? stdout : stderr;
            fwrite(text, 1, (size_t)len, out);
            fflush(out);
        }
    }
    rpc_frame_free(reply);
    rpc_conn_close(c, 0);
    rpc_conn_put(c);
    /* Let the reader finish freeing the connection (its TLS session)
     * before exit: the leak checker of sanitizer builds looks at exit. */
    rpc_conn_wait_readers(1000);
    return status > 255 ? 1 : status;
}
