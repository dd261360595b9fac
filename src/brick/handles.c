/* Per-connection state: the handle table (FH -> open file or directory),
 * the requests running, and the teardown in two steps (brick.h,
 * brick_conn_shutdown).
 *
 * A handle id is its slot number plus a generation in bits 20-39, so a
 * released id is not silently taken to mean the next file opened in the
 * same slot. Handles are reference counted: a worker using one keeps it
 * open while another releases it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "../lib/options.h"
#include "../rpc/opinfo.h"
#include "../rpc/tls.h"
#include "../lib/statedump.h"
#include "brick.h"

#define SLOT_BITS 20
#define SLOT_MAX (1u << SLOT_BITS)
#define GEN_MASK ((1u << 20) - 1)

struct brick_conn *brick_conn_new(struct brick *b, struct rpc_conn *rc, const char *peer)
{
    struct brick_conn *bc = calloc(1, sizeof(*bc));
    if (!bc)
        return NULL;
    bc->b = b;
    bc->rc = rc;
    bc->refs = 1;
    pthread_mutex_init(&bc->lock, NULL);
    snprintf(bc->peer, sizeof(bc->peer), "%s", peer ? peer : "local");
    if (rc)
        rpc_conn_get(rc);
    pthread_mutex_lock(&b->conns_lock);
    bc->all_next = b->conns;
    if (b->conns)
        b->conns->all_prev = bc;
    b->conns = bc;
    pthread_mutex_unlock(&b->conns_lock);
    return bc;
}

void brick_conn_get(struct brick_conn *bc)
{
    pthread_mutex_lock(&bc->lock);
    bc->refs++;
    pthread_mutex_unlock(&bc->lock);
}

void brick_conn_put(struct brick_conn *bc)
{
    pthread_mutex_lock(&bc->lock);
    int last = --bc->refs == 0;
    pthread_mutex_unlock(&bc->lock);
    if (!last)
        return;
    brick_conn_shutdown(bc); /* nothing runs: releases now if not yet */
    struct brick *b = bc->b;
    pthread_mutex_lock(&b->conns_lock);
    if (bc->all_prev)
        bc->all_prev->all_next = bc->all_next;
    else
        b->conns = bc->all_next;
    if (bc->all_next)
        bc->all_next->all_prev = bc->all_prev;
    pthread_mutex_unlock(&b->conns_lock);
    if (bc->rc)
        rpc_conn_put(bc->rc);
    free(bc->fhs);
    free(bc->fh_gen);
    free(bc->subdir);
    pthread_mutex_destroy(&bc->lock);
    free(bc);
}

struct brick_fh *brick_fh_new(int fd, int is_dir, int flags)
{
    struct brick_fh *fh = calloc(1, sizeof(*fh));
    if (!fh)
        return NULL;
    fh->refs = 1;
    fh->fd = fd;
    fh->is_dir = is_dir;
    fh->flags = flags;
    pthread_mutex_init(&fh->dir_lock, NULL);
    return fh;
}

static void fh_free(struct brick *b, struct brick_fh *fh)
{
    if (fh->in_open_set)
        brick_spare_closed(b, fh->dev, fh->ino, fh->owner);
    if (fh->xpath)
        brick_lease_file_closed(b, fh->owner, fh->xpath, fh->dev, fh->ino);
    brick_top_close(b, fh->top, !fh->is_dir);
    free(fh->xpath);
    free(fh->path);
    if (fh->fd >= 0)
        b->vfs->close(fh->fd);
    pthread_mutex_destroy(&fh->dir_lock);
    free(fh);
}

