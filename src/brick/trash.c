/* Removing a whole tree in one request, and giving its space back later.
 *
 * A client that wrote back the removal of every entry below a directory
 * and then of the directory itself (`rm -rf` under its exclusive leases,
 * docs/consistency.md) sends one RMDIR whose DATA lists those entries. The
 * brick checks that everything below the directory is listed, then renames
 * the directory into .cairn/trash: one rename instead of an unlink per
 * entry, so the client's removal is done as soon as the namespace is.
 *
 * UNLINK of a small regular file with one link that no handle has open
 * moves it into the trash too, so that a tree removed file by file (a
 * directory too large for the client to gather, a program that removes
 * files one at a time) also leaves its inodes for the next new files.
 *
 * A purge thread per brick, at the lowest CPU priority, removes what the
 * trash holds (regular files may become spare inodes instead: spare.c);
 * at start it empties what a stop or crash left there. A brick without a
 * trash (it could not be made) removes the tree in place before it
 * answers. Until it has, the space stays in use (df shows it) and open
 * handles on the removed files keep working, as after an unlink. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "brick.h"
#include "storage.h"

#define VFS (b->vfs)
#define PURGE_DEPTH 256 /* deeper than this (only a crash's leftovers): left */
/* A removed file this small goes through the trash (its inode may be kept
 * as a spare); a larger one is unlinked at once, so that removing it gives
 * its space back before the reply (a full brick's user frees room that
 * way). */
#define TRASH_FILE_MAX (256 << 10)
#define AHEAD_BATCH 256 /* spares made ahead before the purge looks again */
/* While clients change things (a change in the last PACE_BUSY_MS), the
 * purge removes PACE_BATCH entries per PACE_PAUSE_MS at most (640 a
 * second); at full speed once they stop, or while the brick's file system
 * has less than a PACE_FREE_PART of its blocks or inodes free. */
#define PACE_BUSY_MS 500
#define PACE_BATCH 32
#define PACE_PAUSE_MS 50
#define PACE_FREE_PART 10 /* not paced with less than a tenth free */

struct brick_trash {
    int fd; /* .cairn/trash */
    struct brick *b;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int work, stopping, busy;
    pthread_t thread;
    uint64_t purged; /* entries removed so far */
    unsigned paced;  /* entries removed since the purge last paused */
};

static uint64_t purge(struct brick_trash *T, int dirfd, const char *name, int type, int depth);

/* ---- the listed entries: an open-addressing set of slices of DATA ---- */

