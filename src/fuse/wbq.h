/* An ordered queue of written-back requests about directories, sent by one
 * worker thread (wb_mkdir.c, wb_dir.c). Each item names a directory node
 * and its parent; waiters wait until no item matching theirs is left. */
#ifndef CAIRN_FUSE_WBQ_H
#define CAIRN_FUSE_WBQ_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct wbq_item {
    struct wbq_item *next;
    uint64_t node, parent;
    int taken; /* the worker is sending it */
};

struct wbq {
    pthread_mutex_t lock;
    pthread_cond_t work; /* the worker: something queued, or stop */
    pthread_cond_t done; /* waiters: an item was answered */
    struct wbq_item *head, **tail;
    size_t n, max;
    unsigned long failures; /* sends that failed so far */
    int last_err;           /* the last one's error, for waiters */
    pthread_t worker;
    int started, stop;
    /* On the worker, without the lock: sends it (0 or -errno); then done
     * is called after waiters were woken, and frees it. What a woken
     * waiter must find (an error for the next fsync) is recorded by send,
     * while the item is still queued. */
    int (*send)(struct wbq *q, struct wbq_item *it);
    void (*done_fn)(struct wbq *q, struct wbq_item *it, int rc);
    void *ctx;
};

enum wbq_match { WBQ_NODE, WBQ_PARENT, WBQ_ANY };

void wbq_init(struct wbq *q, size_t max, int (*send)(struct wbq *, struct wbq_item *),
              void (*done_fn)(struct wbq *, struct wbq_item *, int), void *ctx);
/* Waits for everything queued, then stops the worker. */
void wbq_destroy(struct wbq *q);
/* Under q->lock: whether one more item fits (the worker is started first). */
int wbq_room_locked(struct wbq *q);
/* Under q->lock: appends it. */
void wbq_push_locked(struct wbq *q, struct wbq_item *it);
/* Under q->lock: the last item of node the worker has not taken, or NULL. */
struct wbq_item *wbq_untaken_locked(struct wbq *q, uint64_t node);
/* Under q->lock: the last item of node, taken or not, or NULL. */
struct wbq_item *wbq_find_locked(struct wbq *q, uint64_t node);
/* Any item queued. */
int wbq_busy(struct wbq *q);
/* Until no item matches key (by node, by parent, or any); the error of a
 * send that failed meanwhile, or 0. */
int wbq_wait(struct wbq *q, uint64_t key, enum wbq_match how);
/* Whether an item of node is queued (not waiting). */
int wbq_has(struct wbq *q, uint64_t node);

#endif
