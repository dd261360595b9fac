/* volume info, list and status: read-only views in GlusterFS's layout, so
 * scripts and habits written for `gluster volume info/status` keep working;
 * info and status also as `gluster --xml` prints them (docs/cli.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "../lib/xml.h"
#include "pool.h"
#include "shd.h"

#define RULE "------------------------------------------------------------------------------"

static void print_info(const struct mgmt_vol *v, FILE *out)
{
    fprintf(out, "\nVolume Name: %s\n", v->name);
    int r = v->replica > 1 ? v->replica : 1, sets = v->n_bricks / r;
    fprintf(out, "Type: %s\n",
            r == 1          ? "Distribute"
            : v->redundancy ? (sets > 1 ? "Distributed-Disperse" : "Disperse")
            : sets > 1      ? "Distributed-Replicate"
                            : "Replicate");
    fprintf(out, "Volume ID: %s\n", v->id);
    fprintf(out, "Status: %s\n", mgmt_status_name(v->status));
    fprintf(out, "Snapshot Count: 0\n");
    if (r == 1)
        fprintf(out, "Number of Bricks: %d\n", v->n_bricks);
    else if (v->redundancy)
        fprintf(out, "Number of Bricks: %d x (%d + %d) = %d\n", sets, r - v->redundancy,
                v->redundancy, v->n_bricks);
    else if (v->arbiter)
        fprintf(out, "Number of Bricks: %d x (%d + 1) = %d\n", sets, r - 1, v->n_bricks);
    else
        fprintf(out, "Number of Bricks: %d x %d = %d\n", sets, r, v->n_bricks);
    fprintf(out, "Transport-type: tcp\n");
    fprintf(out, "Bricks:\n");
    for (int i = 0; i < v->n_bricks; i++)
        fprintf(out, "Brick%d: %s:%s%s\n", i + 1, v->bricks[i].host, v->bricks[i].path,
                r > 1 && v->arbiter && i % r == r - 1 ? " (arbiter)" : "");
    if (v->opts.n) {
        fprintf(out, "Options Reconfigured:\n");
        for (size_t i = 0; i < v->opts.n; i++)
            fprintf(out, "%s: %s\n", v->opts.kv[i].name, v->opts.kv[i].value);
    }
}

int mgmt_cmd_info(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc > 3)
        return 2;
    if (argc == 2 || strcmp(argv[2], "all") == 0) {
        if (!m->vols) {
            fprintf(out, "No volumes present\n");
            return 0;
        }
        for (struct mgmt_vol *v = m->vols; v; v = v->next)
            print_info(v, out);
        return 0;
    }
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "Volume %s does not exist\n", argv[2]);
        return 1;
    }
    print_info(v, out);
    return 0;
}

/* The uuid of the server that serves b (GlusterFS's brick uuid and
 * hostUuid); the null uuid when no server of the pool does, as GlusterFS
 * prints for a brick it cannot place. */
static const char *host_uuid(struct mgmt *m, const struct mgmt_brick *b)
{
    if (b->local)
        return m->uuid;
    struct mgmt_peer *p = mgmt_peer_for_host(m, b->host);
    return p ? p->uuid : "00000000-0000-0000-0000-000000000000";
}

/* GlusterFS's volume type numbers and names (cli1-xdr.x, vol_type_str):
 * scripts compare against both. */
enum {
    XML_TYPE_DISTRIBUTE = 0,
    XML_TYPE_REPLICATE = 2,
    XML_TYPE_DISPERSE = 4,
    XML_TYPE_DIST_REPLICATE = 7,
    XML_TYPE_DIST_DISPERSE = 9,
};

