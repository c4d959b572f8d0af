#!/usr/bin/env bash
# gluster_volume.sh — a GlusterFS distributed volume on this machine, for the
# benchmarks that compare dlckpt with a real parallel file system.
#
#   gluster_volume.sh up        start glusterd, create and start a distributed
#                               volume of N bricks, mount it; print the layout
#   gluster_volume.sh down      tear everything down (also what an earlier run
#                               left behind after a failure or SIGKILL)
#   gluster_volume.sh run [--] CMD [ARGS...]
#                               up, run CMD with GLUSTER_MNT set, down — also
#                               when CMD fails, on SIGINT/SIGTERM/SIGHUP, and
#                               (through a watchdog) when this script is killed
#   gluster_volume.sh info      version and layout of the running volume
#   gluster_volume.sh check     exit 1 if anything of ours is left (processes,
#                               mount, state directory, sockets)
#
# Everything lives under one state directory (default /var/lib/dlckpt-gluster):
# glusterd's working, run and log directories, the bricks brick1..brickN. The
# only things outside it are the mount point (default /mnt/dlckpt-gluster) and
# the bricks' sockets in /run/gluster (glusterd puts them there whatever its
# run directory); `down` removes all of them. Our processes are recognised by
# the state directory in their command line (glusterd -f DIR/glusterd.vol,
# glusterfsd --brick-name DIR/brickI, the FUSE client's --log-file DIR/log/…),
# never by name alone. glusterd and the bricks listen on the loopback address
# that this machine's host name resolves to (gluster refuses "localhost" and
# "127.0.0.1" as brick hosts but accepts a name that resolves to them).
#
# Needs root, glusterfs-server and glusterfs-client (Debian), /dev/fuse, and
# TCP port 24007 free (the bricks fetch their volfiles from that port).
# Exit status: 0 ok, 1 failure, 2 usage, 77 cannot run here (not root,
# packages or /dev/fuse missing, port 24007 taken by someone else's glusterd).
set -uo pipefail

DIR=${DLCKPT_GLUSTER_DIR:-/var/lib/dlckpt-gluster}
MNT=${DLCKPT_GLUSTER_MNT:-/mnt/dlckpt-gluster}
VOL=${DLCKPT_GLUSTER_VOL:-dlckptvol}
BRICKS=${DLCKPT_GLUSTER_BRICKS:-2}
QUIET=0
GPORT=24007
MARKER=.dlckpt-gluster   # in DIR: this directory is ours to delete
SELF=$(readlink -f "$0")

