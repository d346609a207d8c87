/*
 * libatomfs_sqlite.so — a SQLite loadable extension registering the VFS "atomfs", which
 * keeps database files in an atomfs pool (see docs/sqlite.md).
 *
 *   .load libatomfs_sqlite                       (sqlite3 shell)
 *   .open file:/app.db?vfs=atomfs&pool=/dev/shm/app.pool
 *   PRAGMA journal_mode=OFF;                      (or MEMORY; crash-safe either way)
 *
 * The pool is the `pool=` URI parameter of the database, else $ATOMFS_POOL; a missing pool
 * file is created when $ATOMFS_CREATE_SIZE is set (bytes, or 0 for the default size) or the
 * URI names an engine: `engine=` (else $ATOMFS_ENGINE, else pool) and `options=` (else
 * $ATOMFS_OPTIONS), e.g. `file:/t.db?vfs=atomfs&pool=/dev/shm/m.pool&engine=mmio&options=home=/srv/db`.
 *
 * Crash safety without a journal (ACCFS SADJ mode): the main database file is opened in
 * O_ATOMIC mode, so every write since the last xSync becomes durable atomically at the next
 * xSync (SQLite syncs the database at each commit) or at SQLITE_FCNTL_COMMIT_PHASETWO (so
 * synchronous=OFF commits too). A write transaction that ends without a commit (ROLLBACK,
 * an error, a crash) leaves nothing behind: its pending writes are dropped (abortv) when
 * SQLite releases its write lock, or by recovery after a crash.
 * SQLITE_IOCAP_BATCH_ATOMIC is advertised and the BEGIN/COMMIT/ROLLBACK_ATOMIC_WRITE file
 * controls map to tx_begin/tx_commit/tx_abort, for SQLite builds with
 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE (other builds never send them).
 *
 * Temporary files (no name, temp databases and journals, sub-journals) go to the default
 * VFS. Locking is SQLite's byte-range protocol (as its unix VFS: the pending, reserved and
 * shared ranges) on atomfs_lock, whose locks the store's server keeps for every process
 * using the store and which belong to each open database file: connections in one process
 * or in several processes (clients of `atomfs serve`, or of the process that opened the
 * store) exclude each other as on a local file system.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3ext.h>

#include "atomfs_sqlite_names.h"
SQLITE_EXTENSION_INIT1

#include "atomfs.h"

#define ATOMFS_CREATE_SIZE_DEFAULT (256ull << 20)

typedef struct AtomfsFile {
    sqlite3_file base;
    atomfs_pool *pool;
    int fd;
    int atomic;       /* main database: O_ATOMIC mode */
    int dirty;        /* writes since the last commit point */
    unsigned long tx; /* batch-atomic-write transaction, 0 when none */
    int lock;         /* SQLITE_LOCK_* level held */
} AtomfsFile;

static sqlite3_vfs atomfs_vfs;
static sqlite3_vfs *default_vfs;

/* The pool of the most recent database open, for xDelete/xAccess (which get no URI). */
static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static char current_pool[4096];

static int io_error(int code)
{
    if (errno == ENOSPC)
        return SQLITE_FULL;
    return code;
}

static int x_close(sqlite3_file *f)
{
    AtomfsFile *p = (AtomfsFile *) f;
    int rc = SQLITE_OK;
    if (p->tx) {
        tx_abort(p->tx);
        p->tx = 0;
    }
    if (p->fd >= 0 && atomfs_close(p->fd) != 0)
        rc = SQLITE_IOERR_CLOSE;
    p->fd = -1;
    if (p->pool)
        atomfs_pool_close(p->pool);
    p->pool = NULL;
    return rc;
}

