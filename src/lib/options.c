/* The volume options registry (see options.h): the table, the value parsers,
 * validation with the messages `volume set` prints, and option sets. */
#include "options.h"
#include "quota.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* CRITICAL and NONE are GlusterFS's; both log errors only (log_parse_level). */
#define LOG_LEVELS "ERROR|WARNING|INFO|DEBUG|TRACE|CRITICAL|NONE"

#define OPT(n, t, d, lo, hi, ch, lv, h)                                                            \
    {                                                                                              \
        .name = (n), .type = (t), .def = (d), .min = (lo), .max = (hi), .choices = (ch),           \
        .live = (lv), .help = (h)                                                                  \
    }

/* A GlusterFS option that means nothing in Cairn: taken, stored and shown
 * with why, so that settings pasted from a GlusterFS volume work. */
#define NOEFFECT(n, t, d, lo, hi, ch, why)                                                         \
    {                                                                                              \
        .name = (n), .type = (t), .def = (d), .min = (lo), .max = (hi), .choices = (ch),           \
        .live = false, .help = (why), .no_effect = true                                            \
    }

/* An option belongs here when something in Cairn reads it, or when it is a
 * GlusterFS option a user of replicate and distribute volumes sets: then it
 * says why it has no effect (NOEFFECT), or accepts only the values that
 * describe what Cairn does (.only), refusing the others with what Cairn does
 * instead. A GlusterFS option taken silently would be a promise the code
 * does not keep. Keep the table sorted by name (a unit test checks). */
