//! Library errors. Every variant names the offending value so a user can act on the message
//! (docs/ARCHITECTURE.md, "Conventions").

/// Result alias of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors a user can cause: bad parameters, bad inputs, unknown names.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter outside its domain, caught once at construction.
    #[error("{name} must be {requirement}, got {value}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// What it must satisfy, in words.
        requirement: &'static str,
        /// The value given.
        value: f64,
    },
    /// A selection problem without candidates.
    #[error("the candidate list is empty")]
    EmptyCandidates,
    /// Scores and sensitivities of different lengths.
    #[error(
        "scores and sensitivities differ in length: {scores} scores, {sensitivities} sensitivities"
    )]
    LengthMismatch {
        /// Number of scores.
        scores: usize,
        /// Number of sensitivities.
        sensitivities: usize,
    },
    /// A score that is NaN or infinite.
    #[error("score of candidate {index} must be finite, got {value}")]
    NonFiniteScore {
        /// Candidate index.
        index: usize,
        /// The score.
        value: f64,
    },
    /// A sensitivity that is not a finite positive number.
    #[error("sensitivity of candidate {index} must be finite and > 0, got {value}")]
    BadSensitivity {
        /// Candidate index.
        index: usize,
        /// The sensitivity.
        value: f64,
    },
    /// A name that is not in a registry; `valid` lists the accepted names.
    #[error("unknown {kind} '{name}'; valid names: {valid}")]
    UnknownName {
        /// What kind of name (`mechanism`, `format`, …).
        kind: &'static str,
        /// The name given.
        name: String,
        /// The accepted names, comma separated.
        valid: String,
    },
    /// A value that could not be parsed, with where it came from.
    #[error("{context}: {message}")]
    Parse {
        /// Where the value came from (file and line, or what was being parsed).
        context: String,
        /// What is wrong with it.
        message: String,
    },
    /// An I/O error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else a user can cause, described in words.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// An I/O error about `path`.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
