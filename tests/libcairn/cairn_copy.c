/* cairn-copy: copies a local directory tree into a Cairn volume through
 * libcairn (as `cp -a` would, without hard links), or a tree of the volume
 * out to a local directory (-r). Used by tests/system/test_libcairn.py and
 * the benchmark's cp-libcairn workload; built against the public header
 * and libcairn.so only.
 *
 *   cairn-copy [-j N] [-o OPTS] SRC HOST:/VOL DST     local SRC -> volume DST
 *   cairn-copy -r [-o OPTS] HOST:/VOL SRC DST         volume SRC -> local DST
 *
 * Into the volume, directories are made first (in walk order), then each
 * file is a chain of asynchronous calls (create, write, set attributes,
 * close) with up to N files (default 32) in flight; the directories'
 * modes and times are set last, as cp -a does. Exit status 0, or 1 with
 * the first error on stderr. */
#include <cairn/cairn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static cairn_vol_t *vol;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int inflight, max_inflight = 32;
static int first_err;
static char first_err_path[4096];
static const char *first_err_what;

static void note_err(const char *what, const char *path, int err)
{
    pthread_mutex_lock(&lock);
    if (!first_err) {
        first_err = err;
        first_err_what = what;
        snprintf(first_err_path, sizeof(first_err_path), "%s", path);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- into the volume ---- */

struct file {
    char *path; /* in the volume */
    char *data;
    size_t len;
    struct stat st; /* the source's */
    cairn_fd_t *fd;
    int step;
};

static void file_done(struct file *f)
{
    free(f->path);
    free(f->data);
    free(f);
    pthread_mutex_lock(&lock);
    inflight--;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static unsigned attr_mask(void)
{
    unsigned v = CAIRN_SET_MODE | CAIRN_SET_ATIME | CAIRN_SET_MTIME;
    return geteuid() == 0 ? v | CAIRN_SET_UID | CAIRN_SET_GID : v;
}

static void closed_cb(ssize_t result, void *arg)
{
    struct file *f = arg;
    if (result < 0)
        note_err("close", f->path, (int)result);
    file_done(f);
}

static void step_failed(struct file *f, const char *what, int err)
{
    note_err(what, f->path, err);
    if (f->fd && cairn_close_async(f->fd, closed_cb, f) == 0)
        return;
    file_done(f);
}

static void attrs_cb(ssize_t result, void *arg)
{
    struct file *f = arg;
    if (result < 0) {
        step_failed(f, "setattr", (int)result);
        return;
    }
    int rc = cairn_close_async(f->fd, closed_cb, f);
    if (rc < 0) {
        note_err("close", f->path, rc);
        file_done(f);
    }
}

static void written_cb(ssize_t result, void *arg)
{
    struct file *f = arg;
    if (result >= 0 && (size_t)result != f->len)
        result = -EIO;
    if (result < 0) {
        step_failed(f, "pwrite", (int)result);
        return;
    }
    int rc = cairn_fsetattr_async(f->fd, &f->st, attr_mask(), attrs_cb, f);
    if (rc < 0)
        step_failed(f, "setattr", rc);
}

static void created_cb(int result, cairn_fd_t *fd, void *arg)
{
    struct file *f = arg;
    if (result < 0) {
        step_failed(f, "create", result);
        return;
    }
    f->fd = fd;
    int rc = f->len ? cairn_pwrite_async(fd, f->data, f->len, 0, written_cb, f)
                    : cairn_fsetattr_async(fd, &f->st, attr_mask(), attrs_cb, f);
    if (rc < 0)
        step_failed(f, f->len ? "pwrite" : "setattr", rc);
}

static int read_file(const char *src, char **data, size_t *len, off_t size)
{
    int fd = open(src, O_RDONLY);
    if (fd < 0)
        return -errno;
    *data = malloc(size > 0 ? (size_t)size : 1);
    *len = 0;
    while (*data && *len < (size_t)size) {
        ssize_t n = read(fd, *data + *len, (size_t)size - *len);
        if (n <= 0)
            break;
        *len += (size_t)n;
    }
    close(fd);
    return *data ? 0 : -ENOMEM;
}

static void start_file(const char *src, const char *dst, const struct stat *st)
{
    struct file *f = calloc(1, sizeof(*f));
    if (!f || !(f->path = strdup(dst))) {
        free(f);
        note_err("copy", dst, -ENOMEM);
        return;
    }
    f->st = *st;
    int rc = read_file(src, &f->data, &f->len, st->st_size);
    if (rc < 0) {
        note_err("read", src, rc);
        free(f->path);
        free(f->data);
        free(f);
        return;
    }
    pthread_mutex_lock(&lock);
    while (inflight >= max_inflight)
        pthread_cond_wait(&cond, &lock);
    inflight++;
    pthread_mutex_unlock(&lock);
    rc =
        cairn_open_async(vol, dst, O_CREAT | O_EXCL | O_WRONLY, st->st_mode & 07777, created_cb, f);
    if (rc < 0) {
        note_err("create", dst, rc);
        file_done(f);
    }
}

struct link_ctx {
    char *path;
    struct stat st;
};

static void link_times_cb(ssize_t result, void *arg)
{
    struct link_ctx *l = arg;
    if (result < 0)
        note_err("setattr", l->path, (int)result);
    free(l->path);
    free(l);
    pthread_mutex_lock(&lock);
    inflight--;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
}

static void link_made_cb(ssize_t result, void *arg)
{
    struct link_ctx *l = arg;
    unsigned v = CAIRN_SET_ATIME | CAIRN_SET_MTIME;
    if (geteuid() == 0)
        v |= CAIRN_SET_UID | CAIRN_SET_GID;
    if (result < 0 || (result = cairn_setattr_async(vol, l->path, &l->st, v, link_times_cb, l)) < 0)
        link_times_cb(result, l);
}

static void start_symlink(const char *src, const char *dst, const struct stat *st)
{
    char target[4096];
    ssize_t n = readlink(src, target, sizeof(target) - 1);
    struct link_ctx *l = calloc(1, sizeof(*l));
    if (n < 0 || !l || !(l->path = strdup(dst))) {
        note_err("readlink", src, n < 0 ? -errno : -ENOMEM);
        free(l);
        return;
    }
    target[n] = 0;
    l->st = *st;
    pthread_mutex_lock(&lock);
    while (inflight >= max_inflight)
        pthread_cond_wait(&cond, &lock);
    inflight++;
    pthread_mutex_unlock(&lock);
    int rc = cairn_symlink_async(vol, target, dst, link_made_cb, l);
    if (rc < 0) {
        note_err("symlink", dst, rc);
        link_times_cb(0, l);
    }
}

/* Directories whose attributes are set once everything in them is. */
struct dirattr {
    char *path;
    struct stat st;
};
static struct dirattr *dirs;
static size_t n_dirs, cap_dirs;

static int copy_in(const char *src, const char *dst)
{
    struct stat st;
    if (lstat(src, &st) < 0) {
        note_err("lstat", src, -errno);
        return -1;
    }
    if (S_ISREG(st.st_mode)) {
        start_file(src, dst, &st);
        return 0;
    }
    if (S_ISLNK(st.st_mode)) {
        start_symlink(src, dst, &st);
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        int rc = cairn_mknod(vol, dst, st.st_mode, st.st_rdev);
        if (rc < 0)
            note_err("mknod", dst, rc);
        return 0;
    }
    int rc = cairn_mkdir(vol, dst, 0700);
    if (rc < 0 && !(rc == -EEXIST && n_dirs == 0)) {
        note_err("mkdir", dst, rc);
        return -1;
    }
    if (n_dirs == cap_dirs) {
        cap_dirs = cap_dirs ? cap_dirs * 2 : 64;
        dirs = realloc(dirs, cap_dirs * sizeof(*dirs));
        if (!dirs)
            abort();
    }
    dirs[n_dirs].path = strdup(dst);
    dirs[n_dirs++].st = st;
    DIR *d = opendir(src);
    if (!d) {
        note_err("opendir", src, -errno);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) && !first_err) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t sl = strlen(src) + strlen(e->d_name) + 2, dl = strlen(dst) + strlen(e->d_name) + 2;
        char *s = malloc(sl), *t = malloc(dl);
        if (!s || !t)
            abort();
        snprintf(s, sl, "%s/%s", src, e->d_name);
        snprintf(t, dl, "%s/%s", dst, e->d_name);
        copy_in(s, t);
        free(s);
        free(t);
    }
    closedir(d);
    return 0;
}

static void wait_all(void)
{
    pthread_mutex_lock(&lock);
    while (inflight > 0)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void set_dir_attrs(void)
{
    /* deepest first: setting a child's times does not touch its parent's */
    for (size_t i = n_dirs; i-- > 0;) {
        int rc = cairn_setattr(vol, dirs[i].path, &dirs[i].st, attr_mask(), NULL);
        if (rc < 0)
            note_err("setattr", dirs[i].path, rc);
        free(dirs[i].path);
    }
    free(dirs);
}

/* ---- out of the volume ---- */

static int copy_out(const char *src, const char *dst, const struct stat *st);

static int copy_out_file(const char *src, const char *dst, const struct stat *st)
{
    cairn_fd_t *fd;
    int rc = cairn_open(vol, src, O_RDONLY, 0, &fd);
    if (rc < 0) {
        note_err("open", src, rc);
        return rc;
    }
    int out = open(dst, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (out < 0) {
        note_err("create", dst, -errno);
        cairn_close(fd);
        return -1;
    }
    static char buf[1 << 20];
    off_t off = 0;
    for (;;) {
        ssize_t n = cairn_pread(fd, buf, sizeof(buf), off);
        if (n < 0) {
            note_err("pread", src, (int)n);
            break;
        }
        if (n == 0)
            break;
        if (write(out, buf, (size_t)n) != n) {
            note_err("write", dst, -errno);
            break;
        }
        off += n;
    }
    cairn_close(fd);
    fchmod(out, st->st_mode & 07777);
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    futimens(out, ts);
    close(out);
    return 0;
}

static int copy_out(const char *src, const char *dst, const struct stat *st)
{
    if (S_ISREG(st->st_mode))
        return copy_out_file(src, dst, st);
    if (S_ISLNK(st->st_mode)) {
        char target[4096];
        ssize_t n = cairn_readlink(vol, src, target, sizeof(target) - 1);
        if (n < 0) {
            note_err("readlink", src, (int)n);
            return -1;
        }
        target[n] = 0;
        if (symlink(target, dst) < 0)
            note_err("symlink", dst, -errno);
        return 0;
    }
    if (!S_ISDIR(st->st_mode))
        return 0;
    if (mkdir(dst, 0700) < 0 && errno != EEXIST) {
        note_err("mkdir", dst, -errno);
        return -1;
    }
    cairn_dir_t *d;
    int rc = cairn_opendir(vol, src, CAIRN_DIR_STAT, &d);
    if (rc < 0) {
        note_err("opendir", src, rc);
        return rc;
    }
    struct cairn_dirent e;
    while ((rc = cairn_readdir(d, &e)) > 0 && !first_err) {
        size_t sl = strlen(src) + strlen(e.d_name) + 2, dl = strlen(dst) + strlen(e.d_name) + 2;
        char *s = malloc(sl), *t = malloc(dl);
        if (!s || !t)
            abort();
        snprintf(s, sl, "%s/%s", src, e.d_name);
        snprintf(t, dl, "%s/%s", dst, e.d_name);
        struct stat est = e.st;
        if (!e.has_stat && (rc = cairn_lstat(vol, s, &est)) < 0)
            note_err("lstat", s, rc);
        else
            copy_out(s, t, &est);
        free(s);
        free(t);
    }
    if (rc < 0)
        note_err("readdir", src, rc);
    cairn_closedir(d);
    chmod(dst, st->st_mode & 07777);
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    utimensat(AT_FDCWD, dst, ts, 0);
    return 0;
}

static int usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-j N] [-o OPTS] SRC HOST:/VOL DST   (local tree into the volume)\n"
            "       %s -r [-o OPTS] HOST:/VOL SRC DST       (volume tree out)\n",
            prog, prog);
    return 2;
}