const struct opt_def opt_table[] = {
    OPT("auth.allow", OPT_STRING, "*", 0, 0, NULL, true,
        "Comma-separated addresses (globs like 192.168.1.*, or IPv4 CIDR blocks) allowed to "
        "connect to the volume's bricks and fetch its layout. An entry /DIR(A|B...) allows "
        "addresses A, B... to mount directory DIR of the volume (/ is the whole volume); a "
        "bare address applies to every mount."),
    OPT("auth.reject", OPT_STRING, "", 0, 0, NULL, true,
        "Comma-separated addresses (globs or IPv4 CIDR blocks) refused even when auth.allow "
        "matches them; /DIR(A|B...) refuses them a mount of DIR alone."),
    OPT("auth.ssl-allow", OPT_STRING, "*", 0, 0, NULL, true,
        "Comma-separated common names (globs) of the client certificates a brick with "
        "server.ssl on accepts; * accepts any certificate from the CA. A change closes the "
        "connections no longer allowed."),
    /* The two cache times without a lease accept 0 only (see opt_validate):
     * what no lease protects, no recall can drop. */
    OPT("client.attribute-timeout", OPT_TIME, "0", 0, 0, NULL, true,
        "Seconds the kernel of a FUSE client may cache file attributes it holds no lease on. "
        "Only 0 is accepted: no other client's change would reach such a cache. Clients cache "
        "under leases instead (client.lease-cache-timeout); kept for scripts that set it to 0."),
    OPT("client.entry-timeout", OPT_TIME, "0", 0, 0, NULL, true,
        "Seconds the kernel of a FUSE client may cache name lookups it holds no lease on. Only 0 "
        "is accepted, as for client.attribute-timeout."),
    NOEFFECT("client.event-threads", OPT_INT, "2", 1, 32, NULL,
             "Cairn sizes the threads that serve its connections itself."),
    OPT("client.lease-cache-timeout", OPT_TIME, "60", 1, 3600, NULL, true,
        "Seconds the kernel of a FUSE client may cache attributes and names it holds a lease "
        "on. A change by another client recalls the lease and drops the cached copy at once; "
        "the timeout bounds how stale a cache can get when a brick becomes unreachable."),
    OPT("client.leases", OPT_BOOL, "on", 0, 0, NULL, true,
        "Clients ask the bricks for leases and cache attributes and names under them, so "
        "repeated lookups and stats do not cross the network. off: every access asks the "
        "brick."),
    OPT("client.ssl", OPT_BOOL, "off", 0, 0, NULL, false,
        "Clients (mounts, libcairn, the self-heal daemon) talk TLS to the bricks, with the "
        "certificate, key and CA of their ssl-cert/ssl-key/ssl-ca settings (default "
        "/etc/ssl/cairn.pem, .key, .ca). Set with server.ssl; applies at the next mount "
        "(docs/security.md)."),
    OPT("client.write-back", OPT_BOOL, "on", 0, 0, NULL, true,
        "Files a client creates in a directory it made and holds alone are written to the "
        "bricks when closed, in one request, instead of one round trip per create, write, "
        "attribute change and close. fsync waits for the bricks; another client's access "
        "makes the holder send them first (docs/consistency.md). off: every operation waits "
        "for the bricks."),
    OPT("client.write-back-files", OPT_INT, "4096", 1, 1048576, NULL, true,
        "Files a client may hold written back but not yet on the bricks; beyond, a create waits "
        "until the bricks have taken some."),
    OPT("client.write-back-size", OPT_SIZE, "64MB", 1048576, 4294967296LL, NULL, true,
        "Bytes of file data a client may hold written back but not yet on the bricks; beyond, "
        "a create waits until the bricks have taken some."),
    NOEFFECT("cluster.background-self-heal-count", OPT_INT, "8", 0, 256, NULL,
             "a client hands the stale objects it meets to its own heal thread; there is no "
             "count to bound."),
    NOEFFECT("cluster.choose-local", OPT_BOOL, "on", 0, 0, NULL,
             "reads go to a good copy Cairn picks (docs/replication.md)."),
    NOEFFECT("cluster.consistent-metadata", OPT_BOOL, "off", 0, 0, NULL,
             "Cairn picks which copy answers for a file's attributes (docs/replication.md)."),
    NOEFFECT("cluster.data-self-heal", OPT_BOOL, "on", 0, 0, NULL,
             "clients heal the stale objects they meet in the background and the self-heal "
             "daemon the rest (cluster.self-heal-daemon); there is no switch per kind."),
    NOEFFECT("cluster.eager-lock", OPT_BOOL, "on", 0, 0, NULL,
             "a change is one round trip with no separate locks to keep (docs/replication.md)."),
    NOEFFECT("cluster.ensure-durability", OPT_BOOL, "on", 0, 0, NULL,
             "fsync always waits until the bricks have the data on disk."),
    NOEFFECT("cluster.entry-self-heal", OPT_BOOL, "on", 0, 0, NULL,
             "as cluster.data-self-heal: no switch per kind."),
    OPT("cluster.favorite-child-policy", OPT_ENUM, "none", 0, 0, "none|size|mtime|ctime|majority",
        true,
        "How the self-heal daemon resolves a split brain by itself: none leaves it to the "
        "administrator; size, mtime, ctime take the biggest, latest-modified or latest-changed "
        "copy; majority the copy whose size and mtime more than half of the set share."),
    NOEFFECT("cluster.granular-entry-heal", OPT_BOOL, "on", 0, 0, NULL,
             "Cairn's heal index has its own format (docs/replication.md)."),
    OPT("cluster.heal-rate-limit", OPT_INT, "0", 0, 100000, NULL, true,
        "MB/s of file data the self-heal daemon of each server copies at most (all its heal "
        "threads together), so clients keep their speed while a brick heals. 0: no limit."),
    OPT("cluster.heal-timeout", OPT_TIME, "10", 1, 86400, NULL, true,
        "Seconds between two index crawls of the self-heal daemon when nothing happens; it "
        "also crawls at once when a brick (re)connects."),
    NOEFFECT("cluster.heal-wait-queue-length", OPT_INT, "128", 0, 10000, NULL,
             "clients queue no heals to bound."),
    NOEFFECT("cluster.lookup-optimize", OPT_BOOL, "on", 0, 0, NULL,
             "a lookup always goes to the name's hashed subvolume only (docs/replication.md, "
             "Distribute)."),
    NOEFFECT("cluster.metadata-self-heal", OPT_BOOL, "on", 0, 0, NULL,
             "as cluster.data-self-heal: no switch per kind."),
    OPT("cluster.min-free-disk", OPT_SPACE, "10%", 0, 1125899906842624LL, NULL, true,
        "Free space (a percentage of each brick's file system, or a size) below which a "
        "distributed volume makes new files on another replica set or brick with more room, "
        "leaving a link-to file under the name's own (docs/replication.md, Distribute)."),
    NOEFFECT("cluster.min-free-inodes", OPT_SPACE, "5%", 0, 1125899906842624LL, NULL,
             "Cairn places new files by free space only (cluster.min-free-disk)."),
    /* Placement of new volumes (docs/elastic.md, "Growing by whole sets"):
     * read by cairnd at `volume create`. */
    {"cluster.placement", OPT_ENUM, "ranges", 0, 0, "ranges|rendezvous", true,
     "Pool-wide (`volume set all`): how the volumes created from now on place files. ranges: "
     "a hash range per set in each directory's layout (a volume's sets are fixed). rendezvous: "
     "one volume-wide placement, so `volume add-brick` can add whole sets and `volume "
     "rebalance` moves only the files the new sets win. Volumes made before keep theirs.",
     .pool = true},
    /* Client quorum (docs/replication.md, "Quorum"): read by the replicate
     * layer of every client, live. */
    OPT("cluster.quorum-count", OPT_INT, "0", 0, 16, NULL, true,
        "With cluster.quorum-type fixed: how many bricks of a replica set must be up for a "
        "change (1 to the replica count; 0: not set, fixed then acts as auto). Other quorum "
        "types ignore it, as in GlusterFS."),
    OPT("cluster.quorum-type", OPT_ENUM, "auto", 0, 0, "none|auto|fixed", true,
        "What a change to a replica set needs up: auto, more than half of its bricks, or "
        "exactly half including the first; fixed, cluster.quorum-count bricks; none, any one "
        "(an arbiter alone never takes data). Below it changes fail with ENOTCONN; reads need "
        "one good copy. none and fixed below a majority risk split brain (docs/replication.md)."),
    NOEFFECT("cluster.read-hash-mode", OPT_INT, "1", 0, 5, NULL,
             "reads go to a good copy Cairn picks (docs/replication.md)."),
    NOEFFECT("cluster.readdir-optimize", OPT_BOOL, "on", 0, 0, NULL,
             "a distributed volume lists a directory once, from the first subvolume holding it."),
    OPT("cluster.self-heal-daemon", OPT_BOOL, "on", 0, 0, NULL, true,
        "Runs a self-heal daemon (cairn-shd) on each server holding a brick of the replicated "
        "volume. `volume heal NAME enable|disable` sets it."),
    /* Server quorum (docs/cluster.md, "Server quorum"): read by cairnd. */
    {"cluster.server-quorum-ratio", OPT_SPACE, "", 0, 0, NULL, true,
     "Pool-wide (`volume set all`): the percentage of the pool's servers a server must reach, "
     "itself included, for the bricks of volumes with cluster.server-quorum-type server to run "
     "on it. Empty: more than half.",
     .pool = true},
    OPT("cluster.server-quorum-type", OPT_ENUM, "none", 0, 0, "none|server", true,
        "server: each server stops this volume's bricks while it reaches too few servers of the "
        "pool (cluster.server-quorum-ratio), and starts them when it reaches enough again; "
        "changes to the volume are refused there meanwhile. none: bricks run whatever the pool."),
    OPT("cluster.shd-max-threads", OPT_INT, "1", 1, 64, NULL, true,
        "Objects each self-heal daemon heals in parallel."),
    NOEFFECT("cluster.shd-wait-qlength", OPT_INT, "1024", 1, 655536, NULL,
             "the self-heal daemon takes its index as it goes; cluster.shd-max-threads sets its "
             "parallelism."),
    NOEFFECT("cluster.use-compound-fops", OPT_BOOL, "off", 0, 0, NULL,
             "a change is always one compound message per brick."),
    OPT("diagnostics.brick-log-level", OPT_ENUM, "INFO", 0, 0, LOG_LEVELS, true,
        "Log level of the volume's brick processes (CRITICAL and NONE log errors only)."),
    NOEFFECT("diagnostics.brick-sys-log-level", OPT_ENUM, "CRITICAL", 0, 0, LOG_LEVELS,
             "Cairn logs to its own log files, not to syslog."),
    OPT("diagnostics.client-log-level", OPT_ENUM, "INFO", 0, 0, LOG_LEVELS, true,
        "Log level of the volume's clients (FUSE mounts; CRITICAL and NONE log errors only)."),
    NOEFFECT("diagnostics.client-sys-log-level", OPT_ENUM, "CRITICAL", 0, 0, LOG_LEVELS,
             "Cairn logs to its own log files, not to syslog."),
    NOEFFECT("diagnostics.count-fop-hits", OPT_BOOL, "off", 0, 0, NULL,
             "bricks always count requests (volume profile)."),
    NOEFFECT("diagnostics.latency-measurement", OPT_BOOL, "off", 0, 0, NULL,
             "bricks always time requests (volume profile)."),
    NOEFFECT("features.cache-invalidation", OPT_BOOL, "off", 0, 0, NULL,
             "a change always recalls the leases other clients cache under, which drops their "
             "copies (docs/consistency.md)."),
    NOEFFECT("features.cache-invalidation-timeout", OPT_TIME, "60", 0, 86400, NULL,
             "cached copies are dropped by lease recalls, not by a timer."),
    OPT("features.default-soft-limit", OPT_INT, "80", 1, 100, NULL, true,
        "Soft limit, in percent of the hard limit, of quota limits set without one (volume "
        "quota VOL default-soft-limit sets it): crossing it is logged (docs/quota.md)."),
    OPT("features.hard-timeout", OPT_TIME, "5", 1, 1800, NULL, true,
        "Seconds between two summations of a distributed volume's quota usage over its replica "
        "sets while a limited directory is above its soft limit; bounds how far the limit can "
        "be overshot (docs/quota.md)."),
    OPT("features.lease-recall-timeout", OPT_TIME, "5", 1, 600, NULL, true,
        "Seconds a brick waits for a client to return a recalled lease before revoking it. A "
        "change that conflicts with another client's lease is answered after the recall, so "
        "a hung client delays it by at most this long."),
    NOEFFECT("features.leases", OPT_BOOL, "off", 0, 0, NULL,
             "bricks always grant leases; clients ask for them while client.leases is on."),
    OPT("features.quota", OPT_BOOL, "off", 0, 0, NULL, true,
        "Directory quota (volume quota VOL enable|disable): bricks count each limited "
        "directory's bytes and objects and refuse growth past the hard limit with EDQUOT "
        "(docs/quota.md)."),
    OPT("features.quota-deem-statfs", OPT_BOOL, "on", 0, 0, NULL, true,
        "With quota on, df of a limited directory (or below it) shows the limit as the size and "
        "the directory's usage as used."),
    OPT("features.quota-limits", OPT_STRING, "", 0, 0, NULL, true,
        "The quota limits, kept by volume quota VOL limit-usage|limit-objects|remove (set "
        "them with those commands)."),
    {"features.read-only", OPT_BOOL, "off", 0, 0, NULL, false,
     "A read-only volume is not available yet; only off is accepted.", .no_effect = true,
     .only = "off",
     .refused = "a read-only volume is not available yet in Cairn: mount with -o ro instead"},
    NOEFFECT("features.selinux", OPT_BOOL, "on", 0, 0, NULL,
             "security.selinux labels are stored when a client mounts with -o selinux."),
    OPT("features.shard", OPT_BOOL, "off", 0, 0, NULL, true,
        "Store files created from now on in blocks of features.shard-block-size, spread over "
        "the replica sets (docs/shard.md); existing files stay whole."),
    OPT("features.shard-block-size", OPT_SIZE, "64MB", 4194304, 4398046511104LL, NULL, true,
        "Block size of files sharded from now on (4MB at least); a file keeps the one it was "
        "created with."),
    OPT("features.soft-timeout", OPT_TIME, "60", 1, 1800, NULL, true,
        "Seconds between two summations of a distributed volume's quota usage over its replica "
        "sets while every limited directory is below its soft limit (docs/quota.md)."),
    NOEFFECT("network.frame-timeout", OPT_TIME, "1800", 5, 1800, NULL,
             "an operation on an unresponsive brick fails after network.ping-timeout; there is "
             "no second timer."),
    NOEFFECT("network.inode-lru-limit", OPT_INT, "16384", 0, 2147483647, NULL,
             "Cairn's clients and bricks size their inode tables themselves."),
    OPT("network.ping-timeout", OPT_TIME, "10", 1, 1800, NULL, true,
        "Seconds a client waits for an unresponsive brick before it declares the brick dead and "
        "fails or reroutes the operations pending on it. A brick whose disk has held a request "
        "this long closes its connections and refuses new ones until the disk completes it "
        "(docs/replication.md, Failures)."),
    NOEFFECT("network.remote-dio", OPT_BOOL, "off", 0, 0, NULL,
             "bricks never open files with O_DIRECT; how a client treats O_DIRECT writes is "
             "performance.strict-o-direct."),
    {"nfs.disable", OPT_BOOL, "on", 0, 0, NULL, false,
     "Cairn has no built-in NFS server; only on is accepted.", .no_effect = true, .only = "on",
     .refused = "Cairn has no built-in NFS server: export a mount with NFS-Ganesha or the "
                "kernel's NFS server"},
    NOEFFECT("nfs.trusted-sync", OPT_BOOL, "off", 0, 0, NULL, "Cairn has no built-in NFS server."),
    OPT("performance.aggregate-size", OPT_SIZE, "128KB", 4096, 1048576, NULL, true,
        "Write-behind sends writes that continue one another as one write of up to this many "
        "bytes (docs/consistency.md, Data: write-behind)."),
    NOEFFECT("performance.cache-capability-xattrs", OPT_BOOL, "on", 0, 0, NULL,
             "Cairn decides itself which extended attributes a client remembers."),
    NOEFFECT("performance.cache-invalidation", OPT_BOOL, "off", 0, 0, NULL,
             "lease recalls always drop what other clients cache (docs/consistency.md)."),
    NOEFFECT("performance.cache-max-file-size", OPT_SIZE, "0", 0, 17592186044416LL, NULL,
             "the read cache takes files of any size, bounded by performance.cache-size."),
    NOEFFECT("performance.cache-min-file-size", OPT_SIZE, "0", 0, 17592186044416LL, NULL,
             "the read cache takes files of any size, bounded by performance.cache-size."),
    NOEFFECT("performance.cache-refresh-timeout", OPT_TIME, "1", 0, 61, NULL,
             "the read cache stays valid while the client holds the file's lease."),
    NOEFFECT("performance.cache-samba-metadata", OPT_BOOL, "off", 0, 0, NULL,
             "Cairn decides itself which extended attributes a client remembers."),
    OPT("performance.cache-size", OPT_SIZE, "32MB", 0, 17179869184LL, NULL, true,
        "Bytes of file data a FUSE client keeps in its read cache (windows of files read at "
        "random, valid while the client holds the file's lease; docs/consistency.md)."),
    NOEFFECT("performance.client-io-threads", OPT_BOOL, "on", 0, 0, NULL,
             "cairn-fuse always serves the kernel on several threads (one io_uring queue per "
             "CPU where the kernel has it)."),
    NOEFFECT("performance.flush-behind", OPT_BOOL, "on", 0, 0, NULL,
             "close waits for the file's written-behind data, so its errors reach close "
             "(docs/consistency.md)."),
    NOEFFECT("performance.force-readdirp", OPT_BOOL, "on", 0, 0, NULL,
             "clients always list directories with readdirplus."),
    NOEFFECT("performance.io-cache", OPT_BOOL, "off", 0, 0, NULL,
             "the read cache is kept valid by leases; performance.cache-size sizes it."),
    OPT("performance.io-thread-count", OPT_INT, "16", 1, 64, NULL, false,
        "Worker threads of each brick process for disk work; applies when the brick starts."),
    NOEFFECT("performance.md-cache-timeout", OPT_TIME, "1", 0, 600, NULL,
             "attributes are cached under leases, which recalls drop on any change; "
             "client.lease-cache-timeout bounds them."),
    NOEFFECT("performance.nl-cache", OPT_BOOL, "off", 0, 0, NULL,
             "a client answers lookups of absent names from a listing it holds under a lease."),
    NOEFFECT("performance.nl-cache-limit", OPT_SIZE, "10MB", 0, 17179869184LL, NULL,
             "absent names are known from listings held under leases (performance.nl-cache)."),
    NOEFFECT("performance.nl-cache-positive-entry", OPT_BOOL, "off", 0, 0, NULL,
             "absent names are known from listings held under leases (performance.nl-cache)."),
    NOEFFECT("performance.nl-cache-timeout", OPT_TIME, "60", 0, 86400, NULL,
             "absent names are known from listings held under leases (performance.nl-cache)."),
    NOEFFECT("performance.open-behind", OPT_BOOL, "on", 0, 0, NULL,
             "Cairn decides itself when an open reaches the bricks."),
    NOEFFECT("performance.parallel-readdir", OPT_BOOL, "off", 0, 0, NULL,
             "clients fetch the listings of subdirectories ahead, under leases."),
    NOEFFECT("performance.quick-read", OPT_BOOL, "on", 0, 0, NULL,
             "small files are read through the read cache and read-ahead, under leases."),
    NOEFFECT("performance.rda-cache-limit", OPT_SIZE, "10MB", 0, 1073741824LL, NULL,
             "Cairn fetches listings ahead under leases; there is no readdir-ahead buffer to "
             "size."),
    NOEFFECT("performance.rda-high-wmark", OPT_SIZE, "128KB", 0, 1073741824LL, NULL,
             "there is no readdir-ahead buffer to size (performance.rda-cache-limit)."),
    NOEFFECT("performance.rda-low-wmark", OPT_SIZE, "4096", 0, 1073741824LL, NULL,
             "there is no readdir-ahead buffer to size (performance.rda-cache-limit)."),
    NOEFFECT("performance.rda-request-size", OPT_SIZE, "131072", 4096, 1073741824LL, NULL,
             "there is no readdir-ahead buffer to size (performance.rda-cache-limit)."),
    OPT("performance.read-ahead", OPT_BOOL, "on", 0, 0, NULL, true,
        "A FUSE client reads the whole window (performance.read-ahead-page-count x 128 KiB) "
        "around a small read of a file it holds a lease on and answers later reads inside it "
        "from its read cache and the kernel's page cache. off: every read the kernel does not "
        "cache goes to a brick."),
    OPT("performance.read-ahead-page-count", OPT_INT, "1", 1, 16, NULL, true,
        "Size of the read-ahead window in units of 128 KiB."),
    NOEFFECT("performance.readdir-ahead", OPT_BOOL, "on", 0, 0, NULL,
             "clients fetch listings ahead under leases whatever this says."),
    NOEFFECT("performance.stat-prefetch", OPT_BOOL, "on", 0, 0, NULL,
             "attributes are cached under leases (client.leases), which keep them coherent."),
    OPT("performance.strict-o-direct", OPT_BOOL, "on", 0, 0, NULL, true,
        "on: writes through O_DIRECT handles wait for the bricks. off: they are written behind "
        "like others (GlusterFS's default)."),
    NOEFFECT("performance.strict-write-ordering", OPT_BOOL, "off", 0, 0, NULL,
             "write-behind sends a file's older data first (docs/consistency.md)."),
    OPT("performance.write-behind", OPT_BOOL, "on", 0, 0, NULL, true,
        "A FUSE client answers writes to files it holds alone (opened for writing while no other "
        "client had them open, or in a directory it made) at once "
        "and sends them in the background, aggregated; fsync and close wait for them and return "
        "their errors, another client's access makes the holder send them first "
        "(docs/consistency.md). off: every write waits for the bricks."),
    OPT("performance.write-behind-trickling-writes", OPT_BOOL, "on", 0, 0, NULL, true,
        "on: a write behind is sent as soon as nothing of its file is in flight, even if smaller "
        "than performance.aggregate-size. off: it waits until the aggregate is full, another "
        "write lands elsewhere in the file, or something waits for it."),
    OPT("performance.write-behind-window-size", OPT_SIZE, "1MB", 524288, 1073741824LL, NULL, true,
        "Bytes of one file a FUSE client may hold written behind; a write past it is answered "
        "once the file is back under it."),
    OPT("server.all-squash", OPT_BOOL, "off", 0, 0, NULL, true,
        "Every caller's requests are executed as server.anonuid:server.anongid, and checked "
        "as that user's (docs/security.md)."),
    {"server.allow-insecure", OPT_BOOL, "on", 0, 0, NULL, false,
     "Bricks do not check the client's source port; only on is accepted.", .no_effect = true,
     .only = "on",
     .refused = "Cairn's bricks do not check client source ports: restrict clients with "
                "auth.allow"},
    OPT("server.anongid", OPT_INT, "65534", 0, 4294967294LL, NULL, true,
        "The group squashed callers act as (server.root-squash, server.all-squash)."),
    OPT("server.anonuid", OPT_INT, "65534", 0, 4294967294LL, NULL, true,
        "The user squashed callers act as (server.root-squash, server.all-squash)."),
    NOEFFECT("server.event-threads", OPT_INT, "2", 1, 1024, NULL,
             "Cairn sizes the threads that serve its connections itself."),
    NOEFFECT("server.outstanding-rpc-limit", OPT_INT, "64", 0, 65536, NULL,
             "Cairn's bricks have no limit of requests in flight per client to set."),
    OPT("server.root-squash", OPT_BOOL, "off", 0, 0, NULL, true,
        "Requests of uid 0 are executed as server.anonuid, and of gid 0 as server.anongid: "
        "root on a client is an unprivileged user on the volume (docs/security.md)."),
    OPT("server.ssl", OPT_BOOL, "off", 0, 0, NULL, false,
        "Bricks accept TLS connections only, from clients whose certificate the CA signed "
        "(and auth.ssl-allow names); applies when the bricks restart (volume stop and start)."),
    OPT("server.statedump-path", OPT_STRING, "/var/run/cairn", 0, 0, NULL, true,
        "Directory where bricks and clients write their statedumps (`volume statedump`, "
        "SIGUSR1); made when missing (docs/operations.md)."),
    OPT("ssl.certificate-depth", OPT_INT, "1", 0, 9, NULL, false,
        "Most intermediate CAs between a peer's certificate and the CA file (0: signed by the "
        "CA itself)."),
    OPT("ssl.cipher-list", OPT_STRING, "", 0, 0, NULL, false,
        "TLS 1.3 cipher suites, ':'-separated (e.g. TLS_AES_256_GCM_SHA384); empty: "
        "OpenSSL's defaults."),
    OPT("ssl.crl-path", OPT_STRING, "", 0, 0, NULL, false,
        "A certificate revocation list (PEM file, or a directory hashed with openssl rehash) "
        "both sides check the other's certificate against; empty: none."),
    NOEFFECT("storage.fips-mode-rchecksum", OPT_BOOL, "on", 0, 0, NULL,
             "Cairn's heal does not use GlusterFS's checksums."),
    NOEFFECT("storage.health-check-interval", OPT_TIME, "30", 0, 86400, NULL,
             "bricks watch every disk request: one held past network.ping-timeout takes the "
             "brick offline until it completes (docs/cluster.md)."),
    {"storage.owner-gid", OPT_INT, "-1", -1, 2147483647, NULL, false,
     "Not available yet; only -1 (leave the owner alone) is accepted.", .no_effect = true,
     .only = "-1",
     .refused = "setting the volume root's owner is not available yet in Cairn: chown the "
                "root directory of a mount instead (it is kept on every brick)"},
    {"storage.owner-uid", OPT_INT, "-1", -1, 2147483647, NULL, false,
     "Not available yet; only -1 (leave the owner alone) is accepted.", .no_effect = true,
     .only = "-1",
     .refused = "setting the volume root's owner is not available yet in Cairn: chown the "
                "root directory of a mount instead (it is kept on every brick)"},
    OPT("storage.reserve", OPT_SPACE, "1", 0, 1125899906842624LL, NULL, true,
        "Space each brick keeps free (a percentage of its file system, or a size): below it "
        "the brick refuses new files and data with ENOSPC, while it still records heal marks "
        "and its own metadata; heal does not fill it either (docs/replication.md). 0: none."),
    OPT("storage.spare-inodes", OPT_INT, "65536", 0, 65536, NULL, true,
        "Empty inodes each brick makes ahead in its idle time (after 3 seconds in which no "
        "client asked for a change), taken by new files instead of allocating an inode each "
        "(docs/brick-format.md, "
        ".cairn/spare). Bounded by a quarter of the brick file system's free inodes. 0: none "
        "made ahead (removed files are still kept as spares)."),
    NOEFFECT("transport.address-family", OPT_ENUM, "inet", 0, 0, "inet|inet6",
             "Cairn connects to the addresses cairnd listens on and bricks' host names give, "
             "IPv4 or IPv6."),
    NOEFFECT("transport.listen-backlog", OPT_INT, "1024", 0, 65535, NULL,
             "cairnd and bricks set their listen backlog themselves."),
    {.name = NULL},
};

