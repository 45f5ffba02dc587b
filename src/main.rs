//! The `recsel` command: parse arguments, run, map errors to exit codes (docs/ARCHITECTURE.md: thin binary).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::main() {
        Ok(code) => code,
        Err(err) => {
            // A closed pipe (`recsel ... | head`) is not a failure.
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
