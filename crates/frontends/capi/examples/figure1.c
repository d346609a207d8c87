/*
 * The seed's Figure 1 (FCFS): update two existing files atomically.
 *
 *   figure1 POOL        creates POOL if missing, with /file1 and /file2, then updates both
 *                       in one transaction and prints their contents.
 *
 * Build: cc -std=c99 figure1.c $(pkg-config --cflags --libs atomfs)
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomfs.h"

static int fail(const char *what)
{
    fprintf(stderr, "figure1: %s: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: figure1 POOL\n");
        return 2;
    }
    atomfs_pool *pool = atomfs_pool_open(argv[1]);
    if (!pool && errno == ENOENT)
        pool = atomfs_pool_create(argv[1], 64u << 20);
    if (!pool)
        return fail(argv[1]);
    /* The two files exist before the transaction, as in the seed. */
    for (int i = 1; i <= 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "/file%d", i);
        int fd = atomfs_open(pool, name, O_RDWR | O_CREAT, 0644);
        if (fd < 0 || atomfs_close(fd) < 0)
            return fail(name);
    }

    /* ---- Figure 1 ---- */
    int fd1 = atomfs_open(pool, "/file1", O_RDWR, 0);
    int fd2 = atomfs_open(pool, "/file2", O_RDWR, 0);
    if (fd1 < 0 || fd2 < 0)
        return fail("open");
    struct TxInfo info;
    info.num = 2;
    info.fdSet = (int *) malloc(2 * sizeof(int));
    if (!info.fdSet)
        return fail("malloc");
    info.fdSet[0] = fd1, info.fdSet[1] = fd2;
    /* transaction begin */
    unsigned long TxID = tx_begin(&info);
    if (TxID == 0)
        return fail("tx_begin");
    if (atomfs_write(fd1, "data1", 5) != 5 || atomfs_write(fd2, "data2", 5) != 5)
        return fail("write");
    if (tx_commit(TxID) < 0) /* commit the transaction */
        return fail("tx_commit");
    /* transaction end */
    free(info.fdSet);
    /* ---- end of Figure 1 ---- */

    char buf[2][16];
    for (int i = 0; i < 2; i++) {
        int fd = i == 0 ? fd1 : fd2;
        ssize_t n = atomfs_pread(fd, buf[i], sizeof buf[i] - 1, 0);
        if (n < 0)
            return fail("pread");
        buf[i][n] = 0;
    }
    printf("file1=%s file2=%s\n", buf[0], buf[1]);
    if (atomfs_close(fd1) < 0 || atomfs_close(fd2) < 0 || atomfs_pool_close(pool) < 0)
        return fail("close");
    return 0;
}
