#!/usr/bin/env bash
# Install atomfs's C front ends under PREFIX (default /usr/local):
#   PREFIX/include/atomfs.h
#   PREFIX/lib/libatomfs.so, libatomfs.a        (C API; link with -latomfs)
#   PREFIX/lib/libatomfs_preload.so              (LD_PRELOAD shim)
#   PREFIX/lib/libatomfs_sqlite.so               (SQLite VFS "atomfs", loadable extension)
#   PREFIX/lib/pkgconfig/atomfs.pc               (pkg-config --cflags --libs atomfs)
#
# Usage: scripts/install-c.sh [PREFIX]
# Builds the release profile first; set ATOMFS_LIB_DIR=target/debug (or any directory holding
# libatomfs.so, libatomfs.a and libatomfs_preload.so, and libatomfs_sqlite.so if built) to
# install already-built libraries. libatomfs_sqlite.so is the one cargo built (crate
# atomfs-sqlite; it finds libatomfs.so in its own directory) or, when the library directory
# has none, compiled here with cc.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
libdir="$prefix/lib"
incdir="$prefix/include"

if [ -z "${ATOMFS_LIB_DIR:-}" ]; then
    cargo build --release -p atomfs-capi -p atomfs-preload -p atomfs-sqlite
    ATOMFS_LIB_DIR=target/release
fi
for f in libatomfs.so libatomfs.a libatomfs_preload.so; do
    [ -f "$ATOMFS_LIB_DIR/$f" ] || { echo "install-c: $ATOMFS_LIB_DIR/$f missing" >&2; exit 1; }
done

mkdir -p "$libdir/pkgconfig" "$incdir"
install -m 0644 crates/frontends/capi/include/atomfs.h "$incdir/atomfs.h"
install -m 0755 "$ATOMFS_LIB_DIR/libatomfs.so" "$ATOMFS_LIB_DIR/libatomfs_preload.so" "$libdir/"
install -m 0644 "$ATOMFS_LIB_DIR/libatomfs.a" "$libdir/"

if [ ! -f /usr/include/sqlite3ext.h ]; then
    echo "install-c: sqlite3ext.h missing (libsqlite3-dev): libatomfs_sqlite.so not installed" >&2
elif [ -f "$ATOMFS_LIB_DIR/libatomfs_sqlite.so" ]; then
    install -m 0755 "$ATOMFS_LIB_DIR/libatomfs_sqlite.so" "$libdir/"
else
    cc -std=c99 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$incdir" \
        crates/frontends/sqlite/atomfs_sqlite.c -L"$libdir" -latomfs -Wl,-rpath,"$libdir" \
        -o "$libdir/libatomfs_sqlite.so"
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cat > "$libdir/pkgconfig/atomfs.pc" <<PC
prefix=$prefix
libdir=$libdir
includedir=$incdir

Name: atomfs
Description: Failure-atomic, durable multi-file updates (C API: tx_begin/tx_commit, O_ATOMIC, syncv)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -latomfs
Libs.private: -lpthread -ldl -lm
PC
echo "install-c: installed atomfs $version under $prefix"
