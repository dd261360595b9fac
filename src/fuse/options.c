/* cairn-fuse's command line: HOST[:PORT]:/VOLNAME[/DIR] MOUNTPOINT [-o opts] [-f] [-d],
 * and who may use the mount. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/volspec.h"
#include "../lib/log.h"
#include "bridge.h"

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s HOST[:PORT]:/VOLNAME[/DIR] MOUNTPOINT [-o OPT[,OPT...]] [-f] [-d]\n"
            "  -h, --help            show this help (man cairn-fuse has more)\n"
            "  -f                    stay in the foreground\n"
            "  -d                    debug: foreground, FUSE requests traced\n"
            "  -o ping-timeout=SEC   brick liveness timeout, whole seconds (default: the\n"
            "                        volume's network.ping-timeout)\n"
            "  -o backup-servers=HOST[:PORT]:HOST[:PORT]...   cairnd servers to fetch the\n"
            "                        volume from when HOST of the spec does not answer\n"
            "                        (also backup-volfile-servers=, GlusterFS's name)\n"
            "  -o attribute-timeout=SEC, -o entry-timeout=SEC   fix this mount's kernel\n"
            "                        cache times, under leases and without them (default: leases\n"
            "                        decide); above 0 another client's change may show up\n"
            "                        to SEC seconds late here\n"
            "  -o log-file=PATH      (default /var/log/cairn/<mountpoint>.log)\n"
            "  -o log-level=LEVEL    error|warning|info|debug|trace\n"
            "  -o ssl-key=PATH, -o ssl-cert=PATH, -o ssl-ca=PATH   this client's TLS key,\n"
            "                        certificate and CA certificates, for volumes with\n"
            "                        client.ssl on (default /etc/ssl/cairn.key, .pem, .ca)\n"
            "  -o mgmt-ssl=on|off    fetch the volume from cairnd over TLS (default: on when\n"
            "                        /var/lib/cairnd/secure-access exists)\n"
            "  -o io-uring=on|off    FUSE requests over io_uring where the kernel has it\n"
            "                        (default on; turns on the fuse module's enable_uring)\n"
            "  -o direct-io-mode=auto|enable|disable   which handles skip the kernel's\n"
            "                        page cache: auto (default) those opened for writing,\n"
            "                        enable every handle, disable only O_DIRECT ones\n"
            "  -o selinux            store security.selinux labels (without it that\n"
            "                        attribute is not supported: EOPNOTSUPP)\n"
            "  -o no-allow-other     only the mounting user may use the mount (default:\n"
            "                        every user, with permissions checked by the kernel\n"
            "                        as on a local disk; a mount by another user than\n"
            "                        root needs user_allow_other in /etc/fuse.conf for\n"
            "                        that, and warns and falls back without it)\n"
            "  -o allow_other        every user, or fail where the mounter may not allow it\n"
            "  -o ro, nosuid, nodev, noexec, sync, dirsync, noatime, ... (the kernel's and\n"
            "                        FUSE's mount options) are passed through\n"
            "GlusterFS's mount options are taken too: transport=tcp, acl, use-readdirp=,\n"
            "reader-thread-count=, xlator-option=X.OPT=VALUE, backupvolfile-server=, and\n"
            "others without effect in Cairn (the log says which; docs/cli.md lists them).\n"
            "An option that is none of these stops the mount.\n",
            prog);
}

/* Adds a line to a buffer of notes for the log. */
static void add_line(char *buf, size_t size, const char *fmt, const char *a, const char *b)
{
    size_t l = strlen(buf);
    if (l + 2 >= size)
        return;
    snprintf(buf + l, size - l, fmt, a, b);
    l = strlen(buf);
    if (l + 1 < size) {
        buf[l] = '\n';
        buf[l + 1] = 0;
    }
}

/* GlusterFS mount options that mean nothing here, with why, and what value
 * each takes: 'b' none or a boolean, 'n' a non-negative number, '-' none. */
