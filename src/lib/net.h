/* Address parsing and socket helpers. */
#ifndef CAIRN_NET_H
#define CAIRN_NET_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <sys/socket.h>

/* The management daemon's port. 24007 and 49152+ belong to GlusterFS and
 * 9419-9425 to MooseFS; Cairn uses 24810 for cairnd and, by default, the
 * range 24811-24999 for brick processes. Changing it breaks existing mounts'
 * fstab lines, so it is part of the documented interface. */
#define CAIRN_MGMT_PORT 24810
#define CAIRN_BRICK_PORT_MIN 24811
#define CAIRN_BRICK_PORT_MAX 24999

#define NET_HOST_MAX 256

struct net_addr {
    char host[NET_HOST_MAX];
    uint16_t port;
};

/* Parses "HOST", "HOST:PORT", "[V6]:PORT"; a missing port becomes
 * default_port. Returns 0 or -EINVAL. */
int net_parse_addr(const char *s, uint16_t default_port, struct net_addr *out);
/* Formats as HOST:PORT. */
void net_format_addr(const struct net_addr *a, char *out, size_t len);

/* Blocking TCP connect with a timeout in milliseconds; returns an fd with
 * TCP_NODELAY and close-on-exec set, or -errno. */
int net_connect(const struct net_addr *a, int timeout_ms);
/* Listening socket bound to the address (SO_REUSEADDR); returns fd or -errno. */
int net_listen(const struct net_addr *a, int backlog);
/* Sets TCP_NODELAY and keepalive on an accepted socket. */
void net_tune(int fd);

/* write/read exactly len bytes, retrying on EINTR; return 0 or -errno
 * (-ECONNRESET on EOF). */
int net_write_all(int fd, const void *buf, size_t len);
int net_read_all(int fd, void *buf, size_t len);

/* Monotonic clock in milliseconds. */
uint64_t net_now_ms(void);

/* *ts = clock's now + ms: the deadline of a timed wait
 * (pthread_cond_timedwait on a condition using that clock). */
void net_deadline(struct timespec *ts, clockid_t clock, uint64_t ms);

/* Initializes c for timed waits against CLOCK_MONOTONIC (net_deadline). */
void net_cond_init_mono(pthread_cond_t *c);

#endif
