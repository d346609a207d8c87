/* namespace_tx.c — create, fill, rename and decorate files on an atomfs FUSE mount inside one
 * transaction: the namespace calls of a process that began a transaction join it.
 *
 *   cc -I crates/frontends/fuse/include -o namespace_tx crates/frontends/fuse/examples/namespace_tx.c
 *   ./namespace_tx MOUNT commit|abort|exit
 *
 * The transaction is begun on a descriptor of the mount's root directory (a transaction of
 * namespace calls; a file's descriptor works too and binds that file's writes as well). Then:
 * mkdir MOUNT/d, create d/new and write to it, rename it to d/final, a symbolic link d/link,
 * a FIFO d/fifo and an attribute user.note on d/final. "commit" makes all of it durable at
 * once, "abort" undoes all of it, "exit" leaves without either (closing the descriptor the
 * transaction was begun on aborts it, as a crash would). Exits 0 on success, 1 on failure.
 */
#include "atomfs_fuse.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static int fail(const char *what)
{
    perror(what);
    return 1;
}

/* After a failed call: true (and a note) when the engine does not offer it yet. */
static int skipped(const char *what)
{
    if (errno != EOPNOTSUPP)
        return 0;
    printf("%s: not offered by this engine yet\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MOUNT commit|abort|exit\n", argv[0]);
        return 2;
    }
    if (chdir(argv[1]) < 0)
        return fail(argv[1]);
    int root = open(".", O_RDONLY | O_DIRECTORY);
    if (root < 0)
        return fail("open .");
    uint64_t tx;
    if (ioctl(root, ATOMFS_IOC_TX_BEGIN, &tx) < 0)
        return fail("ATOMFS_IOC_TX_BEGIN");

    if (mkdir("d", 0755) < 0)
        return fail("mkdir d");
    int fd = open("d/new", O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0)
        return fail("create d/new");
    const char text[] = "written inside the transaction";
    if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1))
        return fail("write d/new");
    close(fd);
    if (rename("d/new", "d/final") < 0)
        return fail("rename d/new d/final");
    /* These three need an engine that offers symbolic links, special files and extended
     * attributes; on one that does not yet, they answer EOPNOTSUPP and are left out. */
    if (symlink("final", "d/link") < 0 && !skipped("symlink"))
        return fail("symlink d/link");
    if (mkfifo("d/fifo", 0600) < 0 && !skipped("mkfifo"))
        return fail("mkfifo d/fifo");
    if (setxattr("d/final", "user.note", "kept", 4, 0) < 0 && !skipped("setxattr"))
        return fail("setxattr d/final");

    if (strcmp(argv[2], "exit") == 0) {
        printf("transaction %llu left open\n", (unsigned long long)tx);
        return 0;
    }
    int abort_it = strcmp(argv[2], "abort") == 0;
    if ((abort_it ? atomfs_tx_abort(root, tx) : atomfs_tx_commit(root, tx)) < 0)
        return fail(abort_it ? "ATOMFS_IOC_TX_ABORT" : "ATOMFS_IOC_TX_COMMIT");
    printf("transaction %llu %s\n", (unsigned long long)tx, abort_it ? "aborted" : "committed");
    close(root);
    return 0;
}
