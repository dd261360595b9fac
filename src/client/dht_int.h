/* The distribute layer's internals, shared by distribute.c (caches,
 * handles, the inline and worker paths), dht_ns.c (namespace changes) and
 * dht_dir.c (directory handles, merged listings and attributes, statfs).
 * Not a public interface: distribute.h is.
 *
 * The dht__ helpers that wait (run, fan_run, get_xattr, hashed, locate and
 * the do_* operations) run on the layer's workers only, never on a thread
 * that completes operations. dht__dir_attr is asynchronous. */
#ifndef CAIRN_CLIENT_DHT_INT_H
#define CAIRN_CLIENT_DHT_INT_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "../lib/log.h"
#include "client.h"
#include "distribute.h"

#define NOFH UINT64_MAX
#define N_WORKERS 4
#define CACHE_MAX 65536
#define CACHE_BUCKETS 4096

/* ---- caches: path -> location, directory path -> layout ---- */

struct centry {
    struct centry *next;
    int subvol, is_dir, has_layout;
    struct cl_dht_layout *layout;
    /* placement volumes, directories: the gfid (the key of the names in
     * it) and the subvolumes known to hold a copy */
    int has_gfid;
    gfid_t gfid;
    uint64_t present;
    char path[];
};

struct dfh {
    int is_dir, subvol;
    uint64_t fh[CL_DHT_MAX];
    char *path;
    /* A listing's leases since its pass began (cookie 0) on this handle:
     * the subvolumes whose every reply granted one, and whether one did
     * not. A pass resumed here from another handle's cookie knows neither. */
    uint64_t leased;
    int unleased, pass;
};

struct job {
    struct job *next;
    struct cl_op *op;
};

struct dht {
    struct cl_layer layer;
    int n, bits;
    /* 1: a volume-wide placement decides where names go (distribute.h;
     * fixed at creation); place and prev (NULL: none) are its current and
     * previous generations, swapped under lock. Set i is child i. */
    int placed;
    struct cl_place *place, *prev;
    char *volume;
    struct cl_dht_cookie_map *cookies; /* mapped readdir cookies */
    pthread_mutex_t lock;              /* caches and handles */
    struct centry *buckets[CACHE_BUCKETS];
    size_t n_cache;
    struct dfh **fhs;
    size_t n_fhs;
    /* cluster.min-free-disk (under lock): the threshold, each subvolume's
     * free bytes at the last reading, the subvolumes below the threshold,
     * and when they were read (0: never) */
    int mfd_percent;
    int64_t mfd_bytes;
    uint64_t avail[CL_DHT_MAX];
    uint64_t short_of_room;
    uint64_t room_ms;
    /* workers */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct job *qhead, *qtail;
    int stopping, n_threads;
    pthread_t threads[N_WORKERS];
};

/* ---- distribute.c ---- */
/* Round trips (struct cl_op's rounds): the thread serving an operation
 * counts those of its sequential phases (dht__run: the sub-operation's;
 * dht__fan_run: the largest of those run at once), starting from what the
 * operation cost before it reached this thread (dht__rounds_start), and
 * dht__complete_op sets them on the operation as it completes it. */
void dht__rounds_start(uint32_t rounds);
uint32_t dht__rounds_now(void);
void dht__complete_op(struct cl_op *op, int status, struct rpc_frame *reply);
uint64_t dht__all_mask(struct dht *d);
void dht__cache_drop(struct dht *d, const char *path);
void dht__cache_drop_all(struct dht *d);
void dht__cache_set_layout(struct dht *d, const char *path, const struct cl_dht_layout *l);
void dht__cache_set_loc(struct dht *d, const char *path, int subvol, int is_dir);
void dht__complete_sub(struct cl_op *op, struct cl_op *sub);
void dht__dfh_free(struct dfh *h);
uint64_t dht__down_mask(struct dht *d);
void dht__every(struct dht *d, struct cl_op *op, int primary, const struct dfh *h);
/* Runs subs[i] on child i for every bit of mask, all at once; waits. */
void dht__fan_run(struct dht *d, struct cl_op *subs, uint64_t mask);
/* Runs ops[k] on child child[k] for every k < n, all at once; waits. An op
 * for a child that is down fails with -ENOTCONN without being sent. */
void dht__run_many(struct dht *d, struct cl_op **ops, const int *child, size_t n);
int dht__fh_add(struct dht *d, struct dfh *h, uint64_t *id);
struct dfh *dht__fh_take(struct dht *d, uint64_t id);
int dht__get_xattr(struct dht *d, int i, const char *path, const char *name, uint8_t *buf,
                   size_t cap, size_t *len);
int dht__hashed(struct dht *d, const char *path, int *h);
/* Placement volumes: where path's name goes (*h) and where the previous
 * placement put it (*hp; -1 when there is none or it is *h). 0 or -errno
 * (waits: the parent's gfid may have to be looked up). */
int dht__place_of(struct dht *d, const char *path, int *h, int *hp);
/* Placement volumes: makes sure directory dir (and its ancestors) exists on
 * subvolume h, as a copy of the one elsewhere (a set added after it was
 * made). 0 or -errno. */
int dht__dir_ensure(struct dht *d, const char *dir, int h);
void dht__cache_set_gfid(struct dht *d, const char *path, const gfid_t *g);
/* 1 and the gfid when cached (the root's is known). */
int dht__cache_gfid(struct dht *d, const char *path, gfid_t *g);
/* The present mask of directory path (bit h), cached. */
int dht__cache_present(struct dht *d, const char *path, int h);
void dht__cache_set_present(struct dht *d, const char *path, int h);
int dht__is_root(const char *path);
int dht__linkto_candidate(const struct rpc_attr *a);
int dht__locate(struct dht *d, const struct rpc_msg *args, const char *path, int *where,
                int *is_dir);
void dht__release_all(struct dht *d, struct cl_op *subs, uint64_t mask);
int dht__run(struct dht *d, int i, struct cl_op *sub);
void dht__sub_from(struct cl_op *sub, const struct rpc_msg *args);
void dht__no_lease(struct rpc_frame *r);
void dht__ask_lease(struct rpc_msg *sub, const struct rpc_msg *args);
void dht__dir_lease(struct dht *d, const struct cl_op *subs, uint64_t mask, struct rpc_frame *r);

/* ---- dht_ns.c ---- */
/* (Re)creates directory path on the subvolumes in mask as a copy of the
 * one on subvolume from (dht_ns.c). */
void dht__remake_dirs(struct dht *d, const char *path, uint64_t mask, int from, int replace);
/* A link-to file at path on subvolume at, pointing to target; 0 or -errno. */
int dht__make_linkto(struct dht *d, int at, const char *path, int target);
int dht__remove_name(struct dht *d, int at, const char *path);
void dht__do_link(struct dht *d, struct cl_op *op, const char *src, const char *dst);
void dht__do_mkdir(struct dht *d, struct cl_op *op, const char *path);
void dht__do_rename(struct dht *d, struct cl_op *op, const char *src, const char *dst);
void dht__do_rmdir(struct dht *d, struct cl_op *op, const char *path);
void dht__do_unlink(struct dht *d, struct cl_op *op, const char *path);

/* ---- dht_dir.c ---- */
void dht__dir_attr(struct dht *d, struct cl_op *op, int base, const struct dfh *h);
void dht__do_dir_fh(struct dht *d, struct cl_op *op, struct dfh *h);
void dht__do_opendir(struct dht *d, struct cl_op *op, const char *path);
void dht__do_statfs(struct dht *d, struct cl_op *op);

#endif
