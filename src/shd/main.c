/* cairn-shd: the self-heal daemon of one volume on one server, started and
 * supervised by cairnd (src/mgmt/shd.c). It connects to every brick of each
 * replica or disperse set that has a brick on this server (a disperse set's
 * stale fragments are rebuilt, docs/disperse.md) and heals from the heal
 * indexes of this server's bricks (the index of a set's healthy bricks
 * names what their peers missed, so each server's daemon covers its own
 * bricks' entries and together they cover the volume). It crawls when a
 * brick (re)connects, every cluster.heal-timeout seconds, and again soon
 * while entries are left over. The volume's options are read again before
 * each crawl: cluster.shd-max-threads, cluster.heal-rate-limit,
 * cluster.favorite-child-policy. Statistics go to --stats-file for `volume
 * heal NAME statistics`. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../client/client.h"
#include "../client/heal.h"
#include "../lib/log.h"

#define POLL_MS 500
#define RETRY_MS 2000 /* entries left over (a brick down, a changing file): again soon */
/* While a brick of the set is down: crawls that heal nothing back off to
 * this (or cluster.heal-timeout, when longer). */
#define DOWN_RETRY_MAX_MS 60000
#define FETCH_MS 3000   /* how often the layout and options are fetched again */
#define CONNECT_MS 5000 /* ping timeout of the daemon's brick connections */
/* Entries another daemon owns but leaves for three heal-timeouts (at
 * least this long) are healed here. */
#define TAKEOVER_MIN_MS 3000

struct set {
    int first, n; /* bricks [first, first + n) of the volume */
    struct cl_layer *ch[CL_REPL_MAX];
    char addr[CL_REPL_MAX][NET_HOST_MAX + 16];
    uint64_t gen[CL_REPL_MAX]; /* connection generations seen at the last crawl */
    uint32_t local;            /* bricks of this server */
    struct cl_heal_stats last, total;
    long long start, end;
    unsigned crawls;
    int left;                /* entries left for later by the last crawl */
    uint64_t next;           /* when the next crawl is due */
    uint64_t retry_ms;       /* wait before the next crawl when entries are left */
    uint64_t skipping_since; /* entries left to other daemons since (0: none left) */
};

static struct set sets[64];
static int n_sets;
static const char *stats_file;

/* When to crawl again. Entries left while a brick of the set is down
 * cannot be healed until it is back, and its return starts a crawl at once
 * (its connection's generation changes): crawling every RETRY_MS meanwhile
 * would only read the growing index again and again, beside the writes
 * that fill it (a copy onto a volume with a server down was several times
 * slower for it). So while a brick is down and a crawl heals nothing, the
 * wait doubles up to a minute (or cluster.heal-timeout, when longer). What
 * waits meanwhile is what can wait: a change the down brick missed cannot
 * heal before it is back; an entry a client left dirty holds writes that
 * never returned, on copies that both took every write that did. */
static uint64_t next_crawl_ms(struct set *s, uint64_t every)
{
    if (!s->left) {
        s->retry_ms = RETRY_MS;
        return every;
    }
    uint64_t max = every > DOWN_RETRY_MAX_MS ? every : DOWN_RETRY_MAX_MS;
    int down = 0;
    for (int i = 0; i < s->n; i++)
        if (!cl_proto_connected(s->ch[i]))
            down = 1;
    if (!down || s->last.healed > 0 || s->retry_ms < RETRY_MS)
        s->retry_ms = RETRY_MS;
    else if (s->retry_ms < max)
        s->retry_ms = s->retry_ms * 2 < max ? s->retry_ms * 2 : max;
    return s->retry_ms < every || down ? s->retry_ms : every;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cairn-shd --volume NAME --mgmt HOST[:PORT] --brick-id ID [--brick-id ID]...\n"
            "                 [--stats-file FILE] [--log-file FILE] [--log-level LEVEL]\n"
            "                 [--ssl-key FILE] [--ssl-cert FILE] [--ssl-ca FILE]\n"
            "                 [--mgmt-ssl on|off]\n"
            "       cairn-shd --help\n"
            "cairnd runs one per replicated volume with a brick on this server.\n");
}

static void destroy_set(struct set *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->ch[i])
            cl_layer_destroy_tree(s->ch[i]);
    memset(s, 0, sizeof(*s));
}

/* (Re)builds the sets holding one of ids; a set whose bricks moved (another
 * port after a restart) gets new connections. */