int main(int argc, char **argv)
{
    int reverse = 0, c;
    const char *opts = NULL;
    while ((c = getopt(argc, argv, "rj:o:")) != -1) {
        if (c == 'r')
            reverse = 1;
        else if (c == 'j' && atoi(optarg) > 0)
            max_inflight = atoi(optarg);
        else if (c == 'o')
            opts = optarg;
        else
            return usage(argv[0]);
    }
    if (argc - optind != 3)
        return usage(argv[0]);
    const char *spec = reverse ? argv[optind] : argv[optind + 1];
    const char *src = reverse ? argv[optind + 1] : argv[optind];
    const char *dst = argv[optind + 2];
    char err[512];
    int rc = cairn_vol_open(spec, opts, &vol, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "cairn-copy: %s\n", err);
        return 1;
    }
    if (reverse) {
        struct stat st;
        if ((rc = cairn_lstat(vol, src, &st)) < 0)
            note_err("lstat", src, rc);
        else
            copy_out(src, dst, &st);
    } else {
        copy_in(src, dst);
        wait_all();
        set_dir_attrs();
    }
    cairn_vol_close(vol);
    if (first_err) {
        fprintf(stderr, "cairn-copy: %s %s: %s\n", first_err_what, first_err_path,
                strerror(-first_err));
        return 1;
    }
    return 0;
}
