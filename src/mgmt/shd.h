/* Self-heal daemon supervision (shd.c) and the heal commands cairnd
 * answers (cmd_heal.c). All under m->lock. */
#ifndef CAIRN_MGMT_SHD_H
#define CAIRN_MGMT_SHD_H

#include <stdio.h>
#include <sys/types.h>

#include "mgmt.h"

/* Starts, reaps, restarts and stops the volumes' self-heal daemons. */
void mgmt_shd_supervise(struct mgmt *m);
/* Stops every self-heal daemon (cairnd exiting). */
void mgmt_shd_stop_all(struct mgmt *m);
/* Sends sig to every running self-heal daemon (SIGHUP: reopen the log). */
void mgmt_shd_signal_all(int sig);
/* Pid of the volume's self-heal daemon on this server, 0 if none. */
pid_t mgmt_shd_pid(const char *vol_id);
/* Where the daemon of volname writes its statistics. */
void mgmt_shd_stats_path(const struct mgmt *m, const char *volname, char *out, size_t len);
/* volume heal NAME enable|disable|statistics */
int mgmt_cmd_heal(struct mgmt *m, int argc, char **argv, FILE *out);

#endif
