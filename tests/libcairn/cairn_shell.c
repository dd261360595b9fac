/* cairn-shell: runs libcairn calls read from stdin, one per line, and
 * answers each with one line, so that a test can interleave the library's
 * calls with what it checks elsewhere (tests/system/test_libcairn.py).
 * Built against the public header and libcairn.so only.
 *
 *   cairn-shell HOST:/VOL [OPTIONS]
 *
 * Commands (arguments are single words; DATA is the rest of the line):
 *   open P FLAGS [MODE]  FLAGS letters: r w (rw: both) c(reate) x(cl) t(runc) a(ppend)
 *                        -> "ok FD"; later commands name the handle FD
 *   close FD | pwrite FD OFF DATA | pread FD OFF LEN | fsync FD | ftruncate FD LEN
 *   fstat FD | discard FD OFF LEN | lock FD r|w|u [wait] | getlk FD r|w
 *   write P DATA (create or truncate, write, close) | read P
 *   stat P | lstat P | mkdir P [MODE] | rmdir P | unlink P | rename A B [noreplace]
 *   symlink TARGET P | readlink P | link A B | chmod P MODE | truncate P LEN
 *   ls P | setxattr P NAME VALUE | getxattr P NAME | listxattr P | removexattr P NAME
 *   statvfs P | quit
 * Answers: "ok [...]" or "err ENAME" (the errno's name). */
#include <cairn/cairn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#define MAX_FDS 64

static cairn_vol_t *vol;
static cairn_fd_t *fds[MAX_FDS];

static int answer(long long rc)
{
    if (rc < 0) {
        const char *name = strerrorname_np((int)-rc);
        printf("err %s\n", name ? name : "E?");
    } else {
        printf("ok\n");
    }
    return 0;
}

static int open_flags(const char *s)
{
    int r = strchr(s, 'r') != NULL, w = strchr(s, 'w') != NULL;
    int f = r && w ? O_RDWR : w ? O_WRONLY : O_RDONLY;
    if (strchr(s, 'c'))
        f |= O_CREAT;
    if (strchr(s, 'x'))
        f |= O_EXCL;
    if (strchr(s, 't'))
        f |= O_TRUNC;
    if (strchr(s, 'a'))
        f |= O_APPEND;
    return f;
}

static cairn_fd_t *fd_of(const char *s)
{
    int i = s ? atoi(s) : -1;
    return i >= 0 && i < MAX_FDS ? fds[i] : NULL;
}

static void print_stat(const struct stat *st)
{
    printf("ok mode=%o size=%lld nlink=%lu ino=%llu\n", (unsigned)st->st_mode,
           (long long)st->st_size, (unsigned long)st->st_nlink, (unsigned long long)st->st_ino);
}

static void do_open(char *p, char *flags, char *mode)
{
    cairn_fd_t *fd;
    int rc = cairn_open(vol, p, open_flags(flags ? flags : "r"),
                        mode ? (mode_t)strtol(mode, NULL, 8) : 0644, &fd);
    if (rc < 0) {
        answer(rc);
        return;
    }
    for (int i = 0; i < MAX_FDS; i++)
        if (!fds[i]) {
            fds[i] = fd;
            printf("ok %d\n", i);
            return;
        }
    cairn_close(fd);
    answer(-EMFILE);
}

static void do_read_fd(cairn_fd_t *fd, long long off, size_t len)
{
    char *buf = malloc(len + 1);
    ssize_t n = buf ? cairn_pread(fd, buf, len, off) : -ENOMEM;
    if (n < 0) {
        answer(n);
    } else {
        buf[n] = 0;
        printf("ok %zd %s\n", n, buf);
    }
    free(buf);
}

