#!/usr/bin/env bash
# A GlusterFS test cluster on this machine, loopback only, without systemd (docs/distributed.md).
#
#   scripts/gluster.sh up       install the packages when missing, start glusterd, create and
#                               start two volumes, mount both (idempotent: what is up stays up)
#   scripts/gluster.sh down     unmount, stop the volumes, stop the daemons by the pids started
#                               here, remove the scratch directory (idempotent)
#   scripts/gluster.sh status   key=value lines (exit 0 when both volumes are mounted, 1 if not)
#   scripts/gluster.sh pids     the pids of the brick processes, one "VOLUME BRICK PID" a line
#                               (PID is N/A while a brick is down)
#   scripts/gluster.sh restart VOLUME        start the volume's bricks that are down
#                                            (gluster volume start VOLUME force)
#   scripts/gluster.sh heal-pending VOLUME   entries the replica volume still has to heal
#
# Everything lives in one scratch directory, ATOMFS_GLUSTER_DIR (default /tmp/atomfs-gluster;
# it must be under /tmp/atomfs-* or /dev/shm/atomfs-*): glusterd's working and run directories,
# its unix socket, pid files, logs, the bricks and the mount points.
#
# Volumes: atomfs-single (one brick), mounted at DIR/mnt/single; atomfs-replica (replica 2, two
# bricks), mounted at DIR/mnt/replica. Both are mounted with `mount -t glusterfs` (FUSE).
#
# The brick host is a name that resolves to a loopback address (gluster refuses literal
# 127.0.0.1 and localhost): ATOMFS_GLUSTER_HOST, default this machine's hostname (Debian maps
# it to 127.0.1.1 in /etc/hosts). glusterd, the bricks and the self-heal daemon bind to that
# address only. When the name resolves to an address outside 127.0.0.0/8, the daemons and the
# client run in a network namespace made here (atomfs-gluster), where that address is put on
# the namespace's own loopback device: traffic never leaves the namespace, and the mount
# stays in this mount namespace (only the network namespace is entered, with nsenter --net).
# ATOMFS_GLUSTER_NETNS=1 asks for the namespace whatever the name resolves to.
#
# Exit status of up: 0 up; 2 not startable here (the reason on stderr: not root, no FUSE,
# packages not installable, no usable host name).
set -euo pipefail

DIR=${ATOMFS_GLUSTER_DIR:-/tmp/atomfs-gluster}
HOST=${ATOMFS_GLUSTER_HOST:-$(hostname)}
NETNS=atomfs-gluster
SINGLE=atomfs-single
REPLICA=atomfs-replica
PORT=24007

here=$(cd "$(dirname "$0")" && pwd)

die() { echo "gluster.sh: $*" >&2; exit 1; }
unavailable() { echo "gluster.sh: unavailable: $*" >&2; exit 2; }
log() { echo "gluster.sh: $*" >&2; }

case "$DIR" in
    /tmp/atomfs-?*|/dev/shm/atomfs-?*) ;;
    *) die "ATOMFS_GLUSTER_DIR=$DIR must be under /tmp/atomfs-* or /dev/shm/atomfs-*" ;;
esac
case "$DIR" in *..*) die "ATOMFS_GLUSTER_DIR=$DIR must not contain '..'" ;; esac

# The address HOST resolves to (IPv4), or nothing.
host_address() { getent ahostsv4 "$HOST" 2>/dev/null | awk 'NR==1 {print $1}'; }

# Whether the daemons run in the network namespace (recorded at up, read back after).
use_netns() {
    if [ -f "$DIR/netns" ]; then return 0; fi
    if [ -f "$DIR/host" ]; then return 1; fi
    [ "${ATOMFS_GLUSTER_NETNS:-0}" = 1 ] && return 0
    case "$(host_address)" in 127.*) return 1 ;; *) return 0 ;; esac
}

# Run a command in the daemons' network namespace (or here, without one).
in_net() {
    if [ -f "$DIR/netns" ]; then nsenter --net="/run/netns/$NETNS" "$@"; else "$@"; fi
}

