/* Checks on names, hosts and brick directories given to cairnd. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/net.h"
#include "../lib/options.h"
#include "mgmt.h"

int mgmt_check_volname(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0 || n > MGMT_VOLNAME_MAX) {
        snprintf(err, errlen, "Volume name must be 1 to %d characters long", MGMT_VOLNAME_MAX);
        return -EINVAL;
    }
    if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != n) {
        snprintf(err, errlen, "Volume name %s is invalid: use only letters, digits, '-' and '_'",
                 name);
        return -EINVAL;
    }
    /* "all" selects every volume in info/status/get; a leading '-' would
     * read as a command-line flag. */
    if (strcmp(name, "all") == 0 || strcmp(name, "help") == 0 || name[0] == '-') {
        snprintf(err, errlen, "Volume name %s is reserved", name);
        return -EINVAL;
    }
    return 0;
}

static int resolve(const char *host, struct addrinfo **res)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    return getaddrinfo(host, NULL, &hints, res) == 0 ? 0 : -EHOSTUNREACH;
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return 0;
}

/* An address is one of ours if a socket can be bound to it. */
static int bindable(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_storage ss;
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    int ok = bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) == 0;
    close(fd);
    return ok;
}

static int is_wildcard(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || strcmp(host, "*") == 0;
}

int mgmt_host_is_local(const struct mgmt *m, const char *host)
{
    struct addrinfo *h, *l = NULL;
    int local = 0;
    if (resolve(host, &h) < 0)
        return -EHOSTUNREACH;
    if (is_wildcard(m->listen.host)) {
        for (struct addrinfo *a = h; a && !local; a = a->ai_next)
            local = bindable(a);
    } else if (resolve(m->listen.host, &l) == 0) {
        for (struct addrinfo *a = h; a && !local; a = a->ai_next)
            for (struct addrinfo *b = l; b && !local; b = b->ai_next)
                local = same_addr(a->ai_addr, b->ai_addr);
        freeaddrinfo(l);
    }
    freeaddrinfo(h);
    return local;
}

/* ---- host names in auth.allow / auth.reject ---- */

/* A lookup on a thread of its own, so the caller can stop waiting for it: a
 * resolver that does not answer must not hold volume set (and the lock it
 * runs under). Whoever drops the last reference frees it. */
struct lookup {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs, done, rc;
    struct addrinfo *res;
    char host[256];
};

static void lookup_put(struct lookup *l)
{
    pthread_mutex_lock(&l->lock);
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->lock);
    if (!last)
        return;
    if (l->res)
        freeaddrinfo(l->res);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);
    pthread_mutex_lock(&l->lock);
    l->rc = rc;
    l->res = res;
    l->done = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    lookup_put(l);
    return NULL;
}

/* getaddrinfo waiting at most ms: 0, -ETIMEDOUT, -ENOENT (no such name,
 * *why says why) or -errno. */
static int resolve_within(const char *host, uint64_t ms, struct addrinfo **res, const char **why)
{
    struct lookup *l = calloc(1, sizeof(*l));
    *why = "";
    if (!l || strlen(host) >= sizeof(l->host)) {
        free(l);
        return l ? -ENAMETOOLONG : -ENOMEM;
    }
    strcpy(l->host, host);
    l->refs = 2;
    pthread_mutex_init(&l->lock, NULL);
    net_cond_init_mono(&l->cond);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, lookup_main, l);
    pthread_attr_destroy(&attr);
    if (e) {
        l->refs = 1;
        lookup_put(l);
        return -e;
    }
    struct timespec dl;
    net_deadline(&dl, CLOCK_MONOTONIC, ms);
    int rc = -ETIMEDOUT;
    pthread_mutex_lock(&l->lock);
    while (!l->done && pthread_cond_timedwait(&l->cond, &l->lock, &dl) != ETIMEDOUT)
        ;
    if (l->done) {
        rc = l->rc == 0 ? 0 : -ENOENT;
        if (l->rc)
            *why = gai_strerror(l->rc);
        *res = l->res;
        l->res = NULL;
    }
    pthread_mutex_unlock(&l->lock);
    lookup_put(l);
    return rc;
}

