/* volume info, list and status: read-only views in GlusterFS's layout, so
 * scripts and habits written for `gluster volume info/status` keep working. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "pool.h"
#include "shd.h"

#define RULE "------------------------------------------------------------------------------"

static void print_info(const struct mgmt_vol *v, FILE *out)
{
    fprintf(out, "\nVolume Name: %s\n", v->name);
    int r = v->replica > 1 ? v->replica : 1, sets = v->n_bricks / r;
    fprintf(out, "Type: %s\n",
            r == 1     ? "Distribute"
            : sets > 1 ? "Distributed-Replicate"
                       : "Replicate");
    fprintf(out, "Volume ID: %s\n", v->id);
    fprintf(out, "Status: %s\n", mgmt_status_name(v->status));
    fprintf(out, "Snapshot Count: 0\n");
    if (r == 1)
        fprintf(out, "Number of Bricks: %d\n", v->n_bricks);
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

static int status_cmd(struct mgmt *m, int argc, char **argv, FILE *out);

int mgmt_cmd_status(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (m->n_peers > 1)
        gather_remote(m);
    int rc = status_cmd(m, argc, argv, out);
    free(remote);
    remote = NULL;
    n_remote = gathered = 0;
    return rc;
}

static int status_cmd(struct mgmt *m, int argc, char **argv, FILE *out)
{
    int detail = 0;
    if (argc > 4)
        return 2;
    if (argc >= 3 && strcmp(argv[argc - 1], "detail") == 0) {
        detail = 1;
        argc--;
    }
    if (argc == 4)
        return 2;
    if (argc == 2 || strcmp(argv[2], "all") == 0) {
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
    struct mgmt_vol *v = mgmt_vol_find(m, argv[2]);
    if (!v) {
        fprintf(out, "Volume %s does not exist\n", argv[2]);
        return 1;
    }
    if (v->status != MGMT_VOL_STARTED) {
        fprintf(out, "Volume %s is not started\n", v->name);
        return 1;
    }
    print_status(v, detail, out);
    return 0;
}
