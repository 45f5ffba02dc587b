//! `recsel mechanisms`: the registry as a table.

use std::io::Write;
use std::process::ExitCode;

use recsel::mechanisms::{MechanismSpec, REGISTRY};

/// List every selection mechanism with its privacy guarantee, parameters and defaults.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  recsel mechanisms\n  recsel mechanisms --json")]
pub struct Args {
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Every parameter of `s` with its default, as declared.
fn params_of(s: &MechanismSpec) -> Vec<String> {
    s.params
        .iter()
        .map(|p| format!("{}={}", p.name, p.default_value()))
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = REGISTRY
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "guarantee": s.guarantee,
                    "private": s.private,
                    "parameters": params_of(s),
                    "summary": s.summary,
                    "use_when": s.use_when,
                    "audit_reference": s.audit_reference,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Columns as wide as their longest entry (at least the widths the table always had).
    let cells = |s: &MechanismSpec| {
        let params = params_of(s);
        let params = if params.is_empty() {
            "-".to_string()
        } else {
            params.join(" ")
        };
        [
            s.name.to_string(),
            s.guarantee.to_string(),
            params,
            s.use_when.to_string(),
        ]
    };
    let mut w = [13, 36, 32, 42];
    for s in REGISTRY {
        for (wi, c) in w.iter_mut().zip(cells(s)) {
            *wi = (*wi).max(c.chars().count());
        }
    }
    let row = |out: &mut std::io::StdoutLock<'_>, c: [String; 4], last: &str| {
        writeln!(
            out,
            "{:<w0$} {:<w1$} {:<w2$} {:<w3$} {last}",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        )
    };
    row(
        &mut out,
        [
            "name".into(),
            "guarantee".into(),
            "parameters (defaults)".into(),
            "use when".into(),
        ],
        "description",
    )?;
    for s in REGISTRY.iter().filter(|s| !s.audit_reference) {
        row(&mut out, cells(s), s.summary)?;
    }
    writeln!(
        out,
        "\nAudit references (deliberately not eps-DP; not part of `all`, for `recsel audit`):"
    )?;
    for s in REGISTRY.iter().filter(|s| s.audit_reference) {
        row(&mut out, cells(s), s.summary)?;
    }
    writeln!(
        out,
        "\nEvery mechanism also takes --eps (finite, > 0). Defaults are the paper's synthetic settings;\n\
         real-data runs use gamma=0.008 (MovieLens, Amazon Books) or 0.0008 (Netflix)."
    )?;
    Ok(ExitCode::SUCCESS)
}
