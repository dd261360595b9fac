/* Warming the subdirectories of a directory being listed.
 *
 * A client listing a tree with attributes (`ls -lR`, a file manager, a
 * backup's walk) asks for one directory after another, and on a brick
 * whose caches are cold each listing waits for the disk to read the
 * entries' inodes. When a READDIRPLUS answers a directory, its
 * subdirectories are the likely next listings: one thread per brick
 * walks them meanwhile, reading each entry's inode (fstatat), so that the
 * client's READDIRPLUS of a subdirectory finds it in memory.
 *
 * It only reads, so it changes nothing anyone sees; it is bounded (a
 * queue of WARM_QUEUE directories, the first WARM_ENTRIES entries of
 * each, a full queue drops new work) and runs on its own thread, beside
 * the workers. It uses the system calls directly, not the brick's storage
 * interface, and only when that interface is the real one: a fault armed
 * by a test is not consumed here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brick.h"
#include "storage.h"

#define WARM_QUEUE 256
#define WARM_ENTRIES 4096

struct brick_warm {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fds[WARM_QUEUE]; /* ring of directory fds to walk */
    unsigned head, count;
    int busy; /* walking one */
    int stopping;
    pthread_t thread;
    uint64_t walked; /* directories (for tests) */
};

/* Reads the inodes of the first WARM_ENTRIES entries of directory fd, and
 * closes it. */
static void walk(int fd)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    int seen = 0;
    for (struct dirent *e; seen < WARM_ENTRIES && (e = readdir(d));) {
        const char *nm = e->d_name;
        if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
            continue;
        struct stat st;
        (void)fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW);
        seen++;
    }
    closedir(d);
}

static void *warm_main(void *arg)
{
    struct brick_warm *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->count && !w->stopping)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->stopping)
            break;
        int fd = w->fds[w->head];
        w->head = (w->head + 1) % WARM_QUEUE;
        w->count--;
        w->busy = 1;
        pthread_mutex_unlock(&w->lock);
        walk(fd);
        pthread_mutex_lock(&w->lock);
        w->walked++;
        w->busy = 0;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int brick_warm_init(struct brick *b)
{
    b->warm = NULL;
    if (b->vfs != &brick_vfs_posix)
        return 0;
    struct brick_warm *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    int rc = pthread_create(&w->thread, NULL, warm_main, w);
    if (rc != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return -rc;
    }
    b->warm = w;
    return 0;
}

void brick_warm_fini(struct brick *b)
{
    struct brick_warm *w = b->warm;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    for (; w->count; w->count--, w->head = (w->head + 1) % WARM_QUEUE)
        close(w->fds[w->head]);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    b->warm = NULL;
}

static int full(const struct brick_warm *w)
{
    return w->count == WARM_QUEUE || w->stopping;
}

void brick_warm_subdir(struct brick *b, int dirfd, const char *name)
{
    struct brick_warm *w = b->warm;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    int room = !full(w); /* no open when there is no room for it */
    pthread_mutex_unlock(&w->lock);
    int fd = room ? openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (fd < 0)
        return;
    pthread_mutex_lock(&w->lock);
    if (full(w)) {
        pthread_mutex_unlock(&w->lock);
        close(fd);
        return;
    }
    w->fds[(w->head + w->count) % WARM_QUEUE] = fd;
    w->count++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

uint64_t brick_warm_settle(struct brick *b)
{
    struct brick_warm *w = b->warm;
    if (!w)
        return 0;
    pthread_mutex_lock(&w->lock);
    while ((w->count || w->busy) && !w->stopping)
        pthread_cond_wait(&w->cond, &w->lock);
    uint64_t n = w->walked;
    pthread_mutex_unlock(&w->lock);
    return n;
}
