/*
 * The rest of the POSIX file API through ordinary libc calls under the shim (paths under
 * /atomfs): symlink, readlink, lstat, O_NOFOLLOW, mkfifo, mknod, renameat2, fallocate,
 * posix_fallocate, the xattr calls, O_TMPFILE + linkat(AT_EMPTY_PATH), link. A part the
 * pool's engine does not offer yet is named in the first argument (comma-separated, as
 * conformance::cases::awaited lists it); for it the program checks the fallback instead.
 *
 *   shim_posix AWAITED    prints "shim_posix: N checks ok"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

static int checks;
static const char *awaited_list;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "shim_posix:%d: check failed: %s (errno %d: %s)\n", __LINE__, \
                    #cond, errno, strerror(errno));                                       \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define FAILS(call, e)                        \
    do {                                      \
        errno = 0;                            \
        CHECK((call) == -1 && errno == (e));  \
    } while (0)

static int awaited(const char *part)
{
    const char *p = awaited_list;
    size_t n = strlen(part);
    while ((p = strstr(p, part)) != NULL) {
        if ((p == awaited_list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) {
            printf("shim_posix: %s awaited\n", part);
            return 1;
        }
        p += n;
    }
    return 0;
}

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t) strlen(text));
    CHECK(close(fd) == 0);
}

static const char *get(const char *path)
{
    static char buf[256];
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    CHECK(n >= 0);
    buf[n] = '\0';
    CHECK(close(fd) == 0);
    return buf;
}

static void symlinks(void)
{
    if (awaited("Symlinks")) {
        FAILS(symlink("f", "/atomfs/l"), EOPNOTSUPP);
        return;
    }
    CHECK(mkdir("/atomfs/d", 0755) == 0);
    put("/atomfs/d/f", "target");
    CHECK(symlink("f", "/atomfs/d/l") == 0);
    CHECK(symlink("d", "/atomfs/dl") == 0);
    char buf[16];
    CHECK(readlink("/atomfs/d/l", buf, sizeof buf) == 1 && buf[0] == 'f');
    FAILS(readlink("/atomfs/d/f", buf, sizeof buf), EINVAL);
    struct stat st;
    CHECK(lstat("/atomfs/d/l", &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat("/atomfs/d/l", &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 6);
    CHECK(fstatat(AT_FDCWD, "/atomfs/d/l", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode));
    CHECK(strcmp(get("/atomfs/dl/l"), "target") == 0);
    FAILS(open("/atomfs/d/l", O_RDONLY | O_NOFOLLOW), ELOOP);
    CHECK(link("/atomfs/d/f", "/atomfs/d/hard") == 0);
    CHECK(stat("/atomfs/d/f", &st) == 0 && st.st_nlink == 2);
    CHECK(unlink("/atomfs/d/l") == 0 && strcmp(get("/atomfs/d/f"), "target") == 0);
}

static void special_files(void)
{
    if (awaited("SpecialFiles")) {
        FAILS(mkfifo("/atomfs/fifo", 0600), EOPNOTSUPP);
        return;
    }
    struct stat st;
    CHECK(mkfifo("/atomfs/fifo", 0600) == 0);
    CHECK(lstat("/atomfs/fifo", &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(mknod("/atomfs/null", S_IFCHR | 0666, makedev(1, 3)) == 0);
    CHECK(stat("/atomfs/null", &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    FAILS(mkfifo("/atomfs/fifo", 0600), EEXIST);
}

static void rename_modes(void)
{
    put("/atomfs/x", "x");
    put("/atomfs/y", "y");
    if (awaited("RenameModes")) {
        FAILS(renameat2(AT_FDCWD, "/atomfs/x", AT_FDCWD, "/atomfs/z", RENAME_NOREPLACE),
              EOPNOTSUPP);
        return;
    }
    FAILS(renameat2(AT_FDCWD, "/atomfs/x", AT_FDCWD, "/atomfs/y", RENAME_NOREPLACE), EEXIST);
    CHECK(renameat2(AT_FDCWD, "/atomfs/x", AT_FDCWD, "/atomfs/y", RENAME_EXCHANGE) == 0);
    CHECK(strcmp(get("/atomfs/x"), "y") == 0 && strcmp(get("/atomfs/y"), "x") == 0);
}

static void fallocate_modes(void)
{
    int fd = open("/atomfs/fa", O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0 && write(fd, "abcdefgh", 8) == 8);
    struct stat st;
    /* Mode 0 and posix_fallocate grow the file on every engine (a hole without fallocate). */
    CHECK(fallocate(fd, 0, 0, 4096) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 4096);
    CHECK(posix_fallocate(fd, 0, 8192) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8192);
    if (awaited("Fallocate")) {
        FAILS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 2), EOPNOTSUPP);
    } else {
        char buf[8];
        CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2, 3) == 0);
        CHECK(pread(fd, buf, 8, 0) == 8 && memcmp(buf, "ab\0\0\0fgh", 8) == 0);
        CHECK(fstat(fd, &st) == 0 && st.st_size == 8192);
    }
    CHECK(close(fd) == 0);
}