int brick_fh_add(struct brick_conn *bc, struct brick_fh *fh, uint64_t *id)
{
    pthread_mutex_lock(&bc->lock);
    if (bc->closed) {
        pthread_mutex_unlock(&bc->lock);
        return -ENOTCONN;
    }
    uint32_t slot = 0;
    while (slot < bc->n_fhs && bc->fhs[slot])
        slot++;
    if (slot == bc->n_fhs) {
        if (bc->n_fhs == SLOT_MAX) {
            pthread_mutex_unlock(&bc->lock);
            return -EMFILE;
        }
        if (bc->n_fhs == bc->cap_fhs) {
            uint32_t cap = bc->cap_fhs ? bc->cap_fhs * 2 : 16;
            struct brick_fh **f = realloc(bc->fhs, cap * sizeof(*f));
            if (f)
                bc->fhs = f;
            uint32_t *g = f ? realloc(bc->fh_gen, cap * sizeof(*g)) : NULL;
            if (!f || !g) {
                pthread_mutex_unlock(&bc->lock);
                return -ENOMEM;
            }
            bc->fh_gen = g;
            bc->cap_fhs = cap;
        }
        bc->fhs[slot] = NULL;
        bc->fh_gen[slot] = 0;
        bc->n_fhs++;
    }
    bc->fhs[slot] = fh;
    bc->fh_gen[slot] = (bc->fh_gen[slot] + 1) & GEN_MASK;
    *id = (uint64_t)slot | (uint64_t)bc->fh_gen[slot] << SLOT_BITS;
    pthread_mutex_unlock(&bc->lock);
    return 0;
}

/* The slot of id if it names a live handle; the caller holds the lock. */
static long slot_of(struct brick_conn *bc, uint64_t id, int is_dir)
{
    uint64_t slot = id & (SLOT_MAX - 1);
    uint64_t gen = id >> SLOT_BITS;
    if (slot >= bc->n_fhs || !bc->fhs[slot] || gen != bc->fh_gen[slot] ||
        bc->fhs[slot]->is_dir != is_dir)
        return -EBADF;
    return (long)slot;
}

int brick_fh_get(struct brick_conn *bc, uint64_t id, int is_dir, struct brick_fh **out)
{
    pthread_mutex_lock(&bc->lock);
    long slot = slot_of(bc, id, is_dir);
    if (slot < 0) {
        pthread_mutex_unlock(&bc->lock);
        return (int)slot;
    }
    *out = bc->fhs[slot];
    (*out)->refs++;
    pthread_mutex_unlock(&bc->lock);
    return 0;
}

void brick_fh_put(struct brick_conn *bc, struct brick_fh *fh)
{
    pthread_mutex_lock(&bc->lock);
    int last = --fh->refs == 0;
    pthread_mutex_unlock(&bc->lock);
    if (last)
        fh_free(bc->b, fh);
}

int brick_fh_remove(struct brick_conn *bc, uint64_t id, int is_dir)
{
    pthread_mutex_lock(&bc->lock);
    long slot = slot_of(bc, id, is_dir);
    if (slot < 0) {
        pthread_mutex_unlock(&bc->lock);
        return (int)slot;
    }
    struct brick_fh *fh = bc->fhs[slot];
    bc->fhs[slot] = NULL;
    pthread_mutex_unlock(&bc->lock);
    brick_fh_put(bc, fh);
    return 0;
}

/* Closes every handle of bc and lets go of its locks, lock waits and
 * leases; once, when bc is shut down and no request of it runs. */
static void conn_release(struct brick_conn *bc)
{
    uint32_t n = 0;
    pthread_mutex_lock(&bc->lock);
    for (uint32_t i = 0; i < bc->n_fhs; i++)
        if (bc->fhs[i])
            n++;
    pthread_mutex_unlock(&bc->lock);
    if (n)
        log_debug("connection %s gone: closing %u handles", bc->peer, n);
    /* Locks first: they are kept on their own fds (locks.c). */
    brick_locks_conn_gone(bc);
    brick_lease_conn_gone(bc);
    brick_accused_conn_gone(bc);
    for (uint32_t i = 0; i < bc->n_fhs; i++) {
        pthread_mutex_lock(&bc->lock);
        struct brick_fh *fh = bc->fhs[i];
        bc->fhs[i] = NULL;
        pthread_mutex_unlock(&bc->lock);
        if (fh && __atomic_load_n(&fh->changed, __ATOMIC_RELAXED))
            brick_version_conn_gone(bc->b, fh);
        if (fh)
            brick_fh_put(bc, fh);
    }
}

