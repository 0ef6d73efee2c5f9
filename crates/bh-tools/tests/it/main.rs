#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod confinement;
mod fixtures;
mod git_broker;
mod gitdirs;
mod props;
mod sandboxing;
mod tools;
