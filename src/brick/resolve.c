/* Request paths to (parent directory fd, name), never escaping the brick
 * root: every component is checked, the parent is opened with openat2()
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (and kept open in the directory
 * cache for the next request there), and the final name is acted on with
 * *at() calls that do not follow it. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "../lib/log.h"
#include "brick.h"

int brick_path_check(const uint8_t *p, size_t len)
{
    if (len == 0 || p[0] != '/')
        return -EINVAL;
    if (len >= RPC_PATH_MAX)
        return -ENAMETOOLONG;
    if (memchr(p, 0, len))
        return -EINVAL;
    if (len == 1)
        return 0; /* the root */
    size_t i = 1;
    while (i <= len) {
        size_t start = i;
        while (i < len && p[i] != '/')
            i++;
        size_t n = i - start;
        if (n == 0)
            return -EINVAL; /* "//" or a trailing "/" */
        if ((n == 1 && p[start] == '.') || (n == 2 && p[start] == '.' && p[start + 1] == '.'))
            return -EINVAL;
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        i++; /* past the '/' (or the end) */
    }
    return 0;
}

static int is_private(const char *s, size_t n)
{
    return n == sizeof(BRICK_PRIVATE) - 1 && !memcmp(s, BRICK_PRIVATE, n);
}

int brick_resolve(struct brick *b, const struct rpc_bytes *path, enum brick_loc_use use,
                  struct brick_loc *loc)
{
    loc->dirfd = -1;
    loc->own = 0;
    loc->dent = NULL;
    loc->is_root = 0;
    loc->parent_is_root = 0;
    loc->name[0] = 0;
    loc->pathbuf[0] = 0;
    loc->path = loc->pathbuf;
    if (!path || !path->p)
        return -EINVAL;
    int rc = brick_path_check(path->p, path->len);
    if (rc < 0)
        return rc;
    memcpy(loc->pathbuf, path->p, path->len);
    loc->pathbuf[path->len] = 0;
    if (path->len == 1) {
        loc->dirfd = b->root_fd;
        loc->is_root = 1;
        strcpy(loc->name, ".");
        return 0;
    }
    const char *first = loc->pathbuf + 1;
    const char *slash1 = strchr(first, '/');
    if (is_private(first, slash1 ? (size_t)(slash1 - first) : strlen(first)))
        return use == BRICK_LOC_CREATE && !slash1 ? -EPERM : -ENOENT;
    const char *last = strrchr(loc->pathbuf, '/');
    strcpy(loc->name, last + 1);
    if (last == loc->pathbuf) {
        loc->dirfd = b->root_fd;
        loc->parent_is_root = 1;
        return 0;
    }
    /* The parent comes from the cache of open directories (dircache.c). */
    int fd = brick_dircache_get(b, first, (size_t)(last - first), &loc->dent);
    if (fd < 0) {
        /* ELOOP for a symlink on the way, EXDEV for a way out. */
        log_debug("resolving the parent of %s: %s", loc->path, strerror(-fd));
        return fd;
    }
    loc->dirfd = fd;
    return 0;
}

void brick_loc_release(struct brick *b, struct brick_loc *loc)
{
    if (loc->dent)
        brick_dircache_put(b, loc->dent);
    else if (loc->own && loc->dirfd >= 0)
        b->vfs->close(loc->dirfd);
    loc->dirfd = -1;
    loc->own = 0;
    loc->dent = NULL;
}
