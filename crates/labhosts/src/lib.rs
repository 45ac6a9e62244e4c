//! The lab's real hosts (docs/lab-remote.md): how a command runs on one
//! (over SSH, or on this machine), and a scenario's `[hosts]` and `[ssh]`
//! tables read and checked, before anything runs anywhere.
pub mod hosts;
pub mod remote;
