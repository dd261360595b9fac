/* Commands the CLI runs itself instead of sending them to cairnd. */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include "../lib/net.h"

/* volume heal NAME [info|full] (argv[0] is "volume"); returns the exit
 * status. */
int cli_volume_heal(const struct net_addr *mgmt, int argc, char **argv);

/* volume profile NAME start|stop|info [cumulative|incremental|clear]
 * (profile.c); returns the exit status. */
int cli_volume_profile(const struct net_addr *mgmt, int argc, char **argv);

#endif