static void do_lock(cairn_fd_t *fd, int cmd, const char *type)
{
    struct flock l = {.l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    l.l_type = !type ? F_WRLCK : type[0] == 'r' ? F_RDLCK : type[0] == 'u' ? F_UNLCK : F_WRLCK;
    int rc = cairn_lock(fd, cmd, &l);
    if (rc == 0 && cmd == F_GETLK)
        printf("ok %s\n", l.l_type == F_UNLCK ? "unlocked" : "locked");
    else
        answer(rc);
}

static void do_ls(const char *p)
{
    cairn_dir_t *d;
    struct cairn_dirent e;
    int rc = cairn_opendir(vol, p, CAIRN_DIR_STAT, &d);
    if (rc < 0) {
        answer(rc);
        return;
    }
    printf("ok");
    while ((rc = cairn_readdir(d, &e)) > 0)
        printf(" %s", e.d_name);
    printf("\n");
    cairn_closedir(d);
}

static void run(char *line)
{
    char *save = NULL, *rest;
    char *cmd = strtok_r(line, " \n", &save);
    if (!cmd)
        return;
    char *a = strtok_r(NULL, " \n", &save);
    /* what follows the second word, untouched (data) */
    char restcopy[4096] = "";
    rest = save;
    if (rest && *rest) {
        rest[strcspn(rest, "\n")] = 0;
        snprintf(restcopy, sizeof(restcopy), "%s", rest);
    }
    char *b = strtok_r(NULL, " \n", &save);
    char *c = strtok_r(NULL, " \n", &save);
    struct stat st;
    char buf[4096];
    if (!strcmp(cmd, "open")) {
        do_open(a, b, c);
    } else if (!strcmp(cmd, "close")) {
        cairn_fd_t *fd = fd_of(a);
        if (fd)
            fds[atoi(a)] = NULL;
        answer(fd ? cairn_close(fd) : -EBADF);
    } else if (!strcmp(cmd, "pwrite")) {
        /* pwrite FD OFF DATA: DATA after the third word */
        const char *data = strchr(restcopy, ' ') ? strchr(restcopy, ' ') + 1 : "";
        ssize_t n = cairn_pwrite(fd_of(a), data, strlen(data), b ? atoll(b) : 0);
        if (n < 0)
            answer(n);
        else
            printf("ok %zd\n", n);
    } else if (!strcmp(cmd, "pread")) {
        do_read_fd(fd_of(a), b ? atoll(b) : 0, c ? (size_t)atoll(c) : 4096);
    } else if (!strcmp(cmd, "fsync")) {
        answer(cairn_fsync(fd_of(a), 0));
    } else if (!strcmp(cmd, "ftruncate")) {
        answer(cairn_ftruncate(fd_of(a), b ? atoll(b) : 0));
    } else if (!strcmp(cmd, "discard")) {
        answer(cairn_discard(fd_of(a), b ? atoll(b) : 0, c ? atoll(c) : 0));
    } else if (!strcmp(cmd, "fstat")) {
        int rc = cairn_fstat(fd_of(a), &st);
        if (rc < 0)
            answer(rc);
        else
            print_stat(&st);
    } else if (!strcmp(cmd, "lock")) {
        do_lock(fd_of(a), c && !strcmp(c, "wait") ? F_SETLKW : F_SETLK, b);
    } else if (!strcmp(cmd, "getlk")) {
        do_lock(fd_of(a), F_GETLK, b);
    } else if (!strcmp(cmd, "write")) {
        cairn_fd_t *fd;
        int rc = cairn_open(vol, a, O_CREAT | O_WRONLY | O_TRUNC, 0644, &fd);
        if (rc == 0) {
            ssize_t n = cairn_pwrite(fd, restcopy, strlen(restcopy), 0);
            rc = cairn_close(fd);
            if (n < 0)
                rc = (int)n;
        }
        answer(rc);
    } else if (!strcmp(cmd, "read")) {
        cairn_fd_t *fd;
        int rc = cairn_open(vol, a, O_RDONLY, 0, &fd);
        if (rc < 0) {
            answer(rc);
        } else {
            do_read_fd(fd, 0, 4096);
            cairn_close(fd);
        }
    } else if (!strcmp(cmd, "stat") || !strcmp(cmd, "lstat")) {
        int rc = cmd[0] == 's' ? cairn_stat(vol, a, &st) : cairn_lstat(vol, a, &st);
        if (rc < 0)
            answer(rc);
        else
            print_stat(&st);
    } else if (!strcmp(cmd, "mkdir")) {
        answer(cairn_mkdir(vol, a, b ? (mode_t)strtol(b, NULL, 8) : 0755));
    } else if (!strcmp(cmd, "rmdir")) {
        answer(cairn_rmdir(vol, a));
    } else if (!strcmp(cmd, "unlink")) {
        answer(cairn_unlink(vol, a));
    } else if (!strcmp(cmd, "rename")) {
        answer(cairn_rename(vol, a, b, c && !strcmp(c, "noreplace") ? RENAME_NOREPLACE : 0));
    } else if (!strcmp(cmd, "symlink")) {
        answer(cairn_symlink(vol, a, b));
    } else if (!strcmp(cmd, "readlink")) {
        ssize_t n = cairn_readlink(vol, a, buf, sizeof(buf) - 1);
        if (n < 0) {
            answer(n);
        } else {
            buf[n] = 0;
            printf("ok %s\n", buf);
        }
    } else if (!strcmp(cmd, "link")) {
        answer(cairn_link(vol, a, b));
    } else if (!strcmp(cmd, "chmod")) {
        answer(cairn_chmod(vol, a, b ? (mode_t)strtol(b, NULL, 8) : 0));
    } else if (!strcmp(cmd, "truncate")) {
        answer(cairn_truncate(vol, a, b ? atoll(b) : 0));
    } else if (!strcmp(cmd, "ls")) {
        do_ls(a);
    } else if (!strcmp(cmd, "setxattr")) {
        answer(cairn_setxattr(vol, a, b, c ? c : "", c ? strlen(c) : 0, 0));
    } else if (!strcmp(cmd, "getxattr")) {
        ssize_t n = cairn_getxattr(vol, a, b, buf, sizeof(buf) - 1);
        if (n < 0) {
            answer(n);
        } else {
            buf[n] = 0;
            printf("ok %s\n", buf);
        }
    } else if (!strcmp(cmd, "listxattr")) {
        ssize_t n = cairn_listxattr(vol, a, buf, sizeof(buf));
        if (n < 0) {
            answer(n);
        } else {
            printf("ok");
            for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
                printf(" %s", buf + i);
            printf("\n");
        }
    } else if (!strcmp(cmd, "removexattr")) {
        answer(cairn_removexattr(vol, a, b));
    } else if (!strcmp(cmd, "statvfs")) {
        struct statvfs sv;
        int rc = cairn_statvfs(vol, a, &sv);
        if (rc < 0)
            answer(rc);
        else
            printf("ok bsize=%lu blocks=%llu namemax=%lu\n", (unsigned long)sv.f_bsize,
                   (unsigned long long)sv.f_blocks, (unsigned long)sv.f_namemax);
    } else {
        printf("err EBADRQC\n");
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s HOST:/VOLUME [OPTIONS]\n", argv[0]);
        return 2;
    }
    char err[512];
    int rc = cairn_vol_open(argv[1], argc > 2 ? argv[2] : NULL, &vol, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "cairn-shell: %s (%s)\n", err, strerrorname_np(-rc));
        return 1;
    }
    printf("ready %s\n", cairn_vol_name(vol));
    fflush(stdout);
    char line[8192];
    while (fgets(line, sizeof(line), stdin)) {
        if (!strncmp(line, "quit", 4))
            break;
        run(line);
        fflush(stdout);
    }
    for (int i = 0; i < MAX_FDS; i++)
        if (fds[i])
            cairn_close(fds[i]);
    cairn_vol_close(vol);
    return 0;
}