static void xml_info(struct mgmt *m, const struct mgmt_vol *v, struct xml_writer *w)
{
    int r = v->replica > 1 ? v->replica : 1, sets = v->n_bricks / r;
    int type = r == 1          ? XML_TYPE_DISTRIBUTE
               : v->redundancy ? (sets > 1 ? XML_TYPE_DIST_DISPERSE : XML_TYPE_DISPERSE)
               : sets > 1      ? XML_TYPE_DIST_REPLICATE
                               : XML_TYPE_REPLICATE;
    xml_open(w, "volume", NULL, NULL);
    xml_leaf(w, "name", v->name);
    xml_leaf(w, "id", v->id);
    xml_leaf_int(w, "status", v->status); /* Created 0, Started 1, Stopped 2, as GlusterFS */
    xml_leaf(w, "statusStr", mgmt_status_name(v->status));
    xml_leaf_int(w, "snapshotCount", 0);
    xml_leaf_int(w, "brickCount", v->n_bricks);
    xml_leaf_int(w, "distCount", sets);
    xml_leaf_int(w, "replicaCount", v->redundancy ? 1 : r);
    xml_leaf_int(w, "arbiterCount", r > 1 && v->arbiter ? 1 : 0);
    xml_leaf_int(w, "disperseCount", v->redundancy ? r : 0);
    xml_leaf_int(w, "redundancyCount", v->redundancy);
    xml_leaf_int(w, "type", type);
    xml_leaf(w, "typeStr",
             type == XML_TYPE_DISTRIBUTE      ? "Distribute"
             : type == XML_TYPE_REPLICATE     ? "Replicate"
             : type == XML_TYPE_DISPERSE      ? "Disperse"
             : type == XML_TYPE_DIST_DISPERSE ? "Distributed-Disperse"
                                              : "Distributed-Replicate");
    xml_leaf_int(w, "transport", 0); /* tcp */
    xml_open(w, "bricks", NULL, NULL);
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *b = &v->bricks[i];
        char name[NET_HOST_MAX + PATH_MAX + 2];
        snprintf(name, sizeof(name), "%s:%s", b->host, b->path);
        const char *uuid = host_uuid(m, b);
        xml_open_mixed(w, "brick", "uuid", uuid, name);
        xml_leaf(w, "name", name);
        xml_leaf(w, "hostUuid", uuid);
        xml_leaf_int(w, "isArbiter", r > 1 && v->arbiter && i % r == r - 1);
        xml_close(w);
    }
    xml_close(w);
    xml_leaf_int(w, "optCount", (long long)v->opts.n);
    xml_open(w, "options", NULL, NULL);
    for (size_t i = 0; i < v->opts.n; i++) {
        xml_open(w, "option", NULL, NULL);
        xml_leaf(w, "name", v->opts.kv[i].name);
        xml_leaf(w, "value", v->opts.kv[i].value);
        xml_close(w);
    }
    xml_close(w);
    xml_close(w);
}

int mgmt_xml_info(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc > 3)
        return 2;
    struct mgmt_vol *one = NULL;
    if (argc == 3 && strcmp(argv[2], "all") != 0) {
        one = mgmt_vol_find(m, argv[2]);
        if (!one) {
            char err[MGMT_VOLNAME_MAX + 64];
            snprintf(err, sizeof(err), "Volume %s does not exist", argv[2]);
            xml_error_doc(out, XML_ERRNO_NO_VOLUME, err);
            return 1;
        }
    }
    struct xml_writer w;
    int count = 0;
    xml_begin(&w, out);
    xml_op_status(&w, 0, 0, NULL);
    xml_open(&w, "volInfo", NULL, NULL);
    xml_open(&w, "volumes", NULL, NULL);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        if (!one || v == one) {
            xml_info(m, v, &w);
            count++;
        }
    xml_leaf_int(&w, "count", count);
    xml_end(&w);
    return 0;
}

int mgmt_cmd_list(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 2)
        return 2;
    if (!m->vols)
        fprintf(out, "No volumes present in cluster\n");
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        fprintf(out, "%s\n", v->name);
    return 0;
}

/* Bricks of other servers, as their cairnd reported them for the command
 * being run on this thread. */
struct remote_brick {
    char id[GFID_STRLEN];
    unsigned port;
    int pid;
};
static __thread struct remote_brick *remote;
static __thread int n_remote, gathered;

/* Whether the brick runs and answers; its port and pid (wherever it runs). */
static int brick_state(const struct mgmt_brick *b, unsigned *port, int *pid)
{
    *port = b->port;
    *pid = (int)b->pid;
    if (b->local || !gathered)
        return mgmt_brick_online(b);
    for (int i = 0; i < n_remote; i++)
        if (strcmp(remote[i].id, b->id) == 0) {
            *port = remote[i].port;
            *pid = remote[i].pid;
            return 1;
        }
    return 0;
}