static int x_read(sqlite3_file *f, void *buf, int amount, sqlite3_int64 offset)
{
    AtomfsFile *p = (AtomfsFile *) f;
    ssize_t got = 0;
    while (got < amount) {
        ssize_t n = atomfs_pread(p->fd, (char *) buf + got, (size_t) (amount - got), offset + got);
        if (n < 0)
            return io_error(SQLITE_IOERR_READ);
        if (n == 0)
            break;
        got += n;
    }
    if (got < amount) {
        memset((char *) buf + got, 0, (size_t) (amount - got));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int x_write(sqlite3_file *f, const void *buf, int amount, sqlite3_int64 offset)
{
    AtomfsFile *p = (AtomfsFile *) f;
    ssize_t done = 0;
    while (done < amount) {
        ssize_t n = atomfs_pwrite(p->fd, (const char *) buf + done, (size_t) (amount - done), offset + done);
        if (n <= 0)
            return io_error(SQLITE_IOERR_WRITE);
        done += n;
    }
    p->dirty = 1;
    return SQLITE_OK;
}

static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    AtomfsFile *p = (AtomfsFile *) f;
    if (atomfs_ftruncate(p->fd, size) != 0)
        return io_error(SQLITE_IOERR_TRUNCATE);
    p->dirty = 1;
    return SQLITE_OK;
}

/* Commit point: for the O_ATOMIC database, every write since the last one becomes durable,
 * atomically. Inside a batch-atomic-write transaction the commit is tx_commit's. */
static int x_sync(sqlite3_file *f, int flags)
{
    AtomfsFile *p = (AtomfsFile *) f;
    (void) flags;
    if (p->tx)
        return SQLITE_OK;
    if (atomfs_fsync(p->fd) != 0)
        return io_error(SQLITE_IOERR_FSYNC);
    p->dirty = 0;
    return SQLITE_OK;
}

static int x_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    AtomfsFile *p = (AtomfsFile *) f;
    struct stat st;
    if (atomfs_fstat(p->fd, &st) != 0)
        return SQLITE_IOERR_FSTAT;
    *size = st.st_size;
    return SQLITE_OK;
}

/* SQLite's lock bytes (as its unix VFS places them). */
#define PENDING_BYTE 0x40000000
#define RESERVED_BYTE (PENDING_BYTE + 1)
#define SHARED_FIRST (PENDING_BYTE + 2)
#define SHARED_SIZE 510

/* Set (type F_RDLCK/F_WRLCK) or drop (F_UNLCK) this file's lock on a byte range: 0, or the
 * SQLite error (BUSY when another connection's lock is in the way). */
static int range_lock(AtomfsFile *p, short type, off_t start, off_t len, int ioerr)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    if (atomfs_lock(p->fd, F_SETLK, &fl) == 0)
        return SQLITE_OK;
    return errno == EAGAIN || errno == EACCES ? SQLITE_BUSY : ioerr;
}

static int x_lock(sqlite3_file *f, int level)
{
    AtomfsFile *p = (AtomfsFile *) f;
    int rc;
    if (p->lock >= level)
        return SQLITE_OK;
    if (level == SQLITE_LOCK_SHARED) {
        /* The pending byte first: no new reader while a writer waits for the readers. */
        rc = range_lock(p, F_RDLCK, PENDING_BYTE, 1, SQLITE_IOERR_LOCK);
        if (rc != SQLITE_OK)
            return rc;
        rc = range_lock(p, F_RDLCK, SHARED_FIRST, SHARED_SIZE, SQLITE_IOERR_LOCK);
        if (range_lock(p, F_UNLCK, PENDING_BYTE, 1, SQLITE_IOERR_UNLOCK) != SQLITE_OK && rc == SQLITE_OK)
            rc = SQLITE_IOERR_UNLOCK;
        if (rc == SQLITE_OK)
            p->lock = SQLITE_LOCK_SHARED;
        return rc;
    }
    if (level == SQLITE_LOCK_RESERVED) {
        rc = range_lock(p, F_WRLCK, RESERVED_BYTE, 1, SQLITE_IOERR_LOCK);
        if (rc == SQLITE_OK)
            p->lock = SQLITE_LOCK_RESERVED;
        return rc;
    }
    /* EXCLUSIVE (through PENDING): hold the pending byte, then every shared byte. */
    if (p->lock < SQLITE_LOCK_PENDING) {
        rc = range_lock(p, F_WRLCK, PENDING_BYTE, 1, SQLITE_IOERR_LOCK);
        if (rc != SQLITE_OK)
            return rc;
        p->lock = SQLITE_LOCK_PENDING;
    }
    rc = range_lock(p, F_WRLCK, SHARED_FIRST, SHARED_SIZE, SQLITE_IOERR_LOCK);
    if (rc == SQLITE_OK)
        p->lock = SQLITE_LOCK_EXCLUSIVE;
    return rc;
}

/* Releasing the write lock with writes that were never committed means the transaction
 * was rolled back (SQLite syncs, then sends COMMIT_PHASETWO, before unlocking a commit):
 * drop them so the file is as at the last commit. */
