//! The Markdown documentation stays navigable and reads as a manual (docs/testing.md): every
//! relative link of README.md, docs/ and data/README.md resolves to a file and, with `#anchor`, to
//! a heading of that file (GitHub's anchor slugs); the README stays an entry point; and no text
//! file of the repository cites an issue number or a work session, which a reader cannot look up.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Link targets that may be absent from a checkout: `docs/cli.md`, the CLI reference generated
/// from the command-line definitions. Links to it are checked like any other once it exists.
const MAY_BE_ABSENT: &[&str] = &["docs/cli.md"];

/// The longest the top-level README may grow: it is an entry point, the rest lives in docs/.
const README_MAX_LINES: usize = 300;

/// The Markdown files whose links are checked: the top-level `*.md`, everything under `docs/`,
/// and the `*.md` directly in `data/` and `python/`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [root.to_path_buf(), root.join("data"), root.join("python")] {
        files.extend(files_in(&dir, false, &|p| has_ext(p, &["md"])));
    }
    files.extend(files_in(&root.join("docs"), true, &|p| has_ext(p, &["md"])));
    files.sort();
    files
}

fn has_ext(p: &Path, exts: &[&str]) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e))
}

/// Files under `dir` accepted by `keep`, recursively when asked; hidden folders, build output
/// (`target`, `out`) and Python caches are skipped.
fn files_in(dir: &Path, recursive: bool, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let skip = name.starts_with('.')
                || ["target", "out", "__pycache__", "node_modules"].contains(&name.as_str());
            if recursive && !skip {
                found.extend(files_in(&path, true, keep));
            }
        } else if keep(&path) {
            found.push(path);
        }
    }
    found
}

/// The lines of a Markdown text outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line with its inline code spans removed (a link inside backticks is not a link).
fn without_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The targets of the inline links and images of one line: `[text](target)`, `![alt](target)`,
/// without an optional `"title"`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 1;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let target = after[..end].trim();
        let target = target.split_once(" \"").map_or(target, |(t, _)| t);
        let target = target.trim_start_matches('<').trim_end_matches('>');
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor of a heading: the rendered text, lower-cased, without punctuation and symbols
/// (letters, digits, `_`, `-` and spaces stay), spaces turned into `-`.
fn slug(heading: &str) -> String {
    // Render the inline Markdown that GitHub would: link text instead of links, no code ticks or
    // emphasis stars.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a Markdown file offers: its headings' slugs, a repeated slug numbered `-1`, `-2`, …
/// as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// `path` with `.` and `..` resolved lexically.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken relative link of `files` (paths under `root`), as `file:line: target (why)`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut broken = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    normalise(&file.parent().unwrap().join(path))
                };
                let relative = resolved
                    .strip_prefix(root)
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                if !resolved.exists() {
                    if !MAY_BE_ABSENT.contains(&relative.as_str()) {
                        broken.push(format!("{shown}:{n}: {target} (no such file)"));
                    }
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if !has_ext(&resolved, &["md"]) {
                    broken.push(format!(
                        "{shown}:{n}: {target} (anchor into a non-Markdown file)"
                    ));
                    continue;
                }
                let known = cache
                    .entry(resolved.clone())
                    .or_insert_with(|| anchors(&std::fs::read_to_string(&resolved).unwrap()));
                if !known.contains(anchor) {
                    broken.push(format!(
                        "{shown}:{n}: {target} (no heading with this anchor)"
                    ));
                }
            }
        }
    }
    broken
}

#[test]
fn every_markdown_link_and_anchor_resolves() {
    let root = Path::new(ROOT);
    let files = markdown_files(root);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")) && files.len() > 10,
        "the Markdown files were not found under {ROOT}: {files:?}"
    );
    let broken = broken_links(root, &files);
    assert!(
        broken.is_empty(),
        "broken links in the documentation:\n{}",
        broken.join("\n")
    );
}

