/* A small libcairn program (docs/libcairn.md): writes a file into a
 * directory of the volume, reads it back, and lists the directory.
 *
 *   cc -o cairn-example cairn_example.c $(pkg-config --cflags --libs cairn)
 *   ./cairn-example server1:/gv0 /hello [backup-servers=server2]
 */
#include <cairn/cairn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, int err)
{
    fprintf(stderr, "cairn-example: %s: %s\n", what, strerror(-err));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST:/VOLUME DIR [OPTIONS]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[2];
    char err[512], path[1024], buf[64];
    cairn_vol_t *vol;
    int rc = cairn_vol_open(argv[1], argc > 3 ? argv[3] : NULL, &vol, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "cairn-example: %s\n", err);
        return 1;
    }
    /* A directory, unless it is there already. */
    rc = cairn_mkdir(vol, dir, 0755);
    if (rc < 0 && rc != -EEXIST)
        return fail("mkdir", rc);

    /* Write a file and read it back. */
    snprintf(path, sizeof(path), "%s/hello.txt", dir);
    cairn_fd_t *fd;
    if ((rc = cairn_open(vol, path, O_CREAT | O_RDWR | O_TRUNC, 0644, &fd)) < 0)
        return fail("create", rc);
    const char *text = "hello from libcairn\n";
    ssize_t n = cairn_pwrite(fd, text, strlen(text), 0);
    if (n < 0)
        return fail("pwrite", (int)n);
    if ((rc = cairn_fsync(fd, 0)) < 0)
        return fail("fsync", rc);
    n = cairn_pread(fd, buf, sizeof(buf) - 1, 0);
    if (n < 0)
        return fail("pread", (int)n);
    buf[n] = 0;
    cairn_close(fd);
    printf("read back: %s", buf);

    struct stat st;
    if ((rc = cairn_stat(vol, path, &st)) < 0)
        return fail("stat", rc);
    printf("size %lld mode %o\n", (long long)st.st_size, (unsigned)(st.st_mode & 07777));

    /* List the directory. */
    cairn_dir_t *d;
    struct cairn_dirent ent;
    if ((rc = cairn_opendir(vol, dir, CAIRN_DIR_STAT, &d)) < 0)
        return fail("opendir", rc);
    while ((rc = cairn_readdir(d, &ent)) > 0)
        printf("entry %s %lld bytes\n", ent.d_name, (long long)ent.st.st_size);
    cairn_closedir(d);
    if (rc < 0)
        return fail("readdir", rc);
    cairn_vol_close(vol);
    return 0;
}
