#!/usr/bin/env bash
# A private Slurm cluster of one node (this host) for tests: its own munged
# (own key and socket), slurmctld and slurmd on unusual ports, all state under
# DIR; nothing of the system's Slurm or munge configuration is used or changed.
#
# usage: slurm_cluster.sh start DIR   start it; prints the SLURM_CONF to export
#        slurm_cluster.sh stop DIR    stop every daemon started from DIR, remove DIR
#        slurm_cluster.sh check       exit 77 (skip) with a reason when it cannot run here
#
# Needs root (slurmd starts jobs as any user) and Debian's slurm-wlm and munge.
set -uo pipefail
cmd=${1:-}; dir=${2:-}
ctld_port=${DLCKPT_SLURMCTLD_PORT:-26817}
slurmd_port=${DLCKPT_SLURMD_PORT:-26818}

check() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: a private Slurm cluster needs root"; exit 77; }
  for b in slurmctld slurmd munged mungekey srun scontrol sinfo; do
    command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] ||
      { echo "SKIP: $b not installed (apt-get install slurm-wlm munge)"; exit 77; }
  done
}

stop() {
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  local steps=""
  if [ -f "$dir/slurm.conf" ]; then
    export SLURM_CONF=$dir/slurm.conf
    timeout -k 2 10 scancel --quiet --full --partition=test >/dev/null 2>&1
    [ -f "$dir/slurmd.pid" ] && steps=$(pgrep -P "$(cat "$dir/slurmd.pid")" -x slurmstepd)
    timeout -k 2 10 scontrol shutdown >/dev/null 2>&1
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; kill "$pid" 2>/dev/null; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  # Step daemons of jobs that outlived scancel (they are our slurmd's children).
  for p in $steps; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}

start() {
  check
  [ -n "$dir" ] || { echo "usage: $0 start DIR" >&2; exit 2; }
  rm -rf "$dir"; mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir" "$dir/munge"
  local sbin=/usr/sbin host
  host=$(hostname -s)
  mungekey -c -k "$dir/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge/munge.key"
  "$sbin/munged" --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" || { echo "munged did not start" >&2; exit 1; }
  cat >"$dir/slurm.conf" <<EOF
ClusterName=dlckpttest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=2
NodeName=$host CPUs=64 RealMemory=4000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64
EOF
  export SLURM_CONF=$dir/slurm.conf
  "$sbin/slurmctld" -f "$SLURM_CONF" || { echo "slurmctld did not start:" >&2; tail -5 "$dir/slurmctld.log" >&2; exit 1; }
  "$sbin/slurmd" -f "$SLURM_CONF" || { echo "slurmd did not start:" >&2; tail -5 "$dir/slurmd.log" >&2; exit 1; }
  for _ in $(seq 150); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
    case "$state" in
      idle*|mixed*|alloc*) echo "SLURM_CONF=$SLURM_CONF"; return 0 ;;
      down*|drain*|inval*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 ;;
    esac
    sleep 0.2
  done
  echo "the Slurm node $host did not come up (state '$state'):" >&2
  tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2
  exit 1
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  check) check ;;
  *) echo "usage: $0 start DIR | stop DIR | check" >&2; exit 2 ;;
esac
