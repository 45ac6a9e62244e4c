//! linerate's dataplane as the control plane sees it: the router
//! program's (bpf/router/router.bpf.c) map layouts, mirrored from its headers and
//! checked against its BTF ([`layout`]); [`fastpath::FastPath`], which
//! loads the program and performs the writes the control plane decides;
//! the [`dataplane::Dataplane`] trait those writes go through; and
//! [`model::Model`], the same maps in memory with the program's verdicts
//! in Rust, held to the program by the tests. The verdict cache's and
//! the connection cache's arithmetic ([`fw_cache`], [`ct_cache`]), the
//! FDB's keys and slots ([`fdb`]), the VLAN devices' places ([`vlans`]), the
//! firewall's classifier as the program holds and walks it ([`fwc`]), and the
//! record by which other processes find a running router's maps
//! ([`record`]) are the program's contract too.
pub mod ct_cache;
pub mod dataplane;
pub mod fastpath;
pub mod fdb;
pub mod fw_cache;
pub mod fw_maps;
pub mod fw_model;
pub mod fwc;
pub mod layout;
pub mod local;
pub mod model;
pub mod police;
pub mod record;
pub mod rules;
pub mod vlans;
