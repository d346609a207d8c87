/*
 * atomfs.h — C API of atomfs: failure-atomic, durable updates of one file or many.
 *
 * Link with -latomfs (pkg-config --cflags --libs atomfs), or run a program under the
 * LD_PRELOAD shim libatomfs_preload.so, which exports the same tx_*, syncv and abortv
 * symbols for ordinary descriptors of files under ATOMFS_PREFIX.
 *
 * Errors: every call returns -1 (pointer calls: NULL; tx_begin: 0) and sets errno.
 * Bad input never crashes: NULL pointers give EFAULT; unknown or closed descriptors, pools
 * and directory streams give EBADF; unknown or finished transaction ids give EINVAL; files
 * of different pools in one call give EXDEV; a descriptor already bound to a running
 * transaction gives EBUSY. Other errno values follow open(2), read(2), ... .
 *
 * Durability: every call outside a transaction and outside O_ATOMIC mode is atomic and
 * durable when it returns. Inside a transaction, writes become durable together at
 * tx_commit. In O_ATOMIC mode, writes since the last fsync become durable together at the
 * next atomfs_fsync/syncv, and are dropped by abortv, by close and by a crash.
 * Isolation between transactions is the application's (as in FCFS).
 *
 * Descriptors are ints in their own number space (>= ATOMFS_FD_BASE), never reused in a
 * process, so a kernel descriptor passed by mistake fails with EBADF.
 *
 * Thread safety: every call may be made from any thread.
 *
 * C99 clean; needs only <stdint.h>, <stddef.h>, <sys/types.h> and <sys/stat.h>.
 */
#ifndef ATOMFS_H
#define ATOMFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <fcntl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header. */
#define ATOMFS_VERSION_MAJOR 0
#define ATOMFS_VERSION_MINOR 1

/* First descriptor number the C API hands out. */
#define ATOMFS_FD_BASE (1 << 24)

/* Open flag: O_ATOMIC (ACCFS). Writes since the last fsync persist together at the next
 * atomfs_fsync/syncv; abortv, close or a crash drop them. Combine with O_RDWR etc. */
#define ATOMFS_O_ATOMIC 0x40000000

/* Most descriptors one tx_begin, syncv or abortv call takes. */
#define ATOMFS_TX_FILES_MAX 4096

/* ---- pools ---- */

/* An open pool (opaque). */
typedef struct atomfs_pool atomfs_pool;

/* Create a new pool file of `size` bytes at `path`. NULL + errno (EEXIST if it exists). */
atomfs_pool *atomfs_pool_create(const char *path, uint64_t size);

/* Create a new store at `path` with the engine `engine` ("pool", "mmio", ...; NULL: "pool")
 * and its options as "key=value,..." (NULL or "": the defaults; e.g. "size=64M,mode=nc", or
 * "home=/srv/data,size=64M" for mmio, whose files live in that directory). NULL + errno
 * (EEXIST if it exists, EINVAL for an unknown engine or option: the reason goes to stderr). */
atomfs_pool *atomfs_create(const char *path, const char *engine, const char *options);

/* Open an existing store, whichever engine made it. NULL + errno (ENOENT, EUCLEAN if no
 * engine recognises the file, EBUSY if another process has it open: through any front end,
 * the FUSE mount and the CLI included — unless that process serves it (atomfs serve, a mount,
 * a program under the shim): then this is its client, docs/serve.md). The same file opened
 * twice in one process shares one store. */
atomfs_pool *atomfs_pool_open(const char *path);

/* Close a pool handle. Descriptors still open on it stay usable; the pool is unmounted
 * when the last of them is closed. */
int atomfs_pool_close(atomfs_pool *pool);

/* ---- files ---- */

/* Open `path` (inside the pool; "/a/b" and "a/b" are the same file). `flags`: O_RDONLY,
 * O_WRONLY or O_RDWR, with O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECTORY and
 * ATOMFS_O_ATOMIC; `mode` is used with O_CREAT. Directories open read-only (for fsync).
 * Returns a descriptor >= ATOMFS_FD_BASE. */
int atomfs_open(atomfs_pool *pool, const char *path, int flags, unsigned int mode);

