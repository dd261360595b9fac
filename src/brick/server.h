/* The brick's network side: a listening socket, one rpc_conn per client, and
 * a bounded pool of worker threads for disk work, so a connection's reader
 * thread never waits on the disk. */
#ifndef CAIRN_BRICK_SERVER_H
#define CAIRN_BRICK_SERVER_H

#include <stdint.h>

#include "../lib/net.h"
#include "brick.h"

/* ---- worker pool (pool.c) ---- */

struct brick_pool;
/* Starts n threads; 0 or -errno. */
int brick_pool_start(struct brick_pool **out, int n);
/* Queues fn(arg); never blocks. 0 or -ENOMEM / -ESHUTDOWN. */
int brick_pool_submit(struct brick_pool *p, void (*fn)(void *), void *arg);
/* Runs what is queued, then stops and frees the pool. */
void brick_pool_stop(struct brick_pool *p);

/* ---- server (server.c) ---- */

struct brick_server;
/* Listens on addr (port 0: any free port) and serves b with `threads`
 * workers. b must outlive the server. 0 or -errno. */
int brick_server_start(struct brick *b, const struct net_addr *addr, int threads,
                       struct brick_server **out);
/* The port actually listened on. */
uint16_t brick_server_port(const struct brick_server *s);
/* Stops accepting, closes every connection (their handles and locks go with
 * them), finishes queued work and frees the server. */
void brick_server_stop(struct brick_server *s);

#endif