/* Asks every other server of the pool which of its bricks run. */
static void gather_remote(struct mgmt *m)
{
    int n = m->n_peers;
    struct mgmt_peer *ps = n ? malloc((size_t)n * sizeof(*ps)) : NULL;
    if (!ps)
        return;
    memcpy(ps, m->peers, (size_t)n * sizeof(*ps));
    gathered = 1;
    pthread_mutex_unlock(&m->lock);
    for (int i = 0; i < n; i++) {
        if (mgmt_peer_is_self(m, &ps[i]))
            continue;
        char *text = NULL;
        const char *argv[] = {"__status"};
        if (mgmt_peer_call(ps[i].host, ps[i].port, 1, argv, &text, 3000) == 0 && text) {
            for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
                 line = strtok_r(NULL, "\n", &save)) {
                struct remote_brick r;
                char id[64];
                if (sscanf(line, "%63s %u %d", id, &r.port, &r.pid) != 3 ||
                    strlen(id) != GFID_STRLEN - 1)
                    continue;
                strcpy(r.id, id);
                struct remote_brick *nr = realloc(remote, (size_t)(n_remote + 1) * sizeof(r));
                if (!nr)
                    break;
                remote = nr;
                remote[n_remote++] = r;
            }
        }
        free(text);
    }
    pthread_mutex_lock(&m->lock);
    free(ps);
}

static void print_row(FILE *out, const char *process, const char *port, const char *rdma,
                      const char *on, const char *pid)
{
    /* A process name wider than its column gets a line of its own. */
    if (strlen(process) >= 44)
        fprintf(out, "%s\n%-44s", process, "");
    else
        fprintf(out, "%-44s", process);
    fprintf(out, "%-10s%-11s%-8s%s\n", port, rdma, on, pid);
}

/* The mount holding path: device, file system type and options, found in
 * /proc/self/mountinfo by device number, the longest mount point wins. */
static void find_mount(const char *path, dev_t dev, char *fs, char *devname, char *opts, size_t len)
{
    snprintf(fs, len, "N/A");
    snprintf(devname, len, "N/A");
    snprintf(opts, len, "N/A");
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return;
    char line[4096];
    size_t best = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned maj, min;
        char mnt[PATH_MAX], mopts[1024], type[64], src[1024];
        if (sscanf(line, "%*s %*s %u:%u %*s %4095s %1023s", &maj, &min, mnt, mopts) != 4)
            continue;
        char *sep = strstr(line, " - ");
        if (!sep || sscanf(sep + 3, "%63s %1023s", type, src) != 2)
            continue;
        size_t n = strlen(mnt);
        if (makedev(maj, min) != dev || strncmp(path, mnt, n) != 0 || n < best)
            continue;
        best = n;
        snprintf(fs, len, "%s", type);
        snprintf(devname, len, "%s", src);
        snprintf(opts, len, "%s", mopts);
    }
    fclose(f);
}

static void human_size(double bytes, char *out, size_t len)
{
    static const char *const units[] = {"Bytes", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, len, "%.1f%s", bytes, units[u]);
}

static void print_detail(const struct mgmt_brick *b, FILE *out)
{
    char port[16], pid[16], fs[PATH_MAX], dev[PATH_MAX], mopts[PATH_MAX], real[PATH_MAX];
    unsigned bport;
    int bpid, on = brick_state(b, &bport, &bpid);
    snprintf(port, sizeof(port), on ? "%u" : "N/A", bport);
    snprintf(pid, sizeof(pid), on ? "%d" : "N/A", bpid);
    fprintf(out, "Brick                : Brick %s:%s\n", b->host, b->path);
    fprintf(out, "TCP Port             : %s\n", port);
    fprintf(out, "RDMA Port            : 0\n");
    fprintf(out, "Online               : %s\n", on ? "Y" : "N");
    fprintf(out, "Pid                  : %s\n", pid);
    struct stat st;
    struct statvfs sv;
    if (!b->local && gathered) {
        fprintf(out, "File System          : N/A (the brick is on %s)\n", b->host);
    } else if (stat(b->path, &st) == 0 && statvfs(b->path, &sv) == 0) {
        char free_s[32], total_s[32];
        if (!realpath(b->path, real))
            snprintf(real, sizeof(real), "%s", b->path);
        find_mount(real, st.st_dev, fs, dev, mopts, sizeof(fs));
        human_size((double)sv.f_bavail * sv.f_frsize, free_s, sizeof(free_s));
        human_size((double)sv.f_blocks * sv.f_frsize, total_s, sizeof(total_s));
        fprintf(out, "File System          : %s\n", fs);
        fprintf(out, "Device               : %s\n", dev);
        fprintf(out, "Mount Options        : %s\n", mopts);
        fprintf(out, "Inode Size           : N/A\n");
        fprintf(out, "Disk Space Free      : %s\n", free_s);
        fprintf(out, "Total Disk Space     : %s\n", total_s);
        fprintf(out, "Inode Count          : %llu\n", (unsigned long long)sv.f_files);
        fprintf(out, "Free Inodes          : %llu\n", (unsigned long long)sv.f_ffree);
    } else {
        fprintf(out, "File System          : N/A (%s)\n", strerror(errno));
    }
    fprintf(out, RULE "\n");
}

