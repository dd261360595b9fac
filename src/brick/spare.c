/* Spare inodes: regular files of removed trees, kept for the next new
 * files.
 *
 * Why: ext4 without a journal (the file system of this project's machines)
 * allocates a new inode by scanning its block group and skipping, one by
 * one, every inode freed in the last minute or so (several minutes while
 * the inode table block is dirty). A `cp -a` or `tar x` right after an
 * `rm -rf` spent about two thirds of each brick's CPU in that scan (perf:
 * recently_deleted under __ext4_new_inode), and with three bricks on one
 * file system every freed inode is scanned three times over.
 *
 * So the trash's purge (trash.c) does not unlink a regular file with one
 * link that no handle has open: it empties it (no data, no extended
 * attribute but its old id) and renames it into .cairn/spare (one of its
 * SPARE_DIRS subdirectories). MAKE_FILE and CREATE (ops_data.c) take one
 * there instead of creating an inode in .cairn/tmp and give it the new
 * file's mode and times; the rest (id, owner, data, and the rename to its
 * name) is done as for a new inode. A spare found when the brick starts
 * is emptied by its taker. The purge truncates, not the taker: ext4
 * flushes a file truncated to zero when it is next closed (its guard for
 * rewrite-by-truncate), which made every new file a synchronous write. At
 * most SPARE_MAX are kept, and per purge pass no more than a quarter of
 * the file system's free inodes, so spares never starve directories or
 * symlinks. The spares survive a restart (the directories are read when
 * the brick opens).
 *
 * The open set: the purge must not keep a file some handle still has
 * open (POSIX keeps an unlinked file's data for whoever has it open), so
 * every regular file opened through a handle is counted here by inode. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lib/log.h"
#include "../lib/net.h"
#include "brick.h"
#include "storage.h"

#define VFS (b->vfs)
#define SPARE_MAX 65536
#define AHEAD_DEFAULT 65536 /* storage.spare-inodes */
/* No request that changes anything for this long: make spares ahead. Not
 * sooner: a copy or an untar is usually followed by a sync, which would
 * also have to write the spares made meanwhile. */
#define AHEAD_IDLE_MS 3000
#define AHEAD_CHECK_MS 1000
#define AHEAD_START_MS 1000 /* after the brick starts */
/* Between two batches of spares made ahead: at most 5,120 a second, so that
 * new bricks (and a test suite's many volumes) do not flood the disk. */
#define AHEAD_PAUSE_MS 50
#define OPEN_BUCKETS 1024
#define XLIST_MAX 4096 /* a spare with a longer attribute list is not taken */
/* On an id in the stack: the spare is known empty (made ahead, or emptied
 * when kept), so the taker skips emptying it. Spares found at start are
 * emptied when taken: a crash may have left one half built. */
#define SPARE_CLEAN (1ull << 63)
#define SPARE_NAME_MAX 64
/* Spares are kept in this many subdirectories of .cairn/spare, by number:
 * ext4 allocates a file's inode in its directory's block group and skips,
 * one by one, the inodes freed there in the last minute or so, so a brick
 * making spares ahead in one directory right after other removals on the
 * file system scanned the same freed inodes for every one. .cairn/spare
 * is a "top" directory (chattr +T), so its subdirectories, and the spares
 * made in them, spread over block groups; a taker's rename also searches
 * a directory of about a hundred names instead of thousands. */
#define SPARE_DIRS 64
/* inode flags a file system sets on a plain new file (ext4: extents) */
#define PLAIN_FLAGS (FS_EXTENT_FL | FS_HUGE_FILE_FL)

struct open_ino {
    struct open_ino *next;
    dev_t dev;
    ino_t ino;
    unsigned count;
    const void *only; /* the one owner of every open, NULL when mixed */
    unsigned only_n;  /* opens by only */
};