/* GlusterFS names of Cairn options with the same meaning. */
const struct opt_alias opt_aliases[] = {
    {"features.lease-lock-recall-timeout", "features.lease-recall-timeout"},
    {NULL, NULL},
};

/* Any user.* key: GlusterFS lets administrators keep their own notes (and
 * hook scripts' settings) on a volume. */
static const struct opt_def user_def =
    OPT("user.*", OPT_STRING, "", 0, 0, NULL, false,
        "Free-form: any user.NAME is stored and shown for the administrator's own use; nothing in "
        "Cairn reads it.");

static const char *const type_names[] = {
    [OPT_BOOL] = "bool",
    [OPT_INT] = "integer",
    [OPT_SIZE] = "size",
    [OPT_TIME] = "seconds",
    [OPT_ENUM] = "enum",
    [OPT_STRING] = "string",
    [OPT_SPACE] = "percent or size",
};

const char *opt_canonical(const char *name)
{
    for (const struct opt_alias *a = opt_aliases; name && a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a->target;
    return name;
}

const struct opt_def *opt_find(const char *name)
{
    if (!name)
        return NULL;
    if (strncmp(name, "user.", 5) == 0 && name[5])
        return &user_def;
    name = opt_canonical(name);
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

bool opt_addr_pattern(const char *e, size_t n)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, e, n);
    buf[n] = 0;
    if (memchr(buf, '/', n))
        return addr_entry_valid(buf, n);
    struct in6_addr a;
    if (inet_pton(AF_INET, buf, &a) == 1 || inet_pton(AF_INET6, buf, &a) == 1)
        return true;
    /* a glob can match only over the characters of numeric addresses */
    if (strcspn(buf, "*?[") == n)
        return false;
    if (strspn(buf, "0123456789.*?[]!-") == n)
        return true;
    return strchr(buf, ':') && strspn(buf, "0123456789abcdefABCDEF:.*?[]!-") == n;
}