static const struct {
    const char *name;
    char value;
    const char *why;
} no_effect[] = {
    {"acl", '-',
     "POSIX ACLs are always enforced: the kernel checks them (default_permissions) and the "
     "bricks store them"},
    {"background-qlen", 'n', "the client sizes its queue to the kernel itself"},
    {"congestion-threshold", 'n', "the client sizes its queue to the kernel itself"},
    {"fopen-keep-cache", 'b', "the kernel's page cache is kept while the client holds a lease"},
    {"gid-timeout", 'n', "the kernel checks permissions with the caller's own group list"},
    {"invalidate-limit", 'n', "the client sizes its caches itself"},
    {"localtime-logging", 'b', "the log's timestamps are Cairn's"},
    {"lru-limit", 'n', "the client sizes its inode table itself"},
    {"negative-timeout", 'n', "absent names are cached under directory leases instead"},
    {"reader-thread-count", 'n',
     "the client serves the kernel on several threads, one io_uring queue per CPU where the "
     "kernel has it"},
    {"resolve-gids", 'b', "the kernel checks permissions with the caller's own group list"},
    {"use-readdirp", 'b', "the client always lists directories with readdirplus"},
    {"volfile-max-fetch-attempts", 'n', "the client asks the server and each backup once"},
};

/* FUSE's and the kernel's own mount options, handed to libfuse as given. */
static const char *const fuse_pass[] = {
    "async",      "atime",         "auto_unmount", "blksize",    "context",     "defcontext",
    "dev",        "diratime",      "dirsync",      "exec",       "fscontext",   "lazytime",
    "max_read",   "noatime",       "nodev",        "nodiratime", "noexec",      "nolazytime",
    "norelatime", "nostrictatime", "nosuid",       "relatime",   "rootcontext", "strictatime",
    "suid",       "sync",          NULL,
};

/* What an xlator-option=XLATOR.OPTION=VALUE names: a GlusterFS translator's
 * option, given to the mount. The ones with a Cairn mount option of the same
 * meaning are taken as that option; 0 when taken, 1 when it names nothing
 * here (warned about in the log), -EINVAL when malformed or a bad value. */
static int parse_one(struct cf_config *c, char *o);
static int xlator_option(struct cf_config *c, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return -EINVAL;
    const char *dot = v;
    for (const char *p = v; p < eq; p++)
        if (*p == '.')
            dot = p + 1;
    if (dot == v) /* no translator part */
        return -EINVAL;
    static const char *const mapped[] = {"ping-timeout", "attribute-timeout", "entry-timeout",
                                         NULL};
    size_t n = (size_t)(eq - dot);
    for (int i = 0; mapped[i]; i++)
        if (strlen(mapped[i]) == n && strncmp(dot, mapped[i], n) == 0) {
            char one[256];
            if (snprintf(one, sizeof(one), "%.*s", (int)strlen(dot), dot) >= (int)sizeof(one))
                return -EINVAL;
            return parse_one(c, one) < 0 ? -EINVAL : 0;
        }
    add_line(c->warnings, sizeof(c->warnings),
             "mount option xlator-option=%s names nothing Cairn has (Cairn has no GlusterFS "
             "translators; volume options are set with `cairn volume set`): ignored%s",
             v, "");
    return 1;
}

static int append_fuse_opt(struct cf_config *c, const char *o)
{
    size_t l = strlen(c->fuse_opts), n = strlen(o);
    if (l + n + 2 > sizeof(c->fuse_opts))
        return -E2BIG;
    if (l)
        c->fuse_opts[l++] = ',';
    memcpy(c->fuse_opts + l, o, n + 1);
    return 0;
}

static int parse_seconds(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= 0 && d <= 86400)) /* NaN too */
        return -EINVAL;
    *out = d;
    return 0;
}