static int x_unlock(sqlite3_file *f, int level)
{
    AtomfsFile *p = (AtomfsFile *) f;
    if (level <= SQLITE_LOCK_SHARED && p->atomic && p->dirty && !p->tx) {
        if (abortv(&p->fd, 1) != 0)
            return SQLITE_IOERR_UNLOCK;
        p->dirty = 0;
    }
    if (level >= p->lock)
        return SQLITE_OK;
    if (p->lock > SQLITE_LOCK_SHARED) {
        if (level == SQLITE_LOCK_SHARED
            && range_lock(p, F_RDLCK, SHARED_FIRST, SHARED_SIZE, SQLITE_IOERR_RDLOCK) != SQLITE_OK)
            return SQLITE_IOERR_RDLOCK;
        if (range_lock(p, F_UNLCK, PENDING_BYTE, 2, SQLITE_IOERR_UNLOCK) != SQLITE_OK)
            return SQLITE_IOERR_UNLOCK;
    }
    if (level == SQLITE_LOCK_NONE && range_lock(p, F_UNLCK, 0, 0, SQLITE_IOERR_UNLOCK) != SQLITE_OK)
        return SQLITE_IOERR_UNLOCK;
    p->lock = level;
    return SQLITE_OK;
}

static int x_check_reserved_lock(sqlite3_file *f, int *out)
{
    AtomfsFile *p = (AtomfsFile *) f;
    struct flock fl;
    if (p->lock >= SQLITE_LOCK_RESERVED) {
        *out = 1;
        return SQLITE_OK;
    }
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = RESERVED_BYTE;
    fl.l_len = 1;
    if (atomfs_lock(p->fd, F_GETLK, &fl) != 0)
        return SQLITE_IOERR_CHECKRESERVEDLOCK;
    *out = fl.l_type != F_UNLCK;
    return SQLITE_OK;
}

static int x_file_control(sqlite3_file *f, int op, void *arg)
{
    AtomfsFile *p = (AtomfsFile *) f;
    switch (op) {
    case SQLITE_FCNTL_COMMIT_PHASETWO:
        if (p->atomic && p->dirty && !p->tx) {
            if (atomfs_fsync(p->fd) != 0)
                return io_error(SQLITE_IOERR_FSYNC);
            p->dirty = 0;
        }
        return SQLITE_OK;
#ifdef SQLITE_FCNTL_BEGIN_ATOMIC_WRITE
    case SQLITE_FCNTL_BEGIN_ATOMIC_WRITE: {
        if (p->tx)
            return SQLITE_MISUSE;
        if (p->dirty && atomfs_fsync(p->fd) != 0) /* earlier spilled writes stand alone */
            return io_error(SQLITE_IOERR_FSYNC);
        p->dirty = 0;
        struct TxInfo info;
        info.num = 1;
        info.fdSet = &p->fd;
        p->tx = tx_begin(&info);
        return p->tx ? SQLITE_OK : SQLITE_IOERR;
    }
    case SQLITE_FCNTL_COMMIT_ATOMIC_WRITE: {
        unsigned long tx = p->tx;
        p->tx = 0;
        p->dirty = 0;
        if (!tx)
            return SQLITE_MISUSE;
        return tx_commit(tx) == 0 ? SQLITE_OK : io_error(SQLITE_IOERR_COMMIT_ATOMIC);
    }
    case SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE: {
        unsigned long tx = p->tx;
        p->tx = 0;
        p->dirty = 0;
        if (!tx)
            return SQLITE_MISUSE;
        return tx_abort(tx) == 0 ? SQLITE_OK : SQLITE_IOERR_ROLLBACK_ATOMIC;
    }
#endif
    case SQLITE_FCNTL_VFSNAME:
        if (arg)
            *(char **) arg = sqlite3_mprintf("atomfs");
        return SQLITE_OK;
    default:
        return SQLITE_NOTFOUND;
    }
}

static int x_sector_size(sqlite3_file *f)
{
    (void) f;
    return 4096;
}

static int x_device_characteristics(sqlite3_file *f)
{
    AtomfsFile *p = (AtomfsFile *) f;
    int caps = SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_SEQUENTIAL;
#ifdef SQLITE_IOCAP_BATCH_ATOMIC
    if (p->atomic)
        caps |= SQLITE_IOCAP_BATCH_ATOMIC;
#else
    (void) p;
#endif
    return caps;
}

static const sqlite3_io_methods atomfs_io = {
    1, x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock,
    x_check_reserved_lock, x_file_control, x_sector_size, x_device_characteristics,
    0, 0, 0, 0, 0, 0,
};

