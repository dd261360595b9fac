/* cairn volume statedump VOLNAME [all|mem|iobuf|callpool|priv|fd|inode|history]...
 * cairn volume statedump VOLNAME client HOST:PID
 *
 * Asks processes of a started volume to write their internal state to a
 * file (docs/operations.md, "Statedump"): every brick of the volume, or one
 * mounted client. cairnd sends SIGUSR1 to the processes of its own server
 * and asks the cairnd of every other server holding a brick (or the
 * client's server) to do the same (internal command __statedump). The
 * processes write the dump themselves, under the volume's
 * server.statedump-path; like GlusterFS, the command returns once the
 * signals are sent, not when the files are complete.
 *
 * GlusterFS's section words are taken and change nothing: a dump has
 * every section. Its nfs and quotad forms name daemons Cairn does not
 * have, and are refused. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

static const char *const sections[] = {"all",  "mem", "iobuf", "callpool",
                                       "priv", "fd",  "inode", "history"};

static int is_section(const char *w)
{
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
        if (strcmp(w, sections[i]) == 0)
            return 1;
    return 0;
}

/* Whether pid is a cairn-fuse process mounting volume name (its command
 * line names the volume as HOST:/NAME or HOST:/NAME/DIR). */
static int is_client_of(pid_t pid, const char *name)
{
    char p[64], comm[64] = "";
    snprintf(p, sizeof(p), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    if (!fgets(comm, sizeof(comm), f))
        comm[0] = 0;
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    if (strcmp(comm, "cairn-fuse") != 0)
        return 0;
    snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
    if (!(f = fopen(p, "r")))
        return 0;
    char arg[4096];
    size_t n = fread(arg, 1, sizeof(arg) - 1, f);
    fclose(f);
    arg[n] = 0;
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i += strlen(arg + i) + 1) {
        const char *s = strstr(arg + i, ":/");
        if (s && strncmp(s + 2, name, nl) == 0 && (s[2 + nl] == 0 || s[2 + nl] == '/'))
            return 1;
    }
    return 0;
}

/* Signals this server's processes of v: its bricks, or client pid. 0, or
 * 1 with the reason in out. */
static int dump_local(struct mgmt_vol *v, pid_t client, FILE *out)
{
    if (client) {
        if (!is_client_of(client, v->name)) {
            fprintf(out, "process %d is not a Cairn client of volume %s on this server\n",
                    (int)client, v->name);
            return 1;
        }
        if (kill(client, SIGUSR1) < 0) {
            fprintf(out, "cannot signal process %d: %s\n", (int)client, strerror(errno));
            return 1;
        }
        return 0;
    }
    int failed = 0;
    for (int i = 0; i < v->n_bricks; i++) {
        struct mgmt_brick *b = &v->bricks[i];
        if (b->local && (!b->pid || kill(b->pid, SIGUSR1) < 0)) {
            fprintf(out, "brick %s:%s is not running\n", b->host, b->path);
            failed = 1;
        }
    }
    return failed;
}

/* Asks the cairnd of peer p to signal its processes of v. */
static int dump_remote(struct mgmt *m, const struct mgmt_peer *p, const char *vol, pid_t client,
                       FILE *out)
{
    char host[NET_HOST_MAX], pid[16];
    snprintf(host, sizeof(host), "%s", p->host);
    snprintf(pid, sizeof(pid), "%d", (int)client);
    uint16_t port = p->port;
    const char *argv[] = {"__statedump", vol, "client", pid};
    char *text = NULL;
    pthread_mutex_unlock(&m->lock);
    int rc = mgmt_peer_call(host, port, client ? 4 : 2, argv, &text, 10000);
    pthread_mutex_lock(&m->lock);
    if (rc < 0)
        fprintf(out, "Host %s is not reachable: %s\n", host, strerror(-rc));
    else if (rc > 0)
        fprintf(out, "%s: %s", host, text && *text ? text : "statedump failed\n");
    free(text);
    return rc != 0;
}