struct brick_spare {
    int fd;              /* .cairn/spare */
    int fds[SPARE_DIRS]; /* its subdirectories, where the spares are */
    pthread_mutex_t lock;
    uint64_t *ids; /* the spares' names, a stack */
    size_t n, cap;
    uint64_t next_id;
    size_t room;           /* how many more this purge pass may keep */
    uint64_t taken, kept;  /* counters, for the log and tests */
    size_t ahead;          /* spares to make ahead in idle time */
    uint64_t last_busy_ms; /* the last change a client asked for (or the start) */
    struct open_ino *open[OPEN_BUCKETS];
};

/* A spare's name in .cairn/spare: its number and SPARE_SUFFIX. Taking a
 * spare renames it out, and ext4 finds (and deletes) the name by reading
 * its directory block entry by entry: with bare numbers a 4 KiB block held
 * about 300 entries, with the suffix about 75, and a rename out of the
 * spare directory took 2-3 us less (a quarter of its time). */
#define SPARE_SUFFIX ".spare-inode-for-the-next-new-file"
static void spare_name(uint64_t id, char *out, size_t len)
{
    snprintf(out, len, "%llu" SPARE_SUFFIX, (unsigned long long)(id & ~SPARE_CLEAN));
}

/* The subdirectory holding spare id. */
static int spare_dir(const struct brick_spare *S, uint64_t id)
{
    return S->fds[(id & ~SPARE_CLEAN) % SPARE_DIRS];
}

static int push_locked(struct brick_spare *S, uint64_t id)
{
    if (S->n == S->cap) {
        size_t cap = S->cap ? S->cap * 2 : 256;
        uint64_t *p = realloc(S->ids, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        S->ids = p;
        S->cap = cap;
    }
    S->ids[S->n++] = id;
    return 0;
}

/* A listing of the directory open as fd (which stays open), or NULL. */
static DIR *dir_of(int fd)
{
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d && dfd >= 0)
        close(dfd);
    return d;
}

/* Reads one directory of spares an earlier run kept: names it gave, in
 * the directory their number says; anything else goes. */
static void read_kept(struct brick_spare *S, int i)
{
    DIR *d = dir_of(S->fds[i]);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        char *end;
        unsigned long long id = strtoull(e->d_name, &end, 10);
        if (strcmp(end, SPARE_SUFFIX) != 0 || e->d_name[0] < '0' || e->d_name[0] > '9' ||
            id >= SPARE_CLEAN || id % SPARE_DIRS != (unsigned)i || S->n >= SPARE_MAX ||
            push_locked(S, id) < 0) {
            (void)unlinkat(S->fds[i], e->d_name, 0);
            continue;
        }
        if (id >= S->next_id)
            S->next_id = id + 1;
    }
    if (d)
        closedir(d);
}

/* Unlinks the files directly in .cairn/spare (where spares were kept
 * before it had subdirectories). */
static void drop_top_files(struct brick_spare *S)
{
    DIR *d = dir_of(S->fd);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_type != DT_DIR)
            (void)unlinkat(S->fd, e->d_name, 0);
    if (d)
        closedir(d);
}

