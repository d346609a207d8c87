/*
 * Database names of the atomfs SQLite VFS inside its pool, apart from SQLite so that the
 * fuzz target `sqlite_names` (fuzz/) runs the very code the VFS runs. Included by
 * atomfs_sqlite.c (which compiles on its own with plain `cc`: this header sits beside it).
 */
#ifndef ATOMFS_SQLITE_NAMES_H
#define ATOMFS_SQLITE_NAMES_H

#include <string.h>

/* Whether a name has a ".." component. */
static int atomfs_sqlite_has_dotdot(const char *name)
{
    for (const char *p = name; (p = strstr(p, "..")) != NULL; p += 2) {
        int starts = p == name || p[-1] == '/';
        int ends = p[2] == '\0' || p[2] == '/';
        if (starts && ends)
            return 1;
    }
    return 0;
}

/* The name of a database inside the pool, into `out` (`n_out` bytes): absolute, "/" + the
 * name as given, leading "./" dropped. 0, or -1 when refused: a name with a ".." component
 * (a database path never climbs; inside a store ".." at the root stays there, so it could
 * only mislead) or one that does not fit. */
static int atomfs_sqlite_full_name(const char *name, int n_out, char *out)
{
    if (atomfs_sqlite_has_dotdot(name))
        return -1;
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    const char *sep = name[0] == '/' ? "" : "/";
    if ((int) (strlen(name) + strlen(sep)) >= n_out)
        return -1;
    strcpy(out, sep);
    strcat(out, name);
    return 0;
}

#endif
