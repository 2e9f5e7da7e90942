//! cohost-hook: the Claude Code hook command (being built).

fn main() {}