/* "/dir(p|p...)": the directory a mount names and the patterns allowed
 * (or refused) to mount it. */
static int validate_dir_entry(const char *name, const char *e, size_t n, char *err, size_t errlen)
{
    const char *open = memchr(e, '(', n);
    if (!open || e[n - 1] != ')' || memchr(open + 1, '(', (size_t)(e + n - open - 1)) ||
        memchr(e, ')', n - 1)) {
        snprintf(err, errlen,
                 "'%.*s' is not a directory entry for %s: write /DIR(ADDRESS|ADDRESS...), "
                 "directory entries separated by commas",
                 (int)n, e, name);
        return -EINVAL;
    }
    size_t dl = (size_t)(open - e);
    if (!opt_dir_valid(e, dl)) {
        snprintf(err, errlen,
                 "'%.*s' in %s is not a directory of the volume: an absolute path like /a/b, "
                 "without '.', '..', empty components or a trailing '/'",
                 (int)dl, e, name);
        return -EINVAL;
    }
    const char *end = e + n - 1; /* the ')' */
    for (const char *q = open + 1;;) {
        size_t k = 0;
        while (q + k < end && q[k] != '|')
            k++;
        const char *a = q;
        size_t m = k;
        while (m && *a == ' ') {
            a++;
            m--;
        }
        while (m && a[m - 1] == ' ')
            m--;
        if (!addr_entry_valid(a, m)) {
            snprintf(err, errlen, "'%.*s' is not a valid address or address pattern for %s in %s",
                     (int)m, a, e, name);
            return -EINVAL;
        }
        if (q + k == end)
            break;
        q += k + 1;
    }
    return 0;
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
        if (n && *p == '/') {
            if (validate_dir_entry(name, p, n, err, errlen) < 0)
                return -EINVAL;
        } else if (!addr_entry_valid(p, n)) {
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

/* Whether norm is one of the '|'-separated values of list. */
static bool in_list(const char *list, const char *norm)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, "|");
        if (strlen(norm) == n && strncmp(norm, p, n) == 0)
            return true;
        p += n;
        if (*p == '|')
            p++;
    }
    return false;
}