static void xattrs(void)
{
    put("/atomfs/xa", "data");
    char buf[64];
    if (awaited("Xattrs")) {
        FAILS(setxattr("/atomfs/xa", "user.a", "v", 1, 0), EOPNOTSUPP);
        FAILS(getxattr("/atomfs/xa", "user.a", buf, sizeof buf), ENODATA);
        CHECK(listxattr("/atomfs/xa", buf, sizeof buf) == 0);
        return;
    }
    CHECK(setxattr("/atomfs/xa", "user.colour", "blue", 4, 0) == 0);
    CHECK(getxattr("/atomfs/xa", "user.colour", NULL, 0) == 4);
    FAILS(getxattr("/atomfs/xa", "user.colour", buf, 2), ERANGE);
    CHECK(getxattr("/atomfs/xa", "user.colour", buf, sizeof buf) == 4 && memcmp(buf, "blue", 4) == 0);
    CHECK(listxattr("/atomfs/xa", buf, sizeof buf) == (ssize_t) sizeof "user.colour");
    FAILS(setxattr("/atomfs/xa", "user.colour", "r", 1, XATTR_CREATE), EEXIST);
    int fd = open("/atomfs/xa", O_RDONLY);
    CHECK(fd >= 0);
    CHECK(fsetxattr(fd, "user.fd", "1", 1, 0) == 0);
    CHECK(fgetxattr(fd, "user.fd", buf, sizeof buf) == 1 && buf[0] == '1');
    CHECK(flistxattr(fd, NULL, 0) == (ssize_t) (sizeof "user.colour" + sizeof "user.fd"));
    CHECK(fremovexattr(fd, "user.fd") == 0);
    CHECK(close(fd) == 0);
    CHECK(removexattr("/atomfs/xa", "user.colour") == 0);
    FAILS(getxattr("/atomfs/xa", "user.colour", buf, sizeof buf), ENODATA);
}

static void unnamed_files(void)
{
    if (awaited("UnnamedFiles")) {
        FAILS(open("/atomfs", O_TMPFILE | O_RDWR, 0600), EOPNOTSUPP);
        return;
    }
    int fd = open("/atomfs", O_TMPFILE | O_RDWR, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "published", 9) == 9);
    CHECK(linkat(fd, "", AT_FDCWD, "/atomfs/pub", AT_EMPTY_PATH) == 0);
    CHECK(close(fd) == 0);
    CHECK(strcmp(get("/atomfs/pub"), "published") == 0);
}

int main(int argc, char **argv)
{
    awaited_list = argc > 1 ? argv[1] : "";
    symlinks();
    special_files();
    rename_modes();
    fallocate_modes();
    xattrs();
    unnamed_files();
    printf("shim_posix: %d checks ok\n", checks);
    return 0;
}
