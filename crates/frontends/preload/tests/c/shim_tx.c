/*
 * Transactions and O_ATOMIC on ordinary descriptors under the shim (LD_PRELOAD), with plain
 * open/write/fsync. The tx_* and syncv/abortv symbols are looked up at run time
 * (dlsym(RTLD_DEFAULT)): they come from the preloaded shim.
 *
 *   shim_tx DIR crash-tx      open DIR/a, DIR/b; tx_begin; write both; SIGKILL before commit
 *   shim_tx DIR commit-tx     the same, committed; prints "committed"
 *   shim_tx DIR crash-atomic  O_ATOMIC writes to DIR/a, SIGKILL before fsync
 *   shim_tx DIR atomic        O_ATOMIC writes to DIR/a then fsync; prints "synced"
 *   shim_tx DIR errors        bad input to every shim call -> -1/errno; prints "errors ok"
 *   shim_tx DIR fork          a forked child reads and writes the descriptor it inherited
 *                             (through the parent's store server, the offset shared with the
 *                             parent), and opens, writes and commits transactions of its own
 *                             (a grandchild too); the parent goes on and sees what they wrote
 *   shim_tx DIR fork-noserve  with ATOMFS_SERVE=0 the parent does not serve: the child gets EIO
 *   shim_tx DIR stdio         fopen/fprintf/fgets/fseek/fclose and fdopen on shim files
 *   shim_tx DIR threads       8 threads each write, fsync, reread and dup their own file, and
 *                             run transactions on it, at the same time; prints "threads ok"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <dlfcn.h>

#include "atomfs.h"

static unsigned long (*p_tx_begin)(struct TxInfo *);
static int (*p_tx_add)(unsigned long, int);
static int (*p_tx_commit)(unsigned long);
static int (*p_tx_abort)(unsigned long);
static int (*p_syncv)(const int *, int);
static int (*p_abortv)(const int *, int);
#define tx_begin p_tx_begin
#define tx_add p_tx_add
#define tx_commit p_tx_commit
#define tx_abort p_tx_abort
#define syncv p_syncv
#define abortv p_abortv

static void load(void)
{
    *(void **) &p_tx_begin = dlsym(RTLD_DEFAULT, "tx_begin");
    *(void **) &p_tx_add = dlsym(RTLD_DEFAULT, "tx_add");
    *(void **) &p_tx_commit = dlsym(RTLD_DEFAULT, "tx_commit");
    *(void **) &p_tx_abort = dlsym(RTLD_DEFAULT, "tx_abort");
    *(void **) &p_syncv = dlsym(RTLD_DEFAULT, "syncv");
    *(void **) &p_abortv = dlsym(RTLD_DEFAULT, "abortv");
    if (!p_tx_begin || !p_tx_add || !p_tx_commit || !p_tx_abort || !p_syncv || !p_abortv) {
        fprintf(stderr, "shim_tx: tx_* symbols not found: run under LD_PRELOAD=libatomfs_preload.so\n");
        exit(3);
    }
}

#define DIE(what) do { fprintf(stderr, "shim_tx: %s: %s (line %d)\n", what, strerror(errno), __LINE__); exit(1); } while (0)
#define EXPECT(call, e) do { errno = 0; if ((call) != -1 || errno != (e)) { \
    fprintf(stderr, "shim_tx: line %d: %s: want errno %d, got %d\n", __LINE__, #call, e, errno); exit(1); } } while (0)

static int open_in(const char *dir, const char *name, int flags)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags, 0644);
    if (fd < 0)
        DIE(path);
    return fd;
}

static const char *thread_dir;

static void *worker(void *arg)
{
    long id = (long) arg;
    char name[32], want[64], got[64];
    snprintf(name, sizeof name, "t%ld", id);
    for (int round = 0; round < 50; round++) {
        int fd = open_in(thread_dir, name, O_RDWR | O_CREAT | O_TRUNC);
        int len = snprintf(want, sizeof want, "thread %ld round %d", id, round);
        struct TxInfo info = {1, &fd};
        unsigned long tx = tx_begin(&info);
        if (!tx || write(fd, want, (size_t) len) != len || tx_commit(tx) != 0 || fsync(fd) != 0)
            return (void *) 1;
        int copy = dup(fd);
        if (copy < 0 || pread(copy, got, sizeof got, 0) != len || memcmp(got, want, (size_t) len) != 0)
            return (void *) 2;
        if (close(copy) != 0 || close(fd) != 0)
            return (void *) 3;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    load();
    const char *dir = argv[1], *mode = argv[2];
    if (strcmp(mode, "crash-tx") == 0 || strcmp(mode, "commit-tx") == 0) {
        int fds[2] = {open_in(dir, "a", O_RDWR | O_CREAT), open_in(dir, "b", O_RDWR | O_CREAT)};
        struct TxInfo info = {2, fds};
        unsigned long tx = tx_begin(&info);
        if (!tx)
            DIE("tx_begin");
        if (pwrite(fds[0], "new-a", 5, 0) != 5 || pwrite(fds[1], "new-b", 5, 0) != 5)
            DIE("pwrite");
        if (mode[0] == 'c' && mode[1] == 'r')
            raise(SIGKILL);
        if (tx_commit(tx) != 0)
            DIE("tx_commit");
        puts("committed");
        return 0;
    }
    if (strcmp(mode, "crash-atomic") == 0 || strcmp(mode, "atomic") == 0) {
        int fd = open_in(dir, "a", O_RDWR | ATOMFS_O_ATOMIC);
        if (write(fd, "ATOMIC", 6) != 6)
            DIE("write");
        if (mode[0] == 'c')
            raise(SIGKILL);
        if (fsync(fd) != 0)
            DIE("fsync");
        puts("synced");
        return 0;
    }
    if (strcmp(mode, "errors") == 0) {
        int fd = open_in(dir, "a", O_RDWR);
        int other = open("/dev/null", O_RDWR); /* a kernel file: not the pool's */
        struct TxInfo bad = {1, NULL};
        errno = 0;
        if (tx_begin(NULL) != 0 || errno != EFAULT) DIE("tx_begin(NULL)");
        errno = 0;
        if (tx_begin(&bad) != 0 || errno != EFAULT) DIE("tx_begin(fdSet NULL)");
        int set[] = {fd, other};
        struct TxInfo mixed = {2, set};
        errno = 0;
        if (tx_begin(&mixed) != 0 || errno != EBADF) DIE("tx_begin(kernel fd)");
        struct TxInfo one = {1, set};
        unsigned long tx = tx_begin(&one);
        if (!tx) DIE("tx_begin");
        errno = 0;
        if (tx_begin(&one) != 0 || errno != EBUSY) DIE("fd in two transactions");
        EXPECT(tx_add(tx + 1000, fd), EINVAL);
        EXPECT(tx_add(tx, 9999), EBADF);
        if (tx_commit(tx) != 0) DIE("tx_commit");
        EXPECT(tx_commit(tx), EINVAL);
        EXPECT(tx_abort(tx), EINVAL);
        EXPECT(syncv(NULL, 1), EFAULT);
        EXPECT(abortv(set, -1), EINVAL);
        EXPECT(syncv(set, 2), EBADF);
        void *volatile nothing = NULL;
        EXPECT(read(fd, nothing, 1), EFAULT);
        EXPECT(lseek(fd, 0, 99), EINVAL);
        EXPECT(open("/atomfs-not-a-dir-of-ours/../atomfs/missing/x", O_RDONLY), ENOENT);
        EXPECT(mkdir(dir, 0755), EEXIST);
        if (close(fd) != 0) DIE("close");
        EXPECT(read(fd, set, 1), EBADF);
        puts("errors ok");
        return 0;
    }
    if (strcmp(mode, "stdio") == 0) {
        char path[4096], line[64];
        snprintf(path, sizeof path, "%s/stdio.txt", dir);
        FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "line one\nline %d\n", 2) < 0 || fclose(f) != 0)
            DIE("fopen w");
        f = fopen(path, "a+");
        if (!f || fputs("line three\n", f) < 0 || fseek(f, 0, SEEK_SET) != 0)
            DIE("fopen a+");
        if (!fgets(line, sizeof line, f) || strcmp(line, "line one\n") != 0)
            DIE("fgets");
        if (fclose(f) != 0)
            DIE("fclose");
        int fd = open(path, O_RDONLY);
        f = fd < 0 ? NULL : fdopen(fd, "r");
        int lines = 0;
        while (f && fgets(line, sizeof line, f))
            lines++;
        if (!f || lines != 3 || fclose(f) != 0)
            DIE("fdopen");
        puts("stdio ok");
        return 0;
    }
    if (strcmp(mode, "threads") == 0) {
        pthread_t threads[8];
        thread_dir = dir;
        for (long i = 0; i < 8; i++)
            if (pthread_create(&threads[i], NULL, worker, (void *) i) != 0)
                DIE("pthread_create");
        for (int i = 0; i < 8; i++) {
            void *result;
            if (pthread_join(threads[i], &result) != 0 || result != NULL) {
                fprintf(stderr, "shim_tx: thread %d failed (%ld)\n", i, (long) result);
                return 1;
            }
        }
        puts("threads ok");
        return 0;
    }
    if (strcmp(mode, "fork") == 0 || strcmp(mode, "fork-noserve") == 0) {
        int serving = strcmp(mode, "fork") == 0;
        int fd = open_in(dir, "inherited", O_RDWR | O_CREAT | O_TRUNC);
        if (write(fd, "0123456789", 10) != 10 || lseek(fd, 0, SEEK_SET) != 0)
            DIE("write inherited");
        pid_t pid = fork();
        if (pid < 0)
            DIE("fork");
        if (pid == 0) {
            char two[2];
            errno = 0;
            int ok = serving
                ? read(fd, two, 2) == 2 && memcmp(two, "01", 2) == 0 && write(fd, "ab", 2) == 2
                : read(fd, two, 1) == -1 && errno == EIO;
            ok = ok && close(fd) == 0;
            if (!serving) {
                ok = ok && open("/atomfs/a", O_RDONLY) == -1 && errno == EIO;
                _exit(ok ? 0 : 1);
            }
            /* Its own descriptors work: through the parent's server. */
            int own = open("/atomfs/a", O_RDONLY);
            ok = ok && own >= 0 && read(own, two, 1) == 1 && close(own) == 0;
            int w = open("/atomfs/from-child", O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ok = ok && w >= 0;
            unsigned long (*begin)(struct TxInfo *) = (unsigned long (*)(struct TxInfo *)) dlsym(RTLD_DEFAULT, "tx_begin");
            int (*commit)(unsigned long) = (int (*)(unsigned long)) dlsym(RTLD_DEFAULT, "tx_commit");
            struct TxInfo info = { 1, &w };
            unsigned long tx = ok && begin ? begin(&info) : 0;
            ok = ok && tx != 0 && write(w, "child", 5) == 5 && commit && commit(tx) == 0;
            ok = ok && close(w) == 0;
            /* A grandchild too. */
            pid_t g = fork();
            if (g == 0) {
                int gw = open("/atomfs/from-grandchild", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                int gok = gw >= 0 && write(gw, "grandchild", 10) == 10 && fsync(gw) == 0 && close(gw) == 0;
                _exit(gok ? 0 : 1);
            }
            int gs;
            ok = ok && g > 0 && waitpid(g, &gs, 0) == g && WIFEXITED(gs) && WEXITSTATUS(gs) == 0;
            _exit(ok ? 0 : 1);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            DIE(serving ? "the forked child could not work through the server" : "child under the prefix did not get EIO");
        char buf[16];
        if (pread(fd, buf, sizeof buf, 0) < 0)
            DIE("parent pread after fork");
        if (serving) {
            /* One offset for parent and child, as for any descriptor shared across fork. */
            char two[2];
            if (read(fd, two, 2) != 2 || memcmp(two, "45", 2) != 0)
                DIE("the parent's offset did not move with the child's reads and writes");
            if (pread(fd, buf, 10, 0) != 10 || memcmp(buf, "01ab456789", 10) != 0)
                DIE("the child's write through the inherited descriptor is missing");
            int r = open("/atomfs/from-child", O_RDONLY);
            ssize_t n = r >= 0 ? read(r, buf, sizeof buf) : -1;
            if (n != 5 || memcmp(buf, "child", 5) != 0)
                DIE("the parent does not see the child's committed file");
            close(r);
            r = open("/atomfs/from-grandchild", O_RDONLY);
            n = r >= 0 ? read(r, buf, sizeof buf) : -1;
            if (n != 10 || memcmp(buf, "grandchild", 10) != 0)
                DIE("the parent does not see the grandchild's file");
            close(r);
        }
        puts("fork ok");
        return 0;
    }
    return 2;
}
