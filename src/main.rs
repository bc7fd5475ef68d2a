//! The `memviz` binary: parse arguments, run the command, map errors to exit codes.
//! Usage errors exit 2 (clap), bad input exits 1 with one `error: ...` line.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = memviz::cli::Cli::parse();
    match memviz::commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if memviz::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let msg = format!("{err:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}
