/* Directories made with their missing parents. */
#ifndef CAIRN_LIB_DIRS_H
#define CAIRN_LIB_DIRS_H

/* Makes path and its missing parents (mode 0755); 0 if it is a directory
 * already, or -errno (-ENOTDIR when path exists as something else). */
int dirs_make(const char *path);

#endif
