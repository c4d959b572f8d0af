#!/usr/bin/env bash
# A private Slurm cluster for tests: its own munged (own key and socket),
# slurmctld and slurmd on unusual ports, all state under DIR; nothing of the
# system's Slurm or munge configuration is used or changed.
#
# usage: slurm_cluster.sh start DIR [NODE=ADDR...]
#                                     start it; prints the SLURM_CONF to export
#        slurm_cluster.sh stop DIR    stop every daemon started from DIR, remove DIR
#        slurm_cluster.sh check       exit 77 (skip) with a reason when it cannot run here
#
# Without NODE=ADDR the cluster is this host alone. With them (the virtual hosts
# of tests/vhost), slurmctld runs here, reached at $DLCKPT_SLURMCTLD_ADDR, and
# one slurmd per node is started with $DLCKPT_SLURMD_EXEC in front of its
# command ("{node}" replaced, e.g. "dlckpt-vhost exec {node} --"); DIR must then
# be visible on every node, and the caller ends those nodes' slurmd (a slurmd in
# a PID namespace writes a pid file the head cannot use).
#
# Needs root (slurmd starts jobs as any user) and Debian's slurm-wlm and munge.
set -uo pipefail
cmd=${1:-}; dir=${2:-}
ctld_port=${DLCKPT_SLURMCTLD_PORT:-26817}
slurmd_port=${DLCKPT_SLURMD_PORT:-26818}
sbin=/usr/sbin

check() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: a private Slurm cluster needs root"; exit 77; }
  for b in slurmctld slurmd munged mungekey srun scontrol sinfo; do
    command -v "$b" >/dev/null || [ -x "$sbin/$b" ] ||
      { echo "SKIP: $b not installed (apt-get install slurm-wlm munge)"; exit 77; }
  done
}

stop() {
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  local steps="" f pid
  if [ -f "$dir/slurm.conf" ]; then
    export SLURM_CONF=$dir/slurm.conf
    timeout -k 2 10 scancel --quiet --full --partition=test >/dev/null 2>&1
    for f in "$dir"/spool/slurmd-*.pid; do
      [ -f "$f" ] && steps+=" $(pgrep -P "$(cat "$f")" -x slurmstepd)"
    done
    timeout -k 2 10 scontrol shutdown >/dev/null 2>&1
  fi
  for f in "$dir"/spool/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    # Only our daemons: a pid from another PID namespace may name anything here.
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in slurmd|slurmctld|munged) ;; *) continue ;; esac
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; kill "$pid" 2>/dev/null; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  # Step daemons of jobs that outlived scancel (they are our slurmd's children).
  for pid in $steps; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$dir"
}

write_conf() {  # CTLD_HOST NODE_LINES PARTITION_NODES
  cat >"$dir/slurm.conf" <<EOC
ClusterName=dlckpttest
SlurmctldHost=$1
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=30
$2
PartitionName=test Nodes=$3 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
EOC
}

start() {
  check
  [ -n "$dir" ] || { echo "usage: $0 start DIR [NODE=ADDR...]" >&2; exit 2; }
  shift 2
  local host nodes=() addrs=() ctld arg i lines="" all="" exec_prefix
  host=$(hostname -s)
  ctld=$host
  for arg in "$@"; do nodes+=("${arg%%=*}"); addrs+=("${arg#*=}"); done
  if ((${#nodes[@]})); then
    if [ -z "${DLCKPT_SLURMCTLD_ADDR:-}" ] || [ -z "${DLCKPT_SLURMD_EXEC:-}" ]; then
      echo "$0: with NODE=ADDR set DLCKPT_SLURMCTLD_ADDR and DLCKPT_SLURMD_EXEC" >&2; exit 2
    fi
    ctld="$host($DLCKPT_SLURMCTLD_ADDR)"
  else
    nodes=("$host"); addrs=("")
  fi
  rm -rf "$dir"; mkdir -p "$dir/state" "$dir/munge"
  chmod 700 "$dir" "$dir/munge"
  mungekey -c -k "$dir/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge/munge.key"
  "$sbin/munged" --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" || { echo "munged did not start" >&2; exit 1; }
  for i in "${!nodes[@]}"; do
    lines+="NodeName=${nodes[$i]}${addrs[$i]:+ NodeAddr=${addrs[$i]}} CPUs=64 RealMemory=4000 State=UNKNOWN"$'\n'
    all+="${all:+,}${nodes[$i]}"
    mkdir -p "$dir/spool/${nodes[$i]}"
  done
  write_conf "$ctld" "$lines" "$all"
  export SLURM_CONF=$dir/slurm.conf
  "$sbin/slurmctld" -f "$SLURM_CONF" || { echo "slurmctld did not start:" >&2; tail -5 "$dir/slurmctld.log" >&2; exit 1; }
  for i in "${!nodes[@]}"; do
    exec_prefix=""
    [ -n "${addrs[$i]}" ] && exec_prefix=${DLCKPT_SLURMD_EXEC//\{node\}/${nodes[$i]}}
    # shellcheck disable=SC2086  # a command prefix, split into words
    $exec_prefix "$sbin/slurmd" -f "$SLURM_CONF" ||
      { echo "slurmd of ${nodes[$i]} did not start:" >&2; tail -5 "$dir/slurmd-${nodes[$i]}.log" >&2; exit 1; }
  done
  local up state
  for _ in $(seq 150); do
    up=0
    for i in "${!nodes[@]}"; do
      state=$(sinfo -h -n "${nodes[$i]}" -o %T 2>/dev/null)
      case "$state" in
        idle*|mixed*|alloc*) up=$((up + 1)) ;;
        down*|drain*|inval*) scontrol update nodename="${nodes[$i]}" state=resume >/dev/null 2>&1 ;;
      esac
    done
    if [ "$up" = "${#nodes[@]}" ]; then echo "SLURM_CONF=$SLURM_CONF"; return 0; fi
    sleep 0.2
  done
  echo "Slurm nodes did not come up:" >&2
  sinfo -N >&2
  tail -5 "$dir/slurmctld.log" "$dir"/slurmd-*.log >&2
  exit 1
}

case "$cmd" in
  start) start "$@" ;;
  stop) stop ;;
  check) check ;;
  *) echo "usage: $0 start DIR [NODE=ADDR...] | stop DIR | check" >&2; exit 2 ;;
esac