static void print_status(const struct mgmt_vol *v, int detail, FILE *out)
{
    fprintf(out, "Status of volume: %s\n", v->name);
    if (detail) {
        fprintf(out, RULE "\n");
        for (int i = 0; i < v->n_bricks; i++)
            print_detail(&v->bricks[i], out);
        return;
    }
    print_row(out, "Cairn process", "TCP Port", "RDMA Port", "Online", "Pid");
    fprintf(out, RULE "\n");
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *b = &v->bricks[i];
        char name[PATH_MAX + NET_HOST_MAX + 16], port[16], pid[16];
        unsigned bport;
        int bpid, on = brick_state(b, &bport, &bpid);
        snprintf(name, sizeof(name), "Brick %s:%s", b->host, b->path);
        snprintf(port, sizeof(port), on ? "%u" : "N/A", bport);
        snprintf(pid, sizeof(pid), on ? "%d" : "N/A", bpid);
        print_row(out, name, port, on ? "0" : "N/A", on ? "Y" : "N", pid);
    }
    if (v->replica >= 2) { /* this server's self-heal daemon (shd.c) */
        char pid[16];
        pid_t sp = mgmt_shd_pid(v->id);
        snprintf(pid, sizeof(pid), sp ? "%d" : "N/A", (int)sp);
        print_row(out, "Self-heal Daemon on localhost", "N/A", "N/A", sp ? "Y" : "N", pid);
    }
    fprintf(out, " \nTask Status of Volume %s\n" RULE "\n", v->name);
    fprintf(out, "There are no active volume tasks\n \n");
}

/* One <node> of volume status, as GlusterFS writes it: a process that is
 * down has port N/A and pid -1. Cairn has no RDMA: rdma is always N/A. The
 * element is left open for the detail fields. */
static void xml_node(struct xml_writer *w, const char *hostname, const char *path,
                     const char *peerid, int on, unsigned port, int pid)
{
    char p[16];
    snprintf(p, sizeof(p), on && port ? "%u" : "N/A", port);
    xml_open(w, "node", NULL, NULL);
    xml_leaf(w, "hostname", hostname);
    xml_leaf(w, "path", path);
    xml_leaf(w, "peerid", peerid);
    xml_leaf_int(w, "status", on ? 1 : 0);
    xml_leaf(w, "port", p);
    xml_open(w, "ports", NULL, NULL);
    xml_leaf(w, "tcp", p);
    xml_leaf(w, "rdma", "N/A");
    xml_close(w);
    xml_leaf_int(w, "pid", on ? pid : -1);
}

/* The file system of a brick of this server, as status detail shows it.
 * Fields that cannot be read are left out, as GlusterFS does. */
static void xml_detail(const struct mgmt_brick *b, struct xml_writer *w)
{
    struct stat st;
    struct statvfs sv;
    char fs[PATH_MAX], dev[PATH_MAX], mopts[PATH_MAX], real[PATH_MAX];
    if (stat(b->path, &st) != 0 || statvfs(b->path, &sv) != 0)
        return;
    if (!realpath(b->path, real))
        snprintf(real, sizeof(real), "%s", b->path);
    find_mount(real, st.st_dev, fs, dev, mopts, sizeof(fs));
    xml_leaf_fmt(w, "sizeTotal", "%llu", (unsigned long long)sv.f_blocks * sv.f_frsize);
    xml_leaf_fmt(w, "sizeFree", "%llu", (unsigned long long)sv.f_bavail * sv.f_frsize);
    xml_leaf(w, "device", dev);
    xml_leaf_fmt(w, "blockSize", "%llu", (unsigned long long)sv.f_bsize);
    xml_leaf(w, "mntOptions", mopts);
    xml_leaf(w, "fsName", fs);
    xml_leaf_fmt(w, "inodesTotal", "%llu", (unsigned long long)sv.f_files);
    xml_leaf_fmt(w, "inodesFree", "%llu", (unsigned long long)sv.f_ffree);
}

