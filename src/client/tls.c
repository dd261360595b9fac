/* The client side's TLS settings (client.h, cl_tls_*): the files a process
 * was given (mount options, libcairn settings, cairnd's own) and the
 * volume's client.ssl and ssl.* options, made into one context per stack;
 * and management TLS (secure-access), one context per process for every
 * connection to a cairnd. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../rpc/tls.h"
#include "client.h"

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static char *key_file, *cert_file, *ca_file;
static int mgmt_mode = -1;           /* -1: CL_SECURE_ACCESS decides */
static struct rpc_tls_ctx *mgmt_ctx; /* made at the first use */

static void replace(char **slot, const char *v)
{
    free(*slot);
    *slot = v && *v ? strdup(v) : NULL;
}

void cl_tls_set_files(const char *key, const char *cert, const char *ca)
{
    pthread_mutex_lock(&files_lock);
    replace(&key_file, key);
    replace(&cert_file, cert);
    replace(&ca_file, ca);
    rpc_tls_ctx_put(mgmt_ctx);
    mgmt_ctx = NULL;
    pthread_mutex_unlock(&files_lock);
}

void cl_tls_set_mgmt(int on)
{
    pthread_mutex_lock(&files_lock);
    mgmt_mode = on;
    pthread_mutex_unlock(&files_lock);
}

int cl_tls_mgmt_on(void)
{
    pthread_mutex_lock(&files_lock);
    int mode = mgmt_mode;
    pthread_mutex_unlock(&files_lock);
    return mode >= 0 ? mode : access(CL_SECURE_ACCESS, F_OK) == 0;
}

int cl_tls_mgmt_ctx(struct rpc_tls_ctx **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cl_tls_mgmt_on())
        return 0;
    pthread_mutex_lock(&files_lock);
    if (!mgmt_ctx) {
        struct rpc_tls_conf conf = {.key = key_file, .cert = cert_file, .ca = ca_file};
        char why[512];
        if (!(mgmt_ctx = rpc_tls_ctx_new(&conf, 0, why, sizeof(why)))) {
            pthread_mutex_unlock(&files_lock);
            snprintf(err, errlen, "management TLS (secure-access): %s", why);
            return -EINVAL;
        }
    }
    rpc_tls_ctx_get(mgmt_ctx);
    *out = mgmt_ctx;
    pthread_mutex_unlock(&files_lock);
    return 0;
}

struct rpc_conn *cl_mgmt_dial(const struct net_addr *a, int timeout_ms,
                              const struct rpc_conn_ops *ops, void *ctx, const char *peer, int *err,
                              char *why, size_t whylen)
{
    struct rpc_tls_ctx *tls;
    int rc = cl_tls_mgmt_ctx(&tls, why, whylen);
    if (rc < 0) {
        *err = rc;
        return NULL;
    }
    struct rpc_conn *c = rpc_conn_dial(a, timeout_ms, tls, ops, ctx, peer, err, why, whylen);
    rpc_tls_ctx_put(tls);
    return c;
}

int cl_tls_ctx(const struct opt_set *vol, int force, struct rpc_tls_ctx **out, char *err,
               size_t errlen)
{
    *out = NULL;
    if (!force && !opt_bool(vol, "client.ssl"))
        return 0;
    pthread_mutex_lock(&files_lock);
    struct rpc_tls_conf conf = {
        .key = key_file,
        .cert = cert_file,
        .ca = ca_file,
        .crl = opt_value(vol, "ssl.crl-path"),
        .ciphers = opt_value(vol, "ssl.cipher-list"),
        .depth = (int)opt_int(vol, "ssl.certificate-depth"),
    };
    char why[512];
    *out = rpc_tls_ctx_new(&conf, 0, why, sizeof(why));
    pthread_mutex_unlock(&files_lock);
    if (!*out) {
        snprintf(err, errlen, "TLS (client.ssl is on): %s", why);
        return -EINVAL;
    }
    return 0;
}
