#!/usr/bin/env bash
# No connection may delay another at the codec service: while a checkpointing
# run goes on, an attacker without the token keeps three connections to the
# service open, reconnecting whenever one is closed, for the run's whole
# duration:
#   silent   connects and sends nothing;
#   partial  sends 6 bytes of a frame header ("DLCK" 01 00) and stops;
#   big      sends a HELLO header announcing 16 MiB and nothing after it.
# The run must still finish with exit 0, every checkpoint encoded and the
# checksum of an undisturbed run, well within a generous time limit (a service
# that waits on such a peer stalls every checkpoint by its read timeout, again
# and again as the attacker reconnects), and the service must have dropped the
# stalled connections with a log line naming the peer. The times of both runs
# are printed for comparison, not asserted.
# usage: codec_stall_test.sh BIN_DIR
set -uo pipefail
bin=$1
job="stall$$"
base="${job}ref"
dir=$(mktemp -d)
apid=
iters=300 every=10
app=("$bin/heat2d-dlckpt" --nx 64 --ny 64 --iters $iters --ckpt-every $every --sleep-ms 20)
expect=$((iters / every))

cleanup() {
  [ -n "$apid" ] && kill "$apid" 2>/dev/null
  for j in "$job" "$base"; do
    for p in $(grep -ls "DLCKPT_JOB=$j" /proc/[0-9]*/environ 2>/dev/null); do
      p=${p#/proc/}; [ "${p%%/*}" = $$ ] || kill -9 "${p%%/*}" 2>/dev/null
    done
    rm -f /dev/shm/dlckpt."$j".*
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*.out "$dir"/attack.log; do [ -f "$f" ] && { echo "---- $f:"; cat "$f"; }; done >&2; exit 1; }

run() {  # run JOB OUT [dlckpt-run options]: prints the run's exit code and seconds
  local j=$1 out=$2; shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 5 150 "$bin/dlckpt-run" --job "$j" --nodes 2 --capacity 16M --timeout 120 "$@" -- "${app[@]}" \
    >"$out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "$rc $(echo "$t1 - $t0" | bc)"
}

# Undisturbed, for the checksum and the time.
read -r rc ref_s < <(run "$base" "$dir/ref.out")
[ "$rc" = 0 ] || fail "the undisturbed run exited $rc"
ref_sum=$(sed -n 's/^checksum: //p' "$dir/ref.out")
[ -n "$ref_sum" ] || fail "the undisturbed run printed no checksum"

# The attacker: starts as soon as the service publishes its rendezvous and
# stops when $dir/stop appears.
python3 - "/tmp/dlckpt-run.$job/rendezvous" "$dir/stop" >"$dir/attack.log" 2>&1 <<'PY' &
import os, select, socket, struct, sys, time
rdv, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(rdv):
    if os.path.exists(stop):
        print("attack: no rendezvous"); sys.exit(0)
    time.sleep(0.01)
time.sleep(0.05)  # written atomically; let it settle
conf = dict(line.split(None, 1) for line in open(rdv).read().split("\n")[1:] if line)
addr = (conf["host"].strip(), int(conf["port"]))
sends = {
    "silent": b"",
    "partial": b"DLCK\x01\x00",
    # magic, version 1 | HELLO << 16, 16 MiB, CRC
    "big": struct.pack("<IIII", 0x4B434C44, 1 | (1 << 16), 16 << 20, 0),
}
conns, made, closed, refused = {}, {k: 0 for k in sends}, {k: 0 for k in sends}, {}
while not os.path.exists(stop):
    for kind, data in sends.items():
        if kind in conns:
            continue
        try:
            s = socket.create_connection(addr, timeout=2)
            s.sendall(data)
            s.setblocking(False)
        except OSError as e:
            if not refused.get(kind):
                print("attack: connect %s: %s" % (kind, e))
            refused[kind] = True
            time.sleep(0.05)
            continue
        conns[kind] = s
        made[kind] += 1
    ready, _, _ = select.select(list(conns.values()), [], [], 0.05)
    for kind, s in list(conns.items()):
        if s not in ready:
            continue
        try:
            gone = s.recv(4096) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            s.close()
            del conns[kind]
            closed[kind] += 1
print("attack: connections " + " ".join("%s=%d" % (k, made[k]) for k in sends) +
      "; closed by the service " + " ".join("%s=%d" % (k, closed[k]) for k in sends))
PY
apid=$!

read -r rc att_s < <(run "$job" "$dir/attacked.out" --keep)
touch "$dir/stop"
wait "$apid"
apid=
cat "$dir/attack.log"
echo "run times: undisturbed ${ref_s} s, under attack ${att_s} s"
[ "$rc" = 0 ] || fail "the run under attack exited $rc (124: it did not finish within 120 s)"
grep -q "exit 0; $expect checkpoint(s)" "$dir/attacked.out" ||
  fail "the run under attack did not complete its $expect checkpoints"
sum=$(sed -n 's/^checksum: //p' "$dir/attacked.out")
[ "$sum" = "$ref_sum" ] || fail "checksum $sum under attack, $ref_sum undisturbed"
grep -q "attack: connections silent=[1-9]" "$dir/attack.log" || fail "the attacker never connected"
log="/tmp/dlckpt-run.$job/codec.log"
grep -q "dropping .*:[0-9]*: no complete HELLO" "$log" || { cat "$log"; fail "no stalled peer was dropped and logged"; }
grep -c "no complete HELLO" "$log" | sed 's/^/codec: stalled connections dropped: /'
echo "codec_stall_test: ok"
