/* Directories made with their missing parents (dirs.h). */
#include "dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

int dirs_make(const char *path)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}
