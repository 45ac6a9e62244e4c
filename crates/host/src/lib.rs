//! Host plumbing shared by the lab, the generator and the router: running
//! system tools with errors a person can act on, entering network
//! namespaces, running daemons in them, pinning threads, checking privileges, the monotonic clock,
//! and the stop flag Ctrl-C and SIGTERM set.

pub mod clock;
pub mod cmd;
pub mod cpu;
pub mod daemon;
pub mod ethtool;
pub mod field;
pub mod netns;
pub mod privilege;
pub mod queue_stats;
pub mod stop;
