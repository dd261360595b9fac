/* Addresses and sockets (net.h): HOST[:PORT] parsing, connecting with a
 * timeout, listening, and monotonic-clock waits. */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int net_parse_addr(const char *s, uint16_t default_port, struct net_addr *out)
{
    const char *host = s, *port = NULL;
    size_t hlen;
    if (!s || !*s)
        return -EINVAL;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end)
            return -EINVAL;
        host = s + 1;
        hlen = (size_t)(end - host);
        if (end[1] == ':')
            port = end + 2;
        else if (end[1])
            return -EINVAL;
    } else {
        const char *colon = strchr(s, ':');
        if (colon && strchr(colon + 1, ':'))
            return -EINVAL; /* bare IPv6 needs brackets */
        hlen = colon ? (size_t)(colon - s) : strlen(s);
        if (colon)
            port = colon + 1;
    }
    if (hlen == 0 || hlen >= NET_HOST_MAX)
        return -EINVAL;
    /* host names and IPv4/IPv6 literals only: letters, digits, . - _ and
     * (inside brackets) : and % */
    for (size_t i = 0; i < hlen; i++) {
        char c = host[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_' || (s[0] == '[' && (c == ':' || c == '%'));
        if (!ok)
            return -EINVAL;
    }
    if (s[0] == '[' && !memchr(host, ':', hlen))
        return -EINVAL; /* brackets are for IPv6 literals */
    memcpy(out->host, host, hlen);
    out->host[hlen] = 0;
    out->port = default_port;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (!*port || *end || p <= 0 || p > 65535)
            return -EINVAL;
        out->port = (uint16_t)p;
    }
    return 0;
}

void net_format_addr(const struct net_addr *a, char *out, size_t len)
{
    if (strchr(a->host, ':'))
        snprintf(out, len, "[%s]:%u", a->host, a->port);
    else
        snprintf(out, len, "%s:%u", a->host, a->port);
}

static int resolve(const struct net_addr *a, struct addrinfo **res, int passive)
{
    struct addrinfo hints = {0};
    char port[8];
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(port, sizeof(port), "%u", a->port);
    int rc = getaddrinfo(a->host, port, &hints, res);
    if (rc == EAI_SYSTEM)
        return -errno;
    return rc ? -EHOSTUNREACH : 0;
}

void net_tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

int net_connect(const struct net_addr *a, int timeout_ms)
{
    struct addrinfo *res, *ai;
    int rc = resolve(a, &res, 0), err = -ECONNREFUSED;
    if (rc)
        return rc;
    for (ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            err = -errno;
            close(fd);
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n;
        do
            n = poll(&p, 1, timeout_ms);
        while (n < 0 && errno == EINTR);
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (n == 0)
            soerr = ETIMEDOUT;
        else if (n < 0)
            soerr = errno;
        else
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            err = -soerr;
            close(fd);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        net_tune(fd);
        freeaddrinfo(res);
        return fd;
    }
    freeaddrinfo(res);
    return err;
}

int net_listen(const struct net_addr *a, int backlog)
{
    struct addrinfo *res;
    int rc = resolve(a, &res, 1);
    if (rc)
        return rc;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
        rc = -errno;
        close(fd);
        goto out;
    }
    rc = fd;
out:
    freeaddrinfo(res);
    return rc;
}

int net_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int net_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -ECONNRESET;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void net_cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

void net_deadline(struct timespec *ts, clockid_t clock, uint64_t ms)
{
    clock_gettime(clock, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

uint64_t net_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
