#![no_main]
// The config target: crates/fuzz, linerate_fuzz::config.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::config(data);
});
