#!/usr/bin/env bash
# A damaged parity is an erasure, as a damaged store is (docs/design.md,
# "Recovery after a node loss"). dlckpt-run's kill command flips bytes of
# the parity objects of the given spares, then kills the node as dlckpt-run
# does for a virtual node (its processes and its shared memory); the
# recovery that follows must not rebuild from the damaged parity:
#   rs-one    RS k=2 (4 data + 2 spares), vn1 killed, parity 0 damaged:
#             rebuilt from the other parity, exit 0 with the failure-free checksum
#   rs-both   the same with both parities damaged: exit 3, "unrecoverable"
#   xor       XOR (3 data + 1 spare), vn1 killed, the parity damaged: exit 3
# While the kill command runs (a run in progress), the codec service must
# listen on 127.0.0.1 only: virtual nodes publish loopback.
#
# usage: parity_damage_test.sh BIN_DIR TEST_BIN_DIR SCENARIO
set -uo pipefail
bin=$1 tbin=$2 scenario=$3
job="pd${scenario//[^a-z0-9]/}$$"
tmp=$(mktemp -d)
out="$tmp/out"
# Iterations long enough that the application is still running when the
# kill command (slower than dlckpt-run's own kill) reaches its processes.
app=("$tbin/ckpt_app" --iters 8 --kib 512 --sleep-ms 150 --write-pieces 8)

leftovers() { grep -ls "DLCKPT_JOB=$1" /proc/[0-9]*/environ 2>/dev/null | grep -v "/proc/$$/" || true; }
cleanup() {
  for j in "$job" "${job}ref"; do
    for p in $(leftovers "$j"); do p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null; done
    rm -f /dev/shm/dlckpt."$j".* 2>/dev/null
    rm -rf "/tmp/dlckpt-run.$j"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL ($scenario): $*" >&2; echo "---- output:" >&2; cat "$out" >&2; exit 1; }

case "$scenario" in
  rs-one)  layout=(--nodes 4 --spares 2 --scheme rs); damage="vn4"; expect_rc=0 ;;
  rs-both) layout=(--nodes 4 --spares 2 --scheme rs); damage="vn4 vn5"; expect_rc=3 ;;
  xor)     layout=(--nodes 3 --spares 1); damage="vn3"; expect_rc=3 ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac

# The kill command (kill.sh JOB "SPARES" OUT_DIR NODE): note the codec's
# listening socket, kill NODE (its processes, its shared memory), then damage
# the parity of SPARES; dlckpt-run waits for it before it looks for the
# loss, so the survey sees the damage.
cat > "$tmp/kill.sh" <<'KILL'
#!/usr/bin/env bash
job=$1 spares=$2 dir=$3 node=$4
port=$(sed -n 's/^port //p' "/tmp/dlckpt-run.$job/rendezvous")
hex=$(printf '%04X' "$port")
{ echo "port $port"; awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $2 }' \
    /proc/net/tcp /proc/net/tcp6; } > "$dir/listen"
for p in $(grep -lzx "DLCKPT_JOB=$job" /proc/[0-9]*/environ 2>/dev/null |
           xargs -r grep -lzx "DLCKPT_NODE=$node" 2>/dev/null); do
  p=${p#/proc/}; kill -9 "${p%%/*}" 2>/dev/null
done
rm -f /dev/shm/dlckpt."$job"."$node".*
slots=()
for spare in $spares; do
  for slot in /dev/shm/dlckpt."$job"."$spare".parity0 /dev/shm/dlckpt."$job"."$spare".parity1; do
    if [ -e "$slot" ]; then slots+=("$slot"); fi
  done
done
python3 - "${slots[@]}" <<'PY'
import sys
# The parity bytes follow a one-page header: flip two of them in each slot.
for path in sys.argv[1:]:
    with open(path, 'r+b') as f:
        for at in (4096 + 1000, 4096 + 50000):
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xA5]))
    print("damaged", path)
PY
KILL
chmod +x "$tmp/kill.sh"

# The failure-free answer, without dlckpt-run (local commits only).
ref=$(DLCKPT_JOB="${job}ref" timeout -k 5 120 mpiexec -launcher fork -n "${layout[1]}" "${app[@]}" 2>/dev/null \
      | sed -n 's/^checksum: //p')
rm -f /dev/shm/dlckpt."${job}ref".*
[ -n "$ref" ] || fail "the failure-free run printed no checksum"

timeout -k 5 240 "$bin/dlckpt-run" --job "$job" "${layout[@]}" --kill-command "$tmp/kill.sh $job '$damage' $tmp {node}" \
  --kill-node vn1 --at checkpoint:2 -- "${app[@]}" >"$out" 2>&1
rc=$?
n=$(grep -c "^damaged /dev/shm/dlckpt.$job" "$out")
[ "$n" -ge "$(wc -w <<<"$damage")" ] || fail "$n parity object(s) damaged"
[ "$rc" = "$expect_rc" ] || fail "dlckpt-run exited $rc, expected $expect_rc"
if [ "$expect_rc" = 0 ]; then
  got=$(sed -n 's/^checksum: //p' "$out")
  [ "$got" = "$ref" ] || fail "checksum '$got' differs from the failure-free run's '$ref'"
  grep -q "checkpoint verified" "$out" || fail "the application did not restart from a verified checkpoint"
else
  grep -q "unrecoverable:" "$out" || fail "exit $rc without an unrecoverable line"
  grep -q "checksum mismatch" "$out" || fail "the damaged parity is not named"
fi

# The codec listened on loopback only while the run was in progress.
sed -n 1p "$tmp/listen" | grep -q '^port [0-9]' || fail "no rendezvous port at the kill"
addrs=$(sed 1d "$tmp/listen" | sed 's/:[0-9A-F]*$//' | sort -u)
[ "$addrs" = "0100007F" ] || fail "the codec listened on '$addrs' (hex), not only on 127.0.0.1"

sleep 0.2
[ -z "$(leftovers "$job")" ] || fail "processes of the job are still running"
if ls /dev/shm | grep -q "^dlckpt\.$job\."; then fail "shared memory objects left: $(ls /dev/shm | grep "dlckpt.$job.")"; fi
grep -E "^dlckpt-run: .*(recovery|unrecoverable)" "$out"
echo "parity_damage_test $scenario: ok"
