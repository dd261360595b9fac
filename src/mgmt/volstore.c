/* The volume store: one text file per volume, DIR/vols/NAME/info, of
 * key=value lines ending in a checksum line so a torn or hand-damaged file is
 * refused instead of half-read. Written atomically: a crash leaves either the
 * old or the new file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../client/distribute.h"
#include "../lib/log.h"
#include "../rpc/wire.h"
#include "pool.h"

#define STORE_VERSION 1

int mgmt_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int mgmt_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

const char *mgmt_status_name(enum mgmt_vol_status s)
{
    switch (s) {
    case MGMT_VOL_CREATED:
        return "Created";
    case MGMT_VOL_STARTED:
        return "Started";
    case MGMT_VOL_STOPPED:
        return "Stopped";
    }
    return "?";
}

struct mgmt_vol *mgmt_vol_find(struct mgmt *m, const char *name)
{
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        if (strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

void mgmt_vol_insert(struct mgmt *m, struct mgmt_vol *v)
{
    struct mgmt_vol **pp = &m->vols;
    while (*pp && strcmp((*pp)->name, v->name) < 0)
        pp = &(*pp)->next;
    v->next = *pp;
    *pp = v;
}

void mgmt_vol_unlink(struct mgmt *m, struct mgmt_vol *v)
{
    for (struct mgmt_vol **pp = &m->vols; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            v->next = NULL;
            return;
        }
}

void mgmt_vol_free(struct mgmt_vol *v)
{
    if (!v)
        return;
    free(v->bricks);
    opt_set_free(&v->opts);
    free(v->place);
    free(v->place_prev);
    free(v);
}

char *mgmt_vol_format(const struct mgmt_vol *v)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "# cairnd volume store; edit only while cairnd is stopped\n");
    fprintf(f, "version=%d\nname=%s\nid=%s\ntype=%s\nstatus=%s\ntransport=tcp\n", STORE_VERSION,
            v->name, v->id,
            v->redundancy    ? "Disperse"
            : v->replica > 1 ? "Replicate"
                             : "Distribute",
            mgmt_status_name(v->status));
    if (v->replica > 1)
        fprintf(f, "replica=%d\narbiter=%d\n", v->replica, v->arbiter);
    if (v->redundancy)
        fprintf(f, "redundancy=%d\n", v->redundancy);
    if (v->gen)
        fprintf(f, "generation=%llu\n", (unsigned long long)v->gen);
    if (v->reset_id[0])
        fprintf(f, "reset-brick=%s\n", v->reset_id);
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *b = &v->bricks[i];
        fprintf(f, "brick=%s %u %s:%s\n", b->id, b->port, b->host, b->path);
    }
    if (v->place)
        mgmt_place_format(f, "placement", v->place);
    if (v->place_prev)
        mgmt_place_format(f, "placement-prev", v->place_prev);
    for (size_t i = 0; i < v->opts.n; i++)
        fprintf(f, "option.%s=%s\n", v->opts.kv[i].name, v->opts.kv[i].value);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    char *out = malloc(len + 32);
    if (!out) {
        free(buf);
        return NULL;
    }
    snprintf(out, len + 32, "%schecksum=%08x\n", buf, rpc_crc32c(0, buf, len));
    free(buf);
    return out;
}

static int parse_brick(const char *val, struct mgmt_brick *b)
{
    char *end;
    const char *sp = strchr(val, ' ');
    if (!sp || (size_t)(sp - val) != GFID_STRLEN - 1)
        return -EINVAL;
    memcpy(b->id, val, GFID_STRLEN - 1);
    b->id[GFID_STRLEN - 1] = 0;
    gfid_t g;
    if (gfid_parse(b->id, &g) < 0)
        return -EINVAL;
    long port = strtol(sp + 1, &end, 10);
    if (end == sp + 1 || *end != ' ' || port < 0 || port > 65535)
        return -EINVAL;
    b->port = (uint16_t)port;
    const char *hp = end + 1, *colon = strstr(hp, ":/");
    if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof(b->host) ||
        strlen(colon + 1) >= sizeof(b->path))
        return -EINVAL;
    memcpy(b->host, hp, (size_t)(colon - hp));
    b->host[colon - hp] = 0;
    strcpy(b->path, colon + 1);
    return 0;
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        rc = -EINVAL;                                                                              \
        goto fail;                                                                                 \
    } while (0)

static int parse_line(struct mgmt_vol *v, char *line, int lineno, char *err, size_t errlen)
{
    int rc = 0;
    char *eq = strchr(line, '=');
    if (!eq)
        BAD("line %d: no '=' in \"%.40s\"", lineno, line);
    *eq = 0;
    const char *key = line, *val = eq + 1;
    if (strcmp(key, "version") == 0) {
        if (atoi(val) != STORE_VERSION)
            BAD("line %d: unsupported store version %s", lineno, val);
    } else if (strcmp(key, "name") == 0) {
        if (mgmt_check_volname(val, err, errlen) < 0)
            BAD("line %d: bad volume name \"%.64s\"", lineno, val);
        strcpy(v->name, val);
    } else if (strcmp(key, "id") == 0) {
        gfid_t g;
        if (gfid_parse(val, &g) < 0)
            BAD("line %d: bad volume id \"%.40s\"", lineno, val);
        strcpy(v->id, val);
    } else if (strcmp(key, "type") == 0) {
        if (strcmp(val, "Distribute") != 0 && strcmp(val, "Replicate") != 0 &&
            strcmp(val, "Disperse") != 0)
            BAD("line %d: unknown volume type \"%.40s\"", lineno, val);
    } else if (strcmp(key, "replica") == 0) {
        char *end;
        long n = strtol(val, &end, 10);
        if (*end || end == val || n < 2 || n > 16)
            BAD("line %d: bad replica count \"%.40s\"", lineno, val);
        v->replica = (int)n;
    } else if (strcmp(key, "redundancy") == 0) {
        char *end;
        long n = strtol(val, &end, 10);
        if (*end || end == val || n < 1 || n > 7)
            BAD("line %d: bad redundancy \"%.40s\"", lineno, val);
        v->redundancy = (int)n;
    } else if (strcmp(key, "arbiter") == 0) {
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            BAD("line %d: bad arbiter count \"%.40s\"", lineno, val);
        v->arbiter = val[0] - '0';
    } else if (strcmp(key, "generation") == 0) {
        char *end;
        v->gen = strtoull(val, &end, 10);
        if (*end || end == val)
            BAD("line %d: bad generation \"%.40s\"", lineno, val);
    } else if (strcmp(key, "transport") == 0) {
        if (strcmp(val, "tcp") != 0)
            BAD("line %d: unknown transport \"%.40s\"", lineno, val);
    } else if (strcmp(key, "status") == 0) {
        if (strcmp(val, "Created") == 0)
            v->status = MGMT_VOL_CREATED;
        else if (strcmp(val, "Started") == 0)
            v->status = MGMT_VOL_STARTED;
        else if (strcmp(val, "Stopped") == 0)
            v->status = MGMT_VOL_STOPPED;
        else
            BAD("line %d: unknown status \"%.40s\"", lineno, val);
    } else if (strcmp(key, "reset-brick") == 0) {
        gfid_t g;
        if (gfid_parse(val, &g) < 0)
            BAD("line %d: bad brick id \"%.40s\"", lineno, val);
        snprintf(v->reset_id, sizeof(v->reset_id), "%s", val);
    } else if (strcmp(key, "placement") == 0 || strcmp(key, "placement-prev") == 0) {
        struct cl_place **slot = key[9] ? &v->place_prev : &v->place;
        if (*slot || mgmt_place_parse(val, slot) < 0)
            BAD("line %d: bad placement \"%.80s\"", lineno, val);
    } else if (strcmp(key, "brick") == 0) {
        void *nb = realloc(v->bricks, (size_t)(v->n_bricks + 1) * sizeof(*v->bricks));
        if (!nb) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        v->bricks = nb;
        struct mgmt_brick *b = &v->bricks[v->n_bricks];
        memset(b, 0, sizeof(*b));
        if (parse_brick(val, b) < 0)
            BAD("line %d: bad brick \"%.80s\"", lineno, val);
        v->n_bricks++;
    } else if (strncmp(key, "option.", 7) == 0) {
        /* An option this version does not know (left by a newer one, or
         * removed), or a value it no longer accepts (a range narrowed, as
         * client.attribute-timeout's to 0), is kept out of the table's reach
         * but not fatal: the option then has its default. */
        char norm[1024], why[512];
        if (!opt_find(key + 7))
            log_warn("volume store line %d: ignoring unknown option %s", lineno, key + 7);
        else if (opt_validate(key + 7, val, norm, sizeof(norm), why, sizeof(why)) < 0)
            log_warn("volume store line %d: ignoring %s=%s (%s)", lineno, key + 7, val, why);
        else if (opt_set_put(&v->opts, opt_canonical(key + 7), val) < 0) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    } else {
        BAD("line %d: unknown key \"%.40s\"", lineno, key);
    }
