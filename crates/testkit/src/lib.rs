//! What linerate's tests share (a dev-only crate): [`plane`], the router
//! program on the two ends of a scratch veth pair and the plane that
//! writes the model and the program alike; [`frames`], frames built by
//! field through etherparse rather than by byte offset; [`vm`], a virtual
//! machine running a kernel with what this host's lacks.
pub mod frames;
pub mod plane;
pub mod rng;
pub mod vm;
