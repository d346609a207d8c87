/*
 * SQLite driver for atomfs-bench's `sqlite` suite, linked against the system libsqlite3
 * (pkg-config sqlite3), the library every configuration of the suite uses, so that the atomfs
 * VFS and SQLite's own journals are measured with the same SQLite.
 *
 * One handle = one connection to one database with two prepared statements (insert, update
 * of a BLOB by integer key). Each bench_sqlite_put outside BEGIN/COMMIT is one autocommit
 * transaction, as in the seed's mobibench update test. The atomfs VFS is registered by
 * loading libatomfs_sqlite.so (bench_sqlite_load_extension) exactly as the sqlite3 shell or
 * Python would.
 *
 * Errors: functions return a SQLite result code (0 = SQLITE_OK) or NULL; the message is
 * copied into the caller's buffer.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_sqlite {
    sqlite3 *db;
    sqlite3_stmt *insert;
    sqlite3_stmt *update;
    sqlite3_stmt *length;
};

static void set_err(char *err, size_t len, const char *what, const char *msg)
{
    if (err && len)
        snprintf(err, len, "%s: %s", what, msg ? msg : "(no message)");
}

const char *bench_sqlite_libversion(void) { return sqlite3_libversion(); }

/* Loads the extension at `path` into a scratch in-memory connection (extension loading is
 * enabled for the C API only). An extension that returns SQLITE_OK_LOAD_PERMANENTLY, as
 * libatomfs_sqlite.so does, stays registered after the connection closes. */
int bench_sqlite_load_extension(const char *path, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    char *msg = NULL;
    int rc = sqlite3_open(":memory:", &db);
    if (rc != SQLITE_OK) {
        set_err(err, errlen, "open :memory:", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return rc;
    }
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *) NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_load_extension(db, path, NULL, &msg);
    if (rc != SQLITE_OK)
        set_err(err, errlen, "load extension", msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc;
}

/* Opens `filename` (a URI when `uri` is non-zero), read-write, creating it. */
struct bench_sqlite *bench_sqlite_open(const char *filename, int uri, char *err, size_t errlen)
{
    struct bench_sqlite *h = calloc(1, sizeof *h);
    if (!h) {
        set_err(err, errlen, "open", "out of memory");
        return NULL;
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | (uri ? SQLITE_OPEN_URI : 0);
    int rc = sqlite3_open_v2(filename, &h->db, flags, NULL);
    if (rc != SQLITE_OK) {
        set_err(err, errlen, filename, h->db ? sqlite3_errmsg(h->db) : sqlite3_errstr(rc));
        sqlite3_close(h->db);
        free(h);
        return NULL;
    }
    return h;
}

/* Runs `sql` (one statement) to completion; copies the first column of its first row, if
 * any, into `out` (empty string when there is none). */
int bench_sqlite_query(struct bench_sqlite *h, const char *sql, char *out, size_t outlen,
                       char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(h->db, sql, -1, &st, NULL);
    if (out && outlen)
        out[0] = 0;
    if (rc != SQLITE_OK) {
        set_err(err, errlen, sql, sqlite3_errmsg(h->db));
        return rc;
    }
    int first = 1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *text = sqlite3_column_text(st, 0);
        if (first && out && outlen && text)
            snprintf(out, outlen, "%s", (const char *) text);
        first = 0;
    }
    if (rc != SQLITE_DONE) {
        set_err(err, errlen, sql, sqlite3_errmsg(h->db));
        sqlite3_finalize(st);
        return rc;
    }
    return sqlite3_finalize(st);
}

/* Prepares the statements on table kv(id INTEGER PRIMARY KEY, v BLOB), which must exist. */
int bench_sqlite_prepare(struct bench_sqlite *h, char *err, size_t errlen)
{
    static const char *const sql[3] = {
        "INSERT INTO kv(id, v) VALUES (?1, ?2)",
        "UPDATE kv SET v = ?2 WHERE id = ?1",
        "SELECT length(v) FROM kv WHERE id = ?1",
    };
    sqlite3_stmt **slot[3] = {&h->insert, &h->update, &h->length};
    for (int i = 0; i < 3; i++) {
        int rc = sqlite3_prepare_v3(h->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, slot[i], NULL);
        if (rc != SQLITE_OK) {
            set_err(err, errlen, sql[i], sqlite3_errmsg(h->db));
            return rc;
        }
    }
    return SQLITE_OK;
}

/* Inserts (insert != 0) or updates row `id` with `len` bytes at `data`. Outside BEGIN/COMMIT
 * this is one transaction: when it returns SQLITE_OK, SQLite has committed it. */
int bench_sqlite_put(struct bench_sqlite *h, int insert, sqlite3_int64 id, const void *data,
                     int len, char *err, size_t errlen)
{
    sqlite3_stmt *st = insert ? h->insert : h->update;
    if (!st) {
        set_err(err, errlen, "put", "statements not prepared");
        return SQLITE_MISUSE;
    }
    int rc = sqlite3_bind_int64(st, 1, id);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(st, 2, data ? data : "", len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int changes = sqlite3_changes(h->db);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        set_err(err, errlen, insert ? "insert" : "update", sqlite3_errmsg(h->db));
        return rc == SQLITE_OK ? SQLITE_ERROR : rc;
    }
    if (changes != 1) {
        set_err(err, errlen, insert ? "insert" : "update", "no row changed");
        return SQLITE_NOTFOUND;
    }
    return SQLITE_OK;
}

/* length(v) of row `id`, or -1 when there is no such row or on error. */
sqlite3_int64 bench_sqlite_value_length(struct bench_sqlite *h, sqlite3_int64 id)
{
    sqlite3_stmt *st = h->length;
    sqlite3_int64 len = -1;
    if (!st || sqlite3_bind_int64(st, 1, id) != SQLITE_OK)
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        len = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return len;
}

/* Finalizes the statements and closes the connection; frees the handle. */
int bench_sqlite_close(struct bench_sqlite *h)
{
    if (!h)
        return SQLITE_OK;
    sqlite3_finalize(h->insert);
    sqlite3_finalize(h->update);
    sqlite3_finalize(h->length);
    int rc = sqlite3_close(h->db);
    free(h);
    return rc;
}
