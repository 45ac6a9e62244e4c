//! Lab traffic: [`gen`] sends frames with the XDP live-frames generator,
//! [`recv`] counts what arrives with an XDP count-and-drop program, and
//! [`frame`] builds the frame templates both agree on.

pub mod afpacket;
pub mod bench;
pub mod flows;
pub mod frame;
pub mod gen;
pub mod latency;
pub mod measure;
pub mod mix;
pub mod profile;
pub mod recv;
pub mod sizes;
pub mod synth;
pub mod tcp;
pub mod units;