/* Close a descriptor. In O_ATOMIC mode, writes since the last fsync are dropped. */
int atomfs_close(int fd);

/* read(2), write(2), pread(2), pwrite(2). At most 0x7ffff000 bytes move per call. */
ssize_t atomfs_read(int fd, void *buf, size_t count);
ssize_t atomfs_write(int fd, const void *buf, size_t count);
ssize_t atomfs_pread(int fd, void *buf, size_t count, int64_t offset);
ssize_t atomfs_pwrite(int fd, const void *buf, size_t count, int64_t offset);

/* lseek(2): SEEK_SET, SEEK_CUR, SEEK_END (and SEEK_DATA, SEEK_HOLE where defined). */
int64_t atomfs_lseek(int fd, int64_t offset, int whence);

/* ftruncate(2). */
int atomfs_ftruncate(int fd, int64_t length);

/* fsync(2). In O_ATOMIC mode: commits the writes since the last fsync, atomically. */
int atomfs_fsync(int fd);

/* fstat(2), and stat(2) of a path in the pool. */
int atomfs_fstat(int fd, struct stat *st);
int atomfs_stat(atomfs_pool *pool, const char *path, struct stat *st);

/* Switch a file in (on != 0) or out of O_ATOMIC mode. Switching out commits pending writes. */
int atomfs_set_atomic(int fd, int on);

/* Record locks, shared with every process using the store (through its server): cmd is
 * F_SETLK (-1 with EAGAIN when another owner's lock conflicts), F_SETLKW (waits) or
 * F_GETLK; fl as fcntl(2) takes it. Locks belong to the open file, as OFD locks do: two
 * opens of a file exclude each other, and the locks go when its last descriptor closes. */
int atomfs_lock(int fd, int cmd, struct flock *fl);

/* ---- namespace (each call atomic and durable when it returns) ---- */

int atomfs_mkdir(atomfs_pool *pool, const char *path, unsigned int mode);
int atomfs_rmdir(atomfs_pool *pool, const char *path);
int atomfs_unlink(atomfs_pool *pool, const char *path);
/* Atomic; replaces an existing target as rename(2) does. */
int atomfs_rename(atomfs_pool *pool, const char *from, const char *to);

/* ---- the rest of the POSIX file API (where the pool's engine offers it; EOPNOTSUPP where
 * it does not yet, see docs/posix.md). Paths follow symbolic links as the kernel does:
 * every component but the last always, the last for the calls on what the path names
 * (atomfs_open, atomfs_stat, the xattr calls, atomfs_opendir) and not for those on the name
 * (atomfs_lstat, atomfs_unlink, atomfs_rename*, atomfs_readlink); O_NOFOLLOW on a link is
 * ELOOP; more than 40 links is ELOOP; absolute targets resolve from the pool's root (the
 * pool is its own root). ---- */

/* symlink(2): a link `linkpath` holding `target`, kept as written. */
int atomfs_symlink(atomfs_pool *pool, const char *target, const char *linkpath);
/* readlink(2): at most `size` bytes of the target, no NUL added; returns the count. */
ssize_t atomfs_readlink(atomfs_pool *pool, const char *path, char *buf, size_t size);
/* lstat(2): a link in the last component is not followed. */
int atomfs_lstat(atomfs_pool *pool, const char *path, struct stat *st);
/* mknod(2): S_IFIFO, S_IFSOCK, S_IFCHR / S_IFBLK (with dev), or S_IFREG / no type for an
 * empty regular file; the permission bits less the umask. S_IFDIR: EPERM. */
int atomfs_mknod(atomfs_pool *pool, const char *path, unsigned int mode, uint64_t dev);
/* renameat2(2): flags 0, RENAME_NOREPLACE (1: EEXIST when `to` exists) or RENAME_EXCHANGE
 * (2: swaps two existing names, atomically). */
int atomfs_rename2(atomfs_pool *pool, const char *from, const char *to, unsigned int flags);
/* fallocate(2): mode 0 (allocate, growing the size), FALLOC_FL_KEEP_SIZE (1),
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE (3), FALLOC_FL_ZERO_RANGE (16, with or without
 * KEEP_SIZE); atomic like a write, in the descriptor's transaction if bound to one. */