int brick_spare_init(struct brick *b)
{
    int rc = VFS->mkdirat(b->root_fd, BRICK_PRIVATE "/spare", 0700);
    if (rc < 0 && rc != -EEXIST)
        return rc;
    struct brick_spare *S = calloc(1, sizeof(*S));
    if (!S)
        return -ENOMEM;
    for (int i = 0; i < SPARE_DIRS; i++)
        S->fds[i] = -1;
    S->fd = VFS->openat(b->root_fd, BRICK_PRIVATE "/spare", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    rc = S->fd < 0 ? S->fd : 0;
    if (rc == 0) {
        int fl = 0;
        if (ioctl(S->fd, FS_IOC_GETFLAGS, &fl) == 0 && !(fl & FS_TOPDIR_FL)) {
            fl |= FS_TOPDIR_FL; /* its subdirectories spread over block groups */
            (void)ioctl(S->fd, FS_IOC_SETFLAGS, &fl);
        }
        drop_top_files(S);
    }
    for (int i = 0; rc == 0 && i < SPARE_DIRS; i++) {
        char name[8];
        snprintf(name, sizeof(name), "%02x", i);
        rc = VFS->mkdirat(S->fd, name, 0700);
        if (rc == 0 || rc == -EEXIST)
            rc = S->fds[i] = VFS->openat(S->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (rc >= 0) {
            rc = 0;
            read_kept(S, i);
        }
    }
    if (rc < 0) {
        for (int i = 0; i < SPARE_DIRS; i++)
            if (S->fds[i] >= 0)
                VFS->close(S->fds[i]);
        if (S->fd >= 0)
            VFS->close(S->fd);
        free(S->ids);
        free(S);
        return rc;
    }
    pthread_mutex_init(&S->lock, NULL);
    S->ahead = AHEAD_DEFAULT;
    /* the first ones a second after the start: the volume's options (which
     * may say none) arrive meanwhile */
    S->last_busy_ms = net_now_ms() - (AHEAD_IDLE_MS - AHEAD_START_MS);
    b->spare = S;
    return 0;
}

void brick_spare_fini(struct brick *b)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return;
    for (int i = 0; i < OPEN_BUCKETS; i++)
        for (struct open_ino *o = S->open[i], *nx; o; o = nx) {
            nx = o->next;
            free(o);
        }
    for (int i = 0; i < SPARE_DIRS; i++)
        VFS->close(S->fds[i]);
    VFS->close(S->fd);
    pthread_mutex_destroy(&S->lock);
    free(S->ids);
    free(S);
    b->spare = NULL;
}

/* ---- the open set ---- */

static struct open_ino **open_slot(struct brick_spare *S, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
    struct open_ino **p = &S->open[(h >> 40) % OPEN_BUCKETS];
    while (*p && ((*p)->dev != dev || (*p)->ino != ino))
        p = &(*p)->next;
    return p;
}

int brick_spare_opened(struct brick *b, dev_t dev, ino_t ino, const void *owner)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return 0;
    pthread_mutex_lock(&S->lock);
    struct open_ino **p = open_slot(S, dev, ino);
    if (!*p && (*p = calloc(1, sizeof(**p)))) {
        (*p)->dev = dev;
        (*p)->ino = ino;
        (*p)->only = owner;
    }
    int rc = *p ? 0 : -ENOMEM;
    if (*p) {
        struct open_ino *o = *p;
        o->count++;
        if (o->only == owner)
            o->only_n++;
        else
            o->only = NULL; /* mixed until every open is closed */
    }
    pthread_mutex_unlock(&S->lock);
    return rc;
}

int brick_spare_is_open(struct brick *b, dev_t dev, ino_t ino)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return 0;
    pthread_mutex_lock(&S->lock);
    int open = *open_slot(S, dev, ino) != NULL;
    pthread_mutex_unlock(&S->lock);
    return open;
}

int brick_spare_opens_by(struct brick *b, dev_t dev, ino_t ino, const void *owner)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return -1;
    pthread_mutex_lock(&S->lock);
    struct open_ino *o = *open_slot(S, dev, ino);
    int n = !o ? 0 : o->only == owner ? (int)o->only_n : -1;
    pthread_mutex_unlock(&S->lock);
    return n;
}

void brick_spare_closed(struct brick *b, dev_t dev, ino_t ino, const void *owner)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return;
    pthread_mutex_lock(&S->lock);
    struct open_ino **p = open_slot(S, dev, ino);
    struct open_ino *o = *p;
    if (o && o->only == owner && o->only_n > 0)
        o->only_n--;
    if (o && --o->count == 0) {
        *p = o->next;
        free(o);
    }
    pthread_mutex_unlock(&S->lock);
}

/* ---- emptying ---- */

/* Empties the file open read-write as fd: no data, no extended attribute
 * but its old id, which the taker replaces before the file has a name.
 * Refuses (-ESTALE) anything but a regular file with one link and no
 * inode flag a new file would not have (immutable, append-only,
 * no-copy-on-write, ...). 0 or -errno. The purge's step when it keeps a
 * file, and the taker's for a spare found when the brick started. Plain
 * system calls: housekeeping, where a test's armed storage fault is not
 * consumed. */
