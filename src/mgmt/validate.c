/* Checks on names, hosts and brick directories given to cairnd. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

int mgmt_brick_dir_make(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
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
