/* two_files.c — update two files on an atomfs FUSE mount atomically, through the ioctls of
 * atomfs_fuse.h (the seed's Figure 1: both writes become durable together, or neither).
 *
 *   cc -I crates/frontends/fuse/include -o two_files crates/frontends/fuse/examples/two_files.c
 *   ./two_files MOUNT/a MOUNT/b "new text" [abort]
 *
 * With "abort" as the fourth argument the transaction is aborted instead of committed, and
 * both files keep their old contents. Exits 0 on success, 1 with a message on failure.
 */
#include "atomfs_fuse.h"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what)
{
    perror(what);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s FILE_A FILE_B TEXT [abort]\n", argv[0]);
        return 2;
    }
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = open(argv[1 + i], O_RDWR | O_CREAT, 0644);
        if (fds[i] < 0)
            return fail(argv[1 + i]);
    }
    uint64_t tx;
    if (atomfs_tx_begin(fds, 2, &tx) < 0)
        return fail("ATOMFS_IOC_TX_BEGIN/ADD");
    size_t len = strlen(argv[3]);
    for (int i = 0; i < 2; i++) {
        if (ftruncate(fds[i], 0) < 0)
            return fail("ftruncate");
        if (pwrite(fds[i], argv[3], len, 0) != (ssize_t)len)
            return fail("pwrite");
    }
    int abort_it = argc > 4 && strcmp(argv[4], "abort") == 0;
    if ((abort_it ? atomfs_tx_abort(fds[0], tx) : atomfs_tx_commit(fds[0], tx)) < 0)
        return fail(abort_it ? "ATOMFS_IOC_TX_ABORT" : "ATOMFS_IOC_TX_COMMIT");
    printf("transaction %llu %s\n", (unsigned long long)tx, abort_it ? "aborted" : "committed");
    close(fds[0]);
    close(fds[1]);
    return 0;
}
