#!/bin/bash
# Jumbo frames through a lab at MTU 9000, the kernel alone and then
# `linerate route` (docs/router.md, multi-buffer frames): frames offered by the
# AF_PACKET generator and counted by the receiver, 3 runs of 5 seconds.
# Usage: scripts/jumbo-lab.sh [path/to/linerate]; needs root.
set -u
L=${1:-target/release/linerate}
N=lrt-jumbo-lab
$L lab up --name $N --mtu 9000 --force >/dev/null || exit 1
trap '$L lab down --name $N >/dev/null' EXIT
run() {
  $L recv --netns $N-recv -i recv0 -t 8 --json > /tmp/$N-recv.json &
  local recv=$!
  sleep 1
  $L gen --netns $N-gen -i gen0 -t 5 --mode afpacket -l "$1" --json > /tmp/$N-gen.json 2>/dev/null
  wait $recv
  python3 - "$2" "$1" "/tmp/$N" <<'PY'
import json, sys
g = json.load(open(sys.argv[3] + '-gen.json'))
r = json.load(open(sys.argv[3] + '-recv.json'))
print(f"{sys.argv[1]:9} -l {sys.argv[2]}: sent {g['pps']/1e3:8.1f} kpps ({g['bps']/1e9:.2f} Gbps), "
      f"received {r['received_packets']} of {g['sent_packets']}")
PY
}
for _ in 1 2 3; do
  for len in 9014 1514; do run $len kernel; done
  $L route --netns $N-dut -i dut0,dut1 -q &
  route=$!
  sleep 2
  for len in 9014 1514; do run $len linerate; done
  kill $route
  wait $route
done