usage() {
  cat <<EOF
usage: $(basename "$0") [options] up|down|info|check|run [--] CMD [ARGS...]

  up      start glusterd, create and start a distributed volume, mount it
  down    unmount, stop and delete the volume, end our gluster processes,
          remove bricks, state and mount point (also leftovers of a killed run)
  run     up, run CMD (environment: GLUSTER_MNT, GLUSTER_VOL, GLUSTER_DIR), down;
          exits with CMD's status
  info    version and layout of the running volume
  check   list what of ours is left; exit 1 if anything is

options (environment variable in brackets):
  --dir DIR      state directory: glusterd state, logs, bricks
                 [DLCKPT_GLUSTER_DIR, default /var/lib/dlckpt-gluster]
  --mount DIR    mount point [DLCKPT_GLUSTER_MNT, default /mnt/dlckpt-gluster]
  --volume NAME  volume name [DLCKPT_GLUSTER_VOL, default dlckptvol]
  --bricks N     bricks of the distributed volume, >= 2 [DLCKPT_GLUSTER_BRICKS, default 2]
  -q, --quiet    print only errors and the layout
  (DLCKPT_GLUSTER_KEEP_LOGS=DIR: \`down\` copies glusterd's, the bricks' and the
  client's logs there before it removes the state directory)
  -h, --help     this text

Exit status: 0 ok, 1 failure, 2 usage, 77 cannot run here (not root,
glusterfs-server/glusterfs-client or /dev/fuse missing, port 24007 in use).
EOF
}

log() { [ "$QUIET" = 1 ] || echo "gluster: $*" >&2; }
err() { echo "gluster: error: $*" >&2; }

# ---------------------------------------------------------------- discovery

# Our process ids: glusterfsd-binary processes (glusterd, glusterfsd and the
# glusterfs client are one binary) whose command line names DIR or MNT.
our_pids() {
  local p exe cmd
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case "$exe" in */glusterfsd|*/glusterfs|*/glusterd) ;; *) continue ;; esac
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case " $cmd" in
      *" $DIR/"*|*"=$DIR/"*|*" $MNT "*|*" $MNT") echo "${p#/proc/}" ;;
    esac
  done
}

is_mounted() { findmnt -rn --mountpoint "$MNT" >/dev/null 2>&1; }

# Sockets the bricks were given (-S /run/gluster/<hash>.socket), from their
# command lines and from the list `up` recorded.
brick_sockets() {
  local p
  for p in $(our_pids); do
    tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^-S$/{n;p}'
  done
  [ -f "$DIR/sockets" ] && cat "$DIR/sockets"
  return 0
}

# The loopback address this machine's host name resolves to, and that name.
resolve_host() {
  local name addr
  for name in "$(hostname)" "$(hostname -f 2>/dev/null)" localhost.localdomain; do
    [ -n "$name" ] && [ "$name" != localhost ] || continue
    addr=$(getent ahostsv4 "$name" 2>/dev/null | awk 'NR == 1 { print $1 }')
    case "$addr" in 127.*) HOST=$name; ADDR=$addr; return 0 ;; esac
  done
  return 1
}

gcli() {
  timeout -k 5 30 gluster --mode=script --glusterd-sock="$DIR/run/glusterd.socket" \
    --log-file="$DIR/log/cli.log" "$@"
}

# ---------------------------------------------------------------- down

safe_dir() {
  case "$DIR" in /|/usr|/usr/*|/etc|/etc/*|/var|/var/lib|/home|/root|/tmp|"") return 1 ;; /*) return 0 ;; esac
  return 1
}

cmd_down() {
  local left=0 pids socks p i
  if ! safe_dir; then err "refusing to use state directory '$DIR'"; return 2; fi
  if [ -d "$DIR" ] && [ ! -e "$DIR/$MARKER" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    err "$DIR exists but was not made by this script (no $MARKER); not touching it"
    return 1
  fi
  socks=$(brick_sockets | sort -u)

  # 1. The mount: unmount (the FUSE client then exits); lazily as a last resort.
  if is_mounted; then
    for i in 1 2 3; do
      umount "$MNT" 2>/dev/null && break
      sleep 1
    done
    if is_mounted; then
      log "$MNT is busy; detaching it lazily"
      umount -l "$MNT" || err "cannot unmount $MNT"
    fi
    log "unmounted $MNT"
  fi

  # 2. The volume, while glusterd still answers (bounded by gcli's timeout).
  if [ -S "$DIR/run/glusterd.socket" ] && [ -n "$(our_pids)" ]; then
    if gcli volume info "$VOL" >/dev/null 2>&1; then
      gcli volume stop "$VOL" force >/dev/null 2>&1
      gcli volume delete "$VOL" >/dev/null 2>&1 && log "volume $VOL stopped and deleted"
    fi
  fi

  # 3. Our processes: SIGTERM, then SIGKILL after 10 s.
  pids=$(our_pids)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null
    for i in $(seq 1 50); do
      pids=$(our_pids)
      [ -z "$pids" ] && break
      sleep 0.2
    done
    if [ -n "$pids" ]; then
      log "killing $(echo $pids) (SIGKILL)"
      kill -KILL $pids 2>/dev/null
      sleep 0.5
    fi
  fi
  # A client killed before its unmount leaves a dead FUSE mount behind.
  is_mounted && { umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; }

  # 4. Files outside DIR: brick sockets, /run/gluster/snaps if glusterd made it.
  for p in $socks; do
    case "$p" in /run/gluster/*.socket|/var/run/gluster/*.socket) rm -f "$p" ;; esac
  done
  if [ -f "$DIR/made-run-snaps" ]; then rmdir /run/gluster/snaps 2>/dev/null; fi

  # 5. Bricks, state, logs (copied first if asked), the mount point.
  if [ -d "$DIR" ]; then
    if [ -n "${DLCKPT_GLUSTER_KEEP_LOGS:-}" ] && [ -d "$DIR/log" ]; then
      mkdir -p "$DLCKPT_GLUSTER_KEEP_LOGS" && cp -r "$DIR/log/." "$DLCKPT_GLUSTER_KEEP_LOGS/" 2>/dev/null
    fi
    rm -rf "$DIR" || err "cannot remove $DIR"
  fi
  if [ -d "$MNT" ] && ! is_mounted; then rmdir "$MNT" 2>/dev/null || err "cannot remove mount point $MNT (not empty?)"; fi

  cmd_check quiet || left=1
  [ "$left" = 0 ] && log "torn down: no gluster process, mount, brick or state of ours left"
  return $left
}

# Lists what is left; status 1 if anything.
cmd_check() {
  local bad=0 pids p
  pids=$(our_pids)
  if [ -n "$pids" ]; then
    bad=1
    for p in $pids; do echo "left: process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" >&2; done
  fi
  is_mounted && { bad=1; echo "left: mount $MNT" >&2; }
  [ -e "$MNT" ] && { bad=1; echo "left: mount point $MNT" >&2; }
  [ -e "$DIR" ] && { bad=1; echo "left: state directory $DIR" >&2; }
  for p in $(brick_sockets | sort -u); do
    [ -e "$p" ] && { bad=1; echo "left: socket $p" >&2; }
  done
  if [ "$bad" = 0 ] && [ "${1:-}" != quiet ]; then echo "gluster: nothing left"; fi
  return $bad
}

# ---------------------------------------------------------------- up

preflight() {
  if [ "$(id -u)" != 0 ]; then echo "gluster: skip: needs root (glusterd, mount)" >&2; return 77; fi
  local b
  for b in glusterd gluster glusterfsd mount.glusterfs; do
    if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ] && [ ! -x "/sbin/$b" ]; then
      echo "gluster: skip: $b not found (apt-get install glusterfs-server glusterfs-client)" >&2
      return 77
    fi
  done
  if [ ! -c /dev/fuse ]; then echo "gluster: skip: /dev/fuse missing" >&2; return 77; fi
  if ! resolve_host; then
    echo "gluster: skip: the host name '$(hostname)' does not resolve to a loopback address;" \
      "gluster needs a brick host name other than localhost/127.0.0.1" >&2
    return 77
  fi
  return 0
}

port_owner() { ss -Hltnp "sport = :$GPORT" 2>/dev/null | head -1; }

cmd_up() {
  local i rc ver bricks=()
  PATH=$PATH:/usr/sbin:/sbin
  preflight || return $?
  case "$BRICKS" in ''|*[!0-9]*) err "--bricks must be a number"; return 2 ;; esac
  [ "$BRICKS" -ge 2 ] || { err "a distributed volume needs --bricks >= 2"; return 2; }
  safe_dir || { err "refusing to use state directory '$DIR'"; return 2; }

  if [ -e "$DIR" ] || is_mounted || [ -n "$(our_pids)" ]; then
    log "cleaning up what an earlier run left behind"
    cmd_down || { err "leftovers of an earlier run could not be removed"; return 1; }
  fi
  if [ -n "$(port_owner)" ]; then
    echo "gluster: skip: TCP port $GPORT is in use by another program: $(port_owner)" >&2
    return 77
  fi

  mkdir -p "$DIR" && touch "$DIR/$MARKER" || { err "cannot create $DIR"; return 1; }
  mkdir -p "$DIR/state" "$DIR/run" "$DIR/log" || return 1
  [ -e /run/gluster/snaps ] || touch "$DIR/made-run-snaps"
  cat >"$DIR/glusterd.vol" <<EOF
volume management
    type mgmt/glusterd
    option working-directory $DIR/state
    option run-directory $DIR/run
    option logging-directory $DIR/log
    option glusterd-sockfile $DIR/run/glusterd.socket
    option transport-type socket
    option transport.address-family inet
    option transport.socket.bind-address $ADDR
    option transport.socket.listen-port $GPORT
    option ping-timeout 0
    option event-threads 1
end-volume
EOF
  log "starting glusterd (state in $DIR, listening on $ADDR:$GPORT)"
  if ! glusterd -f "$DIR/glusterd.vol" -p "$DIR/run/glusterd.pid" -l "$DIR/log/glusterd.log"; then
    err "glusterd did not start; log: $DIR/log/glusterd.log"; tail -5 "$DIR/log/glusterd.log" >&2; return 1
  fi
  for i in $(seq 1 100); do
    gcli pool list >/dev/null 2>&1 && break
    sleep 0.2
  done
  gcli pool list >/dev/null 2>&1 || { err "glusterd does not answer on $DIR/run/glusterd.socket"; return 1; }

  for i in $(seq 1 "$BRICKS"); do
    mkdir -p "$DIR/brick$i" || return 1
    bricks+=("$HOST:$DIR/brick$i")
  done
  # Bricks on the root file system need 'force'. No 'replica' or 'disperse':
  # a distributed volume (files hashed to bricks).
  if ! out=$(gcli volume create "$VOL" transport tcp "${bricks[@]}" force 2>&1); then
    err "volume create $VOL: $out"; return 1
  fi
  if ! out=$(gcli volume start "$VOL" 2>&1); then err "volume start $VOL: $out"; return 1; fi
  # Record the bricks' sockets now: `down` removes them even if the bricks die.
  for i in $(our_pids); do
    tr '\0' '\n' <"/proc/$i/cmdline" 2>/dev/null | sed -n '/^-S$/{n;p}'
  done >"$DIR/sockets"

  mkdir -p "$MNT" || { err "cannot create mount point $MNT"; return 1; }
  if ! mount -t glusterfs -o "log-file=$DIR/log/mount.log" "$HOST:/$VOL" "$MNT"; then
    err "mount -t glusterfs $HOST:/$VOL $MNT failed; log: $DIR/log/mount.log"
    tail -5 "$DIR/log/mount.log" >&2
    return 1
  fi
  # A probe: the mount must take a file and hand it back.
  if ! echo probe >"$MNT/.probe" || [ "$(cat "$MNT/.probe" 2>/dev/null)" != probe ]; then
    err "the mounted volume does not store a file ($MNT/.probe)"; return 1
  fi
  rm -f "$MNT/.probe"
  cmd_info
}

cmd_info() {
  PATH=$PATH:/usr/sbin:/sbin
  resolve_host || true
  local ver
  ver=$(glusterfs --version 2>/dev/null | head -1)
  if ! is_mounted; then err "no volume mounted on $MNT"; return 1; fi
  echo "gluster: version: $ver"
  gcli volume info "$VOL" 2>/dev/null | awk -v v="$VOL" '
    /^Type:/ { type = $2 } /^Number of Bricks:/ { n = $NF } /^Transport-type:/ { tr = $2 }
    END { printf "gluster: volume %s: type %s, %s bricks, transport %s\n", v, type, n, tr }'
  gcli volume status "$VOL" --xml 2>/dev/null | python3 -c '
import sys, xml.etree.ElementTree as ET
for n in ET.parse(sys.stdin).getroot().iter("node"):
    if n.findtext("path", "").startswith("/"):
        print("gluster:   brick %s:%s port %s %s pid %s" % (n.findtext("hostname"), n.findtext("path"),
              n.findtext("port"), "online" if n.findtext("status") == "1" else "OFFLINE", n.findtext("pid")))'
  echo "gluster: mount: $(findmnt -rn -o SOURCE,TARGET,FSTYPE --mountpoint "$MNT")" \
    "(bricks on $(findmnt -rn -o FSTYPE,SOURCE -T "$DIR"))"
}

# ---------------------------------------------------------------- run

start_time() { awk '{ print $22 }' "/proc/$1/stat" 2>/dev/null; }

# The watchdog of `run`: when the owner process dies without having torn down
# (SIGKILL), tear down. It sleeps, never spins.
cmd_guard() {
  local owner=$1 since=$2
  while [ "$(start_time "$owner")" = "$since" ]; do sleep 0.5; done
  if [ -f "$DIR/owner" ] && [ "$(cat "$DIR/owner" 2>/dev/null)" = "$owner" ]; then
    QUIET=1
    # What the owner ran and left behind on the mount (it was killed, so its
    # command was orphaned): end it, or the unmount can only be lazy.
    is_mounted && timeout -k 2 10 fuser -s -k -m "$MNT" >/dev/null 2>&1
    cmd_down >/dev/null 2>&1
  fi
}

# A signal while CMD runs: pass SIGTERM on, give CMD 10 s to clean up after
# itself (it uses the mount), then SIGKILL; the EXIT trap tears down.
on_signal() {
  local i
  if [ -n "${child:-}" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null
    for i in $(seq 1 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$child" 2>/dev/null
  fi
  exit "$1"
}

cmd_run() {
  [ "${1:-}" = -- ] && shift
  [ $# -gt 0 ] || { err "run: no command given"; usage >&2; return 2; }
  local rc
  guard="" child=""
  trap 'on_signal 130' INT
  trap 'on_signal 143' TERM
  trap 'on_signal 129' HUP
  trap 'rc=$?; [ -n "$guard" ] && kill "$guard" 2>/dev/null; cmd_down || rc=1; exit $rc' EXIT
  cmd_up; rc=$?
  if [ "$rc" != 0 ]; then exit "$rc"; fi
  echo $$ >"$DIR/owner"
  export DLCKPT_GLUSTER_DIR=$DIR DLCKPT_GLUSTER_MNT=$MNT DLCKPT_GLUSTER_VOL=$VOL
  setsid "$SELF" --dir "$DIR" --mount "$MNT" --volume "$VOL" _guard $$ "$(start_time $$)" \
    </dev/null >/dev/null 2>&1 &
  guard=$!
  # In the background so that a signal runs its trap at once; stdin kept.
  GLUSTER_MNT=$MNT GLUSTER_VOL=$VOL GLUSTER_DIR=$DIR "$@" <&0 &
  child=$!
  wait "$child"
  rc=$?
  child=""
  exit "$rc"
}

# ---------------------------------------------------------------- main

while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=${2:?--dir needs a value}; shift 2 ;;
    --mount) MNT=${2:?--mount needs a value}; shift 2 ;;
    --volume) VOL=${2:?--volume needs a value}; shift 2 ;;
    --bricks) BRICKS=${2:?--bricks needs a value}; shift 2 ;;
    -q|--quiet) QUIET=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) break ;;
  esac
done
DIR=${DIR%/}; MNT=${MNT%/}
PATH=$PATH:/usr/sbin:/sbin
case "${1:-}" in
  up) cmd_up ;;
  down|gc) cmd_down ;;
  info) cmd_info ;;
  check) cmd_check ;;
  run) shift; cmd_run "$@" ;;
  _guard) shift; cmd_guard "$@" ;;
  "") usage >&2; exit 2 ;;
  *) err "unknown command '$1'"; usage >&2; exit 2 ;;
esac
