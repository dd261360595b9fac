/* The ordered queue of written-back directory requests (wbq.h). */
#include "wbq.h"

static void *worker_main(void *arg)
{
    struct wbq *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        struct wbq_item *it = q->head;
        if (!it) {
            if (q->stop)
                break;
            pthread_cond_wait(&q->work, &q->lock);
            continue;
        }
        it->taken = 1;
        pthread_mutex_unlock(&q->lock);
        int rc = q->send(q, it);
        pthread_mutex_lock(&q->lock);
        if (rc < 0) {
            q->failures++;
            q->last_err = rc;
        }
        if (!(q->head = it->next))
            q->tail = &q->head;
        __atomic_sub_fetch(&q->n, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&q->done);
        pthread_mutex_unlock(&q->lock);
        q->done_fn(q, it, rc);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

void wbq_init(struct wbq *q, size_t max, int (*send)(struct wbq *, struct wbq_item *),
              void (*done_fn)(struct wbq *, struct wbq_item *, int), void *ctx)
{
    *q = (struct wbq){.max = max, .send = send, .done_fn = done_fn, .ctx = ctx};
    q->tail = &q->head;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
}

void wbq_destroy(struct wbq *q)
{
    wbq_wait(q, 0, WBQ_ANY);
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->lock);
    if (q->started)
        pthread_join(q->worker, NULL);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    pthread_mutex_destroy(&q->lock);
}

int wbq_room_locked(struct wbq *q)
{
    if (!q->started && pthread_create(&q->worker, NULL, worker_main, q) == 0)
        q->started = 1;
    return q->started && !q->stop && q->n < q->max;
}

void wbq_push_locked(struct wbq *q, struct wbq_item *it)
{
    it->next = NULL;
    it->taken = 0;
    *q->tail = it;
    q->tail = &it->next;
    __atomic_add_fetch(&q->n, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&q->work);
}

static struct wbq_item *find_locked(struct wbq *q, uint64_t node, int untaken)
{
    struct wbq_item *found = NULL;
    for (struct wbq_item *it = q->head; it; it = it->next)
        if (it->node == node && !(untaken && it->taken))
            found = it;
    return found;
}

struct wbq_item *wbq_untaken_locked(struct wbq *q, uint64_t node)
{
    return find_locked(q, node, 1);
}

struct wbq_item *wbq_find_locked(struct wbq *q, uint64_t node)
{
    return find_locked(q, node, 0);
}

int wbq_busy(struct wbq *q)
{
    return __atomic_load_n(&q->n, __ATOMIC_ACQUIRE) != 0;
}

static int matches(struct wbq *q, uint64_t key, enum wbq_match how)
{
    for (struct wbq_item *it = q->head; it; it = it->next)
        if (how == WBQ_ANY || (how == WBQ_NODE ? it->node : it->parent) == key)
            return 1;
    return 0;
}

int wbq_wait(struct wbq *q, uint64_t key, enum wbq_match how)
{
    if (!wbq_busy(q))
        return 0;
    pthread_mutex_lock(&q->lock);
    unsigned long before = q->failures;
    while (matches(q, key, how))
        pthread_cond_wait(&q->done, &q->lock);
    int rc = q->failures != before ? q->last_err : 0;
    pthread_mutex_unlock(&q->lock);
    return rc;
}

int wbq_has(struct wbq *q, uint64_t node)
{
    if (!wbq_busy(q))
        return 0;
    pthread_mutex_lock(&q->lock);
    int has = matches(q, node, WBQ_NODE);
    pthread_mutex_unlock(&q->lock);
    return has;
}
