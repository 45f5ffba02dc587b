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

/// Phrases of a measurement diary: a comparison with an earlier build or an account of what was
/// tried and dropped. Measured results are stated as current facts in docs/results.md, each with
/// the command that regenerates it; how the code got there lives in git.
const DIARY_PHRASES: &[&str] = &[
    concat!("previous ", "build"),
    "previous commit's build",
    "previous run",
    "earlier build",
    "the build that",
    "predates",
    "before, after",
    "before and after",
    "as fast as before",
    "than before",
    "got faster",
    "got slower",
    "was not kept",
    "were not kept",
    "it now ",
    ", now ",
    "; now ",
    // Split so that a search of the tree for history phrases does not find them here.
    concat!("this ", "session"),
    concat!("previous ", "session"),
    concat!("last ", "session"),
];

/// The diary phrases of a Markdown text, and its headings that speak of a before and an after,
/// as `line N: text`.
fn diary_phrases(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in prose_lines(text) {
        let lower = line.to_lowercase();
        let heading = lower.starts_with('#');
        let before_after = lower.contains("before") && lower.contains("after");
        if DIARY_PHRASES.iter().any(|p| lower.contains(p)) || (heading && before_after) {
            found.push(format!("line {n}: {}", line.trim()));
        }
    }
    found
}

#[test]
fn no_measurement_diaries_in_the_docs() {
    let root = Path::new(ROOT);
    let mut cited = Vec::new();
    for file in markdown_files(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for hit in diary_phrases(&text) {
            cited.push(format!(
                "{}: {hit}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        cited.is_empty(),
        "measurement diaries in the docs (state the result as a current fact in docs/results.md, \
         with its command; history lives in git):\n{}",
        cited.join("\n")
    );
}

/// Power: every diary phrase and a before/after heading are found in any case; a timeline's
/// "before and after the shift" outside a heading is a diary phrase too, while "after the shift",
/// "the previous commit was on disk" and a code block are not.
#[test]
fn the_diary_check_catches_comparisons_with_earlier_builds() {
    let mut text = String::from("# Speed: Before and after\n");
    for p in DIARY_PHRASES {
        text.push_str(&format!("x {} y\n", p.to_uppercase()));
    }
    text.push_str("reward after the shift\nwhile the previous commit was on disk\n");
    text.push_str(concat!("```\nthe previous ", "build\n```\n"));
    let found = diary_phrases(&text);
    assert_eq!(found.len(), DIARY_PHRASES.len() + 1, "{found:#?}");
    assert!(found[0].starts_with("line 1:"), "{found:#?}");
}

/// The repository paths cited in `text`: every word that starts with one of the tracked folders
/// (`src/`, `docs/`, `benches/`, `tests/`, `examples/`, `python/`), without trailing
/// punctuation; a pattern (`*`, `<…>`, `{…}`) is not a path.
fn cited_paths(text: &str) -> Vec<(usize, String)> {
    const FOLDERS: &[&str] = &[
        "src/",
        "docs/",
        "benches/",
        "tests/",
        "examples/",
        "python/",
    ];
    let in_path = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for folder in FOLDERS {
            for (at, _) in line.match_indices(folder) {
                if line[..at].chars().next_back().is_some_and(in_path) {
                    continue; // inside a longer path (python/src/…) or a word
                }
                let rest = &line[at..];
                let end = rest.find(|c: char| !in_path(c)).unwrap_or(rest.len());
                if rest[end..].starts_with(['*', '<', '{']) {
                    continue;
                }
                let path = rest[..end].trim_end_matches(['.', '-']);
                out.push((n + 1, path.to_string()));
            }
        }
    }
    out
}

/// `file:line: path` for every path cited in `files` that does not exist under `root`.
fn missing_cited_paths(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut missing = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, path) in cited_paths(&text) {
            if !root.join(&path).exists() && !MAY_BE_ABSENT.contains(&path.as_str()) {
                let shown = file.strip_prefix(root).unwrap_or(file).display();
                missing.push(format!("{shown}:{n}: {path}"));
            }
        }
    }
    missing
}

