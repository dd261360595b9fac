/* Commands the CLI runs itself instead of sending them to cairnd. */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include <stddef.h>

#include "../lib/net.h"

struct cl_layer;
struct cl_volinfo;
struct cl_heal_progress;
struct cli_progress;

/* A protocol client of brick i of v, waiting for it as long as the
 * volume's network.ping-timeout (brickconn.c); NULL when out of memory. */
struct cl_layer *cli_brick_connect(const struct cl_volinfo *v, int i);

/* volume heal NAME [full|info ...|summary|split-brain ...] (argv[0] is
 * "volume"), run by the CLI against the bricks; returns the exit status.
 * xml: GlusterFS's healInfo document for info [summary|split-brain], an
 * error document for the rest. progress: print progress lines on stderr
 * (--progress; without it, when stderr is a terminal and not xml). */
int cli_volume_heal(const struct net_addr *mgmt, int argc, char **argv, int xml, int progress);
/* Whether this heal command is answered by cairnd (enable, disable,
 * statistics). */
int cli_heal_by_cairnd(int argc, char **argv);

/* volume remove-brick NAME replica N BRICK... force (argv[0] is "volume"):
 * checks, as a client of the bricks, that no brick to be removed holds the
 * only good copy of anything (shrink.c). 0: ask cairnd; 1: refused, with
 * the reason in err. */
int cli_remove_brick_check(const struct net_addr *mgmt, int argc, char **argv, char *err,
                           size_t errlen);

/* volume profile NAME start|stop|info [cumulative|incremental|clear]
 * (profile.c); returns the exit status. */
/* volume quota NAME list|list-objects [PATH...] (quota.c); xml: GlusterFS's
 * <volQuota> document. */
int cli_volume_quota_list(const struct net_addr *mgmt, int argc, char **argv, int xml);
int cli_volume_profile(const struct net_addr *mgmt, int argc, char **argv);

/* volume top NAME {open|read|write|opendir|readdir|clear|read-perf|write-perf}
 * [bs B count N] [brick B] [list-cnt N] (top.c); returns the exit status. */
int cli_volume_top(const struct net_addr *mgmt, int argc, char **argv);

/* volume status NAME clients (clients.c); returns the exit status. */
int cli_volume_status_clients(const struct net_addr *mgmt, int argc, char **argv);

/* Progress lines on stderr of a long operation following p (progress.c):
 * every two seconds how far it came, its rates and the time left when a
 * total is known; cli_progress_stop prints the last line ("done in ...")
 * and frees. what names the operation ("heal full"). NULL when out of
 * memory (then stop does nothing). */
struct cli_progress *cli_progress_start(const char *what, struct cl_heal_progress *p);
/* Adds objects to the number a full walk is expected to meet. */
void cli_progress_expect(struct cli_progress *pr, unsigned objects);
void cli_progress_stop(struct cli_progress *pr);

#endif
