#![no_main]
// The scenario target: crates/fuzz, linerate_fuzz::scenario.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::scenario(data);
});
