/* nbdkit-cairn-plugin: serves one regular file of a Cairn volume as an NBD
 * disk through libcairn, so VM hosts (qemu, qemu-img, nbdfuse) reach an
 * image with no FUSE in the data path (docs/nbd.md).
 *
 *   nbdkit cairn volume=server1:/gv0 file=/images/vm1.img [size=20G]
 *
 * The volume is opened once per nbdkit process and the file once, and that
 * one libcairn handle serves every connection: libcairn allows any call from
 * any thread on one handle (docs/libcairn.md, Threads), so the plugin runs
 * in nbdkit's PARALLEL model with no locks of its own. One handle is also
 * what makes multi-conn true: a flush is an fsync of the handle the writes
 * of every connection went through, on every brick it is open on, and a
 * brick's fsync covers the whole file there, whichever request wrote it. */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cairn/cairn.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* Parameters of cairn_vol_open passed through unchanged ("key=value",
 * joined with commas): see cairn_vol_open in include/cairn/cairn.h. */
static const char *const vol_options[] = {
    "backup-servers", "ping-timeout", "timeout", "log-file", "log-level",
};

static char *volume_spec;        /* volume=HOST[:PORT]:/VOLUME */
static char *file_path;          /* file=/path/in/volume */
static int64_t create_size = -1; /* size=: create the file at this size when missing */
static char *open_options;       /* the pass-through parameters, for cairn_vol_open */

/* Opened in .after_fork (libcairn starts threads, which a fork would lose)
 * and closed in .cleanup; shared by every connection. */
static cairn_vol_t *vol;
static cairn_fd_t *fd;

/* Cleared the first time the bricks' file system refuses the fallocate
 * mode, so later requests go straight to the fallback. */
static int punch_ok = 1, zero_range_ok = 1;

/* nbdkit_error with "FILE: ...: strerror" and the NBD error set; returns -1
 * for the callback to return. err is a positive errno. */
static int fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(int err, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    nbdkit_error("cairn: %s: %s: %s", file_path, what, strerror(err));
    nbdkit_set_error(err);
    return -1;
}

static void nbd_unload(void)
{
    free(volume_spec);
    free(file_path);
    free(open_options);
}

static int add_vol_option(const char *key, const char *value)
{
    if (strchr(value, ',')) {
        nbdkit_error("cairn: %s: a comma cannot appear in the value", key);
        return -1;
    }
    size_t have = open_options ? strlen(open_options) : 0;
    size_t len = have + strlen(key) + strlen(value) + 3;
    char *o = realloc(open_options, len);
    if (!o) {
        nbdkit_error("cairn: out of memory");
        return -1;
    }
    snprintf(o + have, len - have, "%s%s=%s", have ? "," : "", key, value);
    open_options = o;
    return 0;
}

static int set_string(char **dst, const char *key, const char *value)
{
    if (!*value) {
        nbdkit_error("cairn: %s= is empty", key);
        return -1;
    }
    free(*dst);
    if (!(*dst = strdup(value))) {
        nbdkit_error("cairn: out of memory");
        return -1;
    }
    return 0;
}

static int nbd_config(const char *key, const char *value)
{
    if (!strcmp(key, "volume"))
        return set_string(&volume_spec, key, value);
    if (!strcmp(key, "file"))
        return set_string(&file_path, key, value);
    if (!strcmp(key, "size")) {
        create_size = nbdkit_parse_size(value);
        return create_size < 0 ? -1 : 0;
    }
    for (size_t i = 0; i < sizeof(vol_options) / sizeof(vol_options[0]); i++)
        if (!strcmp(key, vol_options[i]))
            return add_vol_option(key, value);
    nbdkit_error("cairn: unknown parameter '%s' (nbdkit cairn --help lists them)", key);
    return -1;
}

static int nbd_config_complete(void)
{
    if (!volume_spec) {
        nbdkit_error("cairn: volume=HOST[:PORT]:/VOLUME is required");
        return -1;
    }
    if (!file_path) {
        nbdkit_error("cairn: file=/PATH/IN/VOLUME is required");
        return -1;
    }
    return 0;
}

static const char config_help[] =
    "volume=HOST[:PORT]:/VOLUME  (required) The volume, as mount names it.\n"
    "file=/PATH                  (required) The file in the volume to serve.\n"
    "size=SIZE                   Create the file at SIZE bytes (1G, 512M...) if it is missing.\n"
    "backup-servers=HOST[:PORT]:...  cairnd servers to ask when HOST does not answer.\n"
    "ping-timeout=SEC            Brick liveness timeout (default: the volume's).\n"
    "timeout=SEC                 Bound on reaching cairnd at startup (default 10).\n"
    "log-file=PATH               libcairn's log (default stderr).\n"
    "log-level=LEVEL             error|warning|info|debug|trace (default warning).";

/* Creates file_path at create_size, or finds that another client made it
 * first. On success *f is open read-write. */