#[test]
fn every_path_cited_in_cargo_toml_and_the_docs_exists() {
    let root = Path::new(ROOT);
    let mut files = vec![root.join("Cargo.toml")];
    files.extend(markdown_files(root));
    let missing = missing_cited_paths(root, &files);
    assert!(
        missing.is_empty(),
        "paths cited in Cargo.toml and the docs that are not in the repository:\n{}",
        missing.join("\n")
    );
}

/// Power: a cited file that does not exist is reported with its line; existing files and folders,
/// a path inside a longer one, patterns and trailing punctuation pass.
#[test]
fn the_cited_path_check_catches_missing_files() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("src/cli")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "").unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "# see src/lib.rs, src/cli/ and (src/lib.rs).\n# python/src/x.rs pipelines/fig*.toml \
         src/<name>.rs\n# the allocator (src/alloc.rs) and benches/gone.sh\n",
    )
    .unwrap();
    let missing = missing_cited_paths(root, &[root.join("Cargo.toml")]);
    assert_eq!(
        missing,
        [
            "Cargo.toml:2: python/src/x.rs",
            "Cargo.toml:3: src/alloc.rs",
            "Cargo.toml:3: benches/gone.sh"
        ],
        "{missing:#?}"
    );
}

/// Where a grammar of values is documented: the page, the heading of its section (up to the next
/// heading; the whole page when `None`), and the forms the parser accepts, read from the parser's
/// own list of valid forms.
struct Grammar {
    what: &'static str,
    page: &'static str,
    section: Option<&'static str>,
    forms: Vec<String>,
}

/// The valid forms a parser names when it refuses an unknown value.
fn forms_of(e: recsel::Error) -> Vec<String> {
    match e {
        recsel::Error::UnknownName { valid, .. } => valid.split(", ").map(str::to_string).collect(),
        other => panic!("an unknown name should be refused as one: {other}"),
    }
}

/// The candidate policies `scoring::CandidatePolicy::parse` accepts, each parsed back (N = 3,
/// FILE = pool.txt) so the list cannot name a form the parser refuses; every variant of the enum
/// must be among them (the match below is exhaustive, so a new variant must be classified here).
fn candidate_grammar() -> Grammar {
    use recsel::scoring::CandidatePolicy as P;
    let forms = forms_of(P::parse("no-such-policy").unwrap_err());
    let mut seen = BTreeSet::new();
    for form in &forms {
        let text = form.replace('N', "3").replace("FILE", "pool.txt");
        let p = P::parse(&text).unwrap_or_else(|e| panic!("{form} is listed but refused: {e}"));
        seen.insert(match p {
            P::All => 0,
            P::Popular(_) => 1,
            P::Heldout(_) => 2,
            P::Pool(_) => 3,
            P::HistoryTop(_) => 4,
        });
    }
    assert_eq!(
        seen.len(),
        5,
        "a candidate policy the parser accepts is missing from {forms:?}"
    );
    Grammar {
        what: "candidate policy",
        page: "docs/deployment.md",
        section: Some("## Candidate policies"),
        forms,
    }
}

/// The priors `scoring::Prior::parse` accepts, each parsed back (W = 0.5, PATH = counts.txt);
/// every variant of the enum must be among them.
fn prior_grammar() -> Grammar {
    use recsel::scoring::Prior as P;
    let forms = forms_of(P::parse("no-such-prior").unwrap_err());
    let mut seen = BTreeSet::new();
    for form in &forms {
        let text = form.replace('W', "0.5").replace("PATH", "counts.txt");
        let p = P::parse(&text).unwrap_or_else(|e| panic!("{form} is listed but refused: {e}"));
        seen.insert(match p {
            P::None => 0,
            P::Popularity(_) => 1,
            P::Heldout(_) => 2,
            P::File(..) => 3,
            P::OwnHistory(_) => 4,
        });
    }
    assert_eq!(
        seen.len(),
        5,
        "a prior the parser accepts is missing from {forms:?}"
    );
    Grammar {
        what: "prior",
        page: "docs/priors.md",
        section: None,
        forms,
    }
}

