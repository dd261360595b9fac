/* The volume options registry (see options.h): the table, the value parsers,
 * validation with the messages `volume set` prints, and option sets. */
#include "options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOG_LEVELS "ERROR|WARNING|INFO|DEBUG|TRACE"

/* Only options something in Cairn reads belong here: a dead entry would be a
 * promise the code does not keep. Keep the table sorted by name. */
const struct opt_def opt_table[] = {
    {"auth.allow", OPT_STRING, "*", 0, 0, NULL, true,
     "Comma-separated addresses (globs like 192.168.1.*, or IPv4 CIDR blocks) allowed to "
     "connect to the volume's bricks and fetch its layout."},
    {"auth.reject", OPT_STRING, "", 0, 0, NULL, true,
     "Comma-separated addresses (globs or IPv4 CIDR blocks) refused even when auth.allow "
     "matches them."},
    /* The two cache times without a lease accept 0 only (see opt_validate):
     * what no lease protects, no recall can drop. */
    {"client.attribute-timeout", OPT_TIME, "0", 0, 0, NULL, true,
     "Seconds the kernel of a FUSE client may cache file attributes it holds no lease on. "
     "Only 0 is accepted: no other client's change would reach such a cache. Clients cache "
     "under leases instead (client.lease-cache-timeout); kept for scripts that set it to 0."},
    {"client.entry-timeout", OPT_TIME, "0", 0, 0, NULL, true,
     "Seconds the kernel of a FUSE client may cache name lookups it holds no lease on. Only 0 "
     "is accepted, as for client.attribute-timeout."},
    {"client.lease-cache-timeout", OPT_TIME, "60", 1, 3600, NULL, true,
     "Seconds the kernel of a FUSE client may cache attributes and names it holds a lease "
     "on. A change by another client recalls the lease and drops the cached copy at once; "
     "the timeout bounds how stale a cache can get when a brick becomes unreachable."},
    {"client.leases", OPT_BOOL, "on", 0, 0, NULL, true,
     "Clients ask the bricks for leases and cache attributes and names under them, so "
     "repeated lookups and stats do not cross the network. off: every access asks the "
     "brick."},
    {"client.write-back", OPT_BOOL, "on", 0, 0, NULL, true,
     "Files a client creates in a directory it made and holds alone are written to the "
     "bricks when closed, in one request, instead of one round trip per create, write, "
     "attribute change and close. fsync waits for the bricks; another client's access "
     "makes the holder send them first (docs/consistency.md). off: every operation waits "
     "for the bricks."},
    {"client.write-back-files", OPT_INT, "4096", 1, 1048576, NULL, true,
     "Files a client may hold written back but not yet on the bricks; beyond, a create waits "
     "until the bricks have taken some."},
    {"client.write-back-size", OPT_SIZE, "64MB", 1048576, 4294967296LL, NULL, true,
     "Bytes of file data a client may hold written back but not yet on the bricks; beyond, "
     "a create waits until the bricks have taken some."},
    {"cluster.favorite-child-policy", OPT_ENUM, "none", 0, 0, "none|size|mtime|ctime|majority",
     true,
     "How the self-heal daemon resolves a split brain by itself: none leaves it to the "
     "administrator; size, mtime, ctime take the biggest, latest-modified or latest-changed "
     "copy; majority the copy whose size and mtime more than half of the set share."},
    {"cluster.heal-rate-limit", OPT_INT, "0", 0, 100000, NULL, true,
     "MB/s of file data the self-heal daemon of each server copies at most (all its heal "
     "threads together), so clients keep their speed while a brick heals. 0: no limit."},
    {"cluster.heal-timeout", OPT_TIME, "10", 1, 86400, NULL, true,
     "Seconds between two index crawls of the self-heal daemon when nothing happens; it "
     "also crawls at once when a brick (re)connects."},
    {"cluster.min-free-disk", OPT_SPACE, "10%", 0, 1125899906842624LL, NULL, true,
     "Free space (a percentage of each brick's file system, or a size) below which a "
     "distributed volume makes new files on another replica set or brick with more room, "
     "leaving a link-to file under the name's own (docs/replication.md, Distribute)."},
    {"cluster.self-heal-daemon", OPT_BOOL, "on", 0, 0, NULL, true,
     "Runs a self-heal daemon (cairn-shd) on each server holding a brick of the replicated "
     "volume. `volume heal NAME enable|disable` sets it."},
    {"cluster.shd-max-threads", OPT_INT, "1", 1, 64, NULL, true,
     "Objects each self-heal daemon heals in parallel."},
    {"diagnostics.brick-log-level", OPT_ENUM, "INFO", 0, 0, LOG_LEVELS, true,
     "Log level of the volume's brick processes."},
    {"diagnostics.client-log-level", OPT_ENUM, "INFO", 0, 0, LOG_LEVELS, true,
     "Log level of the volume's clients (FUSE mounts)."},
    {"features.lease-recall-timeout", OPT_TIME, "5", 1, 600, NULL, true,
     "Seconds a brick waits for a client to return a recalled lease before revoking it. A "
     "change that conflicts with another client's lease is answered after the recall, so "
     "a hung client delays it by at most this long."},
    {"network.ping-timeout", OPT_TIME, "10", 1, 1800, NULL, true,
     "Seconds a client waits for an unresponsive brick before it declares the brick dead and "
     "fails or reroutes the operations pending on it. A brick whose disk has held a request "
     "this long closes its connections and refuses new ones until the disk completes it "
     "(docs/replication.md, Failures)."},
    {"performance.aggregate-size", OPT_SIZE, "128KB", 4096, 1048576, NULL, true,
     "Write-behind sends writes that continue one another as one write of up to this many "
     "bytes (docs/consistency.md, Data: write-behind)."},
    {"performance.cache-size", OPT_SIZE, "32MB", 0, 17179869184LL, NULL, true,
     "Bytes of file data a FUSE client keeps in its read cache (windows of files read at "
     "random, valid while the client holds the file's lease; docs/consistency.md)."},
    {"performance.io-thread-count", OPT_INT, "16", 1, 64, NULL, false,
     "Worker threads of each brick process for disk work; applies when the brick starts."},
    {"performance.read-ahead", OPT_BOOL, "on", 0, 0, NULL, true,
     "A FUSE client reads the whole window (performance.read-ahead-page-count x 128 KiB) "
     "around a small read of a file it holds a lease on and answers later reads inside it "
     "from its read cache and the kernel's page cache. off: every read the kernel does not "
     "cache goes to a brick."},
    {"performance.read-ahead-page-count", OPT_INT, "1", 1, 16, NULL, true,
     "Size of the read-ahead window in units of 128 KiB."},
    {"performance.strict-o-direct", OPT_BOOL, "on", 0, 0, NULL, true,
     "on: writes through O_DIRECT handles wait for the bricks. off: they are written behind "
     "like others (GlusterFS's default)."},
    {"performance.write-behind", OPT_BOOL, "on", 0, 0, NULL, true,
     "A FUSE client answers writes to files it holds alone (opened for writing while no other "
     "client had them open, or in a directory it made) at once "
     "and sends them in the background, aggregated; fsync and close wait for them and return "
     "their errors, another client's access makes the holder send them first "
     "(docs/consistency.md). off: every write waits for the bricks."},
    {"performance.write-behind-trickling-writes", OPT_BOOL, "on", 0, 0, NULL, true,
     "on: a write behind is sent as soon as nothing of its file is in flight, even if smaller "
     "than performance.aggregate-size. off: it waits until the aggregate is full, another "
     "write lands elsewhere in the file, or something waits for it."},
    {"performance.write-behind-window-size", OPT_SIZE, "1MB", 524288, 1073741824LL, NULL, true,
     "Bytes of one file a FUSE client may hold written behind; a write past it is answered "
     "once the file is back under it."},
    {"storage.reserve", OPT_SPACE, "1", 0, 1125899906842624LL, NULL, true,
     "Space each brick keeps free (a percentage of its file system, or a size): below it "
     "the brick refuses new files and data with ENOSPC, while it still records heal marks "
     "and its own metadata; heal does not fill it either (docs/replication.md). 0: none."},
    {"storage.spare-inodes", OPT_INT, "65536", 0, 65536, NULL, true,
     "Empty inodes each brick makes ahead in its idle time (after 3 seconds in which no "
     "client asked for a change), taken by new files instead of allocating an inode each "
     "(docs/brick-format.md, "
     ".cairn/spare). Bounded by a quarter of the brick file system's free inodes. 0: none "
     "made ahead (removed files are still kept as spares)."},
    {NULL, 0, NULL, 0, 0, NULL, false, NULL},
};