/// Power: the same check reports a missing file, a missing anchor in another file and in the same
/// file, and passes the links that do resolve — including a heading with code, punctuation and a
/// repeated title.
#[test]
fn the_link_check_catches_broken_files_and_anchors() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A page\n\n## `recsel select`: outputs (fig 13)\n\n## Notes\n\n## Notes\n\n```\n## not a heading\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("README.md"),
        "[ok](docs/a.md) [ok](docs/a.md#recsel-select-outputs-fig-13) [ok](docs/a.md#notes-1)\n\
         [ok](#top) [web](https://example.org/x#y) `[code](not-a-link.md)`\n\
         [missing](docs/b.md) [bad anchor](docs/a.md#not-a-heading) [self](#nowhere)\n\
         ![img](docs/a.md)\n\n# Top\n",
    )
    .unwrap();
    let files = vec![root.join("README.md"), root.join("docs/a.md")];
    let broken = broken_links(root, &files);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(
        broken[0].contains("docs/b.md (no such file)"),
        "{broken:#?}"
    );
    assert!(
        broken[1].contains("#not-a-heading (no heading"),
        "{broken:#?}"
    );
    assert!(broken[2].contains("#nowhere (no heading"), "{broken:#?}");
}

#[test]
fn github_slugs_of_headings() {
    assert_eq!(
        slug("Real-data protocol: what the paper's text changes (seed 001 §VIII)"),
        "real-data-protocol-what-the-papers-text-changes-seed-001-viii"
    );
    assert_eq!(
        slug("Utility a product owner reads: hit@1 and MSE"),
        "utility-a-product-owner-reads-hit1-and-mse"
    );
    assert_eq!(
        slug("`recsel synth`, `recsel twocand`, `recsel run`"),
        "recsel-synth-recsel-twocand-recsel-run"
    );
    assert_eq!(slug("Fig 2 — scenarios 1–3"), "fig-2--scenarios-13");
    assert_eq!(slug("The [bandit](bandit.md) (ε)"), "the-bandit-ε");
}

#[test]
fn readme_is_an_entry_point() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines (at most {README_MAX_LINES}): move reference and results to docs/"
    );
    for command in [
        "cargo run --release -- select --dataset synthetic",
        "cargo test --release --locked",
    ] {
        assert!(
            readme.contains(command),
            "README.md no longer shows `{command}`"
        );
    }
}

/// Phrases that cite development history: an issue number, or a work session.
fn history_phrases(text: &str) -> Vec<String> {
    const ISSUE: &str = "issue";
    const SESSION: &str = "session";
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (n, line) in lower.lines().enumerate() {
        let bytes = line.as_bytes();
        for (at, _) in line.match_indices(ISSUE) {
            let word_start = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
            let after = &line[at + ISSUE.len()..];
            let number = after
                .strip_prefix(' ')
                .is_some_and(|r| r.as_bytes().first().is_some_and(|b| b.is_ascii_digit()));
            if word_start && number {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
        for which in ["this", "previous", "last", "next"] {
            if line.contains(&format!("{which} {SESSION}")) {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

/// The text files of the repository a reader sees: sources, tests, benches, examples, pipelines,
/// the Python package, the docs and the build files.
fn text_files(root: &Path) -> Vec<PathBuf> {
    let text = |p: &Path| has_ext(p, &["rs", "md", "toml", "sh", "py", "pyi", "yml", "yaml"]);
    let mut files = files_in(root, false, &text);
    for dir in [
        "src",
        "tests",
        "benches",
        "examples",
        "pipelines",
        "python",
        "docs",
        "data",
    ] {
        files.extend(files_in(&root.join(dir), true, &text));
    }
    files.extend(files_in(&root.join(".ci"), true, &|_| true));
    files.retain(|f| !f.ends_with("Cargo.lock"));
    files.sort();
    files
}

#[test]
fn no_development_history_in_the_repository() {
    let root = Path::new(ROOT);
    let files = text_files(root);
    assert!(
        files.iter().any(|f| f.ends_with("src/lib.rs")),
        "the sources were not found under {ROOT}"
    );
    let mut cited = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for hit in history_phrases(&text) {
            cited.push(format!(
                "{}: {hit}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        cited.is_empty(),
        "development history in the repository (say what the code does; history lives in git):\n{}",
        cited.join("\n")
    );
}

/// Power: the phrases are found in any case and position; "tissue 3", "issues" and a pytest
/// fixture's `scope="session"` are not history.
#[test]
fn the_history_check_catches_issue_numbers_and_sessions() {
    let issue = "Issue";
    let text = format!(
        "// fixed for {issue} 12\n# see {} 4, item 2\nwhat this {} changed\nthe previous {} did\n\
         tissue 3; issues are tracked; scope=\"session\"; an issue with numbers\n",
        issue.to_lowercase(),
        "session",
        "SESSION"
    );
    let found = history_phrases(&text);
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].starts_with("line 1:") && found[3].starts_with("line 4:"));
}