static int validate_value(const struct opt_def *d, const char *name, const char *value, char *norm,
                          size_t normlen, char *err, size_t errlen);

int opt_validate(const char *name, const char *value, char *norm, size_t normlen, char *err,
                 size_t errlen)
{
    const struct opt_def *d = opt_find(name);
    if (!d) {
        snprintf(err, errlen, "option : %s does not exist", name ? name : "(null)");
        return -ENOENT;
    }
    if (d->only && !*d->only) {
        snprintf(err, errlen, "%s cannot be set: %s", name, d->refused);
        return -EINVAL;
    }
    int rc = validate_value(d, name, value, norm, normlen, err, errlen);
    if (rc == 0 && d->only && !in_list(d->only, norm)) {
        snprintf(err, errlen, "%s %s is refused: %s (accepted: %s)", name, value, d->refused,
                 d->only);
        return -EINVAL;
    }
    return rc;
}

static int validate_value(const struct opt_def *d, const char *name, const char *value, char *norm,
                          size_t normlen, char *err, size_t errlen)
{
    int64_t v;
    bool b;
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
        if (strcmp(name, "features.quota-limits") == 0) {
            struct quota_limits q;
            if (strlen(value) >= normlen) {
                snprintf(err, errlen, "too many quota limits (%zu bytes of them, at most %zu)",
                         strlen(value), normlen - 1);
                return -EINVAL;
            }
            if (quota_limits_parse(value, &q, err, errlen) < 0)
                return -EINVAL;
            quota_limits_free(&q);
        }
        if (strcmp(name, "server.statedump-path") == 0 && value[0] != '/') {
            snprintf(err, errlen, "'%s' is not an absolute path for %s", value, name);
            return -EINVAL;
        }
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
    name = opt_canonical(name);
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

/* One pattern (spaces around it ignored) against addr. */
static bool pattern_matches(const char *p, size_t n, const char *addr)
{
    char pat[256];
    while (n && *p == ' ') {
        p++;
        n--;
    }
    while (n && p[n - 1] == ' ')
        n--;
    if (!n || n >= sizeof(pat))
        return false;
    memcpy(pat, p, n);
    pat[n] = 0;
    return memchr(pat, '/', n) ? cidr_match(pat, n, addr) : fnmatch(pat, addr, 0) == 0;
}

/* Whether an entry of list that applies to a mount of dir matches addr:
 * a bare pattern applies to every mount, "/d(p|p...)" to mounts of d
 * alone (dir "/" is the whole volume). */
static bool list_matches(const char *list, const char *dir, const char *addr)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        const char *e = p;
        size_t m = n;
        while (m && *e == ' ') {
            e++;
            m--;
        }
        if (m && *e == '/') {
            const char *open = memchr(e, '(', m);
            const char *close = open ? memchr(open, ')', m - (size_t)(open - e)) : NULL;
            size_t dl = open ? (size_t)(open - e) : 0;
            if (close && dl == strlen(dir) && !memcmp(e, dir, dl)) {
                for (const char *q = open + 1; q < close;) {
                    size_t k = strcspn(q, "|)");
                    if (pattern_matches(q, k, addr))
                        return true;
                    q += k + (q[k] == '|');
                }
            }
        } else if (pattern_matches(e, m, addr)) {
            return true;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

bool opt_addr_allowed_dir(const char *allow, const char *reject, const char *dir, const char *addr)
{
    if (!addr)
        return false;
    if (!dir || !*dir)
        dir = "/";
    if (strncasecmp(addr, "::ffff:", 7) == 0 && strchr(addr + 7, '.'))
        addr += 7;
    if (reject && list_matches(reject, dir, addr))
        return false;
    return list_matches(allow ? allow : "*", dir, addr);
}

bool opt_addr_allowed(const char *allow, const char *reject, const char *addr)
{
    return opt_addr_allowed_dir(allow, reject, "/", addr);
}

bool opt_dir_valid(const char *d, size_t n)
{
    if (n == 0 || d[0] != '/' || n >= 4096 || memchr(d, 0, n))
        return false;
    if (n == 1)
        return true;
    for (size_t i = 1; i <= n;) {
        size_t k = 0;
        while (i + k < n && d[i + k] != '/')
            k++;
        if (k == 0 || k > 255 || (k == 1 && d[i] == '.') ||
            (k == 2 && d[i] == '.' && d[i + 1] == '.'))
            return false;
        i += k + 1;
    }
    return true;
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
        if (d->only)
            fprintf(out, "Accepted: %s\n", *d->only ? d->only : "(nothing)");
        if (d->no_effect) {
            fprintf(out, "Description: (no effect in Cairn: %s)\n\n", d->help);
            continue;
        }
        if (d->pool)
            fprintf(out, "Scope: the whole pool (volume set all %s VALUE)\n", d->name);
        fprintf(out, "Live: %s\n", d->live ? "yes" : "no (applies when the bricks restart)");
        fprintf(out, "Description: %s\n\n", d->help);
    }
    for (const struct opt_alias *a = opt_aliases; a->name; a++)
        fprintf(out, "Option: %s\nSame as: %s\n\n", a->name, a->target);
    fprintf(out, "Option: %s\nDefault Value: (empty)\nType: string\nDescription: %s\n\n",
            user_def.name, user_def.help);
}