struct names {
    const char **p;
    uint32_t *len;
    size_t mask;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static size_t slot_of(const struct names *s, const char *p, size_t n)
{
    size_t i = (size_t)hash_bytes(p, n) & s->mask;
    while (s->p[i] && (s->len[i] != n || memcmp(s->p[i], p, n)))
        i = (i + 1) & s->mask;
    return i;
}

static int names_init(struct names *s, const struct rpc_bytes *tree, int n)
{
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    s->mask = cap - 1;
    s->p = calloc(cap, sizeof(*s->p));
    s->len = calloc(cap, sizeof(*s->len));
    if (!s->p || !s->len) {
        free(s->p);
        free(s->len);
        return -ENOMEM;
    }
    for (uint32_t o = 0; o < tree->len;) {
        const char *e = (const char *)tree->p + o;
        size_t l = strlen(e);
        size_t i = slot_of(s, e, l);
        s->p[i] = e;
        s->len[i] = (uint32_t)l;
        o += (uint32_t)l + 1;
    }
    return 0;
}

static void names_free(struct names *s)
{
    free(s->p);
    free(s->len);
}

static int names_has(const struct names *s, const char *p, size_t n)
{
    return s->p[slot_of(s, p, n)] != NULL;
}

/* ---- the check: everything below the directory is listed ---- */

#define DENTS_BUF 8192

/* Whether every entry of directory fd, whose path relative to the removed
 * directory is rel[0..rl) (empty at the top), and below it is in s.
 * Returns 0, -ENOTEMPTY (why names the first entry not listed) or -errno.
 * Listed entries have at most RPC_TREE_DEPTH components, so an entry found
 * deeper fails the lookup before the walk goes further. */
static int check_dir(struct brick *b, int fd, char *rel, size_t rl, const struct names *s,
                     char *why, size_t wl)
{
    char *buf = malloc(DENTS_BUF);
    if (!buf)
        return -ENOMEM;
    int rc = 0;
    for (long n; rc == 0 && (n = VFS->getdents(fd, buf, DENTS_BUF)) != 0;) {
        if (n < 0) {
            rc = (int)n;
            break;
        }
        for (long o = 0; rc == 0 && o < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + o);
            o += d->d_reclen;
            const char *nm = d->d_name;
            if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
                continue;
            size_t nl = strlen(nm), l2 = rl + (rl ? 1 : 0) + nl;
            if (l2 >= PATH_MAX) {
                rc = -ENAMETOOLONG;
                break;
            }
            if (rl)
                rel[rl] = '/';
            memcpy(rel + l2 - nl, nm, nl + 1);
            if (!names_has(s, rel, l2)) {
                snprintf(why, wl, "%s is not among the entries the removal lists", rel);
                rc = -ENOTEMPTY;
                break;
            }
            int is_dir = d->d_type == DT_DIR;
            struct stat st;
            if (d->d_type == DT_UNKNOWN && VFS->fstatat(fd, nm, &st) == 0)
                is_dir = S_ISDIR(st.st_mode);
            if (is_dir) {
                int sub = VFS->openat(fd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
                rc = sub < 0 ? sub : check_dir(b, sub, rel, l2, s, why, wl);
                if (sub >= 0)
                    VFS->close(sub);
            }
            rel[rl] = 0;
        }
    }
    free(buf);
    return rc;
}

/* Renames dirfd/name into the trash, under a name of its own, for the
 * purge thread. was: what the caller found there (NULL: anything goes);
 * something else found in its place meanwhile is put back (-EAGAIN). */
static int into_trash(struct brick *b, struct brick_trash *T, int dirfd, const char *name,
                      const struct stat *was)
{
    gfid_t g;
    char tname[GFID_STRLEN];
    gfid_generate(&g);
    gfid_format(&g, tname);
    int rc = VFS->renameat2(dirfd, name, T->fd, tname, RENAME_NOREPLACE);
    if (rc < 0)
        return rc;
    struct stat st;
    if (was && (VFS->fstatat(T->fd, tname, &st) < 0 || st.st_ino != was->st_ino ||
                st.st_dev != was->st_dev || !S_ISREG(st.st_mode))) {
        rc = VFS->renameat2(T->fd, tname, dirfd, name, RENAME_NOREPLACE);
        if (rc < 0)
            log_warn("trash: could not put back %s (%s): left as %s/trash/%s", name, strerror(-rc),
                     BRICK_PRIVATE, tname);
        return -EAGAIN;
    }
    pthread_mutex_lock(&T->lock);
    T->work = 1;
    pthread_cond_broadcast(&T->cond); /* the purge thread, among settle()'s waiters */
    pthread_mutex_unlock(&T->lock);
    return 0;
}

int brick_trash_tree(struct brick *b, int dirfd, const char *name, const struct rpc_bytes *tree,
                     char *why, size_t wl)
{
    struct brick_trash *T = b->trash;
    const char *w = NULL;
    int n = rpc_tree_check(tree, &w);
    if (n < 0) {
        snprintf(why, wl, "bad tree: %s", w);
        return -EPROTO;
    }
    struct names s;
    int rc = names_init(&s, tree, n);
    if (rc < 0)
        return rc;
    int fd = VFS->openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    char *rel = malloc(PATH_MAX);
    if (fd < 0 || !rel) {
        rc = fd < 0 ? fd : -ENOMEM;
    } else {
        rel[0] = 0;
        rc = check_dir(b, fd, rel, 0, &s, why, wl);
    }
    if (fd >= 0)
        VFS->close(fd);
    free(rel);
    names_free(&s);
    if (rc < 0)
        return rc;
    if (!T) {
        (void)purge(NULL, dirfd, name, DT_DIR, 0);
        return VFS->fstatat(dirfd, name, &(struct stat){0}) == -ENOENT ? 0 : -EIO;
    }
    return into_trash(b, T, dirfd, name, NULL);
}

int brick_trash_file(struct brick *b, int dirfd, const char *name)
{
    struct brick_trash *T = b->trash;
    struct stat st;
    if (T && VFS->fstatat(dirfd, name, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
        st.st_size <= TRASH_FILE_MAX && !brick_spare_is_open(b, st.st_dev, st.st_ino)) {
        int rc = into_trash(b, T, dirfd, name, &st);
        if (rc != -EAGAIN)
            return rc;
    }
    return VFS->unlinkat(dirfd, name, 0);
}

/* ---- the purge ---- */

static int stopping(struct brick_trash *T)
{
    return T && __atomic_load_n(&T->stopping, __ATOMIC_ACQUIRE);
}

/* The purge thread, after each entry: pauses while clients change things.
 *
 * Why: the purge's renames into .cairn/spare and its unlinks take the same
 * locks as the requests' (a cross-directory rename takes the file system's
 * one rename lock), and at the lowest CPU priority a purge holding one
 * waits long for a CPU. An `rm -rf` followed at once by a `tar x` ran the
 * two together: include/'s untar took 1.9 s instead of 1.5-1.8 s
 * (docs/notes/performance-notes.md, round twenty-two). Paced, the purge still
 * ends while clients are busy, at PACE_BATCH per PACE_PAUSE_MS. */
static void pace(struct brick_trash *T)
{
    if (++T->paced < PACE_BATCH)
        return;
    T->paced = 0;
    if (brick_idle_ms(T->b) >= PACE_BUSY_MS)
        return;
    /* a brick short of space gets it back at full speed */
    struct statfs sf;
    if (fstatfs(T->fd, &sf) < 0 || sf.f_bavail < sf.f_blocks / PACE_FREE_PART ||
        sf.f_ffree < sf.f_files / PACE_FREE_PART)
        return;
    struct timespec ts;
    net_deadline(&ts, CLOCK_MONOTONIC, PACE_PAUSE_MS);
    pthread_mutex_lock(&T->lock);
    /* into_trash() wakes the thread too: only a stop ends the pause early */
    while (!T->stopping && pthread_cond_timedwait(&T->cond, &T->lock, &ts) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&T->lock);
}

/* Removes every entry of directory fd (an open file of its own, closed
 * here), at depth; returns the entries removed. */
static uint64_t purge_below(struct brick_trash *T, int fd, int depth)
{
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && !stopping(T);) {
        const char *nm = e->d_name;
        if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
            continue;
        n += purge(T, fd, nm, e->d_type, depth);
        if (T)
            pace(T);
    }
    closedir(d);
    return n;
}

/* Removes name (of dirent type type) in directory dirfd with everything
 * below it; returns the entries removed. A regular file may become a spare
 * inode instead (spare.c). Plain system calls: this is housekeeping, not
 * a request, and a test's armed storage fault is not consumed here. */
static uint64_t purge(struct brick_trash *T, int dirfd, const char *name, int type, int depth)
{
    if (T && type == DT_REG && brick_spare_keep(T->b, dirfd, name))
        return 1;
    if (unlinkat(dirfd, name, 0) == 0)
        return 1;
    if ((errno != EISDIR && errno != EPERM) || depth >= PURGE_DEPTH || stopping(T))
        return 0;
    uint64_t n =
        purge_below(T, openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW), depth + 1);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
        n++;
    return n;
}