static int create_file(cairn_fd_t **f)
{
    int rc = cairn_open(vol, file_path, O_RDWR | O_CREAT | O_EXCL, 0644, f);
    if (rc == -EEXIST)
        return cairn_open(vol, file_path, O_RDWR, 0, f);
    if (rc < 0)
        return rc;
    if (create_size > 0 && (rc = cairn_ftruncate(*f, create_size)) < 0) {
        cairn_close(*f);
        *f = NULL;
        cairn_unlink(vol, file_path); /* no half-made image left for the next start */
        return rc;
    }
    nbdkit_debug("cairn: created %s of %" PRId64 " bytes", file_path, create_size);
    return 0;
}

/* Opens the volume and the file (creating it when size= says so) into vol
 * and fd, or reports why not and leaves both NULL. */
static int open_export(void)
{
    char err[512] = "";
    int rc = cairn_vol_open(volume_spec, open_options, &vol, err, sizeof(err));
    if (rc < 0) {
        nbdkit_error("cairn: cannot open volume %s: %s", volume_spec, *err ? err : strerror(-rc));
        vol = NULL;
        return -1;
    }
    rc = cairn_open(vol, file_path, O_RDWR, 0, &fd);
    if (rc == -ENOENT && create_size >= 0)
        rc = create_file(&fd);
    if (rc < 0)
        fd = NULL;
    struct stat st;
    if (rc == 0 && (rc = cairn_fstat(fd, &st)) == 0 && !S_ISREG(st.st_mode))
        rc = -EISDIR;
    if (rc == 0)
        return 0;
    if (rc == -ENOENT && create_size >= 0)
        nbdkit_error("cairn: %s: cannot create it in volume %s: no such directory", file_path,
                     volume_spec);
    else if (rc == -ENOENT)
        nbdkit_error("cairn: %s: no such file in volume %s (size=SIZE creates it)", file_path,
                     volume_spec);
    else if (rc == -EISDIR)
        nbdkit_error("cairn: %s: not a regular file in volume %s", file_path, volume_spec);
    else
        nbdkit_error("cairn: cannot open %s in volume %s: %s", file_path, volume_spec,
                     strerror(-rc));
    if (fd)
        cairn_close(fd);
    cairn_vol_close(vol);
    fd = NULL;
    vol = NULL;
    return -1;
}

static void close_export(void)
{
    if (fd) {
        int rc = cairn_close(fd);
        if (rc < 0)
            nbdkit_error("cairn: closing %s: %s", file_path, strerror(-rc));
    }
    cairn_vol_close(vol);
    fd = NULL;
    vol = NULL;
}

/* Before nbdkit forks into the background: open the volume and the file
 * once, so a wrong volume or file fails the start with a message the user
 * sees, then close again (libcairn's threads would not survive the fork). */
static int nbd_get_ready(void)
{
    if (open_export() < 0)
        return -1;
    close_export();
    return 0;
}

static int nbd_after_fork(void)
{
    return open_export();
}

static void nbd_cleanup(void)
{
    close_export();
}