static int parse_one(struct cf_config *c, char *o)
{
    char *eq = strchr(o, '=');
    const char *v = eq ? eq + 1 : NULL;
    size_t klen = eq ? (size_t)(eq - o) : strlen(o);
#define KEY(s) (klen == strlen(s) && strncmp(o, s, klen) == 0)
    if (KEY("ping-timeout")) {
        /* the volume option's syntax and range, so a live change and the
         * mount's override are the same kind of value */
        int64_t sec;
        if (!v || opt_parse_time(v, &sec) < 0 || sec < 1 || sec > 1800)
            goto bad;
        c->ping_timeout_ms = (int)sec * 1000;
    } else if (KEY("backup-servers") || KEY("backup-volfile-servers") ||
               KEY("backupvolfile-server")) {
        if (!v || cl_servers_parse(v, c->backup, CF_MAX_BACKUPS, &c->n_backup) < 0)
            goto bad;
    } else if (KEY("attribute-timeout") || KEY("attr-timeout") || KEY("attr_timeout")) {
        if (!v || parse_seconds(v, &c->attr_timeout) < 0)
            goto bad;
    } else if (KEY("entry-timeout") || KEY("entry_timeout")) {
        if (!v || parse_seconds(v, &c->entry_timeout) < 0)
            goto bad;
    } else if (KEY("log-file")) {
        if (!v || !*v || strlen(v) >= sizeof(c->log_file))
            goto bad;
        strcpy(c->log_file, v);
    } else if (KEY("mgmt-ssl")) {
        if (!v || (strcmp(v, "on") && strcmp(v, "off")))
            goto bad;
        c->mgmt_ssl = !strcmp(v, "on");
    } else if (KEY("ssl-key") || KEY("ssl-cert") || KEY("ssl-ca")) {
        char *slot = KEY("ssl-key") ? c->ssl_key : KEY("ssl-cert") ? c->ssl_cert : c->ssl_ca;
        if (!v || !*v || strlen(v) >= PATH_MAX)
            goto bad;
        strcpy(slot, v);
    } else if (KEY("log-level")) {
        if (!v || (c->log_level = log_parse_level(v)) < 0)
            goto bad;
    } else if (KEY("rw") || KEY("default_permissions") || KEY("fsname") || KEY("subtype")) {
        /* rw is the default; the others Cairn sets itself */
    } else if (KEY("io-uring")) {
        if (!v || (strcmp(v, "on") && strcmp(v, "off")))
            goto bad;
        c->io_uring = !strcmp(v, "on");
    } else if (KEY("direct-io-mode")) {
        if (!v)
            goto bad;
        if (!strcmp(v, "auto"))
            c->dio_mode = CF_DIO_AUTO;
        else if (!strcmp(v, "enable"))
            c->dio_mode = CF_DIO_ENABLE;
        else if (!strcmp(v, "disable"))
            c->dio_mode = CF_DIO_DISABLE;
        else
            goto bad;
    } else if (KEY("allow_other") || KEY("no-allow-other") || KEY("allow_root")) {
        /* allow_other is added by cf_decide_access; allow_root (libfuse's:
         * the mounter and root) goes to libfuse */
        int want = KEY("allow_other")  ? CF_OTHERS_ASKED
                   : KEY("allow_root") ? CF_OTHERS_ROOT
                                       : CF_OTHERS_OFF;
        if (v)
            goto bad;
        if (c->others != CF_OTHERS_AUTO && c->others != want) {
            fprintf(stderr, "cairn-fuse: mount options allow_other, allow_root and "
                            "no-allow-other exclude each other\n");
            return -EINVAL;
        }
        c->others = want;
        if (want == CF_OTHERS_ROOT)
            return append_fuse_opt(c, o);
    } else if (KEY("selinux")) {
        c->selinux = 1;
    } else if (KEY("debug")) {
        c->debug = 1;
    } else if (KEY("transport")) {
        /* GlusterFS's: Cairn speaks TCP (socket is its other name) */
        if (v && !strcmp(v, "rdma")) {
            fprintf(stderr, "cairn-fuse: mount option transport=rdma: Cairn speaks TCP only "
                            "(transport=tcp)\n");
            return -EINVAL;
        }
        if (!v || (strcmp(v, "tcp") && strcmp(v, "socket")))
            goto bad;
    } else if (KEY("xlator-option")) {
        if (!v || xlator_option(c, v) < 0)
            goto bad;
    } else if (KEY("ro")) {
        c->read_only = 1;
        return append_fuse_opt(c, o);
    } else {
        for (size_t i = 0; i < sizeof(no_effect) / sizeof(no_effect[0]); i++) {
            if (!KEY(no_effect[i].name))
                continue;
            bool b;
            char *end;
            if ((no_effect[i].value == '-' && v) ||
                (no_effect[i].value == 'b' && v && opt_parse_bool(v, &b) < 0) ||
                (no_effect[i].value == 'n' &&
                 (!v || !isdigit((unsigned char)*v) || (strtoul(v, &end, 10), *end))))
                goto bad;
            add_line(c->notes, sizeof(c->notes), "mount option %s has no effect in Cairn: %s",
                     no_effect[i].name, no_effect[i].why);
            return 0;
        }
        for (int i = 0; fuse_pass[i]; i++)
            if (KEY(fuse_pass[i]))
                return append_fuse_opt(c, o);
        fprintf(stderr, "cairn-fuse: unknown mount option '%s' (cairn-fuse --help lists them)\n",
                o);
        return -EINVAL;
    }
    return 0;
#undef KEY
bad:
    fprintf(stderr, "cairn-fuse: invalid mount option '%s'\n", o);
    return -EINVAL;
}

