/* The SQLite VFS's database-name rule (crates/frontends/sqlite/atomfs_sqlite_names.h), exported
 * for the fuzz target `sqlite_uri`. */
#include "../../crates/frontends/sqlite/atomfs_sqlite_names.h"

int fuzz_sqlite_full_name(const char *name, int n_out, char *out)
{
    return atomfs_sqlite_full_name(name, n_out, out);
}