fail:
    return rc;
}

int mgmt_vol_parse(const char *text, size_t len, struct mgmt_vol **out, char *err, size_t errlen)
{
    int rc = -EINVAL;
    char *copy = NULL;
    struct mgmt_vol *v = calloc(1, sizeof(*v));
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (memchr(text, 0, len))
        BAD("NUL byte in file");
    /* The checksum line is the last line and covers everything before it. */
    const char *ck = NULL;
    for (const char *p = text; p < text + len;) {
        const char *nl = memchr(p, '\n', (size_t)(text + len - p));
        if (!nl)
            BAD("last line is not terminated (truncated file?)");
        if ((size_t)(nl - p) > 9 && strncmp(p, "checksum=", 9) == 0) {
            if (nl + 1 != text + len)
                BAD("data after the checksum line");
            ck = p;
        }
        p = nl + 1;
    }
    if (!ck)
        BAD("no checksum line (truncated file?)");
    /* The value is 1-8 hex digits up to the newline; parsed by hand since
     * the buffer is not NUL-terminated and strtoul would skip newlines. */
    unsigned long want = 0;
    const char *hex = ck + 9;
    size_t ndig = 0;
    for (; hex[ndig] != '\n'; ndig++) {
        char ch = hex[ndig];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0 || ndig == 8)
            BAD("checksum mismatch (damaged file)");
        want = want << 4 | (unsigned long)d;
    }
    if (ndig == 0 || want != rpc_crc32c(0, text, (size_t)(ck - text)))
        BAD("checksum mismatch (damaged file)");
    copy = strndup(text, (size_t)(ck - text));
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    int lineno = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (*line == '#')
            continue;
        if ((rc = parse_line(v, line, lineno, err, errlen)) < 0)
            goto fail;
    }
    if (!v->name[0] || !v->id[0])
        BAD("volume name or id missing");
    if (v->n_bricks == 0)
        BAD("volume %s has no bricks", v->name);
    if (v->replica > 1 && v->n_bricks % v->replica)
        BAD("volume %s: %d bricks are not a multiple of replica %d", v->name, v->n_bricks,
            v->replica);
    if (v->place_prev && !v->place)
        BAD("volume %s: a previous placement without a placement", v->name);
    if (v->place && v->place->n != v->n_bricks / (v->replica > 1 ? v->replica : 1))
        BAD("volume %s: its placement has %d sets, its bricks make %d", v->name, v->place->n,
            v->n_bricks / (v->replica > 1 ? v->replica : 1));
    free(copy);
    *out = v;
    return 0;