/* One <volume> of volStatus: the rows of the text view (print_status). */
static void xml_status(struct mgmt *m, const struct mgmt_vol *v, int detail, struct xml_writer *w)
{
    int shd = !detail && v->replica >= 2; /* this server's self-heal daemon (shd.c) */
    xml_open(w, "volume", NULL, NULL);
    xml_leaf(w, "volName", v->name);
    xml_leaf_int(w, "nodeCount", v->n_bricks + shd);
    for (int i = 0; i < v->n_bricks; i++) {
        const struct mgmt_brick *b = &v->bricks[i];
        unsigned port;
        int pid, on = brick_state(b, &port, &pid);
        xml_node(w, b->host, b->path, host_uuid(m, b), on, port, pid);
        if (detail && (b->local || !gathered))
            xml_detail(b, w);
        xml_close(w);
    }
    if (shd) {
        pid_t sp = mgmt_shd_pid(v->id);
        xml_node(w, "Self-heal Daemon", "localhost", m->uuid, sp != 0, 0, (int)sp);
        xml_close(w);
    }
    if (!detail) { /* no rebalance or remove-brick tasks */
        xml_open(w, "tasks", NULL, NULL);
        xml_close(w);
    }
    xml_close(w);
}

/* volume status [VOLNAME|all] [detail]: the volume named (NULL: all) and
 * detail. 0, or 2 for a usage error. */
static int status_args(int argc, char **argv, const char **name, int *detail)
{
    *detail = 0;
    if (argc > 4)
        return 2;
    if (argc >= 3 && strcmp(argv[argc - 1], "detail") == 0) {
        *detail = 1;
        argc--;
    }
    if (argc == 4)
        return 2;
    *name = argc == 3 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
    return 0;
}

static int xml_status_cmd(struct mgmt *m, const char *name, int detail, FILE *out)
{
    struct mgmt_vol *one = NULL;
    if (name) {
        char err[MGMT_VOLNAME_MAX + 64];
        one = mgmt_vol_find(m, name);
        if (!one || one->status != MGMT_VOL_STARTED) {
            snprintf(err, sizeof(err),
                     one ? "Volume %s is not started" : "Volume %s does not exist", name);
            xml_error_doc(out, one ? XML_ERRNO_NOT_STARTED : XML_ERRNO_NO_VOLUME, err);
            return 1;
        }
    }
    struct xml_writer w;
    xml_begin(&w, out);
    xml_op_status(&w, 0, 0, NULL);
    xml_open(&w, "volStatus", NULL, NULL);
    xml_open(&w, "volumes", NULL, NULL);
    for (struct mgmt_vol *v = m->vols; v; v = v->next)
        if (one ? v == one : v->status == MGMT_VOL_STARTED)
            xml_status(m, v, detail, &w);
    xml_end(&w);
    return 0;
}

static int status_cmd(struct mgmt *m, const char *name, int detail, FILE *out)
{
    if (!name) {
        int any = 0;
        for (struct mgmt_vol *v = m->vols; v; v = v->next)
            if (v->status == MGMT_VOL_STARTED) {
                print_status(v, detail, out);
                any = 1;
            }
        if (!any)
            fprintf(out, m->vols ? "No volumes are started\n" : "No volumes present\n");
        return 0;
    }
    struct mgmt_vol *v = mgmt_vol_find(m, name);
    if (!v) {
        fprintf(out, "Volume %s does not exist\n", name);
        return 1;
    }
    if (v->status != MGMT_VOL_STARTED) {
        fprintf(out, "Volume %s is not started\n", v->name);
        return 1;
    }
    print_status(v, detail, out);
    return 0;
}

/* Both forms of volume status, with the other servers' bricks gathered
 * for the time of the command. */
static int status_gathered(struct mgmt *m, int xml, int argc, char **argv, FILE *out)
{
    const char *name;
    int detail;
    if (status_args(argc, argv, &name, &detail))
        return 2;
    if (m->n_peers > 1)
        gather_remote(m);
    int rc = xml ? xml_status_cmd(m, name, detail, out) : status_cmd(m, name, detail, out);
    free(remote);
    remote = NULL;
    n_remote = gathered = 0;
    return rc;
}

int mgmt_xml_status(struct mgmt *m, int argc, char **argv, FILE *out)
{
    return status_gathered(m, 1, argc, argv, out);
}

int mgmt_cmd_status(struct mgmt *m, int argc, char **argv, FILE *out)
{
    return status_gathered(m, 0, argc, argv, out);
}