/* Appends s (n bytes) to out as one more entry after separator sep, unless
 * it is there already. */
static int append_entry(char *out, size_t outlen, const char *s, size_t n, char sep)
{
    size_t l = strlen(out);
    const char seps[2] = {sep, 0};
    for (const char *p = out; *p;) {
        size_t k = strcspn(p, seps);
        if (k == n && strncmp(p, s, n) == 0)
            return 0;
        p += k + (p[k] == sep);
    }
    if (l + n + 2 > outlen)
        return -E2BIG;
    if (l)
        out[l++] = sep;
    memcpy(out + l, s, n);
    out[l + n] = 0;
    return 0;
}

static void add_reason(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    size_t l = strlen(err);
    if (l + 3 >= errlen)
        return;
    snprintf(err + l, errlen - l, "%s", l ? "; " : "");
    l = strlen(err);
    snprintf(err + l, errlen - l, fmt, a, b);
}

/* One entry p[0..n): appended to out (after sep) as it is, as the one
 * spelling of an IPv6 address, or as the addresses a host name resolves
 * to. 0, 1 (a reason added to err) or -E2BIG. */
static int resolve_one(const char *option, const char *p, size_t n, char *out, size_t outlen,
                       char sep, uint64_t end, char *err, size_t errlen)
{
    char e[256];
    if (n == 0 || n >= sizeof(e)) /* empty or absurd: opt_validate words the refusal */
        return append_entry(out, outlen, p, n, sep);
    memcpy(e, p, n);
    e[n] = 0;
    struct in6_addr a6;
    char text[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET6, e, &a6) == 1) { /* one spelling, as peers are printed */
        inet_ntop(AF_INET6, &a6, text, sizeof(text));
        return append_entry(out, outlen, text, strlen(text), sep);
    }
    if (opt_addr_pattern(e, n))
        return append_entry(out, outlen, e, n, sep);
    if (strcspn(e, "*?[") != n || strspn(e, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789.-_") != n) {
        add_reason(err, errlen,
                   "'%s' is neither an address, an address pattern (like 192.168.1.*, "
                   "10.0.0.0/8) nor a host name: a pattern over host names never matches, "
                   "since %s is checked against the client's address",
                   e, option);
        return 1;
    }
    uint64_t now = net_now_ms();
    struct addrinfo *res = NULL;
    const char *why;
    int rc = now < end ? resolve_within(e, end - now, &res, &why) : -ETIMEDOUT;
    if (rc < 0) {
        add_reason(err, errlen,
                   rc == -ETIMEDOUT ? "'%s' is not an address, and resolving it as a host "
                                      "name took too long%s"
                                    : "'%s' is not an address, and no host of that name "
                                      "resolves (%s)",
                   e, rc == -ETIMEDOUT ? "" : why);
        return 1;
    }
    rc = 0;
    for (struct addrinfo *ai = res; ai && rc == 0; ai = ai->ai_next) {
        const void *addr = ai->ai_family == AF_INET
                               ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                               : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
            !inet_ntop(ai->ai_family, addr, text, sizeof(text)))
            continue;
        rc = append_entry(out, outlen, text, strlen(text), sep);
    }
    freeaddrinfo(res);
    return rc;
}

/* "/DIR(A|B...)": each of A, B... resolved as above, '|' between them. */
static int resolve_dir_entry(const char *option, const char *p, size_t n, char *out, size_t outlen,
                             uint64_t end, char *err, size_t errlen)
{
    const char *open = memchr(p, '(', n);
    if (!open || p[n - 1] != ')') /* malformed: opt_validate words the refusal */
        return append_entry(out, outlen, p, n, ',');
    char inner[1024] = "", whole[1200];
    int bad = 0, rc;
    for (const char *q = open + 1; q < p + n - 1;) {
        size_t k = strcspn(q, "|)");
        if ((rc = resolve_one(option, q, k, inner, sizeof(inner), '|', end, err, errlen)) < 0)
            return rc;
        bad |= rc;
        q += k + (q[k] == '|');
    }
    if (bad)
        return 1;
    int w = snprintf(whole, sizeof(whole), "%.*s(%s)", (int)(open - p), p, inner);
    if (w < 0 || (size_t)w >= sizeof(whole))
        return -E2BIG;
    return append_entry(out, outlen, whole, (size_t)w, ',');
}