void brick_conn_shutdown(struct brick_conn *bc)
{
    pthread_mutex_lock(&bc->lock);
    if (bc->closed) {
        pthread_mutex_unlock(&bc->lock);
        return;
    }
    bc->closed = 1;
    int now = bc->busy == 0;
    if (now)
        bc->released = 1;
    pthread_mutex_unlock(&bc->lock);
    if (now)
        conn_release(bc);
}

int brick_conn_enter(struct brick_conn *bc, struct brick_running *run, uint16_t opcode)
{
    run->since_ms = net_now_ms();
    run->opcode = opcode;
    run->next = NULL;
    pthread_mutex_lock(&bc->lock);
    int closed = bc->closed;
    if (!closed) {
        bc->busy++;
        run->prev = bc->running_tail;
        if (bc->running_tail)
            bc->running_tail->next = run;
        else
            bc->running = run;
        bc->running_tail = run;
    }
    pthread_mutex_unlock(&bc->lock);
    return closed ? -ENOTCONN : 0;
}

void brick_conn_leave(struct brick_conn *bc, struct brick_running *run)
{
    pthread_mutex_lock(&bc->lock);
    if (run->prev)
        run->prev->next = run->next;
    else
        bc->running = run->next;
    if (run->next)
        run->next->prev = run->prev;
    else
        bc->running_tail = run->prev;
    int last = --bc->busy == 0 && bc->closed && !bc->released;
    if (last)
        bc->released = 1;
    pthread_mutex_unlock(&bc->lock);
    if (last)
        conn_release(bc);
}

int brick_oldest_request(struct brick *b, uint64_t *since_ms, uint16_t *opcode, char *peer,
                         size_t peer_len)
{
    int found = 0;
    pthread_mutex_lock(&b->conns_lock);
    for (struct brick_conn *bc = b->conns; bc; bc = bc->all_next) {
        pthread_mutex_lock(&bc->lock);
        const struct brick_running *r = bc->running;
        if (r && (!found || r->since_ms < *since_ms)) {
            found = 1;
            *since_ms = r->since_ms;
            *opcode = r->opcode;
            snprintf(peer, peer_len, "%s", bc->peer);
        }
        pthread_mutex_unlock(&bc->lock);
    }
    pthread_mutex_unlock(&b->conns_lock);
    return found;
}

void brick_close_unallowed(struct brick *b)
{
    pthread_mutex_lock(&b->opt_lock);
    char *allow = b->auth_allow ? strdup(b->auth_allow) : NULL;
    char *reject = b->auth_reject ? strdup(b->auth_reject) : NULL;
    char *ssl_allow = b->ssl_allow ? strdup(b->ssl_allow) : NULL;
    int lost =
        (b->auth_allow && !allow) || (b->auth_reject && !reject) || (b->ssl_allow && !ssl_allow);
    pthread_mutex_unlock(&b->opt_lock);
    if (lost) { /* out of memory: closing on a guess would be worse */
        log_warn("cannot check the connections against the new auth options: %s", strerror(ENOMEM));
        goto out;
    }
    pthread_mutex_lock(&b->conns_lock);
    for (struct brick_conn *bc = b->conns; bc; bc = bc->all_next) {
        const char *name = bc->rc ? rpc_conn_tls_name(bc->rc) : NULL;
        pthread_mutex_lock(&bc->lock);
        int live = bc->handshaken && !bc->closed;
        /* the rules of the handshake (server.c), for the directory the
         * connection was opened for */
        int by_addr = live && !opt_addr_allowed_dir(allow, reject, bc->subdir, bc->addr);
        int by_name =
            live && !by_addr && name && !rpc_tls_name_allowed(ssl_allow ? ssl_allow : "*", name);
        pthread_mutex_unlock(&bc->lock);
        if (by_addr) {
            log_warn("closing the connection from %s: address %s is no longer allowed "
                     "(auth.allow/auth.reject)",
                     bc->peer, bc->addr);
            rpc_conn_close(bc->rc, -EACCES);
        } else if (by_name) {
            log_warn("closing the connection from %s: certificate name %s is no longer in "
                     "auth.ssl-allow",
                     bc->peer, name);
            rpc_conn_close(bc->rc, -EACCES);
        }
    }
    pthread_mutex_unlock(&b->conns_lock);
out:
    free(allow);
    free(reject);
    free(ssl_allow);
}

