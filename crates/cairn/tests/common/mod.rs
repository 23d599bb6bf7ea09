//! Code shared by integration tests. It lives in a directory so that cargo does not build it
//! as a test target of its own; a test includes it with `mod common;`.

pub mod linearizability;