static int empty_file(int fd, struct stat *st)
{
    int fl = 0;
    if (fstat(fd, st) < 0)
        return -errno;
    if (!S_ISREG(st->st_mode) || st->st_nlink != 1 ||
        (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0 && (fl & ~PLAIN_FLAGS)))
        return -ESTALE;
    if (st->st_size && ftruncate(fd, 0) < 0)
        return -errno;
    char list[XLIST_MAX];
    ssize_t n = flistxattr(fd, list, sizeof(list));
    if (n < 0)
        return -errno;
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
        if (strcmp(list + i, BRICK_XATTR_GFID) != 0 && fremovexattr(fd, list + i) < 0)
            return -errno;
    return 0;
}

/* A spare known empty: only what a stat tells is checked (st). */
static int plain_file(int fd, struct stat *st)
{
    if (fstat(fd, st) < 0)
        return -errno;
    return S_ISREG(st->st_mode) && st->st_nlink == 1 && st->st_size == 0 ? 0 : -ESTALE;
}

/* ---- taking one ---- */

int brick_spare_take(struct brick *b, int *dirfd, char *name, size_t len, int flags, mode_t mode,
                     int times_later, struct stat *st)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return -ENOENT;
    brick_spare_busy(b);
    pthread_mutex_lock(&S->lock);
    int have = S->n > 0;
    uint64_t id = have ? S->ids[--S->n] : 0;
    pthread_mutex_unlock(&S->lock);
    if (!have)
        return -ENOENT;
    spare_name(id, name, len);
    if (strlen(name) + 1 >= len)
        return -ENAMETOOLONG; /* the caller's buffer; never with BRICK_NEW_NAME_MAX */
    int sd = *dirfd = spare_dir(S, id);
    /* checked read-write (a crash may have left it half built, or undone
     * part of the purge's work), then opened as asked if that is
     * something else */
    int base = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    int want = (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW;
    int rc, fd = VFS->openat(sd, name, O_RDWR | base, 0);
    if (fd >= 0 &&
        ((rc = (id & SPARE_CLEAN) ? plain_file(fd, st) : empty_file(fd, st)) < 0 ||
         ((st->st_mode & 07777) != (mode & 07777) && (rc = VFS->fchmod(fd, mode & 07777)) < 0) ||
         (!times_later && (rc = VFS->futimens(fd, NULL)) < 0))) {
        VFS->close(fd);
        fd = rc;
    }
    if (fd >= 0) {
        st->st_mode = (st->st_mode & S_IFMT) | (mode & 07777);
        st->st_size = 0;
    }
    if (fd >= 0 && (want | base) != (O_RDWR | base)) {
        int fd2 = VFS->openat(sd, name, want, 0);
        VFS->close(fd);
        fd = fd2;
    }
    if (fd < 0) {
        VFS->unlinkat(sd, name, 0);
        return fd;
    }
    __atomic_add_fetch(&S->taken, 1, __ATOMIC_RELAXED);
    return fd;
}

/* ---- keeping one (the purge) ---- */

void brick_spare_pass(struct brick *b)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return;
    struct statfs sf;
    size_t room = fstatfs(S->fd, &sf) == 0 ? (size_t)(sf.f_ffree / 4) : 0;
    pthread_mutex_lock(&S->lock);
    S->room = room;
    pthread_mutex_unlock(&S->lock);
}

