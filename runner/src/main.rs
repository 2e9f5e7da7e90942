//! cohost-runner: the in-pane launcher (being built).

fn main() {}