static void *nbd_open(int readonly)
{
    return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t nbd_get_size(void *handle)
{
    struct stat st;
    int rc = cairn_fstat(fd, &st);
    if (rc < 0)
        return fail(-rc, "fstat");
    return st.st_size;
}

static int nbd_can_multi_conn(void *handle)
{
    return 1; /* one handle for all connections (see the top of the file) */
}

static int nbd_can_fua(void *handle)
{
    /* nbdkit flushes after a FUA write: an fsync is all a native FUA
     * would do too */
    return NBDKIT_FUA_EMULATE;
}

static int nbd_can_fast_zero(void *handle)
{
    return 1; /* .zero only uses fallocate, or fails at once */
}

static int nbd_pread(void *handle, void *buf, uint32_t count, uint64_t offset, uint32_t flags)
{
    char *p = buf;
    while (count > 0) {
        ssize_t n = cairn_pread(fd, p, count, (off_t)offset);
        if (n < 0)
            return fail((int)-n, "reading %" PRIu32 " bytes at %" PRIu64, count, offset);
        if (n == 0)
            return fail(EIO, "reading %" PRIu32 " bytes at %" PRIu64 ": the file ends there", count,
                        offset);
        p += n;
        count -= (uint32_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int nbd_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset,
                      uint32_t flags)
{
    const char *p = buf;
    while (count > 0) {
        ssize_t n = cairn_pwrite(fd, p, count, (off_t)offset);
        if (n < 0)
            return fail((int)-n, "writing %" PRIu32 " bytes at %" PRIu64, count, offset);
        if (n == 0)
            return fail(EIO, "writing %" PRIu32 " bytes at %" PRIu64 ": nothing written", count,
                        offset);
        p += n;
        count -= (uint32_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int nbd_flush(void *handle, uint32_t flags)
{
    /* data and metadata: the bricks' replication marks are xattrs, and a
     * copy whose marks were lost could be read as good after a crash */
    int rc = cairn_fsync(fd, 0);
    return rc < 0 ? fail(-rc, "flush") : 0;
}

/* fallocate(mode) on the range; -EOPNOTSUPP (once) clears *ok. */
static int try_fallocate(int *ok, int mode, uint32_t count, uint64_t offset)
{
    if (!__atomic_load_n(ok, __ATOMIC_RELAXED))
        return -EOPNOTSUPP;
    int rc = cairn_fallocate(fd, mode, (off_t)offset, (off_t)count);
    if (rc == -EOPNOTSUPP) {
        if (__atomic_exchange_n(ok, 0, __ATOMIC_RELAXED))
            nbdkit_debug("cairn: the bricks refuse fallocate mode %#x: falling back", mode);
    }
    return rc;
}

static int nbd_trim(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
    int rc = try_fallocate(&punch_ok, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, count, offset);
    /* A trim is advice: where holes cannot be punched the data stays. */
    if (rc == -EOPNOTSUPP)
        return 0;
    return rc < 0 ? fail(-rc, "trimming %" PRIu32 " bytes at %" PRIu64, count, offset) : 0;
}

/* A hole where the client allows one (MAY_TRIM: the NBD request came
 * without NO_HOLE), else ZERO_RANGE, which keeps the blocks allocated.
 * Where the bricks support neither, ENOTSUP has nbdkit write zeros with
 * .pwrite (or fail a fast-zero request at once, as it must). */
static int nbd_zero(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
    int rc = -EOPNOTSUPP;
    if (flags & NBDKIT_FLAG_MAY_TRIM)
        rc = try_fallocate(&punch_ok, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, count, offset);
    if (rc == -EOPNOTSUPP)
        rc = try_fallocate(&zero_range_ok, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, count,
                           offset);
    if (rc == -EOPNOTSUPP) {
        nbdkit_set_error(ENOTSUP);
        return -1;
    }
    return rc < 0 ? fail(-rc, "zeroing %" PRIu32 " bytes at %" PRIu64, count, offset) : 0;
}

static int nbd_can_extents(void *handle)
{
    return 1;
}

/* Data and holes (which read as zeros) from SEEK_DATA / SEEK_HOLE on the
 * bricks' file, so `qemu-img map` and sparse copies skip what was never
 * written or was trimmed. A range the bricks cannot tell about (their
 * file system has no SEEK_DATA) is reported as data, which is always
 * true. */
static int nbd_extents(void *handle, uint32_t count, uint64_t offset, uint32_t flags,
                       struct nbdkit_extents *extents)
{
    const uint64_t end = offset + count;
    const uint32_t hole = NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO;
    while (offset < end) {
        off_t data = cairn_lseek(fd, (off_t)offset, SEEK_DATA);
        if (data == -ENXIO) /* no data from here to the end of the file */
            return nbdkit_add_extent(extents, offset, end - offset, hole);
        if (data == -EINVAL || data == -EOPNOTSUPP)
            return nbdkit_add_extent(extents, offset, end - offset, 0);
        if (data < 0)
            return fail((int)-data, "SEEK_DATA at %" PRIu64, offset);
        uint64_t next = (uint64_t)data;
        uint32_t type = hole;
        if (next <= offset) {
            off_t h = cairn_lseek(fd, (off_t)offset, SEEK_HOLE);
            if (h < 0)
                return fail((int)-h, "SEEK_HOLE at %" PRIu64, offset);
            next = (uint64_t)h;
            type = 0;
        }
        if (next <= offset) /* the file changed under us: say data */
            next = end, type = 0;
        if (next > end)
            next = end;
        if (nbdkit_add_extent(extents, offset, next - offset, type) < 0)
            return -1;
        offset = next;
        if (flags & NBDKIT_FLAG_REQ_ONE)
            break;
    }
    return 0;
}

static struct nbdkit_plugin plugin = {
    .name = "cairn",
    .longname = "nbdkit Cairn volume plugin",
    .version = "1.0",
    .description = "Serves a file of a Cairn volume as an NBD disk, through libcairn.",
    .unload = nbd_unload,
    .config = nbd_config,
    .config_complete = nbd_config_complete,
    .config_help = config_help,
    .magic_config_key = "file",
    .get_ready = nbd_get_ready,
    .after_fork = nbd_after_fork,
    .cleanup = nbd_cleanup,
    .open = nbd_open,
    .get_size = nbd_get_size,
    .can_multi_conn = nbd_can_multi_conn,
    .can_fua = nbd_can_fua,
    .can_fast_zero = nbd_can_fast_zero,
    .pread = nbd_pread,
    .pwrite = nbd_pwrite,
    .flush = nbd_flush,
    .trim = nbd_trim,
    .zero = nbd_zero,
    .can_extents = nbd_can_extents,
    .extents = nbd_extents,
};

NBDKIT_REGISTER_PLUGIN(plugin)
