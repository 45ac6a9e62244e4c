#!/usr/bin/env bash
# linerate's two entry points on a fresh Debian 12 machine, as root:
#   ./quickstart.sh lab    install what is missing, build, run the lab's default scenario
#   ./quickstart.sh test   install what is missing, run the whole test suite
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

case "${1:-}" in
    lab)
        shift
        cargo build --release --quiet -p linerate
        exec ./target/release/linerate lab run "$@"
        ;;
    test)
        shift
        # As root, everything: the tests that need namespaces, BPF and XDP
        # too (the `privileged` feature; without it they are ignored).
        # One build, not kept for edits: no incremental caches on disk.
        export CARGO_INCREMENTAL=0
        exec cargo test --workspace --features privileged "$@"
        ;;
    *)
        echo "usage: $0 lab|test [args...]" >&2
        exit 2
        ;;
esac
