/* Commands the CLI runs itself instead of sending them to cairnd. */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include "../lib/net.h"

/* volume heal NAME [full|info ...|summary|split-brain ...] (argv[0] is
 * "volume"), run by the CLI against the bricks; returns the exit status.
 * xml: GlusterFS's healInfo document for info [summary|split-brain], an
 * error document for the rest. */
int cli_volume_heal(const struct net_addr *mgmt, int argc, char **argv, int xml);
/* Whether this heal command is answered by cairnd (enable, disable,
 * statistics). */
int cli_heal_by_cairnd(int argc, char **argv);

/* volume profile NAME start|stop|info [cumulative|incremental|clear]
 * (profile.c); returns the exit status. */
int cli_volume_profile(const struct net_addr *mgmt, int argc, char **argv);

#endif
