/* atomfs_fuse.h — control a file on an atomfs FUSE mount: per-file atomic mode and
 * multi-file transactions, by ioctl on open file descriptors of the mount.
 *
 *   uint64_t tx;
 *   ioctl(fd_a, ATOMFS_IOC_TX_BEGIN, &tx);   // new transaction, fd_a bound to it
 *   ioctl(fd_b, ATOMFS_IOC_TX_ADD, &tx);     // bind fd_b too
 *   pwrite(fd_a, ...); pwrite(fd_b, ...);    // writes through bound fds belong to tx
 *   ioctl(fd_a, ATOMFS_IOC_TX_COMMIT, &tx);  // durable together (or ATOMFS_IOC_TX_ABORT)
 *
 * Rules: a file descriptor is bound to at most one open transaction (EBUSY otherwise);
 * closing a bound descriptor before the commit aborts the transaction (so does a crash or
 * the death of the program); COMMIT and ABORT may be issued on any descriptor of the mount.
 * Errors come back as -1 with errno set (EINVAL for an unknown transaction).
 *
 * Atomic mode (O_ATOMIC of ACCFS): ATOMFS_IOC_SET_ATOMIC with an int 1/0 on a descriptor, or
 * the extended attribute user.atomfs.atomic = "1"/"0" on the file (applies to descriptors
 * opened afterwards). Writes then collect until fsync() or close(), which commit them as one
 * unit; ATOMFS_IOC_ATOMIC_ABORT drops them. The numbers below are part of the interface.
 */
#ifndef ATOMFS_FUSE_H
#define ATOMFS_FUSE_H

#include <stdint.h>
#include <errno.h>
#include <sys/ioctl.h>

#define ATOMFS_IOC_MAGIC 'A'

/* out: the new transaction id; binds the descriptor it is issued on */
#define ATOMFS_IOC_TX_BEGIN    _IOR(ATOMFS_IOC_MAGIC, 1, uint64_t)
/* in: transaction id; binds the descriptor it is issued on */
#define ATOMFS_IOC_TX_ADD      _IOW(ATOMFS_IOC_MAGIC, 2, uint64_t)
/* in: transaction id */
#define ATOMFS_IOC_TX_COMMIT   _IOW(ATOMFS_IOC_MAGIC, 3, uint64_t)
/* in: transaction id */
#define ATOMFS_IOC_TX_ABORT    _IOW(ATOMFS_IOC_MAGIC, 4, uint64_t)
/* in: int, 1 = atomic mode on, 0 = off (switching off commits pending writes) */
#define ATOMFS_IOC_SET_ATOMIC  _IOW(ATOMFS_IOC_MAGIC, 5, int32_t)
/* drop the pending atomic-mode writes of this descriptor */
#define ATOMFS_IOC_ATOMIC_ABORT _IO(ATOMFS_IOC_MAGIC, 6)

/* Begin a transaction over n descriptors. Returns 0 and sets *tx, or -1 with errno set
 * (the transaction is then aborted). */
static inline int atomfs_tx_begin(const int *fds, int n, uint64_t *tx)
{
    if (n < 1 || ioctl(fds[0], ATOMFS_IOC_TX_BEGIN, tx) < 0)
        return -1;
    for (int i = 1; i < n; i++) {
        if (ioctl(fds[i], ATOMFS_IOC_TX_ADD, tx) < 0) {
            int saved = errno;
            ioctl(fds[0], ATOMFS_IOC_TX_ABORT, tx);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

static inline int atomfs_tx_commit(int fd, uint64_t tx) { return ioctl(fd, ATOMFS_IOC_TX_COMMIT, &tx); }
static inline int atomfs_tx_abort(int fd, uint64_t tx) { return ioctl(fd, ATOMFS_IOC_TX_ABORT, &tx); }

#endif
