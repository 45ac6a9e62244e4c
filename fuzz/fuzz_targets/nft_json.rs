#![no_main]
// The nft_json target: crates/fuzz, linerate_fuzz::nft_json.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::nft_json(data);
});
