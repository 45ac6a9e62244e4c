#!/usr/bin/env bash
# Installs what linerate needs on Debian 12, as root: the BPF toolchain,
# the tools the lab calls, and Rust (if cargo is missing). Idempotent: fast
# when everything is already there.
set -euo pipefail

# bird2, frr: the BGP daemons `linerate bench bgp` and its tests run in the
# lab's namespaces (each test starts its own, with its own files; the
# packages' services are not used).
# clang-19: the FIB lives in a BPF arena, whose address-space casts clang
# emits from version 18 (Debian 12's default clang is 14).
PACKAGES=(clang clang-19 llvm libbpf-dev libelf-dev zlib1g-dev pkg-config make gcc
          iproute2 ethtool iputils-ping procps util-linux linux-libc-dev
          nftables iptables fonts-dejavu-core python3-venv
          bird2 frr
          systemd     # systemd-analyze verifies the service unit
          prometheus  # promtool checks the metrics' exposition
          linux-perf  # lab run --profile records the DUT's core
          conntrack   # the stateful firewall's tests list and delete the kernel's entries
          iperf3      # real TCP through the router: its tests and `linerate bench tcp`
          openssh-client openssh-server # the lab's remote hosts (crates/labhosts/src/remote.rs) and their test's sshd
          qemu-system-x86 busybox-static cpio kmod xz-utils) # the VM for what this kernel lacks (crates/testkit/src/vm.rs)

if [ "$(id -u)" -ne 0 ]; then
    echo "setup: run as root (apt-get, network namespaces and BPF need it)" >&2
    exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The VM's kernel: Debian's own, which has the modules this host's kernel
# lacks (802.1Q, VRF, bonding), unpacked where crates/testkit/src/vm.rs
# looks for it, its modules indexed for modprobe.
VM_KERNEL=6.12.117+deb12-amd64
VM_DIR=/var/cache/linerate/vm/$VM_KERNEL
if [ ! -e "$VM_DIR/ready" ]; then
    echo "setup: fetching the VM's kernel, linux-image-$VM_KERNEL"
    tmp=$(mktemp -d)
    chmod 755 "$tmp"
    ( cd "$tmp" && { apt-get download -q "linux-image-$VM_KERNEL" 2>/dev/null ||
        { apt-get update -q && apt-get download -q "linux-image-$VM_KERNEL"; }; } )
    rm -rf "$VM_DIR"
    mkdir -p "$VM_DIR"
    dpkg-deb -x "$tmp"/linux-image-*.deb "$VM_DIR"
    rm -rf "$tmp"
    depmod -b "$VM_DIR" "$VM_KERNEL"
    touch "$VM_DIR/ready"
fi

if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
        echo "setup: installing Rust with rustup"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q curl ca-certificates
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    }
fi

# cargo-deb builds the Debian package (crates/linerate/tests/package_cli.rs).
if ! PATH="$HOME/.cargo/bin:$PATH" command -v cargo-deb >/dev/null 2>&1; then
    echo "setup: installing cargo-deb"
    PATH="$HOME/.cargo/bin:$PATH" cargo install --quiet --locked cargo-deb@3.8.0
fi

# FD.io CSIT's MLRsearch, the oracle of linerate's (scripts/csit-mlrsearch.py,
# crates/linerate/tests/csit_oracle.rs), in a venv of Debian's Python.
cd "$(dirname "$0")/.."
if ! .venv-csit/bin/python -c "import MLRsearch" >/dev/null 2>&1; then
    echo "setup: installing CSIT's MLRsearch 1.2.1 into .venv-csit"
    rm -rf .venv-csit
    /usr/bin/python3 -m venv .venv-csit
    .venv-csit/bin/pip install -q MLRsearch==1.2.1
fi