static const char *const type_names[] = {
    [OPT_BOOL] = "bool",
    [OPT_INT] = "integer",
    [OPT_SIZE] = "size",
    [OPT_TIME] = "seconds",
    [OPT_ENUM] = "enum",
    [OPT_STRING] = "string",
    [OPT_SPACE] = "percent or size",
};

const struct opt_def *opt_find(const char *name)
{
    if (!name)
        return NULL;
    for (const struct opt_def *d = opt_table; d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

int opt_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"on", "yes", "true", "enable", "1"};
    static const char *const no[] = {"off", "no", "false", "disable", "0"};
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* Parses a decimal number followed by a suffix from the table; the value
 * times the suffix's multiplier must fit in an int64_t. */
struct unit {
    const char *suffix;
    int64_t mult;
};

static int parse_scaled(const char *s, const struct unit *units, int64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    while (*end == ' ')
        end++;
    for (const struct unit *u = units; u->suffix; u++) {
        if (strcasecmp(end, u->suffix) != 0)
            continue;
        if (v > (unsigned long long)(INT64_MAX / u->mult))
            return -EINVAL;
        *out = (int64_t)v * u->mult;
        return 0;
    }
    return -EINVAL;
}

int opt_parse_size(const char *s, int64_t *out)
{
    static const struct unit units[] = {
        {"", 1},          {"B", 1},           {"KB", 1ll << 10},
        {"K", 1ll << 10}, {"KiB", 1ll << 10}, {"MB", 1ll << 20},
        {"M", 1ll << 20}, {"MiB", 1ll << 20}, {"GB", 1ll << 30},
        {"G", 1ll << 30}, {"GiB", 1ll << 30}, {"TB", 1ll << 40},
        {"T", 1ll << 40}, {"TiB", 1ll << 40}, {NULL, 0},
    };
    return parse_scaled(s, units, out);
}

int opt_parse_time(const char *s, int64_t *out)
{
    static const struct unit units[] = {
        {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {NULL, 0},
    };
    return parse_scaled(s, units, out);
}

int opt_parse_space(const char *s, int *percent, int64_t *bytes)
{
    int64_t v;
    size_t n = s ? strlen(s) : 0;
    *percent = -1;
    *bytes = 0;
    if (n && s[n - 1] == '%') {
        char num[32];
        if (n - 1 >= sizeof(num))
            return -EINVAL;
        memcpy(num, s, n - 1);
        num[n - 1] = 0;
        if (parse_scaled(num, (const struct unit[]){{"", 1}, {NULL, 0}}, &v) < 0 || v > 100)
            return -EINVAL;
        *percent = (int)v;
        return 0;
    }
    if (parse_scaled(s, (const struct unit[]){{"", 1}, {NULL, 0}}, &v) == 0) {
        /* a plain number is a percentage, as GlusterFS reads it */
        if (v > 100)
            return -EINVAL;
        *percent = (int)v;
        return 0;
    }
    return opt_parse_size(s, bytes);
}

uint64_t opt_space_bytes(int percent, int64_t bytes, uint64_t total)
{
    if (percent >= 0)
        return total / 100 * (uint64_t)percent + total % 100 * (uint64_t)percent / 100;
    return (uint64_t)bytes;
}

/* One entry of an address list: a glob, or an IPv4 CIDR block. */
static bool addr_entry_valid(const char *e, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)e[i];
        if (!isalnum(c) && !strchr(".:*?[]-/_", c))
            return false;
    }
    const char *slash = memchr(e, '/', n);
    if (!slash)
        return true;
    char ip[64];
    size_t iplen = (size_t)(slash - e);
    if (iplen >= sizeof(ip))
        return false;
    memcpy(ip, e, iplen);
    ip[iplen] = 0;
    struct in_addr a;
    char *end;
    long bits = strtol(slash + 1, &end, 10);
    return inet_pton(AF_INET, ip, &a) == 1 && end == e + n && end != slash + 1 && bits >= 0 &&
           bits <= 32;
}

