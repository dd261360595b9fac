/* The client side's TLS settings (client.h, cl_tls_*): the files a process
 * was given (mount options, libcairn settings, cairnd's own) and the
 * volume's client.ssl and ssl.* options, made into one context per stack. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rpc/tls.h"
#include "client.h"

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static char *key_file, *cert_file, *ca_file;

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
    pthread_mutex_unlock(&files_lock);
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
