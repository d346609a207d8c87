/* Path probe for the shim's confinement table: runs the operations named by its arguments
 * and prints one line per operation with what the process saw, so that the same list run
 * with and without the shim can be compared line by line.
 *
 *   mkdir:PATH          mkdir(PATH, 0755)
 *   put:PATH=TEXT       create/truncate PATH and write TEXT
 *   cd:PATH             chdir(PATH)
 *   dirfd:PATH          open PATH (O_RDONLY|O_DIRECTORY) as the directory of the next *at calls
 *   realdir:PATH        the same, but the shim is told nothing (the path is outside its prefix)
 *   open:PATH           open(PATH, O_RDONLY) and print the first line of the file, or DIR
 *   at:PATH             openat(dirfd, PATH, O_RDONLY), printed as open
 *   stat:PATH           stat(PATH): "file SIZE" or "dir"
 *   statat:PATH         fstatat(dirfd, PATH, ..., 0), printed as stat
 *   create:PATH         open(PATH, O_WRONLY|O_CREAT|O_EXCL, 0644) and close
 *
 * Errors print as their errno name (ENOENT, ...); the program always exits 0 once its arguments are parsed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dir_fd = AT_FDCWD;

static const char *ename(int e) {
    switch (e) {
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EEXIST: return "EEXIST";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case ELOOP: return "ELOOP";
    case EBADF: return "EBADF";
    default: return "EOTHER";
    }
}

static void show_fd(const char *op, const char *path, int fd) {
    if (fd < 0) {
        printf("%s:%s => %s\n", op, path, ename(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        printf("%s:%s => DIR\n", op, path);
        close(fd);
        return;
    }
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) {
        printf("%s:%s => read %s\n", op, path, ename(errno));
    } else {
        buf[n] = 0;
        buf[strcspn(buf, "\n")] = 0;
        printf("%s:%s => %s\n", op, path, buf);
    }
    close(fd);
}

static void show_stat(const char *op, const char *path, int rc, const struct stat *st) {
    if (rc != 0)
        printf("%s:%s => %s\n", op, path, ename(errno));
    else if (S_ISDIR(st->st_mode))
        printf("%s:%s => dir\n", op, path);
    else
        printf("%s:%s => file %lld\n", op, path, (long long)st->st_size);
}

static void put(const char *arg) {
    char path[8192];
    const char *eq = strchr(arg, '=');
    if (!eq || (size_t)(eq - arg) >= sizeof path) {
        printf("put:%s => bad argument\n", arg);
        return;
    }
    memcpy(path, arg, (size_t)(eq - arg));
    path[eq - arg] = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        printf("put:%s => %s\n", path, ename(errno));
        return;
    }
    size_t len = strlen(eq + 1);
    if (write(fd, eq + 1, len) != (ssize_t)len)
        printf("put:%s => short write\n", path);
    close(fd);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        char *colon = strchr(arg, ':');
        if (!colon) {
            fprintf(stderr, "bad operation %s\n", arg);
            return 2;
        }
        *colon = 0;
        const char *op = arg, *path = colon + 1;
        struct stat st;
        if (!strcmp(op, "mkdir")) {
            if (mkdir(path, 0755) != 0)
                printf("mkdir:%s => %s\n", path, ename(errno));
        } else if (!strcmp(op, "put")) {
            put(path);
        } else if (!strcmp(op, "cd")) {
            if (chdir(path) != 0)
                printf("cd:%s => %s\n", path, ename(errno));
        } else if (!strcmp(op, "dirfd") || !strcmp(op, "realdir")) {
            if (dir_fd != AT_FDCWD)
                close(dir_fd);
            dir_fd = open(path, O_RDONLY | O_DIRECTORY);
            if (dir_fd < 0) {
                printf("%s:%s => %s\n", op, path, ename(errno));
                dir_fd = AT_FDCWD;
            }
        } else if (!strcmp(op, "open")) {
            show_fd(op, path, open(path, O_RDONLY));
        } else if (!strcmp(op, "at")) {
            show_fd(op, path, openat(dir_fd, path, O_RDONLY));
        } else if (!strcmp(op, "stat")) {
            int rc = stat(path, &st);
            show_stat(op, path, rc, &st);
        } else if (!strcmp(op, "statat")) {
            int rc = fstatat(dir_fd, path, &st, 0);
            show_stat(op, path, rc, &st);
        } else if (!strcmp(op, "create")) {
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd < 0)
                printf("create:%s => %s\n", path, ename(errno));
            else {
                printf("create:%s => ok\n", path);
                close(fd);
            }
        } else {
            fprintf(stderr, "unknown operation %s\n", op);
            return 2;
        }
    }
    return 0;
}