static int validate_addr_list(const char *name, const char *v, char *err, size_t errlen)
{
    if (!*v && strcmp(name, "auth.allow") == 0) {
        snprintf(err, errlen, "%s needs at least one address; use '*' to allow every address",
                 name);
        return -EINVAL;
    }
    for (const char *p = v; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (!addr_entry_valid(p, n)) {
            snprintf(err, errlen, "'%.*s' is not a valid address or address pattern for %s", (int)n,
                     p, name);
            return -EINVAL;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int validate_enum(const struct opt_def *d, const char *value, char *norm, size_t normlen,
                         char *err, size_t errlen)
{
    const char *p = d->choices;
    while (*p) {
        size_t n = strcspn(p, "|");
        if (strlen(value) == n && strncasecmp(value, p, n) == 0) {
            snprintf(norm, normlen, "%.*s", (int)n, p);
            return 0;
        }
        p += n;
        if (*p == '|')
            p++;
    }
    snprintf(err, errlen, "'%s' is not valid for %s (choose one of %s)", value, d->name,
             d->choices);
    return -EINVAL;
}

/* The kernel's cache times for what a client holds no lease on. A lease's
 * recall is what tells a client that another one changed something; without
 * one, any time above 0 lets a mount show what another has changed, for that
 * long. Accepted at 0 only, with a message that says so. */
static bool is_no_lease_timeout(const char *name)
{
    return strcmp(name, "client.attribute-timeout") == 0 ||
           strcmp(name, "client.entry-timeout") == 0;
}

int opt_validate(const char *name, const char *value, char *norm, size_t normlen, char *err,
                 size_t errlen)
{
    const struct opt_def *d = opt_find(name);
    int64_t v;
    bool b;
    if (!d) {
        snprintf(err, errlen, "option : %s does not exist", name ? name : "(null)");
        return -ENOENT;
    }
    if (!value || strlen(value) >= normlen || strchr(value, '\n')) {
        snprintf(err, errlen, "invalid value for %s", name);
        return -EINVAL;
    }
    switch (d->type) {
    case OPT_BOOL:
        if (opt_parse_bool(value, &b) < 0) {
            snprintf(err, errlen, "'%s' is not a valid boolean for %s (use on or off)", value,
                     name);
            return -EINVAL;
        }
        snprintf(norm, normlen, "%s", b ? "on" : "off");
        return 0;
    case OPT_INT:
    case OPT_SIZE:
    case OPT_TIME: {
        int rc;
        const char *what;
        if (d->type == OPT_INT) {
            char *end;
            errno = 0;
            long long x = strtoll(value, &end, 10);
            rc = (!*value || *end || errno) ? -EINVAL : 0;
            v = x;
            what = "an integer";
        } else if (d->type == OPT_SIZE) {
            rc = opt_parse_size(value, &v);
            what = "a size (like 4KB, 1MB, 2GB or bytes)";
        } else {
            rc = opt_parse_time(value, &v);
            what = "a time in seconds";
        }
        if (rc < 0) {
            snprintf(err, errlen, "'%s' is not %s for %s", value, what, name);
            return -EINVAL;
        }
        if (v != 0 && is_no_lease_timeout(name)) {
            snprintf(err, errlen,
                     "%s must be 0: the kernel would cache without a lease, where no change "
                     "by another client can reach it; client.lease-cache-timeout sets how long "
                     "clients cache under leases, which stays coherent",
                     name);
            return -EINVAL;
        }
        if (v < d->min || v > d->max) {
            snprintf(err, errlen, "'%s' is out of range [%" PRId64 " - %" PRId64 "] for %s", value,
                     d->min, d->max, name);
            return -EINVAL;
        }
        if (d->type == OPT_SIZE)
            snprintf(norm, normlen, "%s", value);
        else
            snprintf(norm, normlen, "%" PRId64, v);
        return 0;
    }
    case OPT_SPACE: {
        int pct;
        if (opt_parse_space(value, &pct, &v) < 0) {
            snprintf(err, errlen,
                     "'%s' is not a percentage (0-100, like 1 or 5%%) or a size (like 10GB) "
                     "for %s",
                     value, name);
            return -EINVAL;
        }
        if (pct < 0 && (v < d->min || v > d->max)) {
            snprintf(err, errlen, "'%s' is out of range [%" PRId64 " - %" PRId64 " bytes] for %s",
                     value, d->min, d->max, name);
            return -EINVAL;
        }
        if (pct >= 0)
            snprintf(norm, normlen, "%d%%", pct);
        else
            snprintf(norm, normlen, "%s", value);
        return 0;
    }
    case OPT_ENUM:
        return validate_enum(d, value, norm, normlen, err, errlen);
    case OPT_STRING:
        if (strncmp(name, "auth.", 5) == 0 && validate_addr_list(name, value, err, errlen) < 0)
            return -EINVAL;
        snprintf(norm, normlen, "%s", value);
        return 0;
    }
    snprintf(err, errlen, "%s has an unknown type", name);
    return -EINVAL;
}

void opt_set_free(struct opt_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->kv[i].name);
        free(s->kv[i].value);
    }
    free(s->kv);
    s->kv = NULL;
    s->n = 0;
}

int opt_set_put(struct opt_set *s, const char *name, const char *value)
{
    size_t i;
    for (i = 0; i < s->n; i++)
        if (strcmp(s->kv[i].name, name) == 0)
            break;
    if (!value) {
        if (i == s->n)
            return 0;
        free(s->kv[i].name);
        free(s->kv[i].value);
        memmove(&s->kv[i], &s->kv[i + 1], (s->n - i - 1) * sizeof(s->kv[0]));
        s->n--;
        return 0;
    }
    char *v = strdup(value);
    if (!v)
        return -ENOMEM;
    if (i < s->n) {
        free(s->kv[i].value);
        s->kv[i].value = v;
        return 0;
    }
    char *n = strdup(name);
    void *kv = realloc(s->kv, (s->n + 1) * sizeof(s->kv[0]));
    if (!n || !kv) {
        free(v);
        free(n);
        if (kv)
            s->kv = kv;
        return -ENOMEM;
    }
    s->kv = kv;
    s->kv[s->n].name = n;
    s->kv[s->n].value = v;
    s->n++;
    return 0;
}

int opt_set_copy(struct opt_set *dst, const struct opt_set *src)
{
    int rc = 0;
    memset(dst, 0, sizeof(*dst));
    for (size_t i = 0; i < src->n && rc == 0; i++)
        rc = opt_set_put(dst, src->kv[i].name, src->kv[i].value);
    if (rc < 0)
        opt_set_free(dst);
    return rc;
}

bool opt_set_differ(const struct opt_set *a, const struct opt_set *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(opt_value(a, a->kv[i].name), opt_value(b, a->kv[i].name)) != 0)
            return true;
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(opt_value(a, b->kv[i].name), opt_value(b, b->kv[i].name)) != 0)
            return true;
    return false;
}

