#![no_main]
// The netlink target: crates/fuzz, linerate_fuzz::netlink.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::netlink(data);
});
