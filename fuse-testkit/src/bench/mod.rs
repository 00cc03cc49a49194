//! What the benches share: host time per launch, the per-call samples behind a median, and the
//! roofline's ceilings and points.

pub mod host_time;
pub mod roofline;
pub mod samples;
