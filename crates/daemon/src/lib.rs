//! linerate's service: `linerate route` as a long-running process. The
//! loop ([`run`]) attaches the fast path, mirrors the kernel into it
//! (linerate_router), runs the firewall's and conntrack's threads
//! (linerate_firewall) and answers the kernel's notifications; around it
//! the configuration file ([`config`]), the hand-over of a running fast
//! path to the next router ([`handover`]), the Prometheus exporter
//! ([`metrics`]), logging ([`log`]) and the service manager's protocol
//! ([`service`]); and the views of a running router from another
//! process ([`stats`], [`queues`]).
pub mod config;
pub mod handover;
pub mod log;
pub mod metrics;
pub mod queues;
pub mod run;
pub mod service;
pub mod stats;