/// The text of `section` (from its heading to the next heading), or the whole text.
fn section_of<'a>(text: &'a str, section: Option<&str>) -> &'a str {
    let Some(heading) = section else { return text };
    let Some(start) = text.find(&format!("\n{heading}\n")) else {
        return "";
    };
    let body = &text[start + heading.len() + 2..];
    let end = body.find("\n#").map_or(body.len(), |at| at + 1);
    &body[..end]
}

/// The forms of `g` that have no entry (a table row starting with the form in backticks) on the
/// page text `text`.
fn undocumented(g: &Grammar, text: &str) -> Vec<String> {
    let section = section_of(text, g.section);
    g.forms
        .iter()
        .filter(|f| !section.lines().any(|l| l.starts_with(&format!("| `{f}`"))))
        .cloned()
        .collect()
}

/// Paragraphs of `text` (outside code blocks) that spell out the grammar again: three or more of
/// its forms that carry an argument (`popular:N`, `file:PATH:W`, …).
fn grammar_copies(g: &Grammar, text: &str) -> Vec<String> {
    let long: Vec<&String> = g.forms.iter().filter(|f| f.contains(':')).collect();
    let mut found = Vec::new();
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut flush = |paragraph: &mut Vec<(usize, &str)>| {
        let joined: String = paragraph
            .iter()
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join(" ");
        let named = long.iter().filter(|f| joined.contains(f.as_str())).count();
        if named >= 3 {
            found.push(format!("line {}: {named} forms", paragraph[0].0));
        }
        paragraph.clear();
    };
    for (n, line) in prose_lines(text) {
        if line.trim().is_empty() {
            flush(&mut paragraph);
        } else {
            paragraph.push((n, line));
        }
    }
    if !paragraph.is_empty() {
        flush(&mut paragraph);
    }
    found
}

/// The Markdown files and Python docstrings a reader may take a grammar from; docs/cli.md, the
/// generated reference, is checked through the help texts instead.
fn grammar_readers(root: &Path) -> Vec<PathBuf> {
    let mut files = markdown_files(root);
    files.extend(files_in(&root.join("python/recsel"), true, &|p| {
        has_ext(p, &["py", "pyi"])
    }));
    files.retain(|f| !f.ends_with("docs/cli.md"));
    files
}

