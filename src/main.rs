//! `trainer`: one binary that trains, checks the GPU first, and knows its scheduler.
//! Everything lives in the library; this file sets up the allocator and turns the result into
//! an exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Before the first tensor: keep freed buffers for the next step (see host_memory).
    trainer::backend::host_memory::tune();
    let cli = match trainer::cli::config::parse_cli() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match trainer::run(cli) {
        Ok(code) => code,
        Err(err) => {
            // `error: …` then one `caused by: …` line per cause: each text is said once.
            eprint!("{}", trainer::error::render(&err));
            ExitCode::from(trainer::error::exit_code_of(&err))
        }
    }
}