static void build_sets(const struct cl_volinfo *v, char **ids, int n_ids)
{
    int k = 0;
    for (int f = 0; f + v->replica <= v->n_bricks && k < 64; f += v->replica) {
        uint32_t local = 0;
        for (int i = 0; i < v->replica; i++)
            for (int j = 0; j < n_ids; j++)
                if (v->bricks[f + i].id && strcmp(v->bricks[f + i].id, ids[j]) == 0)
                    local |= 1u << i;
        if (!local)
            continue;
        struct set *s = &sets[k];
        int same = s->n == v->replica && s->first == f;
        char addr[CL_REPL_MAX][NET_HOST_MAX + 16];
        for (int i = 0; i < v->replica; i++) {
            net_format_addr(&v->bricks[f + i].addr, addr[i], sizeof(addr[i]));
            if (same && strcmp(addr[i], s->addr[i]) != 0)
                same = 0;
        }
        if (!same) {
            if (s->n)
                log_info("replica set at brick %d changed; reconnecting", f);
            destroy_set(s);
            s->first = f;
            s->n = v->replica;
            for (int i = 0; i < v->replica; i++) {
                struct cl_proto_params pp = {.addr = v->bricks[f + i].addr,
                                             .volume = v->name,
                                             .brick_path = v->bricks[f + i].path,
                                             .ping_timeout_ms = CONNECT_MS};
                s->ch[i] = cl_proto_new(&pp);
                memcpy(s->addr[i], addr[i], sizeof(s->addr[i]));
                if (!s->ch[i]) {
                    log_error("out of memory connecting to brick %d", f + i);
                    destroy_set(s);
                    break;
                }
            }
            if (!s->n)
                continue;
        }
        s->local = local;
        k++;
    }
    for (int i = k; i < n_sets; i++)
        destroy_set(&sets[i]);
    n_sets = k;
}

static void write_stats(const struct cl_volinfo *v)
{
    if (!stats_file)
        return;
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", stats_file);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        log_warn("cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    for (int k = 0; k < n_sets; k++) {
        struct set *s = &sets[k];
        for (int i = 0; i < s->n; i++) {
            if (!(s->local >> i & 1))
                continue;
            const struct cl_brickinfo *b = &v->bricks[s->first + i];
            fprintf(f,
                    "brick %d %s:%s\nstart %lld\nend %lld\nhealed %u\nsplit %u\nfailed %u\n"
                    "pending %u\ncopied %llu\nsame %llu\ncrawls %u\ntotal_healed %u\n"
                    "total_copied %llu\ntotal_same %llu\nresolved %u\n",
                    s->first + i, b->addr.host, b->path, s->start, s->end, s->last.healed,
                    s->last.split, s->last.failed, s->last.pending,
                    (unsigned long long)s->last.bytes_copied,
                    (unsigned long long)s->last.bytes_same, s->crawls, s->total.healed,
                    (unsigned long long)s->total.bytes_copied,
                    (unsigned long long)s->total.bytes_same, s->total.resolved);
        }
    }
    fclose(f);
    if (rename(tmp, stats_file) < 0)
        log_warn("cannot rename %s: %s", tmp, strerror(errno));
}

