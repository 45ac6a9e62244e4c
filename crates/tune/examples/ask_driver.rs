//! What an interface's driver says of itself, as `linerate tune` asks it,
//! printed as JSON: how the tests' driver fixtures are recorded
//! (`cargo run -p linerate-tune --example ask_driver -- eth0`).
fn main() {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: ask_driver INTERFACE");
        std::process::exit(2);
    };
    let driver = linerate_tune::Driver::ask(&name);
    println!(
        "{}",
        serde_json::to_string_pretty(&driver).expect("serialisable")
    );
}