int mgmt_cmd_statedump_local(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc != 2 && !(argc == 4 && strcmp(argv[2], "client") == 0)) {
        fprintf(out, "usage: __statedump VOLNAME [client PID]\n");
        return 1;
    }
    struct mgmt_vol *v = mgmt_vol_find(m, argv[1]);
    if (!v || v->status != MGMT_VOL_STARTED) {
        fprintf(out, "volume %s is not started on this server\n", argv[1]);
        return 1;
    }
    return dump_local(v, argc == 4 ? (pid_t)atoi(argv[3]) : 0, out);
}

/* HOST:PID of a client; 0 or -EINVAL. */
static int parse_client(const char *s, char *host, size_t hostlen, pid_t *pid)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= hostlen || !colon[1])
        return -EINVAL;
    for (const char *d = colon + 1; *d; d++)
        if (!isdigit((unsigned char)*d))
            return -EINVAL;
    long p = strtol(colon + 1, NULL, 10);
    if (p <= 1 || p > 4194304)
        return -EINVAL;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    *pid = (pid_t)p;
    return 0;
}

int mgmt_cmd_statedump(struct mgmt *m, int argc, char **argv, FILE *out)
{
    if (argc < 3)
        return 2;
    const char *name = argv[2];
    pid_t client = 0;
    char host[NET_HOST_MAX] = "";
    if (argc >= 4 && strcmp(argv[3], "client") == 0) {
        if (argc != 5 || parse_client(argv[4], host, sizeof(host), &client) < 0) {
            fprintf(out, "volume statedump: failed: client must be given as HOSTNAME:PID\n");
            return 1;
        }
    } else {
        for (int i = 3; i < argc; i++) {
            if (strcmp(argv[i], "nfs") == 0 || strcmp(argv[i], "quotad") == 0) {
                fprintf(out,
                        "volume statedump: failed: Cairn has no %s daemon; dump the bricks "
                        "(no word) or a client (client HOSTNAME:PID)\n",
                        argv[i]);
                return 1;
            }
            if (!is_section(argv[i]))
                return 2;
        }
    }
    struct mgmt_vol *v = mgmt_vol_find(m, name);
    if (!v) {
        fprintf(out, "volume statedump: failed: Volume %s does not exist\n", name);
        return 1;
    }
    if (v->status != MGMT_VOL_STARTED) {
        fprintf(out, "volume statedump: failed: Volume %s is not in the started state\n", name);
        return 1;
    }
    char *err = NULL;
    size_t errlen = 0;
    FILE *e = open_memstream(&err, &errlen);
    if (!e) {
        fprintf(out, "volume statedump: failed: out of memory\n");
        return 1;
    }
    int failed = 0;
    if (client) {
        struct mgmt_peer *p = m->n_peers ? mgmt_peer_for_host(m, host) : NULL;
        if (m->n_peers && !p)
            fprintf(e, "%s is not a server of the pool\n", host), failed = 1;
        else if (!p || mgmt_peer_is_self(m, p))
            failed = dump_local(v, client, e);
        else
            failed = dump_remote(m, p, name, client, e);
    } else {
        failed = dump_local(v, 0, e);
        /* every other server holding a brick of the volume, once */
        int n = m->n_peers;
        struct mgmt_peer *peers = n ? malloc((size_t)n * sizeof(*peers)) : NULL;
        int asked = 0;
        for (int i = 0; peers && i < n; i++) {
            struct mgmt_peer *p = &m->peers[i];
            int holds = 0;
            for (int j = 0; j < v->n_bricks && !holds; j++)
                holds = mgmt_peer_for_host(m, v->bricks[j].host) == p;
            if (holds && !mgmt_peer_is_self(m, p))
                peers[asked++] = *p;
        }
        if (n && !peers)
            fprintf(e, "out of memory\n"), failed = 1;
        /* v and m->peers may change while m->lock is released */
        for (int i = 0; i < asked; i++)
            failed |= dump_remote(m, &peers[i], name, 0, e);
        free(peers);
    }
    fclose(e);
    if (failed)
        fprintf(out, "volume statedump: failed: %s", err && *err ? err : "\n");
    else
        fprintf(out, "volume statedump: success\n");
    free(err);
    return failed;
}
