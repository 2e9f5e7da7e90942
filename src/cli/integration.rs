//! The commands that fit cohost into a person's setup, for living with it every day: the config file, shell completions
//! and the man page, the systemd user service, the machine-wide Claude hook, and the tmux status segment and jump key. Clap
//! structs only; each runs in `crate::commands`.

use clap::Subcommand;

/// Flattened into `Command`: these are top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum IntegrationCommand {
    /// The config file ($XDG_CONFIG_HOME/cohost/config.toml): every `serve` setting.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script: `cohost completions bash > ~/.local/share/bash-completion/completions/cohost`.
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the man page (roff): `cohost man | man -l -`.
    Man,
    /// Start `cohost serve` at login: a systemd user unit (`cohost.service`).
    #[command(subcommand)]
    Service(ServiceCommand),
    /// The opt-in Claude hook for every Claude on this machine (your `~/.claude/settings.json`,
    /// or `$CLAUDE_CONFIG_DIR/settings.json`): install, uninstall, status.
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Count the agents: running, waiting for you, finished and unseen (one request).
    /// `--tmux` prints a short segment for tmux's `status-right`.
    Status {
        /// A tmux status segment with style codes (`#[fg=…]`); empty when nothing is going on.
        #[arg(long, conflicts_with = "json")]
        tmux: bool,
        #[arg(long)]
        json: bool,
    },
    /// Switch your tmux client to the next agent that needs you (waiting first, then finished
    /// and unseen) and mark it seen. Repeat to cycle.
    Next {
        /// Only agents waiting for you (an approval, a question, input).
        #[arg(long, conflicts_with = "unseen")]
        waiting: bool,
        /// Only agents that finished and you have not seen.
        #[arg(long)]
        unseen: bool,
        /// The tmux client to switch (a key binding passes `#{client_name}`). Default: the
        /// client this runs in, else tmux's most recent one.
        #[arg(long)]
        client: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective `serve` settings and where each came from (flag, env, file, default).
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Print the config file's path.
    Path,
}

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write `$XDG_CONFIG_HOME/systemd/user/cohost.service` (runs this `cohost serve`, restarts it
    /// on failure, logs to the journal), then enable and start it. Settings come from the config
    /// file; `--home`/`COHOST_HOME`, `COHOST_CONFIG` and this shell's PATH are written into it.
    Install {
        /// Write the unit, but do not enable or start it.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop and disable the unit, and remove its file.
    Uninstall,
    /// Whether the unit is installed, enabled and running, and whether the daemon answers.
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Add cohost's hook to your Claude settings, after your own hooks (a backup first; a
    /// second install changes nothing). Every Claude started afterwards reports its status to
    /// this daemon; one no cohost session drives, or with no daemon running, goes on unchanged.
    Install,
    /// Take cohost's hook out again: the file as it was before the install, byte for byte, when
    /// nothing else changed it since; else only cohost's entries are removed.
    Uninstall,
    /// Whether cohost's hook is installed, not installed, or stale (a moved binary, another
    /// home), and in which file.
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}
