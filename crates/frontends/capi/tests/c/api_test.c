/*
 * Exercises every call of atomfs.h, with its error paths: NULL pointers, bad descriptors,
 * descriptors of another pool, unknown and finished transaction ids, a descriptor bound to
 * two transactions. Durability is checked from a fresh process (this program re-executed
 * as `api_test cat POOL PATH`) on a copy of the pool file taken while this process is idle:
 * a pool is open in one process at a time (a second open fails with EBUSY, also checked),
 * and a copy of the file is what a power cut at that moment would leave.
 *
 *   api_test DIR             runs every check with pools in DIR; prints "api_test: N checks ok"
 *   api_test cat POOL PATH   prints the content of PATH in POOL (used by the checks)
 *   api_test busy POOL       exits 0 when opening POOL fails with EBUSY
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "atomfs.h"

static int checks;
static const char *self;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        checks++;                                                                       \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "api_test:%d: check failed: %s (errno %d: %s)\n", __LINE__, \
                    #cond, errno, strerror(errno));                                     \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* The call fails with -1 (or the given failure value) and errno `e`. */
#define FAILS(call, failv, e)                   \
    do {                                        \
        errno = 0;                              \
        CHECK((call) == (failv) && errno == (e)); \
    } while (0)

static int cat_main(const char *pool_path, const char *path)
{
    atomfs_pool *pool = atomfs_pool_open(pool_path);
    if (!pool)
        return 3;
    int fd = atomfs_open(pool, path, O_RDONLY, 0);
    if (fd < 0)
        return errno == ENOENT ? 4 : 3;
    char buf[4096];
    ssize_t n;
    while ((n = atomfs_read(fd, buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t) n, stdout);
    return n < 0 ? 3 : 0;
}

/* Copy the pool file to `to` (byte for byte, while this process is idle). */
static void snapshot(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK(in && out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        CHECK(fwrite(buf, 1, n, out) == n);
    CHECK(!ferror(in) && fclose(in) == 0 && fclose(out) == 0);
}

/* Run this program again with `mode` and `arg`s; its exit status. */
static int rerun(const char *mode, const char *a, const char *b, int out_fd)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (out_fd >= 0)
            dup2(out_fd, 1);
        execl(self, self, mode, a, b, (char *) NULL);
        _exit(5);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The durable content of `path` as a fresh process sees it; "<missing>" if absent. */
static const char *durable(const char *pool_path, const char *path)
{
    static char out[8192];
    char snap[4200];
    snprintf(snap, sizeof snap, "%s.snap", pool_path);
    snapshot(pool_path, snap);
    pool_path = snap;
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        execl(self, self, "cat", pool_path, path, (char *) NULL);
        _exit(5);
    }
    close(pipefd[1]);
    size_t len = 0;
    ssize_t n;
    while ((n = read(pipefd[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t) n;
    close(pipefd[0]);
    out[len] = 0;
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    if (WEXITSTATUS(status) == 4)
        return "<missing>";
    CHECK(WEXITSTATUS(status) == 0);
    return out;
}

static void put(atomfs_pool *pool, const char *path, const char *text)
{
    int fd = atomfs_open(pool, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= ATOMFS_FD_BASE);
    CHECK(atomfs_write(fd, text, strlen(text)) == (ssize_t) strlen(text));
    CHECK(atomfs_close(fd) == 0);
}

static const char *get(int fd)
{
    static char buf[4096];
    ssize_t n = atomfs_pread(fd, buf, sizeof buf - 1, 0);
    CHECK(n >= 0);
    buf[n] = 0;
    return buf;
}

static void test_pools(const char *dir, char *p1, char *p2, atomfs_pool **a, atomfs_pool **b)
{
    char other[4096];
    snprintf(p1, 4096, "%s/one.pool", dir);
    snprintf(p2, 4096, "%s/two.pool", dir);
    snprintf(other, sizeof other, "%s/not-a-pool", dir);
    FAILS(atomfs_pool_open(NULL), NULL, EFAULT);
    FAILS(atomfs_pool_create(NULL, 1 << 20), NULL, EFAULT);
    FAILS(atomfs_pool_open(p1), NULL, ENOENT);
    FAILS(atomfs_pool_create(p1, 0), NULL, EINVAL);
    *a = atomfs_pool_create(p1, 16u << 20);
    CHECK(*a != NULL);
    FAILS(atomfs_pool_create(p1, 16u << 20), NULL, EEXIST);
    *b = atomfs_pool_create(p2, 16u << 20);
    CHECK(*b != NULL);
    FILE *f = fopen(other, "w");
    CHECK(f && fputs("hello, not a pool, sixteen bytes and more\n", f) >= 0 && fclose(f) == 0);
    FAILS(atomfs_pool_open(other), NULL, EUCLEAN);
    atomfs_pool *again = atomfs_pool_open(p1);
    CHECK(again != NULL && again != *a);
    CHECK(atomfs_pool_close(again) == 0);
    FAILS(atomfs_pool_close(again), -1, EBADF);
    FAILS(atomfs_pool_close(NULL), -1, EFAULT);
}

static void test_files(atomfs_pool *pool, const char *pool_path)
{
    int dummy = 0;
    FAILS(atomfs_open(NULL, "/x", O_RDONLY, 0), -1, EFAULT);
    FAILS(atomfs_open((atomfs_pool *) &dummy, "/x", O_RDONLY, 0), -1, EBADF);
    FAILS(atomfs_open(pool, NULL, O_RDONLY, 0), -1, EFAULT);
    FAILS(atomfs_open(pool, "/missing", O_RDONLY, 0), -1, ENOENT);
    FAILS(atomfs_open(pool, "/x", O_ACCMODE, 0), -1, EINVAL);

    int fd = atomfs_open(pool, "/f", O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= ATOMFS_FD_BASE);
    FAILS(atomfs_open(pool, "/f", O_RDWR | O_CREAT | O_EXCL, 0600), -1, EEXIST);
    FAILS(atomfs_open(pool, "/f", O_RDONLY | O_DIRECTORY, 0), -1, ENOTDIR);
    FAILS(atomfs_open(pool, "/f/g", O_RDONLY, 0), -1, ENOTDIR);
    CHECK(atomfs_write(fd, "hello world", 11) == 11);
    CHECK(strcmp(durable(pool_path, "/f"), "hello world") == 0);
    CHECK(atomfs_lseek(fd, 0, SEEK_CUR) == 11);
    CHECK(atomfs_lseek(fd, 6, SEEK_SET) == 6);
    char buf[64];
    CHECK(atomfs_read(fd, buf, 5) == 5 && memcmp(buf, "world", 5) == 0);
    CHECK(atomfs_read(fd, buf, 5) == 0);
    CHECK(atomfs_pwrite(fd, "W", 1, 6) == 1);
    CHECK(atomfs_pread(fd, buf, 64, 0) == 11 && memcmp(buf, "hello World", 11) == 0);
    CHECK(atomfs_lseek(fd, -1, SEEK_END) == 10);
    CHECK(atomfs_pwrite(fd, "!", 1, 20) == 1); /* a hole from 11 to 20 */
    CHECK(atomfs_pread(fd, buf, 64, 0) == 21 && buf[15] == 0 && buf[20] == '!');
    CHECK(atomfs_ftruncate(fd, 5) == 0);
    struct stat st;
    CHECK(atomfs_fstat(fd, &st) == 0 && st.st_size == 5 && S_ISREG(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(atomfs_stat(pool, "/f", &st) == 0 && st.st_size == 5);
    CHECK(atomfs_stat(pool, "/", &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(atomfs_fsync(fd) == 0);
    CHECK(strcmp(durable(pool_path, "/f"), "hello") == 0);

    /* error paths of every descriptor call */
    FAILS(atomfs_read(fd, NULL, 4), -1, EFAULT);
    FAILS(atomfs_write(fd, NULL, 4), -1, EFAULT);
    CHECK(atomfs_write(fd, NULL, 0) == 0);
    FAILS(atomfs_pread(fd, buf, 4, -1), -1, EINVAL);
    FAILS(atomfs_pwrite(fd, buf, 4, -1), -1, EINVAL);
    FAILS(atomfs_lseek(fd, 0, 42), -1, EINVAL);
    FAILS(atomfs_lseek(fd, -100, SEEK_SET), -1, EINVAL);
    FAILS(atomfs_ftruncate(fd, -1), -1, EINVAL);
    FAILS(atomfs_fstat(fd, NULL), -1, EFAULT);
    FAILS(atomfs_stat(pool, "/f", NULL), -1, EFAULT);
    FAILS(atomfs_stat(pool, NULL, &st), -1, EFAULT);
    FAILS(atomfs_stat(pool, "/nope", &st), -1, ENOENT);
    int bad[] = {-1, 0, 1, 2, ATOMFS_FD_BASE - 1, 0x7fffffff};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FAILS(atomfs_read(bad[i], buf, 1), -1, EBADF);
        FAILS(atomfs_write(bad[i], buf, 1), -1, EBADF);
        FAILS(atomfs_pread(bad[i], buf, 1, 0), -1, EBADF);
        FAILS(atomfs_pwrite(bad[i], buf, 1, 0), -1, EBADF);
        FAILS(atomfs_lseek(bad[i], 0, SEEK_SET), -1, EBADF);
        FAILS(atomfs_ftruncate(bad[i], 0), -1, EBADF);
        FAILS(atomfs_fsync(bad[i]), -1, EBADF);
        FAILS(atomfs_fstat(bad[i], &st), -1, EBADF);
        FAILS(atomfs_set_atomic(bad[i], 1), -1, EBADF);
        FAILS(atomfs_close(bad[i]), -1, EBADF);
    }
    CHECK(atomfs_close(fd) == 0);
    FAILS(atomfs_close(fd), -1, EBADF);
    FAILS(atomfs_read(fd, buf, 1), -1, EBADF);

    int ro = atomfs_open(pool, "/f", O_RDONLY, 0);
    CHECK(ro >= 0);
    FAILS(atomfs_write(ro, "x", 1), -1, EBADF);
    FAILS(atomfs_ftruncate(ro, 0), -1, EINVAL);
    int wo = atomfs_open(pool, "/f", O_WRONLY | O_APPEND, 0);
    CHECK(wo >= 0);
    FAILS(atomfs_read(wo, buf, 1), -1, EBADF);
    CHECK(atomfs_write(wo, "++", 2) == 2);
    CHECK(strcmp(get(ro), "hello++") == 0);
    CHECK(atomfs_close(ro) == 0 && atomfs_close(wo) == 0);
}

static void test_namespace(atomfs_pool *pool)
{
    struct stat st;
    FAILS(atomfs_mkdir(NULL, "/d", 0755), -1, EFAULT);
    FAILS(atomfs_mkdir(pool, NULL, 0755), -1, EFAULT);
    CHECK(atomfs_mkdir(pool, "/d", 0755) == 0);
    FAILS(atomfs_mkdir(pool, "/d", 0755), -1, EEXIST);
    FAILS(atomfs_mkdir(pool, "/no/such", 0755), -1, ENOENT);
    CHECK(atomfs_mkdir(pool, "/d/sub", 0700) == 0);
    put(pool, "/d/a", "A");
    put(pool, "/d/b", "B");
    FAILS(atomfs_open(pool, "/d", O_RDWR, 0), -1, EISDIR);
    int dfd = atomfs_open(pool, "/d", O_RDONLY, 0);
    CHECK(dfd >= 0 && atomfs_fsync(dfd) == 0);
    FAILS(atomfs_read(dfd, &st, 1), -1, EISDIR);
    CHECK(atomfs_fstat(dfd, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(atomfs_close(dfd) == 0);

    atomfs_dir *dir = atomfs_opendir(pool, "/d");
    CHECK(dir != NULL);
    int seen = 0;
    struct atomfs_dirent *e;
    errno = 0;
    while ((e = atomfs_readdir(dir)) != NULL) {
        if (strcmp(e->d_name, "a") == 0 && e->d_type == ATOMFS_DT_REG)
            seen |= 1;
        else if (strcmp(e->d_name, "b") == 0 && e->d_type == ATOMFS_DT_REG)
            seen |= 2;
        else if (strcmp(e->d_name, "sub") == 0 && e->d_type == ATOMFS_DT_DIR)
            seen |= 4;
        else
            seen |= 8;
        CHECK(e->d_ino != 0);
    }
    CHECK(errno == 0 && seen == 7);
    CHECK(atomfs_closedir(dir) == 0);
    FAILS(atomfs_closedir(dir), -1, EBADF);
    FAILS(atomfs_readdir(dir), NULL, EBADF);
    FAILS(atomfs_readdir(NULL), NULL, EFAULT);
    FAILS(atomfs_closedir(NULL), -1, EFAULT);
    FAILS(atomfs_opendir(pool, "/d/a"), NULL, ENOTDIR);
    FAILS(atomfs_opendir(pool, "/nope"), NULL, ENOENT);
    FAILS(atomfs_opendir(NULL, "/d"), NULL, EFAULT);

    FAILS(atomfs_rmdir(pool, "/d"), -1, ENOTEMPTY);
    FAILS(atomfs_rmdir(pool, "/d/a"), -1, ENOTDIR);
    FAILS(atomfs_unlink(pool, "/d/sub"), -1, EISDIR);
    FAILS(atomfs_unlink(pool, "/d/zz"), -1, ENOENT);
    FAILS(atomfs_unlink(pool, NULL), -1, EFAULT);
    CHECK(atomfs_rename(pool, "/d/a", "/d/b") == 0); /* replaces b */
    CHECK(atomfs_stat(pool, "/d/a", &st) < 0 && errno == ENOENT);
    int fd = atomfs_open(pool, "/d/b", O_RDONLY, 0);
    CHECK(fd >= 0 && strcmp(get(fd), "A") == 0 && atomfs_close(fd) == 0);
    FAILS(atomfs_rename(pool, "/d/b", "/d/sub"), -1, EISDIR);
    FAILS(atomfs_rename(pool, "/d/nope", "/d/x"), -1, ENOENT);
    FAILS(atomfs_rename(pool, "/d/b", NULL), -1, EFAULT);
    FAILS(atomfs_rename(pool, NULL, "/d/x"), -1, EFAULT);
    CHECK(atomfs_unlink(pool, "/d/b") == 0);
    CHECK(atomfs_rmdir(pool, "/d/sub") == 0);
    CHECK(atomfs_rmdir(pool, "/d") == 0);
    FAILS(atomfs_stat(pool, "/d", &st), -1, ENOENT);
}

static void test_transactions(atomfs_pool *pool, atomfs_pool *other, const char *pool_path)
{
    put(pool, "/t1", "old1");
    put(pool, "/t2", "old2");
    put(other, "/o", "other");
    int fd1 = atomfs_open(pool, "/t1", O_RDWR, 0);
    int fd2 = atomfs_open(pool, "/t2", O_RDWR, 0);
    int fo = atomfs_open(other, "/o", O_RDWR, 0);
    CHECK(fd1 >= 0 && fd2 >= 0 && fo >= 0);

    /* bad input */
    FAILS(tx_begin(NULL), 0UL, EFAULT);
    struct TxInfo info = {1, NULL};
    FAILS(tx_begin(&info), 0UL, EFAULT);
    info.num = -1;
    FAILS(tx_begin(&info), 0UL, EINVAL);
    int bad_set[] = {fd1, 12345};
    info.num = 2, info.fdSet = bad_set;
    FAILS(tx_begin(&info), 0UL, EBADF);
    int mixed[] = {fd1, fo};
    info.fdSet = mixed;
    FAILS(tx_begin(&info), 0UL, EXDEV);
    FAILS(tx_commit(0), -1, EINVAL);
    FAILS(tx_commit(987654321UL), -1, EINVAL);
    FAILS(tx_abort(987654321UL), -1, EINVAL);
    FAILS(tx_add(987654321UL, fd1), -1, EINVAL);

    /* commit: both or nothing, durable at commit */
    int set[] = {fd1, fd2};
    info.num = 2, info.fdSet = set;
    unsigned long tx = tx_begin(&info);
    CHECK(tx != 0);
    int only1[] = {fd1};
    struct TxInfo info1 = {1, only1};
    FAILS(tx_begin(&info1), 0UL, EBUSY); /* fd1 is bound already */
    unsigned long tx_other = tx_begin(&(struct TxInfo){0, NULL});
    CHECK(tx_other != 0 && tx_other != tx);
    FAILS(tx_add(tx_other, fd2), -1, EBUSY);
    FAILS(tx_add(tx, fo), -1, EXDEV);
    FAILS(tx_add(tx, 777), -1, EBADF);
    CHECK(tx_abort(tx_other) == 0);
    FAILS(tx_abort(tx_other), -1, EINVAL);
    CHECK(atomfs_write(fd1, "new1", 4) == 4);
    CHECK(atomfs_write(fd2, "new2", 4) == 4);
    CHECK(strcmp(durable(pool_path, "/t1"), "old1") == 0);
    CHECK(strcmp(durable(pool_path, "/t2"), "old2") == 0);
    CHECK(tx_commit(tx) == 0);
    CHECK(strcmp(durable(pool_path, "/t1"), "new1") == 0);
    CHECK(strcmp(durable(pool_path, "/t2"), "new2") == 0);
    FAILS(tx_commit(tx), -1, EINVAL);
    FAILS(tx_abort(tx), -1, EINVAL);
    FAILS(tx_add(tx, fd1), -1, EINVAL);

    /* abort: nothing remains; tx_add binds lazily */
    info.num = 0, info.fdSet = NULL;
    tx = tx_begin(&info);
    CHECK(tx != 0);
    CHECK(tx_add(tx, fd1) == 0);
    FAILS(tx_add(tx, fo), -1, EXDEV);
    CHECK(tx_add(tx, fd2) == 0);
    CHECK(atomfs_pwrite(fd1, "XXXX", 4, 0) == 4 && atomfs_ftruncate(fd2, 1) == 0);
    CHECK(strcmp(get(fd1), "XXXX") == 0 && strcmp(get(fd2), "n") == 0);
    CHECK(tx_abort(tx) == 0);
    CHECK(strcmp(get(fd1), "new1") == 0 && strcmp(get(fd2), "new2") == 0);
    CHECK(strcmp(durable(pool_path, "/t1"), "new1") == 0);

    /* a descriptor closed inside a transaction: the transaction still commits */
    tx = tx_begin(&info);
    CHECK(tx != 0 && tx_add(tx, fd2) == 0);
    CHECK(atomfs_pwrite(fd2, "late", 4, 0) == 4);
    CHECK(tx_commit(tx) == 0);
    CHECK(strcmp(durable(pool_path, "/t2"), "late") == 0);
    CHECK(atomfs_close(fd1) == 0 && atomfs_close(fd2) == 0 && atomfs_close(fo) == 0);
}

static void test_atomic(atomfs_pool *pool, atomfs_pool *other, const char *pool_path)
{
    put(pool, "/a1", "aaaa");
    put(pool, "/a2", "bbbb");
    put(other, "/o2", "oooo");
    int fd1 = atomfs_open(pool, "/a1", O_RDWR | ATOMFS_O_ATOMIC, 0);
    int fd2 = atomfs_open(pool, "/a2", O_RDWR, 0);
    int fo = atomfs_open(other, "/o2", O_RDWR | ATOMFS_O_ATOMIC, 0);
    CHECK(fd1 >= 0 && fd2 >= 0 && fo >= 0);
    CHECK(atomfs_set_atomic(fd2, 1) == 0);

    /* fsync commits one file's writes */
    CHECK(atomfs_pwrite(fd1, "AA", 2, 0) == 2 && atomfs_pwrite(fd1, "AA", 2, 2) == 2);
    CHECK(strcmp(get(fd1), "AAAA") == 0);
    CHECK(strcmp(durable(pool_path, "/a1"), "aaaa") == 0);
    CHECK(atomfs_fsync(fd1) == 0);
    CHECK(strcmp(durable(pool_path, "/a1"), "AAAA") == 0);

    /* syncv commits several together */
    CHECK(atomfs_pwrite(fd1, "1", 1, 0) == 1 && atomfs_pwrite(fd2, "2", 1, 0) == 1);
    CHECK(strcmp(durable(pool_path, "/a2"), "bbbb") == 0);
    int both[] = {fd1, fd2};
    CHECK(syncv(both, 2) == 0);
    CHECK(strcmp(durable(pool_path, "/a1"), "1AAA") == 0);
    CHECK(strcmp(durable(pool_path, "/a2"), "2bbb") == 0);

    /* abortv drops pending writes */
    CHECK(atomfs_pwrite(fd1, "zzzz", 4, 0) == 4 && atomfs_ftruncate(fd2, 0) == 0);
    CHECK(abortv(both, 2) == 0);
    CHECK(strcmp(get(fd1), "1AAA") == 0 && strcmp(get(fd2), "2bbb") == 0);

    /* bad input */
    FAILS(syncv(NULL, 1), -1, EFAULT);
    FAILS(abortv(NULL, 1), -1, EFAULT);
    FAILS(syncv(both, -1), -1, EINVAL);
    FAILS(abortv(both, -1), -1, EINVAL);
    CHECK(syncv(NULL, 0) == 0 && abortv(NULL, 0) == 0);
    int mixed[] = {fd1, fo};
    FAILS(syncv(mixed, 2), -1, EXDEV);
    FAILS(abortv(mixed, 2), -1, EXDEV);
    int badfds[] = {fd1, 4242};
    FAILS(syncv(badfds, 2), -1, EBADF);
    FAILS(abortv(badfds, 2), -1, EBADF);

    /* switching out of atomic mode commits; closing without fsync drops */
    CHECK(atomfs_pwrite(fd2, "S", 1, 0) == 1 && atomfs_set_atomic(fd2, 0) == 0);
    CHECK(strcmp(durable(pool_path, "/a2"), "Sbbb") == 0);
    CHECK(atomfs_pwrite(fd1, "dropped", 7, 0) == 7);
    CHECK(atomfs_close(fd1) == 0);
    CHECK(strcmp(durable(pool_path, "/a1"), "1AAA") == 0);
    CHECK(atomfs_close(fd2) == 0 && atomfs_close(fo) == 0);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 4 && strcmp(argv[1], "cat") == 0)
        return cat_main(argv[2], argv[3]);
    if (argc >= 3 && strcmp(argv[1], "busy") == 0)
        return atomfs_pool_open(argv[2]) == NULL && errno == EBUSY ? 0 : 1;
    if (argc != 2) {
        fprintf(stderr, "usage: api_test DIR | api_test cat POOL PATH\n");
        return 2;
    }
    char p1[4096], p2[4096];
    atomfs_pool *a, *b;
    test_pools(argv[1], p1, p2, &a, &b);
    /* another process cannot open a pool this one has open */
    CHECK(rerun("busy", p1, "", -1) == 0);
    test_files(a, p1);
    test_namespace(a);
    test_transactions(a, b, p1);
    test_atomic(a, b, p1);

    /* a closed pool handle is refused; descriptors opened on it stay usable */
    int fd = atomfs_open(a, "/t1", O_RDONLY, 0);
    CHECK(fd >= 0);
    CHECK(atomfs_pool_close(a) == 0);
    FAILS(atomfs_open(a, "/t1", O_RDONLY, 0), -1, EBADF);
    FAILS(atomfs_mkdir(a, "/x", 0755), -1, EBADF);
    CHECK(strcmp(get(fd), "new1") == 0);
    CHECK(atomfs_close(fd) == 0);
    CHECK(atomfs_pool_close(b) == 0);
    printf("api_test: %d checks ok\n", checks);
    return 0;
}
