//! The library's dependency direction (docs/ARCHITECTURE.md): every top-level module sits in a
//! layer and may import only from strictly lower layers, and the files inside one module folder
//! import each other without cycles. The test reads `src/` as text, so a reintroduced upward
//! import fails here with the file, the line and the rule it breaks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of lower layers only. A new top-level
/// module must be placed here (and in docs/ARCHITECTURE.md) before the test passes.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["io", "options", "rng", "simd", "hugepages"],
    &["numerics"],
    &["data", "privacy"],
    &["mechanisms", "model"],
    &["scoring", "eval", "ledger", "column_statistic"],
    &["experiments", "recommend"],
    // The evaluation wing: tunes and measures releases; serving never imports it.
    &["evaluate"],
    &["report", "audit"],
    &["serve"],
    // The binary's subcommands: above everything, their files without cycles like any module.
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// A source file: its top-level module, its file stem inside that module's folder (`None` for
/// `mod.rs` or a single-file module) and its text.
struct Source {
    path: String,
    module: String,
    file: Option<String>,
    text: String,
}

/// Text with `//` comments removed (string literals with `//` in them are rare in `use` lines and
/// paths, which is all this test reads).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let code = match l.find("//") {
                Some(p) => &l[..p],
                None => l,
            };
            (i + 1, code.to_string())
        })
        .collect()
}

/// First path segments after `prefix` on a line: `crate::a::b` gives `a`; `crate::{a, b::c}`
/// gives `a` and `b`.
fn segments_after(line: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(p) = rest.find(prefix) {
        // Only whole path roots: `crate::`, not `mycrate::`.
        let before = rest[..p].chars().last();
        rest = &rest[p + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner.find('}').unwrap_or(inner.len());
            for item in inner[..end].split(',') {
                let head = item.trim().split("::").next().unwrap_or("").trim();
                if !head.is_empty() {
                    out.push(head.to_string());
                }
            }
        } else {
            let head: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !head.is_empty() {
                out.push(head);
            }
        }
    }
    out
}

/// Every violation of the rules in `sources`, one line each.
fn violations(sources: &[Source]) -> Vec<String> {
    let mut bad = Vec::new();
    // Files of each module folder, for the sibling-cycle check.
    let mut siblings: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in sources {
        if let Some(f) = &s.file {
            siblings.entry(&s.module).or_default().insert(f);
        }
    }
    let mut edges: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for s in sources {
        let Some(own) = layer_of(&s.module) else {
            bad.push(format!(
                "{}: module `{}` has no layer; place it in tests/architecture.rs LAYERS and \
                 docs/ARCHITECTURE.md",
                s.path, s.module
            ));
            continue;
        };
        for (line, code) in code_lines(&s.text) {
            for target in segments_after(&code, "crate::") {
                if target == s.module || matches!(target.as_str(), "Error" | "Result") {
                    continue;
                }
                match layer_of(&target) {
                    Some(l) if l < own => {}
                    Some(_) => bad.push(format!(
                        "{}:{line}: `{}` (layer {own}) imports `{target}` (layer {}): \
                         dependencies run from higher layers to lower ones only",
                        s.path,
                        s.module,
                        layer_of(&target).unwrap()
                    )),
                    None => {}
                }
            }
            // Sibling files of one folder: `super::x` or `crate::<module>::x`.
            if let Some(f) = &s.file {
                let own_prefix = format!("crate::{}::", s.module);
                let names = segments_after(&code, "super::")
                    .into_iter()
                    .chain(segments_after(&code, &own_prefix));
                for n in names {
                    if let Some(sib) = siblings[s.module.as_str()].get(n.as_str()) {
                        if *sib != f.as_str() {
                            edges.entry((&s.module, f)).or_default().insert(sib);
                        }
                    }
                }
            }
        }
    }
    // A cycle among sibling files: depth-first search per module.
    for (module, files) in &siblings {
        fn visit<'a>(
            node: &'a str,
            module: &'a str,
            edges: &BTreeMap<(&'a str, &'a str), BTreeSet<&'a str>>,
            stack: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
            bad: &mut Vec<String>,
        ) {
            if done.contains(node) {
                return;
            }
            if let Some(p) = stack.iter().position(|n| *n == node) {
                let mut cycle: Vec<&str> = stack[p..].to_vec();
                cycle.push(node);
                bad.push(format!(
                    "src/{module}/: the files import each other in a cycle: {}",
                    cycle.join(" -> ")
                ));
                return;
            }
            stack.push(node);
            if let Some(next) = edges.get(&(module, node)) {
                for n in next {
                    visit(n, module, edges, stack, done, bad);
                }
            }
            stack.pop();
            done.insert(node);
        }
        let mut done = BTreeSet::new();
        for f in files {
            visit(f, module, &edges, &mut Vec::new(), &mut done, &mut bad);
        }
    }
    bad
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The sources of the library and of the binary's subcommands (`cli/`, the top layer); the crate
/// roots `lib.rs` and `main.rs` only declare modules.
fn library_sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let rel = p.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let first = parts[0].trim_end_matches(".rs").to_string();
        if matches!(first.as_str(), "lib" | "main") {
            continue;
        }
        // src/data/load.rs -> (data, load); src/data/mod.rs -> (data, None); src/rng.rs ->
        // (rng, None); deeper files count as their folder's file.
        let file = match parts.len() {
            1 => None,
            _ if parts[1] == "mod.rs" => None,
            _ => Some(parts[1].trim_end_matches(".rs").to_string()),
        };
        out.push(Source {
            path: format!("src/{}", parts.join("/")),
            module: first,
            file,
            text: std::fs::read_to_string(&p).unwrap(),
        });
    }
    out
}

