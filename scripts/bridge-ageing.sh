#!/usr/bin/env bash
# Steady bridged traffic for a long time, with the bridge's ageing short:
# does an FDB entry the fast path carries ever age out, is anything
# flooded, is a MAC move followed at once? The lab's DUT bridges dut0 and
# dut1 (br0, ageing 10 s, both ends learned from their own frames): the
# generator sends RATE frames a second to the receiver's MAC for SECONDS,
# the receiver one frame a second back (its entry stays learned); half way,
# the receiver's MAC moves (it sends once from the generator's side, then
# from its own again). At the end: the fast path's counters by reason over
# the whole run (pass_bridge_learn: each frame that taught the kernel, a
# move's among them; pass_bridge_flood: each frame to an unknown MAC), and
# the FDB. As root, after scripts/setup.sh and a release build.
# Usage: scripts/bridge-ageing.sh [SECONDS] [RATE] [LAB_NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_RUN=${1:-600}
RATE=${2:-1M}
LAB=${3:-lrt-ageing}
LR=./target/release/linerate
GEN_MAC=02:00:00:00:00:01
RECV_MAC=02:00:00:00:00:04
DUT="$LAB-dut"
trap 'kill $(jobs -p) 2>/dev/null || true; wait; $LR lab down --name "$LAB" >/dev/null 2>&1 || true' EXIT
$LR lab up --name "$LAB" >/dev/null
in_dut() { ip netns exec "$DUT" "$@"; }
in_dut ip link set dev dut0 address 02:00:00:00:00:12
in_dut ip link add br0 type bridge ageing_time 1000
in_dut ip link set dev dut0 master br0
in_dut ip link set dev dut1 master br0
in_dut ip link set dev br0 up
$LR route --netns "$DUT" -i dut0,dut1 -q &
sleep 3
# Both ends heard once, then the steady streams.
$LR gen --netns "$LAB-recv" --iface recv0 -S "$RECV_MAC" -D "$GEN_MAC" -n 1 >/dev/null
$LR gen --netns "$LAB-gen" --iface gen0 -S "$GEN_MAC" -D "$RECV_MAC" -n 1 >/dev/null
sleep 1
$LR stats --netns "$DUT" -t "$SECONDS_RUN" --json > /tmp/bridge-ageing-stats.json &
STATS=$!
$LR gen --netns "$LAB-recv" --iface recv0 -S "$RECV_MAC" -D "$GEN_MAC" -R 1 -t "$SECONDS_RUN" >/dev/null &
$LR gen --netns "$LAB-gen" --iface gen0 -S "$GEN_MAC" -D "$RECV_MAC" -R "$RATE" -t "$SECONDS_RUN" > /tmp/bridge-ageing-gen.txt &
GEN=$!
sleep $((SECONDS_RUN / 2))
# The receiver's MAC moves to dut0 for one frame, and back.
$LR gen --netns "$LAB-gen" --iface gen0 -S "$RECV_MAC" -D "$GEN_MAC" -n 1 >/dev/null
sleep 0.05
$LR gen --netns "$LAB-recv" --iface recv0 -S "$RECV_MAC" -D "$GEN_MAC" -n 1 >/dev/null
wait "$GEN" "$STATS"
tail -1 /tmp/bridge-ageing-gen.txt
python3 - <<'EOF'
import json
s = json.load(open("/tmp/bridge-ageing-stats.json"))
for i in s["interfaces"]:
    r = {k: v["packets"] for k, v in i["reasons"].items() if v["packets"]}
    print(i.get("interface", i.get("name")), r)
EOF
echo "FDB:"
in_dut bridge -s fdb show br br0 | grep -v permanent