int brick_spare_keep(struct brick *b, int dirfd, const char *name)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return 0;
    pthread_mutex_lock(&S->lock);
    int full = S->n >= SPARE_MAX || S->room == 0;
    pthread_mutex_unlock(&S->lock);
    if (full)
        return 0;
    int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
    uint64_t id = 0;
    if (ok) {
        pthread_mutex_lock(&S->lock);
        if ((ok = !*open_slot(S, st.st_dev, st.st_ino)))
            id = S->next_id++;
        pthread_mutex_unlock(&S->lock);
    }
    char sn[SPARE_NAME_MAX];
    spare_name(id, sn, sizeof(sn));
    /* emptied here, in the purge, rather than by the taker */
    ok = ok && empty_file(fd, &st) == 0 &&
         renameat2(dirfd, name, spare_dir(S, id), sn, RENAME_NOREPLACE) == 0;
    close(fd);
    if (!ok)
        return 0;
    pthread_mutex_lock(&S->lock);
    int pushed = push_locked(S, id | SPARE_CLEAN) == 0;
    if (pushed) {
        S->room--;
        S->kept++;
    }
    pthread_mutex_unlock(&S->lock);
    if (!pushed)
        (void)unlinkat(spare_dir(S, id), sn, 0);
    return 1;
}

/* ---- making some ahead ---- */

void brick_spare_busy(struct brick *b)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return;
    /* per request on every thread: write the shared line once a millisecond */
    uint64_t now = net_now_ms();
    if (__atomic_load_n(&S->last_busy_ms, __ATOMIC_RELAXED) != now)
        __atomic_store_n(&S->last_busy_ms, now, __ATOMIC_RELAXED);
}

uint64_t brick_idle_ms(struct brick *b)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return UINT64_MAX;
    uint64_t last = __atomic_load_n(&S->last_busy_ms, __ATOMIC_RELAXED);
    uint64_t now = net_now_ms();
    return now > last ? now - last : 0;
}

void brick_spare_set_ahead(struct brick *b, size_t n)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return;
    pthread_mutex_lock(&S->lock);
    S->ahead = n > SPARE_MAX ? SPARE_MAX : n;
    pthread_mutex_unlock(&S->lock);
}

int brick_spare_make_ahead(struct brick *b, unsigned max)
{
    struct brick_spare *S = b->spare;
    if (!S)
        return AHEAD_CHECK_MS;
    uint64_t idle = brick_idle_ms(b);
    if (idle < AHEAD_IDLE_MS)
        return (int)(AHEAD_IDLE_MS - idle);
    pthread_mutex_lock(&S->lock);
    size_t want = S->n < S->ahead ? S->ahead - S->n : 0;
    pthread_mutex_unlock(&S->lock);
    struct statfs sf;
    if (want && fstatfs(S->fd, &sf) == 0 && (size_t)(sf.f_ffree / 4) < want)
        want = (size_t)(sf.f_ffree / 4); /* never starve directories and symlinks */
    if (want > max)
        want = max;
    if (!want)
        return AHEAD_CHECK_MS;
    pthread_mutex_lock(&S->lock);
    uint64_t first = S->next_id; /* names for all of them at once */
    S->next_id += want;
    pthread_mutex_unlock(&S->lock);
    unsigned made = 0;
    for (; made < want; made++) {
        uint64_t id = first + made;
        char sn[SPARE_NAME_MAX];
        spare_name(id, sn, sizeof(sn));
        /* plain system calls: housekeeping, as the purge */
        int fd =
            openat(spare_dir(S, id), sn, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            break;
        close(fd);
        pthread_mutex_lock(&S->lock);
        int pushed = S->n < SPARE_MAX && push_locked(S, id | SPARE_CLEAN) == 0;
        pthread_mutex_unlock(&S->lock);
        if (!pushed) {
            (void)unlinkat(spare_dir(S, id), sn, 0);
            break;
        }
    }
    if (made)
        log_debug("spare: %u inodes made ahead", made);
    return made == want ? AHEAD_PAUSE_MS : AHEAD_CHECK_MS;
}

void brick_spare_counts(struct brick *b, uint64_t *kept, uint64_t *taken, uint64_t *held)
{
    struct brick_spare *S = b->spare;
    *kept = *taken = *held = 0;
    if (!S)
        return;
    pthread_mutex_lock(&S->lock);
    *kept = S->kept;
    *held = S->n;
    pthread_mutex_unlock(&S->lock);
    *taken = __atomic_load_n(&S->taken, __ATOMIC_RELAXED);
}