/* The file an open descriptor names on the brick, relative to the brick's
 * root ("?" when it cannot be read, "(deleted)" kept as the kernel says). */
static void fd_name(const struct brick *b, int fd, char *out, size_t len)
{
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n < 0) {
        snprintf(out, len, "?");
        return;
    }
    target[n] = 0;
    size_t root = strlen(b->path);
    const char *rel = target;
    if (strncmp(target, b->path, root) == 0 && (target[root] == '/' || !target[root]))
        rel = target[root] ? target + root : "/";
    snprintf(out, len, "%s", rel);
}

static void conn_dump(struct brick_conn *bc, int n, FILE *f)
{
    fprintf(f, "\n[brick.connection.%d]\n", n);
    if (sd_lock(&bc->lock) < 0) {
        fprintf(f, "peer=%s\nskipped=busy\n", bc->peer);
        return;
    }
    uint64_t now = net_now_ms();
    fprintf(f, "peer=%s\naddress=%s\nsubdir=%s\nhandshaken=%d\nclosed=%d\nreleased=%d\n", bc->peer,
            bc->addr, bc->subdir ? bc->subdir : "/", bc->handshaken, bc->closed, bc->released);
    fprintf(f, "requests-running=%d\n", bc->busy);
    int i = 0;
    for (const struct brick_running *r = bc->running; r; r = r->next)
        fprintf(f, "request.%d=%s running-ms=%llu\n", ++i, rpc_op_name(r->opcode),
                (unsigned long long)(now - r->since_ms));
    int open = 0;
    for (uint32_t s = 0; s < bc->n_fhs; s++)
        open += bc->fhs[s] != NULL;
    fprintf(f, "handles=%d\n", open);
    for (uint32_t s = 0; s < bc->n_fhs; s++) {
        const struct brick_fh *fh = bc->fhs[s];
        if (!fh)
            continue;
        char g[GFID_STRLEN] = "-", on_brick[PATH_MAX];
        if (fh->has_gfid)
            gfid_format(&fh->gfid, g);
        fd_name(bc->b, fh->fd, on_brick, sizeof(on_brick));
        fprintf(f, "handle.%llu=%s flags=0%o gfid=%s path=%s on-brick=%s%s\n",
                (unsigned long long)((uint64_t)s | (uint64_t)bc->fh_gen[s] << SLOT_BITS),
                fh->is_dir ? "dir" : "file", (unsigned)fh->flags, g, fh->path ? fh->path : "-",
                on_brick, fh->xpath ? " exclusive-lease" : "");
    }
    pthread_mutex_unlock(&bc->lock);
}

void brick_conns_dump(struct brick *b, FILE *f)
{
    if (sd_section(f, "brick.connections", &b->conns_lock) < 0)
        return;
    int n = 0;
    for (struct brick_conn *bc = b->conns; bc; bc = bc->all_next)
        n++;
    fprintf(f, "count=%d\n", n);
    n = 0;
    for (struct brick_conn *bc = b->conns; bc; bc = bc->all_next)
        conn_dump(bc, ++n, f);
    pthread_mutex_unlock(&b->conns_lock);
}

void brick_conns_put_clients(struct brick *b, const struct brick_conn *asker, struct rpc_buf *out)
{
    pthread_mutex_lock(&b->conns_lock);
    for (struct brick_conn *bc = b->conns; bc; bc = bc->all_next) {
        pthread_mutex_lock(&bc->lock);
        int live = bc != asker && bc->rc && bc->handshaken && !bc->closed;
        pthread_mutex_unlock(&bc->lock);
        if (!live)
            continue;
        uint64_t rx, tx;
        rpc_conn_bytes(bc->rc, &rx, &tx);
        size_t mark = rpc_put_begin(out, RPC_T_CLIENT);
        rpc_put_str(out, RPC_T_HOST, bc->peer);
        rpc_put_u64(out, RPC_T_SIZE, rx);
        rpc_put_u64(out, RPC_T_OFFSET, tx);
        rpc_put_end(out, mark);
    }
    pthread_mutex_unlock(&b->conns_lock);
}