fail:
    free(copy);
    mgmt_vol_free(v);
    return rc;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int mgmt_vol_save(const char *workdir, const struct mgmt_vol *v)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 16], path[PATH_MAX + 16];
    int rc, fd = -1;
    char *text = mgmt_vol_format(v);
    if (!text)
        return -ENOMEM;
    snprintf(dir, sizeof(dir), "%s/vols/%s", workdir, v->name);
    snprintf(tmp, sizeof(tmp), "%s/info.tmp", dir);
    snprintf(path, sizeof(path), "%s/info", dir);
    if ((rc = mkdir_p(dir, 0755)) < 0)
        goto out;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if ((rc = mgmt_write_all(fd, text, strlen(text))) < 0)
        goto out;
    if (fsync(fd) < 0 || close(fd) < 0) {
        rc = -errno;
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0) {
        rc = -errno;
        goto out;
    }
    rc = fsync_dir(dir);
    if (rc == 0)
        rc = fsync_dir(workdir); /* the vols/NAME entry of a new volume */
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0) {
        unlink(tmp);
        log_error("cannot write %s: %s", path, strerror(-rc));
    }
    free(text);
    return rc;
}

int mgmt_vol_remove(const char *workdir, const char *name)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/vols/%s", workdir, name);
    snprintf(path, sizeof(path), "%s/info", dir);
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    snprintf(path, sizeof(path), "%s/info.tmp", dir);
    unlink(path);
    if (rmdir(dir) < 0 && errno != ENOENT)
        return -errno;
    snprintf(dir, sizeof(dir), "%s/vols", workdir);
    fsync_dir(dir);
    return 0;
}

static int read_file(const char *path, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size > (1 << 20)) {
        close(fd);
        return -EFBIG;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    int rc = mgmt_read_all(fd, buf, (size_t)st.st_size);
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[st.st_size] = 0;
    *out = buf;
    *len = (size_t)st.st_size;
    return 0;
}

int mgmt_store_load(struct mgmt *m, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/vols", m->workdir) >= (int)sizeof(dir)) {
        snprintf(err, errlen, "workdir path too long");
        return -ENAMETOOLONG;
    }
    if (mkdir_p(dir, 0755) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -errno;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
        return -errno;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 300], why[256];
        char *text = NULL;
        size_t len = 0;
        struct mgmt_vol *v;
        snprintf(path, sizeof(path), "%s/%s/info", dir, e->d_name);
        rc = read_file(path, &text, &len);
        if (rc == -ENOENT) {
            /* a volume whose create never finished: vols/NAME without info */
            log_warn("ignoring %s/%s: no info file", dir, e->d_name);
            rc = 0;
            continue;
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
            break;
        }
        rc = mgmt_vol_parse(text, len, &v, why, sizeof(why));
        free(text);
        if (rc < 0) {
            snprintf(err, errlen, "%s is corrupted: %s", path, why);
            break;
        }
        if (strcmp(v->name, e->d_name) != 0) {
            snprintf(err, errlen, "%s is corrupted: it names volume %s", path, v->name);
            mgmt_vol_free(v);
            rc = -EINVAL;
            break;
        }
        mgmt_vol_insert(m, v);
    }
    closedir(d);
    mgmt_mark_local(m);
    return rc;
}