#[test]
fn each_grammar_is_documented_on_one_page_and_linked_from_the_others() {
    let root = Path::new(ROOT);
    for g in [candidate_grammar(), prior_grammar()] {
        let text = std::fs::read_to_string(root.join(g.page)).unwrap();
        let missing = undocumented(&g, &text);
        assert!(
            missing.is_empty(),
            "{}: the {} forms {missing:?} have no entry (`| `FORM` |` row) in {}",
            g.page,
            g.what,
            g.section.unwrap_or("the page")
        );
        let mut copies = Vec::new();
        for file in grammar_readers(root) {
            if file.ends_with(g.page) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for hit in grammar_copies(&g, &text) {
                copies.push(format!(
                    "{}: {hit}",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
        assert!(
            copies.is_empty(),
            "the {} grammar is written out again (link to {} instead):\n{}",
            g.what,
            g.page,
            copies.join("\n")
        );
    }
}

/// Power: removing one policy's entry from the page, or one prior's, is reported by name; a
/// paragraph that lists three forms is a copy, one that names two is not.
#[test]
fn the_grammar_check_catches_a_missing_entry_and_a_copy() {
    let root = Path::new(ROOT);
    for g in [candidate_grammar(), prior_grammar()] {
        let text = std::fs::read_to_string(root.join(g.page)).unwrap();
        assert!(undocumented(&g, &text).is_empty());
        for form in &g.forms {
            let cut: String = text
                .lines()
                .filter(|l| !l.starts_with(&format!("| `{form}`")))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(
                undocumented(&g, &cut),
                std::slice::from_ref(form),
                "{}",
                g.what
            );
        }
        let long: Vec<&String> = g.forms.iter().filter(|f| f.contains(':')).collect();
        let copy = format!(
            "Use {}, {} or\n{}.\n\nOr {} and {}.\n",
            long[0], long[1], long[2], long[0], long[1]
        );
        assert_eq!(grammar_copies(&g, &copy), ["line 1: 3 forms"], "{}", g.what);
    }
}

/// Every help text of an option that takes a candidate policy names every policy the parser
/// accepts, and every help text of `--prior` every public prior (the one leak, `own-history:W`, is
/// refused where nothing is served); the generated reference, docs/cli.md, shows them.
#[test]
fn every_candidates_and_prior_help_names_every_form() {
    let out = crate::util::recsel(&["help-markdown"]);
    assert!(out.status.success());
    let reference = String::from_utf8(out.stdout).unwrap();
    let public_priors: Vec<String> = prior_grammar()
        .forms
        .into_iter()
        .filter(|f| {
            let text = f.replace('W', "0.5").replace("PATH", "counts.txt");
            recsel::scoring::Prior::parse(&text)
                .unwrap()
                .history_independent()
        })
        .collect();
    for (flag, forms) in [
        ("--candidates", candidate_grammar().forms),
        ("--prior", public_priors),
    ] {
        let rows: Vec<&str> = reference
            .lines()
            .filter(|l| l.starts_with(&format!("| `{flag} ")))
            .collect();
        assert!(rows.len() >= 3, "{flag}: {rows:#?}");
        for row in rows {
            for form in &forms {
                assert!(
                    row.contains(form.as_str()),
                    "{flag} does not name {form}: {row}"
                );
            }
        }
    }
}

/// The visible subcommands, from the command table of the generated reference (`recsel
/// help-markdown`, the clap command tree).
fn subcommands() -> Vec<String> {
    let out = crate::util::recsel(&["help-markdown"]);
    assert!(out.status.success());
    let reference = String::from_utf8(out.stdout).unwrap();
    reference
        .lines()
        .filter_map(|l| l.strip_prefix("| [`recsel "))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// What is wrong with the command table of `readme` and the sections of `usage` for the
/// subcommands `commands`: the README's tour has a row for every subcommand, docs/usage.md a
/// section for every subcommand, and no second table of them.
fn command_table_problems(commands: &[String], readme: &str, usage: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for c in commands {
        let row = format!("| `recsel {c}` |");
        if !readme.lines().any(|l| l.starts_with(&row)) {
            problems.push(format!("README.md's tour has no row `{row}`"));
        }
        let named = |l: &str| {
            l.starts_with("## ")
                && (l.contains(&format!("`recsel {c}`")) || l.contains(&format!("`recsel {c} ")))
        };
        if !usage.lines().any(named) {
            problems.push(format!("docs/usage.md has no section on `recsel {c}`"));
        }
    }
    if let Some(l) = usage.lines().find(|l| l.starts_with("| `recsel ")) {
        problems.push(format!(
            "docs/usage.md has a table of subcommands again (link to the README's tour): {l}"
        ));
    }
    problems
}

#[test]
fn the_readme_tour_and_usage_md_cover_every_subcommand_once() {
    let commands = subcommands();
    assert!(
        commands.len() >= 10 && commands.iter().any(|c| c == "serve"),
        "{commands:?}"
    );
    let root = Path::new(ROOT);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let usage = std::fs::read_to_string(root.join("docs/usage.md")).unwrap();
    let problems = command_table_problems(&commands, &readme, &usage);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Power: a subcommand missing from the tour or from usage.md, and a second table, are reported.
#[test]
fn the_command_table_check_catches_a_missing_subcommand() {
    let commands = ["fit".to_string(), "tune".to_string()];
    let readme = "| `recsel fit` | fits | x |\n| `recsel tune` | tunes | x |\n";
    let usage = "## `recsel fit`\n\n## `recsel tune` and `recsel evaluate`\n";
    assert!(command_table_problems(&commands, readme, usage).is_empty());
    let p = command_table_problems(&commands, "| `recsel fit` | fits | x |\n", usage);
    assert_eq!(p.len(), 1, "{p:?}");
    let p = command_table_problems(&commands, readme, "## `recsel fit`\n");
    assert_eq!(p.len(), 1, "{p:?}");
    let p = command_table_problems(&commands, readme, &format!("{usage}| `recsel fit` | f |\n"));
    assert_eq!(p.len(), 1, "{p:?}");
}

/// What docs/testing.md's table of exact-law tests misses: every `#[test]` of the `sources`
/// (module name, text) whose body runs a chi-square check (`chi_square_gof(`, or a `fits(` /
/// `assert_fits(` helper) must be named in `table` — as `module::name`, `name`, or its whole file
/// `tests/module.rs` — and every `module::name` the table names must be a test of `sources` (or,
/// as `module::tests::name`, of a unit-test module under `src/`, given as `unit_fns`).
fn exact_law_table_problems(
    sources: &[(String, String)],
    unit_fns: &BTreeSet<String>,
    table: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut fns: HashMap<&str, BTreeSet<String>> = HashMap::new();
    for (module, text) in sources {
        let set = fns.entry(module.as_str()).or_default();
        // Tests of an integration-test file start a line; a `#[test]` inside a string does not.
        for part in text.split("\n#[test]\n").skip(1) {
            let Some(name) = part
                .split("fn ")
                .nth(1)
                .and_then(|s| s.split('(').next())
                .map(str::trim)
            else {
                continue;
            };
            set.insert(name.to_string());
            let body = part.split("\n}\n").next().unwrap_or(part);
            let chi = ["chi_square_gof(", "fits("]
                .iter()
                .any(|m| body.contains(m));
            let named = table.contains(&format!("::{name}`"))
                || table.contains(&format!("`{name}`"))
                || table.contains(&format!("`tests/{module}.rs`"));
            if chi && !named {
                problems.push(format!(
                    "{module}::{name} runs a chi-square check but is not in the table"
                ));
            }
        }
    }
    for token in table.split('`').skip(1).step_by(2) {
        let parts: Vec<&str> = token.split("::").collect();
        let plain = parts.len() >= 2
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        if !plain {
            continue;
        }
        let name = parts[parts.len() - 1];
        let exists = match (parts.len(), fns.get(parts[0])) {
            (2, Some(set)) => set.contains(name),
            _ if parts.len() >= 3 && parts[parts.len() - 2] == "tests" => unit_fns.contains(name),
            _ => continue,
        };
        if !exists {
            problems.push(format!("the table names {token}, which is no test"));
        }
    }
    problems
}

/// docs/testing.md, "What is checked against an exact law", lists every exact-law test.
#[test]
fn every_exact_law_test_is_in_the_testing_table() {
    let root = Path::new(ROOT);
    let doc = std::fs::read_to_string(root.join("docs/testing.md")).unwrap();
    let start = doc
        .find("## What is checked against an exact law")
        .expect("the exact-law section");
    let end = doc[start..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + e + 1);
    let table = &doc[start..end];
    let mut sources = Vec::new();
    for path in files_in(&root.join("tests"), false, &|p| has_ext(p, &["rs"])) {
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        sources.push((module, std::fs::read_to_string(&path).unwrap()));
    }
    let mut unit_fns = BTreeSet::new();
    for path in files_in(&root.join("src"), true, &|p| has_ext(p, &["rs"])) {
        let text = std::fs::read_to_string(&path).unwrap();
        for part in text.split("#[test]").skip(1) {
            if let Some(name) = part.split("fn ").nth(1).and_then(|s| s.split('(').next()) {
                unit_fns.insert(name.trim().to_string());
            }
        }
    }
    let problems = exact_law_table_problems(&sources, &unit_fns, table);
    assert!(
        problems.is_empty(),
        "docs/testing.md:\n{}",
        problems.join("\n")
    );
}

/// Power: an unlisted chi-square test and a listed test that does not exist are reported.
#[test]
fn the_exact_law_table_check_catches_a_missing_row() {
    // (`fi` and `ts(` apart, so that this test itself is no chi-square test to the scan.)
    let src = concat!(
        "\n#[test]\nfn a_law() {\n    fi",
        "ts(&c, &p, \"x\");\n}\n\n#[test]\nfn other() {\n}\n"
    );
    let sources = vec![("laws".to_string(), src.to_string())];
    let units = BTreeSet::new();
    assert!(exact_law_table_problems(&sources, &units, "| x | y | `laws::a_law` |").is_empty());
    assert_eq!(
        exact_law_table_problems(&sources, &units, "| x | y | z |").len(),
        1
    );
    let p = exact_law_table_problems(&sources, &units, "| `laws::a_law`, `laws::gone` |");
    assert_eq!(p.len(), 1, "{p:?}");
}

/// What is wrong with docs/seeds.md's coverage tables: a `module::name` that is no `fn name` of
/// `tests/module.rs` (`tests` maps each module to its text), and a row that names neither a
/// test nor a documented deviation.
fn seed_table_problems(doc: &str, tests: &HashMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut rows = 0;
    for line in doc.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        if !line.starts_with("| ") || cells.len() < 2 || line.starts_with("|---") {
            continue;
        }
        let backing = cells[cells.len() - 1];
        if backing.trim_end_matches(" |").trim() == "backed by" {
            continue;
        }
        rows += 1;
        let mut named = 0;
        for token in backing.split('`').skip(1).step_by(2) {
            let parts: Vec<&str> = token.split("::").collect();
            if parts.len() != 2 {
                continue;
            }
            named += 1;
            let exists = tests.get(parts[0]).is_some_and(|text| {
                text.contains(&format!("fn {}(", parts[1]))
                    || text.contains(&format!("fn {}<", parts[1]))
            });
            if !exists {
                problems.push(format!(
                    "names {token}, which is no test in tests/{}.rs",
                    parts[0]
                ));
            }
        }
        if named == 0 && !backing.contains("documented deviation") {
            problems.push(format!(
                "a row with neither a test nor a documented deviation: {line}"
            ));
        }
    }
    if rows < 50 {
        problems.push(format!("only {rows} rows"));
    }
    problems
}

fn test_sources() -> HashMap<String, String> {
    files_in(&Path::new(ROOT).join("tests"), false, &|p| {
        has_ext(p, &["rs"])
    })
    .into_iter()
    .map(|p| {
        let module = p.file_stem().unwrap().to_string_lossy().into_owned();
        (module, std::fs::read_to_string(&p).unwrap())
    })
    .collect()
}

/// docs/seeds.md: every test its coverage tables name exists, and every row is backed.
#[test]
fn every_test_the_seed_table_names_exists() {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/seeds.md")).unwrap();
    let problems = seed_table_problems(&doc, &test_sources());
    assert!(
        problems.is_empty(),
        "docs/seeds.md:\n{}",
        problems.join("\n")
    );
}

/// Power: a planted wrong test name and an unbacked row are reported.
#[test]
fn the_seed_table_check_catches_a_planted_name() {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/seeds.md")).unwrap();
    let tests = test_sources();
    let planted = doc.replacen(
        "`naive_selection::the_best_of_one_run_per_candidate_loses_k_minus_one_eps0`",
        "`naive_selection::the_best_of_one_run_per_candidate_loses_k_eps0`",
        1,
    );
    assert_ne!(planted, doc, "the planted name must replace a row's test");
    let problems = seed_table_problems(&planted, &tests);
    eprintln!("planted wrong name: {problems:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("the_best_of_one_run_per_candidate_loses_k_eps0"));
    let unbacked = format!("{doc}\n| Theorem 9.9 (planted) | nothing yet |\n");
    let problems = seed_table_problems(&unbacked, &tests);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("Theorem 9.9"));
}
