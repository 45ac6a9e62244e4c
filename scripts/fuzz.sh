#!/usr/bin/env bash
# Runs linerate's fuzz targets (fuzz/, cargo-fuzz with libFuzzer), each for
# SECONDS, one after the other, and says for each the runs, the edges of
# the code it covered and whether it crashed:
#
#   scripts/fuzz.sh SECONDS [TARGET ...]     # default: every target
#
# Each target starts from its corpus (fuzz/corpus/TARGET) and adds to it
# what it finds that covers new code. A crash stops the target, its input
# in fuzz/artifacts/TARGET/: fix it, and keep the input in
# fuzz/regressions/TARGET/, where `cargo test -p linerate-fuzz` runs it
# from then on. libFuzzer needs nightly's sanitizer flags: the nightly
# toolchain if rustup has one, else the stable compiler told to accept
# them (RUSTC_BOOTSTRAP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$HOME/.cargo/bin:$PATH"

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
    echo "usage: scripts/fuzz.sh SECONDS [TARGET ...]" >&2
    exit 2
fi
seconds=$1
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^linerate-fuzz-targets$')
fi
for t in "${targets[@]}"; do
    [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "fuzz.sh: no target $t (fuzz/fuzz_targets/)" >&2; exit 2; }
done

command -v cargo-fuzz >/dev/null || cargo install --quiet --locked cargo-fuzz@0.13.2
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
fi

status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    log=$(mktemp)
    if "${fuzz[@]}" run "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" \
        -print_final_stats=1 > "$log" 2>&1; then
        verdict="no crash"
    else
        verdict="CRASHED (fuzz/artifacts/$t/)"
        status=1
    fi
    # libFuzzer's last status line: "#N DONE cov: C ft: F corp: K/..."
    last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -n 1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/\1 edges, \2 features/p' <<< "$last")
    echo "$t: ${seconds}s, ${runs:-?} runs, $verdict; covered ${cov:-?}"
    [ "$verdict" = "no crash" ] || tail -n 40 "$log"
    rm -f "$log"
    # The corpus kept to the inputs that cover what it covers.
    "${fuzz[@]}" cmin "$t" "fuzz/corpus/$t" > /dev/null 2>&1 || true
done
exit $status
