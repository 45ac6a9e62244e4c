#!/usr/bin/env bash
# linerate's MLRsearch and FD.io CSIT's (scripts/csit-mlrsearch.py, through
# `linerate trial`) search the same lab DUT (the kernel forwarding) for NDR
# and PDR, alternately, N times each, with the same goals (exceed ratio 0,
# width 0.005, trials 1 to 4 s, duration sum 4 s); then every reported load
# is measured again, 3 trials of 4 s: how often does it hold (NDR: no loss,
# PDR: loss within 0.5%)? As root, after scripts/setup.sh and a release
# build. Usage: scripts/compare-csit-lab.sh [N] [LAB_NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-3}
LAB=${2:-lrt-csit}
LR=./target/release/linerate
PY=.venv-csit/bin/python
OUT=$(mktemp -d)
trap '$LR lab down --name "$LAB" >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
$LR lab up --name "$LAB" >/dev/null
# The maximum: what the generator offers paced, as the first search
# measures it (--max-rate auto); both tools search below it.
MAX=auto
for i in $(seq 1 "$N"); do
    $LR search --method ndr-pdr --lab "$LAB" -t 1 --final-seconds 4 --duration-sum 4 \
        --max-rate "$MAX" --json > "$OUT/linerate.$i.json"
    if [ "$MAX" = auto ]; then
        MAX=$($PY -c "import json; print(json.load(open('$OUT/linerate.1.json'))['max_rate_pps'])")
        echo "max rate: $MAX pps"
    fi
    $PY scripts/csit-mlrsearch.py --linerate "$LR" --lab "$LAB" --min-load "$($PY -c "print($MAX/1000)")" \
        --max-load "$MAX" > "$OUT/csit.$i.json"
    echo "search $i: linerate $($PY -c "import json; print([(g['name'], g['lower_pps']) for g in json.load(open('$OUT/linerate.$i.json'))['result']['goals']])") csit $(cat "$OUT/csit.$i.json")"
done
remeasure() { # tool goal load loss_ratio
    local held=0
    for k in 1 2 3; do
        loss=$($LR trial --lab "$LAB" -R "$3" -t 4 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss_ratio"])')
        if $PY -c "import sys; sys.exit(0 if $loss <= $4 else 1)"; then held=$((held + 1)); fi
    done
    echo "$1 $2 $3 $held/3"
}
for i in $(seq 1 "$N"); do
    for goal in ndr pdr; do
        ratio=$([ $goal = ndr ] && echo 0 || echo 0.005)
        l=$($PY -c "import json; r=json.load(open('$OUT/linerate.$i.json'))['result']; print([g for g in r['goals'] if g['name']=='$goal'][0]['lower_pps'])")
        c=$($PY -c "import json; print(json.load(open('$OUT/csit.$i.json'))['$goal']['lower_pps'])")
        remeasure linerate "$goal" "$l" "$ratio"
        remeasure csit "$goal" "$c" "$ratio"
    done
done | tee "$OUT/holds.txt"
echo "== held, out of $((N * 3)) re-trials each:"
for tool in linerate csit; do
    for goal in ndr pdr; do
        echo "$tool $goal: $(grep "^$tool $goal " "$OUT/holds.txt" | awk '{split($4,a,"/"); s+=a[1]} END {print s}')"
    done
done
