//! Integration tests of bh-session against real Pi files (tests/fixtures) and
//! hand-made bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod bad_input;
mod context;
mod fixtures;
mod fork;
mod graph;
mod proptests;
mod support;
mod tree;
mod write;