int mgmt_resolve_addr_list(const char *option, const char *list, char *out, size_t outlen,
                           char *err, size_t errlen)
{
    uint64_t end = net_now_ms() + MGMT_RESOLVE_MS;
    int bad = 0;
    out[0] = err[0] = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        int rc = n && *p == '/' ? resolve_dir_entry(option, p, n, out, outlen, end, err, errlen)
                                : resolve_one(option, p, n, out, outlen, ',', end, err, errlen);
        if (rc < 0)
            goto too_long;
        bad |= rc;
        p += n + (p[n] == ',');
    }
    if (bad)
        return -EINVAL;
    if (!*list)
        out[0] = 0;
    return 0;
too_long:
    snprintf(err, errlen, "%s: the list of addresses is too long", option);
    return -EINVAL;
}

/* ---- brick directories ---- */

/* Cuts path back to its deepest existing ancestor (in place; it may be a
 * file in the way); returns the length of the part cut off, with *err the
 * errno of a stat that failed otherwise. path stays absolute. */
static size_t existing_ancestor(char *path, struct stat *st, int *err)
{
    size_t full = strlen(path);
    for (;;) {
        if (stat(path, st) == 0) {
            *err = 0;
            return full - strlen(path);
        }
        *err = errno;
        char *slash = strrchr(path, '/');
        if ((errno != ENOENT && errno != ENOTDIR) || !slash || strcmp(path, "/") == 0)
            return full - strlen(path);
        if (slash == path)
            path[1] = 0;
        else
            *slash = 0;
    }
}

int mgmt_brick_dir_usable(const char *label, const char *path, struct stat *st, int *missing,
                          char *err, size_t errlen)
{
    *missing = 0;
    if (stat(path, st) == 0) {
        if (!S_ISDIR(st->st_mode)) {
            snprintf(err, errlen, "Brick path %s is not a directory", label);
            return -ENOTDIR;
        }
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
        snprintf(err, errlen, "Cannot look at brick directory %s: %s", label, strerror(errno));
        return -errno;
    }
    struct stat lst;
    if (lstat(path, &lst) == 0) {
        snprintf(err, errlen, "Cannot create brick directory %s: it is a dangling symbolic link",
                 label);
        return -ENOENT;
    }
    char anc[PATH_MAX];
    int e;
    snprintf(anc, sizeof(anc), "%s", path);
    existing_ancestor(anc, st, &e);
    if (e) {
        snprintf(err, errlen, "Cannot create brick directory %s: %s: %s", label, anc, strerror(e));
        return -e;
    }
    if (!S_ISDIR(st->st_mode)) {
        snprintf(err, errlen, "Cannot create brick directory %s: %s is not a directory", label,
                 anc);
        return -ENOTDIR;
    }
    /* EROFS for a read-only file system, EACCES where cairnd runs as a
     * user who may not write there */
    if (access(anc, W_OK | X_OK) < 0) {
        e = errno;
        snprintf(err, errlen, "Cannot create brick directory %s in %s: %s", label, anc,
                 strerror(e));
        return -e;
    }
    *missing = 1;
    return 0;
}

void mgmt_brick_canonical(const char *path, char *out)
{
    char anc[PATH_MAX], real[PATH_MAX];
    struct stat st;
    int e;
    snprintf(anc, sizeof(anc), "%s", path);
    size_t cut = existing_ancestor(anc, &st, &e);
    if (e || !realpath(anc, real)) {
        snprintf(out, PATH_MAX, "%s", path);
        return;
    }
    const char *rest = path + strlen(path) - cut; /* "/x/y" or "" */
    snprintf(out, PATH_MAX, "%s%s", strcmp(real, "/") == 0 && *rest ? "" : real, rest);
}
