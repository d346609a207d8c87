/*
 * The modes of files and directories the C API creates: the mode argument less the process
 * umask, as open(2) and mkdir(2) give them. For each mask: umask(mask), then atomfs_open
 * with O_CREAT and mode 0666, atomfs_mkdir with mode 0777, and one more of each with an
 * explicit narrower mode; prints the resulting permission bits, one line per mask.
 *
 *   umask_test POOL    prints "MASK FILE DIR FILE640 DIR750" for masks 022, 077, 027, 000
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "atomfs.h"

static int fail(const char *what)
{
    fprintf(stderr, "umask_test: %s: %s\n", what, strerror(errno));
    return 1;
}

/* The permission bits of `path`, or -1. */
static int perm(atomfs_pool *pool, const char *path)
{
    struct stat st;
    if (atomfs_stat(pool, path, &st) != 0)
        return -1;
    return (int) (st.st_mode & 07777);
}

static int create_pair(atomfs_pool *pool, const char *name, unsigned file_mode, unsigned dir_mode)
{
    char path[64];
    snprintf(path, sizeof path, "/%s.f", name);
    int fd = atomfs_open(pool, path, O_CREAT | O_EXCL | O_WRONLY, file_mode);
    if (fd < 0 || atomfs_close(fd) != 0)
        return -1;
    snprintf(path, sizeof path, "/%s.d", name);
    return atomfs_mkdir(pool, path, dir_mode);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    atomfs_pool *pool = atomfs_pool_create(argv[1], 64u << 20);
    if (!pool)
        return fail("atomfs_pool_create");
    const mode_t masks[] = {022, 077, 027, 0};
    for (unsigned i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        char plain[16], narrow[16], path[64];
        snprintf(plain, sizeof plain, "p%u", i);
        snprintf(narrow, sizeof narrow, "n%u", i);
        umask(masks[i]);
        if (create_pair(pool, plain, 0666, 0777) != 0 || create_pair(pool, narrow, 0640, 0750) != 0)
            return fail("create");
        int modes[4];
        const char *suffix[4] = {".f", ".d", ".f", ".d"};
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "/%s%s", k < 2 ? plain : narrow, suffix[k]);
            modes[k] = perm(pool, path);
        }
        printf("%03o %o %o %o %o\n", (unsigned) masks[i], modes[0], modes[1], modes[2], modes[3]);
    }
    return atomfs_pool_close(pool) == 0 ? 0 : fail("atomfs_pool_close");
}