cli() { in_net gluster --mode=script --glusterd-sock="$DIR/glusterd.socket" --log-file="$DIR/log/cli.log" "$@"; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

pid_of() { [ -s "$1" ] && tr -dc 0-9 <"$1" || true; }

check_environment() {
    [ "$(id -u)" -eq 0 ] || unavailable "not root (glusterd, bricks with trusted xattrs and mount need it)"
    [ -c /dev/fuse ] || unavailable "no /dev/fuse: the kernel offers no FUSE here"
    if ! command -v glusterd >/dev/null || ! command -v mount.glusterfs >/dev/null; then
        bash "$here/install-deps.sh" || true
    fi
    command -v glusterd >/dev/null || unavailable "glusterfs-server is not installed and could not be installed"
    command -v mount.glusterfs >/dev/null || unavailable "glusterfs-client is not installed and could not be installed"
    [ -n "$(host_address)" ] || unavailable "host name $HOST does not resolve (set ATOMFS_GLUSTER_HOST)"
}

setup_netns() {
    local addr=$1
    command -v nsenter >/dev/null || unavailable "nsenter missing (util-linux)"
    if ! ip netns list 2>/dev/null | grep -qw "$NETNS"; then
        ip netns add "$NETNS" || unavailable "cannot create network namespace $NETNS"
    fi
    ip -n "$NETNS" link set lo up
    ip -n "$NETNS" addr add "$addr/32" dev lo 2>/dev/null || true
    echo "$NETNS" >"$DIR/netns"
}

write_volfile() {
    local addr=$1
    cat >"$DIR/glusterd.vol" <<EOF
volume management
    type mgmt/glusterd
    option working-directory $DIR/lib
    option run-directory $DIR/run
    option logging-directory $DIR/log
    option glusterd-sockfile $DIR/glusterd.socket
    option transport-type socket
    option transport.address-family inet
    option transport.socket.bind-address $addr
    option transport.socket.listen-port $PORT
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option ping-timeout 0
    option event-threads 1
    option base-port 49152
    option max-port 49251
end-volume
EOF
}

start_glusterd() {
    local pid
    pid=$(pid_of "$DIR/glusterd.pid")
    if alive "$pid"; then return 0; fi
    local addr
    addr=$(host_address)
    mkdir -p "$DIR/lib" "$DIR/run" "$DIR/log" "$DIR/bricks" "$DIR/mnt/single" "$DIR/mnt/replica"
    if use_netns; then setup_netns "$addr"; else echo "$HOST" >"$DIR/host"; fi
    write_volfile "$addr"
    in_net glusterd -f "$DIR/glusterd.vol" -p "$DIR/glusterd.pid" -l "$DIR/log/glusterd.log" \
        || die "glusterd did not start (log: $DIR/log/glusterd.log)"
    for _ in $(seq 1 100); do
        if cli volume list >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    die "glusterd does not answer on $DIR/glusterd.socket (log: $DIR/log/glusterd.log)"
}

# create_volume NAME [replica N] BRICK...
create_volume() {
    local name=$1; shift
    local spec=() bricks=()
    if [ "$1" = replica ]; then spec=(replica "$2"); shift 2; fi
    for b in "$@"; do
        mkdir -p "$DIR/bricks/$b"
        bricks+=("$HOST:$DIR/bricks/$b")
    done
    if ! cli volume info "$name" >/dev/null 2>&1; then
        # force: the bricks are on the root file system (a scratch directory), which gluster
        # refuses by default.
        cli volume create "$name" "${spec[@]}" transport tcp "${bricks[@]}" force >/dev/null
        # Fail fast while a brick is away, not after the default 42 s.
        cli volume set "$name" network.ping-timeout 5 >/dev/null
        # No client-side caching of writes and attributes: a stat right after a write must
        # see the brick's file (the cache engine reports its home files' times), as on a
        # local file system.
        for option in performance.write-behind performance.stat-prefetch \
            performance.quick-read performance.io-cache performance.read-ahead; do
            cli volume set "$name" "$option" off >/dev/null
        done
    fi
    if ! cli volume info "$name" | grep -q '^Status: Started'; then
        cli volume start "$name" >/dev/null
    fi
}

mount_volume() {
    local name=$1 at=$2
    if mountpoint -q "$at"; then
        # A live mount is kept; one whose client is gone (killed by a fault test: the kernel
        # answers ENOTCONN) is detached and mounted again.
        if stat "$at" >/dev/null 2>&1 && [ -n "$(client_pid "$at")" ]; then
            client_pid "$at" >"$DIR/client-$name.pid"
            return 0
        fi
        umount -l "$at" 2>/dev/null || true
    fi
    mkdir -p "$at"
    in_net mount -t glusterfs -o "log-file=$DIR/log/client-$name.log" "$HOST:/$name" "$at"
    client_pid "$at" >"$DIR/client-$name.pid"
}

# The pid of the FUSE client serving mount point $1: the glusterfs process whose last
# argument is exactly that (scratch) mount point, the newest one when several are (the client
# of a lazily detached mount lives on until its last descriptor closes, then exits).
client_pid() {
    local at=$1 p start best="" best_start=-1
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/exe" 2>/dev/null)" = /usr/sbin/glusterfsd ] || continue
        if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | tail -n 1 | grep -qxF "$at"; then
            # Field 22 of /proc/PID/stat is the start time; the command name (field 2) may
            # hold spaces, so count from after its closing parenthesis.
            start=$(sed 's/.*) //' "$p/stat" 2>/dev/null | awk '{ print $20 }')
            [ -n "$start" ] || continue
            if [ "$start" -gt "$best_start" ]; then
                best=${p#/proc/}
                best_start=$start
            fi
        fi
    done
    [ -z "$best" ] || echo "$best"
}

up() {
    check_environment
    mkdir -p "$DIR"
    start_glusterd
    create_volume "$SINGLE" single
    create_volume "$REPLICA" replica 2 replica-a replica-b
    mount_volume "$SINGLE" "$DIR/mnt/single"
    mount_volume "$REPLICA" "$DIR/mnt/replica"
    status
}

# Brick pids from `gluster volume status`: "VOLUME BRICK PID" lines.
pids() {
    local v
    for v in "$SINGLE" "$REPLICA"; do
        cli volume status "$v" detail 2>/dev/null | awk -v vol="$v" '
            /^Brick *:/ { sub(/^Brick *: *Brick /, ""); brick = $0 }
            /^Pid *:/ { print vol, brick, $3 }'
    done
}

status() {
    local ok=0 addr
    addr=$(host_address)
    echo "dir=$DIR"
    echo "host=$HOST"
    echo "address=$addr"
    if [ -f "$DIR/netns" ]; then echo "netns=$NETNS"; else echo "netns="; fi
    echo "glusterd_pid=$(pid_of "$DIR/glusterd.pid")"
    alive "$(pid_of "$DIR/glusterd.pid")" || ok=1
    echo "single_volume=$SINGLE"
    echo "single_mount=$DIR/mnt/single"
    mountpoint -q "$DIR/mnt/single" 2>/dev/null || ok=1
    echo "single_client_pid=$(pid_of "$DIR/client-$SINGLE.pid")"
    echo "replica_volume=$REPLICA"
    echo "replica_mount=$DIR/mnt/replica"
    mountpoint -q "$DIR/mnt/replica" 2>/dev/null || ok=1
    echo "replica_client_pid=$(pid_of "$DIR/client-$REPLICA.pid")"
    echo "bricks_dir=$DIR/bricks"
    if [ $ok -eq 0 ]; then echo "state=up"; else echo "state=down"; fi
    return $ok
}

# Stop processes we started, by their pids: TERM to all, then KILL to those left after 5 s.
stop_pids() {
    local pid left
    for pid in "$@"; do alive "$pid" && kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
        left=""
        for pid in "$@"; do alive "$pid" && left="$left $pid"; done
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
}

down() {
    [ -d "$DIR" ] || { ip netns list 2>/dev/null | grep -qw "$NETNS" && ip netns del "$NETNS"; return 0; }
    local at name f
    local pids=()
    for name in "$SINGLE" "$REPLICA"; do
        at="$DIR/mnt/${name#atomfs-}"
        if mountpoint -q "$at" 2>/dev/null; then umount "$at" 2>/dev/null || umount -l "$at" || true; fi
        pids+=("$(pid_of "$DIR/client-$name.pid")")
    done
    # Mounts the fault tests left lazily unmounted or remounted elsewhere under DIR.
    awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r at; do
        umount -l "$at" 2>/dev/null || true
    done
    # The whole cluster goes, state and all: the bricks are stopped by their pids, not with
    # `gluster volume stop` (seconds per volume for nothing kept).
    if alive "$(pid_of "$DIR/glusterd.pid")"; then
        pids+=($(pids | awk '$3 ~ /^[0-9]+$/ { print $3 }'))
    fi
    # Bricks and daemons glusterd started: their pid files in its run directory.
    if [ -d "$DIR/run" ]; then
        while read -r f; do pids+=("$(pid_of "$f")"); done < <(find "$DIR/run" -name '*.pid')
    fi
    stop_pids "${pids[@]}"
    stop_pids "$(pid_of "$DIR/glusterd.pid")"
    if [ -f "$DIR/netns" ]; then ip netns del "$NETNS" 2>/dev/null || true; fi
    # Nothing may be mounted under DIR any more before it is removed.
    if awk -v d="$DIR/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        die "something is still mounted under $DIR; not removing it"
    fi
    rm -rf --one-file-system "$DIR"
}

# The sum of the entries `gluster volume heal VOLUME statistics heal-count` reports pending
# on the bricks ("unknown" when it cannot tell); asks the self-heal daemon to heal first.
heal_pending() {
    cli volume heal "$1" >/dev/null 2>&1 || true
    cli volume heal "$1" statistics heal-count 2>/dev/null | awk '
        /^Number of entries:/ { seen = 1; if ($4 ~ /^[0-9]+$/) n += $4; else bad = 1 }
        END { if (bad || !seen) print "unknown"; else print n + 0 }'
}

volume_arg() {
    case "${1:-}" in
        "$SINGLE"|"$REPLICA") ;;
        *) die "volume must be $SINGLE or $REPLICA, not '${1:-}'" ;;
    esac
}

case "${1:-}" in
    up) up ;;
    restart) volume_arg "${2:-}"; cli volume start "$2" force >/dev/null ;;
    heal-pending) volume_arg "${2:-}"; heal_pending "$2" ;;
    down) down ;;
    status) status ;;
    pids) pids ;;
    *) echo "usage: $0 up|down|status|pids|restart VOLUME|heal-pending VOLUME" >&2; exit 64 ;;
esac
