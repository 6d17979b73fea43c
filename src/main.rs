//! `trainer`: one binary that trains, checks the GPU first, and knows its scheduler.
//! Everything lives in the library; this file sets up the allocator and turns the result into
//! an exit code (every code is a [`trainer::exit::Exit`]).

use std::process::ExitCode;

use trainer::exit::Exit;

fn main() -> ExitCode {
    // Before the first tensor: keep freed buffers for the next step (see host_memory).
    trainer::backend::host_memory::tune();
    let cli = match trainer::cli::config::parse_cli() {
        Ok(cli) => cli,
        Err(e) => {
            // What `clap::Error::exit` does, with the code from the table: usage errors on
            // stderr exit with `Exit::Usage`, `--help`/`--version` on stdout with `Exit::Ok`.
            let _ = e.print();
            return Exit::from_status(e.exit_code()).into();
        }
    };
    match trainer::run(cli) {
        Ok(code) => code,
        Err(err) => {
            // `error: …` then one `caused by: …` line per cause: each text is said once.
            eprint!("{}", trainer::error::render(&err));
            trainer::error::exit_of(&err).into()
        }
    }
}
