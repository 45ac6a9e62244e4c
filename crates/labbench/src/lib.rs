//! linerate's benchmarks under traffic, each in a lab of its own: what a
//! ruleset change costs the traffic flowing (`firewall_change`), what a
//! burst of control-plane work does to it (`control_burst`), how fast
//! the router follows a route or neighbour change (`route_change`), what
//! a restart costs, each way of restarting (`restart`), and real TCP
//! through the router, carried or not (`tcp`). The benches of the
//! libraries against their peers are linerate-bench's.
pub mod control_burst;
pub mod firewall_change;
pub mod lab_traffic;
pub mod restart;
pub mod route_change;
mod service_manager;
pub mod tcp;
