/* A fixed set of worker threads taking jobs from one FIFO queue. Submitting
 * never blocks, so a connection's reader thread can hand work over and go
 * back to reading. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "server.h"

struct job {
    struct job *next;
    void (*fn)(void *);
    void *arg;
};

struct brick_pool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct job *head, **tail;
    int stopping;
    int n;
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    struct brick_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cond, &p->lock);
        struct job *j = p->head;
        if (!j)
            break; /* stopping and drained */
        p->head = j->next;
        if (!p->head)
            p->tail = &p->head;
        pthread_mutex_unlock(&p->lock);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int brick_pool_start(struct brick_pool **out, int n)
{
    struct brick_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    if (n < 1)
        n = 1;
    p->threads = calloc((size_t)n, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->tail = &p->head;
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
        if (rc) {
            p->n = i;
            brick_pool_stop(p);
            return -rc;
        }
        p->n = i + 1;
    }
    *out = p;
    return 0;
}

int brick_pool_submit(struct brick_pool *p, void (*fn)(void *), void *arg)
{
    struct job *j = malloc(sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->fn = fn;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->stopping) {
        pthread_mutex_unlock(&p->lock);
        free(j);
        return -ESHUTDOWN;
    }
    *p->tail = j;
    p->tail = &j->next;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void brick_pool_stop(struct brick_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->threads);
    free(p);
}