#[test]
fn library_dependencies_run_one_way() {
    let sources = library_sources();
    assert!(sources.len() > 30, "read only {} files", sources.len());
    let bad = violations(&sources);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn source(path: &str, text: &str) -> Source {
    let parts: Vec<&str> = path.trim_start_matches("src/").split('/').collect();
    Source {
        path: path.to_string(),
        module: parts[0].trim_end_matches(".rs").to_string(),
        file: (parts.len() > 1 && parts[1] != "mod.rs")
            .then(|| parts[1].trim_end_matches(".rs").to_string()),
        text: text.to_string(),
    }
}

/// The check has power: the two cycles this layout removed, put back, are both reported.
#[test]
fn an_upward_import_or_a_sibling_cycle_is_reported() {
    let upward = [
        source(
            "src/report/mod.rs",
            "use crate::experiments::select::MseRow;",
        ),
        source(
            "src/experiments/real.rs",
            "use crate::report::write_atomic; // upward",
        ),
        source("src/model/io.rs", "use crate::{data::Csr, report::Table};"),
    ];
    let bad = violations(&upward);
    assert_eq!(bad.len(), 2, "{bad:#?}");
    assert!(bad[0].contains("src/experiments/real.rs:1: `experiments` (layer 6) imports `report`"));
    assert!(bad[1].contains("src/model/io.rs:1: `model` (layer 4) imports `report`"));

    let cycle = [
        source(
            "src/data/load.rs",
            "use crate::data::split::{split, SplitConfig};",
        ),
        source(
            "src/data/split.rs",
            "let t = super::load::select_rows(&m, &rows);",
        ),
        source("src/data/mod.rs", "pub use load::load_dataset;"),
    ];
    let bad = violations(&cycle);
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert!(bad[0].contains("load -> split -> load"), "{}", bad[0]);

    // The binary's subcommands are held to the same rule: two that call each other are a cycle.
    let cli = [
        source(
            "src/cli/recommend.rs",
            "super::recommend_ledger::run(rec, options, input)?;",
        ),
        source(
            "src/cli/recommend_ledger.rs",
            "super::recommend::show_report(&report, None)?;",
        ),
        source("src/cli/common.rs", "use recsel::recommend::Recommender;"),
    ];
    let bad = violations(&cli);
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert!(
        bad[0].contains("src/cli/: the files import each other in a cycle: recommend -> recommend_ledger -> recommend"),
        "{}",
        bad[0]
    );

    let unknown = [source("src/newstage/mod.rs", "use crate::data::Csr;")];
    assert!(violations(&unknown)[0].contains("has no layer"));
}

/// The house limit on a source file's length, before its `#[cfg(test)]` module.
const MAX_LINES: usize = 800;

/// Lines of `text` before its first line that opens a `#[cfg(test)]` module (all lines without
/// one).
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

/// Every `.rs` file of the library, the binary, the Python binding, the examples and the benches
/// longer than [`MAX_LINES`] before its tests, with its length.
fn long_files() -> Vec<(String, usize)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "python/src", "examples", "benches"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let n = lines_before_tests(&std::fs::read_to_string(&p).unwrap());
            (p.strip_prefix(root).unwrap().display().to_string(), n)
        })
        .filter(|(_, n)| *n > MAX_LINES)
        .collect()
}

/// No source file over 800 lines before its `#[cfg(test)]` module: a longer one is split by
/// topic (docs/ARCHITECTURE.md, "Conventions").
#[test]
fn no_source_file_is_over_800_lines_before_its_tests() {
    let long = long_files();
    assert!(
        long.is_empty(),
        "split these files by topic (at most {MAX_LINES} lines before #[cfg(test)]): {long:?}"
    );
    // The count has power: it stops at the test module, and a long file is one line too many.
    let text = format!(
        "{}#[cfg(test)]\nmod tests {{}}\n",
        "fn f() {}\n".repeat(MAX_LINES + 1)
    );
    assert_eq!(lines_before_tests(&text), MAX_LINES + 1);
    assert_eq!(lines_before_tests("a\n#[cfg(test)]\nb\nc\n"), 1);
}