/* Open the store at `path`; when it does not exist and $ATOMFS_CREATE_SIZE is set or the
 * database URI names an engine (`engine=`), create it with that engine ($ATOMFS_ENGINE, else
 * "pool") and its options (`options=` in the URI, else $ATOMFS_OPTIONS: "key=value,..."). */
static atomfs_pool *open_pool(const char *path, const char *engine, const char *options)
{
    atomfs_pool *pool = atomfs_pool_open(path);
    const char *size = getenv("ATOMFS_CREATE_SIZE");
    if (!pool && errno == ENOENT && (size || (engine && *engine))) {
        char all[1024];
        unsigned long long bytes = size ? strtoull(size, NULL, 0) : 0;
        if (!engine || !*engine)
            engine = getenv("ATOMFS_ENGINE");
        if (!options || !*options)
            options = getenv("ATOMFS_OPTIONS");
        if (!options)
            options = "";
        if (strstr(options, "size=") || !size)
            snprintf(all, sizeof all, "%s", options);
        else
            snprintf(all, sizeof all, "%s%ssize=%llu", options, *options ? "," : "",
                     bytes ? bytes : (unsigned long long) ATOMFS_CREATE_SIZE_DEFAULT);
        pool = atomfs_create(path, engine, all);
        if (!pool && errno == EEXIST) /* created meanwhile */
            pool = atomfs_pool_open(path);
    }
    return pool;
}

/* The pool for a file: its URI parameter, else $ATOMFS_POOL, else the last one used. */
static atomfs_pool *pool_for(const char *name, int use_uri)
{
    const char *path = use_uri && name ? sqlite3_uri_parameter(name, "pool") : NULL;
    const char *engine = use_uri && name ? sqlite3_uri_parameter(name, "engine") : NULL;
    const char *options = use_uri && name ? sqlite3_uri_parameter(name, "options") : NULL;
    char remembered[sizeof current_pool];
    if (!path || !*path)
        path = getenv("ATOMFS_POOL");
    pthread_mutex_lock(&current_lock);
    if (path && *path && strlen(path) < sizeof current_pool)
        strcpy(current_pool, path);
    strcpy(remembered, current_pool);
    pthread_mutex_unlock(&current_lock);
    if (!remembered[0]) {
        errno = ENOENT;
        return NULL;
    }
    return open_pool(remembered, engine, options);
}

static int x_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags)
{
    AtomfsFile *p = (AtomfsFile *) f;
    const int temp = SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TRANSIENT_DB |
                     SQLITE_OPEN_SUBJOURNAL;
    (void) vfs;
    if (!name || (flags & temp)) /* scratch files: the default VFS, in this same slot */
        return default_vfs->xOpen(default_vfs, name, f, flags, out_flags);

    memset(p, 0, sizeof *p);
    p->fd = -1;
    p->pool = pool_for(name, (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL)) != 0);
    if (!p->pool)
        return SQLITE_CANTOPEN;
    int oflags = (flags & SQLITE_OPEN_READWRITE) ? O_RDWR : O_RDONLY;
    if (flags & SQLITE_OPEN_CREATE)
        oflags |= O_CREAT;
    if (flags & SQLITE_OPEN_EXCLUSIVE)
        oflags |= O_EXCL;
    if ((flags & SQLITE_OPEN_MAIN_DB) && (flags & SQLITE_OPEN_READWRITE)) {
        oflags |= ATOMFS_O_ATOMIC;
        p->atomic = 1;
    }
    p->fd = atomfs_open(p->pool, name, oflags, 0644);
    if (p->fd < 0) {
        atomfs_pool_close(p->pool);
        p->pool = NULL;
        return SQLITE_CANTOPEN;
    }
    if (out_flags)
        *out_flags = flags;
    p->base.pMethods = &atomfs_io;
    return SQLITE_OK;
}

static int x_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void) vfs;
    (void) sync_dir; /* namespace calls are durable when they return */
    atomfs_pool *pool = pool_for(NULL, 0);
    if (!pool)
        return SQLITE_IOERR_DELETE;
    int rc = atomfs_unlink(pool, name);
    int err = errno;
    atomfs_pool_close(pool);
    if (rc == 0)
        return SQLITE_OK;
    return err == ENOENT ? SQLITE_IOERR_DELETE_NOENT : SQLITE_IOERR_DELETE;
}