static int parse_opts(struct cf_config *c, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *o = strtok_r(copy, ",", &save); o && rc == 0; o = strtok_r(NULL, ",", &save))
        rc = parse_one(c, o);
    free(copy);
    return rc;
}

static int parse_spec(struct cf_config *c, const char *spec)
{
    const char *why;
    if (cl_volspec_parse_dir(spec, &c->server, c->volume, sizeof(c->volume), c->subdir,
                             sizeof(c->subdir), &why) < 0) {
        if (strcmp(why, "bad server address") == 0)
            fprintf(stderr, "cairn-fuse: bad server address in '%s'\n", spec);
        else if (strcmp(why, "bad directory") == 0)
            fprintf(stderr,
                    "cairn-fuse: bad directory in '%s': write /VOLNAME/DIR, without '.', '..' "
                    "or empty components\n",
                    spec);
        else
            fprintf(stderr, "cairn-fuse: '%s' is not HOST[:PORT]:/VOLNAME[/DIR]\n", spec);
        return -EINVAL;
    }
    snprintf(c->fsname, sizeof(c->fsname), "%s", spec);
    return 0;
}

int cf_parse_args(int argc, char **argv, struct cf_config *c)
{
    const char *pos[2];
    int npos = 0;
    memset(c, 0, sizeof(*c));
    c->log_level = -1;
    c->mgmt_ssl = -1;
    c->attr_timeout = -1;
    c->entry_timeout = -1;
    c->io_uring = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o")) {
            if (++i == argc || parse_opts(c, argv[i]) < 0)
                goto usage;
        } else if (!strncmp(a, "-o", 2)) {
            if (parse_opts(c, a + 2) < 0)
                goto usage;
        } else if (!strcmp(a, "-f")) {
            c->foreground = 1;
        } else if (!strcmp(a, "-d")) {
            c->debug = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, argv[0]);
            exit(0);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cairn-fuse: unknown flag %s\n", a);
            goto usage;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            goto usage;
        }
    }
    if (npos != 2)
        goto usage;
    if (parse_spec(c, pos[0]) < 0)
        return -EINVAL;
    if (!realpath(pos[1], c->mountpoint)) {
        fprintf(stderr, "cairn-fuse: mount point %s: %s\n", pos[1], strerror(errno));
        return -EINVAL;
    }
    if (c->debug)
        c->foreground = 1;
    return 0;
usage:
    usage(stderr, argv[0]);
    return -EINVAL;
}

/* Whether the fuse.conf at path has a line "user_allow_other" (text after
 * '#' and blanks around it ignored), the rule by which fusermount3 lets a
 * user other than root mount with allow_other. */
static int user_allow_other(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int yes = 0;
    while (!yes && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "#")] = 0;
        char *s = line, *e = line + strlen(line);
        while (isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        yes = e - s == 16 && strncmp(s, "user_allow_other", 16) == 0;
    }
    fclose(f);
    return yes;
}

int cf_decide_access(struct cf_config *c, const char *fuse_conf)
{
    c->mounter_only = 0;
    if (c->others == CF_OTHERS_OFF || c->others == CF_OTHERS_ROOT)
        return 0;
    /* root mounts with mount(2), or through fusermount3, which lets root
     * set allow_other whatever fuse.conf says */
    uid_t uid = getuid();
    if (uid == 0 || user_allow_other(fuse_conf))
        return append_fuse_opt(c, "allow_other");
    if (c->others == CF_OTHERS_ASKED) {
        fprintf(stderr,
                "cairn-fuse: -o allow_other: a mount by uid %u (not root) may let other users in "
                "only with 'user_allow_other' in %s\n",
                (unsigned)uid, fuse_conf);
        return -EPERM;
    }
    c->mounter_only = 1;
    return 0;
}