int atomfs_fallocate(int fd, int mode, int64_t offset, int64_t len);
/* Extended attributes (user.*, trusted.*, security.*, system.posix_acl_access/default;
 * values up to 64 KiB). get/list: size 0 returns the length needed, a buffer too small is
 * ERANGE; a missing attribute is ENODATA. setxattr flags: 0, XATTR_CREATE (1),
 * XATTR_REPLACE (2). The list is the names, each followed by a NUL. */
ssize_t atomfs_getxattr(atomfs_pool *pool, const char *path, const char *name, void *value,
                        size_t size);
int atomfs_setxattr(atomfs_pool *pool, const char *path, const char *name, const void *value,
                    size_t size, int flags);
ssize_t atomfs_listxattr(atomfs_pool *pool, const char *path, char *list, size_t size);
int atomfs_removexattr(atomfs_pool *pool, const char *path, const char *name);
/* open(2) with O_TMPFILE: a new unnamed file in directory `dir`, open with `flags`
 * (O_WRONLY or O_RDWR, plus O_APPEND, ATOMFS_O_ATOMIC) and `mode` less the umask. Nothing of
 * it survives its last close or a crash unless atomfs_linkat names it. Returns a descriptor. */
int atomfs_tmpfile(atomfs_pool *pool, const char *dir, int flags, unsigned int mode);
/* linkat(2) of a descriptor (AT_EMPTY_PATH): a new name for its file in its pool; for an
 * atomfs_tmpfile file, this publishes it with its contents, atomically. */
int atomfs_linkat(int fd, const char *newpath);

/* A directory stream (opaque) and its entries. */
typedef struct atomfs_dir atomfs_dir;
/* d_type values (equal to the DT_* of <dirent.h> on Linux). */
#define ATOMFS_DT_FIFO 1
#define ATOMFS_DT_CHR 2
#define ATOMFS_DT_DIR 4
#define ATOMFS_DT_BLK 6
#define ATOMFS_DT_REG 8
#define ATOMFS_DT_LNK 10
#define ATOMFS_DT_SOCK 12
struct atomfs_dirent {
    uint64_t d_ino;
    unsigned char d_type; /* one of the ATOMFS_DT_* */
    char d_name[256];     /* NUL-terminated */
};

/* Open a directory stream; the entries are those at the time of the call ("." and ".."
 * are not listed). */
atomfs_dir *atomfs_opendir(atomfs_pool *pool, const char *path);
/* Next entry, valid until the next call on the stream; NULL at the end (errno unchanged)
 * or on error (errno set: EBADF for an unknown stream). */
struct atomfs_dirent *atomfs_readdir(atomfs_dir *dir);
int atomfs_closedir(atomfs_dir *dir);

/* ---- O_ATOMIC groups (ACCFS) ---- */

/* Commit the pending O_ATOMIC writes of `n` files of one pool as one atomic unit.
 * n == 0 does nothing and returns 0. */
int syncv(const int *fds, int n);
/* Drop the pending O_ATOMIC writes of `n` files of one pool. */
int abortv(const int *fds, int n);

/* ---- transactions (FCFS) ---- */

/* The files a transaction starts with: `num` descriptors at `fdSet`. */
struct TxInfo {
    int num;
    int *fdSet;
};

/* Begin a transaction bound to info->fdSet[0..num) (num may be 0: tx_add binds later).
 * Every write and ftruncate through a bound descriptor belongs to the transaction until
 * tx_commit or tx_abort. A descriptor is bound to at most one running transaction (EBUSY).
 * Returns the transaction id (never 0), or 0 with errno set. */
unsigned long tx_begin(struct TxInfo *info);

/* Bind one more descriptor to a running transaction. */
int tx_add(unsigned long txid, int fd);

/* Make every change of the transaction durable, atomically; the descriptors stay open and
 * are unbound. If the commit fails, the transaction is aborted. The id is finished either
 * way (later calls with it: EINVAL). */
int tx_commit(unsigned long txid);

/* Undo every change of the transaction; the descriptors stay open and are unbound. */
int tx_abort(unsigned long txid);

#ifdef __cplusplus
}
#endif

#endif /* ATOMFS_H */