static void add(struct cl_heal_stats *t, const struct cl_heal_stats *a)
{
    t->entries += a->entries;
    t->healed += a->healed;
    t->pending += a->pending;
    t->split += a->split;
    t->failed += a->failed;
    t->resolved += a->resolved;
    t->skipped += a->skipped;
    t->bytes_copied += a->bytes_copied;
    t->bytes_same += a->bytes_same;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One crawl of set s with the volume's current options. */
static void crawl(struct set *s, const struct cl_volinfo *v)
{
    struct cl_heal_params p = {.index_mask = s->local, .source = -1};
    /* Entries another server's daemon owns but has not healed for a while
     * (that daemon is gone: its cairnd died while its bricks run on): this
     * daemon takes them over. */
    uint64_t takeover_ms = (uint64_t)opt_int(&v->opts, "cluster.heal-timeout") * 3000;
    if (takeover_ms < TAKEOVER_MIN_MS)
        takeover_ms = TAKEOVER_MIN_MS;
    p.takeover = s->skipping_since && now_ms() - s->skipping_since >= takeover_ms;
    p.threads = (int)opt_int(&v->opts, "cluster.shd-max-threads");
    p.rate_bps = (uint64_t)opt_int(&v->opts, "cluster.heal-rate-limit") << 20;
    int pol = cl_heal_policy_parse(opt_value(&v->opts, "cluster.favorite-child-policy"));
    p.policy = pol < 0 ? CL_HEAL_POL_NONE : (enum cl_heal_policy)pol;
    p.redundancy = v->redundancy; /* a disperse set: fragments rebuilt, not copied */
    for (int i = 0; i < s->n; i++)
        s->gen[i] = cl_proto_generation(s->ch[i]);
    struct cl_heal_stats st = {0};
    long long start = (long long)time(NULL);
    int rc = cl_heal_run(s->ch, s->n, v->arbiter, &p, &st);
    s->crawls++;
    if (!st.skipped)
        s->skipping_since = 0;
    else if (!s->skipping_since)
        s->skipping_since = now_ms();
    if (p.takeover)
        log_info("replica set at brick %d: took over entries their owner left for %llu ms",
                 s->first, (unsigned long long)takeover_ms);
    s->left = st.pending + st.failed + st.skipped > 0;
    if (st.entries > st.skipped) {
        /* The statistics show the last crawl that found something. */
        s->last = st;
        s->start = start;
        s->end = (long long)time(NULL);
        add(&s->total, &st);
        log_info("crawl of replica set at brick %d: %u entries, %u healed, %u in split brain, "
                 "%u left, %llu bytes copied, %llu bytes found equal",
                 s->first, st.entries, st.healed, st.split, st.pending + st.failed,
                 (unsigned long long)st.bytes_copied, (unsigned long long)st.bytes_same);
    }
    if (rc < 0)
        log_debug("crawl of replica set at brick %d: reading an index failed: %s", s->first,
                  strerror(-rc));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"volume", required_argument, NULL, 'v'},   {"mgmt", required_argument, NULL, 'm'},
        {"brick-id", required_argument, NULL, 'b'}, {"stats-file", required_argument, NULL, 's'},
        {"log-file", required_argument, NULL, 'l'}, {"log-level", required_argument, NULL, 'L'},
        {"ssl-key", required_argument, NULL, 'K'},  {"ssl-cert", required_argument, NULL, 'C'},
        {"ssl-ca", required_argument, NULL, 'A'},   {"mgmt-ssl", required_argument, NULL, 'M'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    const char *ssl_key = NULL, *ssl_cert = NULL, *ssl_ca = NULL;
    const char *volume = NULL, *mgmt = NULL, *logfile = NULL;
    char *ids[64];
    int n_ids = 0, level = LOG_INFO, c;
    log_init("shd", LOG_INFO);
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'v':
            volume = optarg;
            break;
        case 'm':
            mgmt = optarg;
            break;
        case 'b':
            if (n_ids < 64)
                ids[n_ids++] = optarg;
            break;
        case 's':
            stats_file = optarg;
            break;
        case 'l':
            logfile = optarg;
            break;
        case 'L':
            if ((level = log_parse_level(optarg)) < 0) {
                fprintf(stderr, "cairn-shd: bad --log-level %s\n", optarg);
                return 2;
            }
            break;
        case 'K':
            ssl_key = optarg;
            break;
        case 'C':
            ssl_cert = optarg;
            break;
        case 'A':
            ssl_ca = optarg;
            break;
        case 'M':
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "cairn-shd: --mgmt-ssl takes on or off\n");
                return 2;
            }
            cl_tls_set_mgmt(!strcmp(optarg, "on"));
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!volume || !mgmt || !n_ids || optind != argc) {
        usage(stderr);
        return 2;
    }
    log_set_level((enum log_level)level);
    cl_tls_set_files(ssl_key, ssl_cert, ssl_ca);
    if (logfile && log_open(logfile) < 0) {
        fprintf(stderr, "cairn-shd: cannot open log file %s: %s\n", logfile, strerror(errno));
        return 1;
    }
    struct net_addr maddr;
    if (net_parse_addr(mgmt, CAIRN_MGMT_PORT, &maddr) < 0) {
        log_error("bad --mgmt address %s", mgmt);
        return 2;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    log_info("self-heal daemon of volume %s starting (%d local bricks)", volume, n_ids);

    struct cl_volinfo v = {0};
    int have_v = 0;
    uint64_t next_fetch = 0;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= next_fetch) {
            struct cl_volinfo nv;
            char err[512];
            if (cl_volume_fetch(&maddr, volume, 5000, &nv, err, sizeof(err)) == 0) {
                if (have_v)
                    cl_volinfo_free(&v);
                v = nv;
                have_v = 1;
                if (v.replica >= 2)
                    build_sets(&v, ids, n_ids);
            } else {
                log_warn("cannot fetch the layout of volume %s: %s", volume, err);
            }
            next_fetch = now + FETCH_MS;
        }
        if (have_v && v.replica >= 2) {
            int wrote = 0;
            uint64_t every = (uint64_t)opt_int(&v.opts, "cluster.heal-timeout") * 1000;
            for (int k = 0; k < n_sets; k++) {
                struct set *s = &sets[k];
                int reconnected = 0;
                for (int i = 0; i < s->n; i++)
                    if (cl_proto_generation(s->ch[i]) != s->gen[i])
                        reconnected = 1;
                if (now < s->next && !reconnected)
                    continue;
                crawl(s, &v);
                s->next = now_ms() + next_crawl_ms(s, every);
                wrote = 1;
            }
            if (wrote)
                write_stats(&v);
        }
        struct timespec ts = {0, POLL_MS * 1000000L};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        int r = sig == SIGHUP ? log_reopen() : 0;
        if (r < 0)
            log_error("SIGHUP: cannot reopen the log file: %s", strerror(-r));
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("signal %d: self-heal daemon of volume %s stopping", sig, volume);
            break;
        }
    }
    for (int k = 0; k < n_sets; k++)
        destroy_set(&sets[k]);
    if (have_v)
        cl_volinfo_free(&v);
    return 0;
}
