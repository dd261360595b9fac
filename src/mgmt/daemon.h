/* cairnd process plumbing (daemon.c). */
#ifndef CAIRN_MGMT_DAEMON_H
#define CAIRN_MGMT_DAEMON_H

#include <limits.h>
#include <stdio.h>

/* Takes the exclusive lock DIR/cairnd.lock; returns its fd (kept open for the
 * daemon's life), or -EBUSY when another cairnd holds it, with a message in
 * err. */
int mgmt_lock_workdir(const char *workdir, char *err, size_t errlen);
/* Double fork and setsid. Returns 0 in the daemon, with *ready_fd to pass to
 * mgmt_report_ready; the starting process exits 0 once the daemon reports
 * ready, 1 if it fails first. */
int mgmt_daemonize(int *ready_fd);
/* Tells the starting process the outcome; on success also detaches stderr. */
void mgmt_report_ready(int *ready_fd, int ok);
/* Writes the current pid to path atomically. */
int mgmt_write_pid_file(const char *path);

#endif