static void *purge_main(void *arg)
{
    struct brick_trash *T = arg;
    /* Behind the requests for the CPU (nice 19). Not the idle I/O class:
     * mq-deadline holds such reads back for seconds behind any other I/O. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    pthread_mutex_lock(&T->lock);
    for (;;) {
        /* between passes: spares made ahead (spare.c) */
        while (!T->work && !T->stopping) {
            pthread_mutex_unlock(&T->lock);
            int wait_ms = brick_spare_make_ahead(T->b, AHEAD_BATCH);
            pthread_mutex_lock(&T->lock);
            if (wait_ms > 0 && !T->work && !T->stopping) {
                struct timespec ts;
                net_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)wait_ms);
                pthread_cond_timedwait(&T->cond, &T->lock, &ts);
            }
        }
        if (T->stopping)
            break;
        T->work = 0;
        T->busy = 1;
        pthread_mutex_unlock(&T->lock);
        brick_spare_pass(T->b);
        /* a new open file each pass: a dup would share (and keep) the
         * last pass's offset */
        uint64_t n = purge_below(T, openat(T->fd, ".", O_RDONLY | O_DIRECTORY), 0);
        pthread_mutex_lock(&T->lock);
        T->purged += n;
        T->busy = 0;
        pthread_cond_broadcast(&T->cond);
        if (n)
            log_debug("trash: %llu entries removed", (unsigned long long)n);
    }
    pthread_mutex_unlock(&T->lock);
    return NULL;
}

int brick_trash_init(struct brick *b)
{
    int rc = b->vfs->mkdirat(b->root_fd, BRICK_PRIVATE "/trash", 0700);
    if (rc < 0 && rc != -EEXIST)
        return rc;
    struct brick_trash *T = calloc(1, sizeof(*T));
    if (!T)
        return -ENOMEM;
    T->fd =
        b->vfs->openat(b->root_fd, BRICK_PRIVATE "/trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (T->fd < 0) {
        rc = T->fd;
        free(T);
        return rc;
    }
    T->b = b;
    pthread_mutex_init(&T->lock, NULL);
    net_cond_init_mono(&T->cond);
    T->work = 1; /* what an earlier run left */
    if ((rc = pthread_create(&T->thread, NULL, purge_main, T)) != 0) {
        b->vfs->close(T->fd);
        pthread_cond_destroy(&T->cond);
        pthread_mutex_destroy(&T->lock);
        free(T);
        return -rc;
    }
    b->trash = T;
    return 0;
}

void brick_trash_fini(struct brick *b)
{
    struct brick_trash *T = b->trash;
    if (!T)
        return;
    pthread_mutex_lock(&T->lock);
    __atomic_store_n(&T->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&T->cond);
    pthread_mutex_unlock(&T->lock);
    pthread_join(T->thread, NULL);
    b->vfs->close(T->fd);
    pthread_cond_destroy(&T->cond);
    pthread_mutex_destroy(&T->lock);
    free(T);
    b->trash = NULL;
}

uint64_t brick_trash_settle(struct brick *b)
{
    struct brick_trash *T = b->trash;
    if (!T)
        return 0;
    pthread_mutex_lock(&T->lock);
    while (T->work || T->busy)
        pthread_cond_wait(&T->cond, &T->lock);
    uint64_t n = T->purged;
    pthread_mutex_unlock(&T->lock);
    return n;
}