static int x_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void) vfs;
    atomfs_pool *pool = pool_for(NULL, 0);
    struct stat st;
    *out = 0;
    if (!pool)
        return SQLITE_OK;
    if (atomfs_stat(pool, name, &st) == 0) {
        if (flags == SQLITE_ACCESS_EXISTS)
            *out = !S_ISREG(st.st_mode) || st.st_size > 0;
        else
            *out = (st.st_mode & 0600) != 0;
    }
    atomfs_pool_close(pool);
    return SQLITE_OK;
}

/* Names inside the pool: atomfs_sqlite_names.h (a ".." component is refused). */
static int x_full_pathname(sqlite3_vfs *vfs, const char *name, int n_out, char *out)
{
    (void) vfs;
    return atomfs_sqlite_full_name(name, n_out, out) == 0 ? SQLITE_OK : SQLITE_CANTOPEN;
}

static void *x_dl_open(sqlite3_vfs *v, const char *name) { (void) v; return default_vfs->xDlOpen(default_vfs, name); }
static void x_dl_error(sqlite3_vfs *v, int n, char *msg) { (void) v; default_vfs->xDlError(default_vfs, n, msg); }
static void (*x_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void) { (void) v; return default_vfs->xDlSym(default_vfs, h, sym); }
static void x_dl_close(sqlite3_vfs *v, void *h) { (void) v; default_vfs->xDlClose(default_vfs, h); }
static int x_randomness(sqlite3_vfs *v, int n, char *out) { (void) v; return default_vfs->xRandomness(default_vfs, n, out); }
static int x_sleep(sqlite3_vfs *v, int us) { (void) v; return default_vfs->xSleep(default_vfs, us); }
static int x_current_time(sqlite3_vfs *v, double *t) { (void) v; return default_vfs->xCurrentTime(default_vfs, t); }
static int x_get_last_error(sqlite3_vfs *v, int n, char *msg) { (void) v; return default_vfs->xGetLastError(default_vfs, n, msg); }
static int x_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *t)
{
    (void) v;
    if (default_vfs->iVersion >= 2 && default_vfs->xCurrentTimeInt64)
        return default_vfs->xCurrentTimeInt64(default_vfs, t);
    double d;
    int rc = default_vfs->xCurrentTime(default_vfs, &d);
    *t = (sqlite3_int64) (d * 86400000.0);
    return rc;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_atomfssqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
    (void) db;
    SQLITE_EXTENSION_INIT2(api);
    if (sqlite3_vfs_find("atomfs"))
        return SQLITE_OK_LOAD_PERMANENTLY;
    default_vfs = sqlite3_vfs_find(NULL);
    if (!default_vfs) {
        if (err)
            *err = sqlite3_mprintf("atomfs: no default VFS");
        return SQLITE_ERROR;
    }
    atomfs_vfs.iVersion = 2;
    atomfs_vfs.szOsFile = (int) sizeof(AtomfsFile) > default_vfs->szOsFile ? (int) sizeof(AtomfsFile)
                                                                            : default_vfs->szOsFile;
    atomfs_vfs.mxPathname = 1024;
    atomfs_vfs.zName = "atomfs";
    atomfs_vfs.xOpen = x_open;
    atomfs_vfs.xDelete = x_delete;
    atomfs_vfs.xAccess = x_access;
    atomfs_vfs.xFullPathname = x_full_pathname;
    atomfs_vfs.xDlOpen = x_dl_open;
    atomfs_vfs.xDlError = x_dl_error;
    atomfs_vfs.xDlSym = x_dl_sym;
    atomfs_vfs.xDlClose = x_dl_close;
    atomfs_vfs.xRandomness = x_randomness;
    atomfs_vfs.xSleep = x_sleep;
    atomfs_vfs.xCurrentTime = x_current_time;
    atomfs_vfs.xGetLastError = x_get_last_error;
    atomfs_vfs.xCurrentTimeInt64 = x_current_time_int64;
    int rc = sqlite3_vfs_register(&atomfs_vfs, 0);
    if (rc != SQLITE_OK)
        return rc;
    return SQLITE_OK_LOAD_PERMANENTLY;
}

/* The same entry point under a second name, for `.load libatomfs_sqlite sqlite3_atomfs_init`. */
int sqlite3_atomfs_init(sqlite3 *db, char **err, const sqlite3_api_routines *api)
{
    return sqlite3_atomfssqlite_init(db, err, api);
}