const char *opt_set_get(const struct opt_set *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->kv[i].name, name) == 0)
            return s->kv[i].value;
    return NULL;
}

const char *opt_value(const struct opt_set *s, const char *name)
{
    const char *v = opt_set_get(s, name);
    if (v)
        return v;
    const struct opt_def *d = opt_find(name);
    return d ? d->def : NULL;
}

bool opt_bool(const struct opt_set *s, const char *name)
{
    bool b = false;
    const char *v = opt_value(s, name);
    if (v && opt_parse_bool(v, &b) < 0) {
        const struct opt_def *d = opt_find(name);
        if (d)
            opt_parse_bool(d->def, &b);
    }
    return b;
}

int64_t opt_int(const struct opt_set *s, const char *name)
{
    const struct opt_def *d = opt_find(name);
    const char *v = opt_value(s, name);
    int64_t x = 0;
    if (!d || !v)
        return 0;
    int rc;
    if (d->type == OPT_SIZE) {
        rc = opt_parse_size(v, &x);
    } else if (d->type == OPT_TIME) {
        rc = opt_parse_time(v, &x);
    } else {
        char *end;
        x = strtoll(v, &end, 10);
        rc = (*v && !*end) ? 0 : -EINVAL;
    }
    /* A value that does not parse or is out of range (a hand-edited store,
     * or one kept from a version with a wider range) falls back to the
     * default rather than to 0. */
    bool numeric = d->type == OPT_INT || d->type == OPT_SIZE || d->type == OPT_TIME;
    if (rc < 0 || (numeric && (x < d->min || x > d->max))) {
        if (d->type == OPT_SIZE)
            opt_parse_size(d->def, &x);
        else if (d->type == OPT_TIME)
            opt_parse_time(d->def, &x);
        else
            x = strtoll(d->def, NULL, 10);
    }
    return x;
}

