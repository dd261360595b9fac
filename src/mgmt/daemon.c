/* Process plumbing for cairnd: the workdir lock, daemonizing with a
 * readiness report to the starting shell, and the pid file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"

int mgmt_lock_workdir(const char *workdir, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/cairnd.lock", workdir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK) {
            char pidpath[PATH_MAX + 16], text[32] = "?";
            snprintf(pidpath, sizeof(pidpath), "%s/cairnd.pid", workdir);
            /* The holder writes its pid file just after taking the lock:
             * a second cairnd started at once may look before that. */
            for (int tries = 0; tries < 20 && !strcmp(text, "?"); tries++) {
                int pfd = open(pidpath, O_RDONLY | O_CLOEXEC);
                if (pfd >= 0) {
                    ssize_t n = read(pfd, text, sizeof(text) - 1);
                    text[n > 0 ? n : 0] = 0;
                    text[strcspn(text, "\n")] = 0;
                    close(pfd);
                    if (!text[0])
                        strcpy(text, "?");
                }
                if (!strcmp(text, "?"))
                    usleep(50 * 1000);
            }
            snprintf(err, errlen, "another cairnd (pid %s) is running with workdir %s", text,
                     workdir);
            return -EBUSY;
        }
        snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
        return -e;
    }
    return fd; /* held, and inherited across fork, for the daemon's life */
}

int mgmt_daemonize(int *ready_fd)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0) {
        /* The starting shell's process: wait for the daemon's verdict. */
        close(pfd[1]);
        char c = 1;
        ssize_t n;
        do
            n = read(pfd[0], &c, 1);
        while (n < 0 && errno == EINTR);
        _exit(n == 1 && c == 0 ? 0 : 1);
    }
    close(pfd[0]);
    setsid();
    pid = fork();
    if (pid < 0)
        _exit(1);
    if (pid > 0)
        _exit(0);
    if (chdir("/") < 0)
        _exit(1);
    umask(022);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        /* stderr stays until the log file replaces it, so early errors are
         * still seen by the starting shell. */
        close(null);
    }
    *ready_fd = pfd[1];
    return 0;
}

void mgmt_report_ready(int *ready_fd, int ok)
{
    if (*ready_fd < 0)
        return;
    char c = ok ? 0 : 1;
    ssize_t n = write(*ready_fd, &c, 1);
    (void)n;
    close(*ready_fd);
    *ready_fd = -1;
    if (ok) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 2);
            close(null);
        }
    }
}

int mgmt_write_pid_file(const char *path)
{
    char tmp[PATH_MAX + 8], text[32];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int n = snprintf(text, sizeof(text), "%d\n", (int)getpid());
    int rc = write(fd, text, (size_t)n) == n ? 0 : -EIO;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    return rc;
}