void opt_space(const struct opt_set *s, const char *name, int *percent, int64_t *bytes)
{
    const struct opt_def *d = opt_find(name);
    const char *v = opt_value(s, name);
    if (!v || opt_parse_space(v, percent, bytes) < 0) {
        if (!d || opt_parse_space(d->def, percent, bytes) < 0) {
            *percent = 0;
            *bytes = 0;
        }
    }
}

static bool cidr_match(const char *pat, size_t n, const char *addr)
{
    char ip[64];
    const char *slash = memchr(pat, '/', n);
    size_t iplen = (size_t)(slash - pat);
    if (iplen >= sizeof(ip))
        return false;
    memcpy(ip, pat, iplen);
    ip[iplen] = 0;
    long bits = strtol(slash + 1, NULL, 10);
    struct in_addr net, a;
    if (bits < 0 || bits > 32 || inet_pton(AF_INET, ip, &net) != 1 ||
        inet_pton(AF_INET, addr, &a) != 1)
        return false;
    uint32_t mask = bits == 0 ? 0 : htonl(~0u << (32 - bits));
    return (net.s_addr & mask) == (a.s_addr & mask);
}

static bool list_matches(const char *list, const char *addr)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char pat[256];
        while (n && *p == ' ') {
            p++;
            n--;
        }
        size_t m = n;
        while (m && p[m - 1] == ' ')
            m--;
        if (m && m < sizeof(pat)) {
            memcpy(pat, p, m);
            pat[m] = 0;
            if (memchr(pat, '/', m) ? cidr_match(pat, m, addr) : fnmatch(pat, addr, 0) == 0)
                return true;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

bool opt_addr_allowed(const char *allow, const char *reject, const char *addr)
{
    if (!addr)
        return false;
    if (strncasecmp(addr, "::ffff:", 7) == 0 && strchr(addr + 7, '.'))
        addr += 7;
    if (reject && list_matches(reject, addr))
        return false;
    return list_matches(allow ? allow : "*", addr);
}

void opt_print_help(FILE *out)
{
    for (const struct opt_def *d = opt_table; d->name; d++) {
        fprintf(out, "Option: %s\n", d->name);
        fprintf(out, "Default Value: %s\n", *d->def ? d->def : "(empty)");
        fprintf(out, "Type: %s\n", type_names[d->type]);
        if (d->type == OPT_ENUM)
            fprintf(out, "Choices: %s\n", d->choices);
        else if (d->type == OPT_INT || d->type == OPT_SIZE || d->type == OPT_TIME)
            fprintf(out, "Range: %" PRId64 " - %" PRId64 "\n", d->min, d->max);
        else if (d->type == OPT_SPACE)
            fprintf(out, "Range: 0%% - 100%%, or %" PRId64 " - %" PRId64 " bytes\n", d->min,
                    d->max);
        fprintf(out, "Live: %s\n", d->live ? "yes" : "no (applies when the bricks restart)");
        fprintf(out, "Description: %s\n\n", d->help);
    }
}
