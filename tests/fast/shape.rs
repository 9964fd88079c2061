//! The crate's shape, held by a test so it cannot drift back: the
//! crate's top-level modules point one way (no circle of `crate::…`
//! references, doc comments' included: a doc that names a module above
//! it leans on it too); no two files of `src/` that reach each other
//! (through `use` or a path, as `crate::…` or `super::…`; a module and
//! its own parent do not count — a child naturally uses what its parent
//! declares); and no function longer than 80 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest function allowed, in lines (signature to closing brace).
const MAX_FN_LINES: usize = 80;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The module path of a file under `src/` (`lab/mod.rs` → `lab`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The file's code without comments, string and character literals
/// (their lines kept, empty), and without its unit tests (they may reach
/// anywhere).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let starts = |p: &str| rest.iter().take(p.len()).copied().eq(p.chars());
        let skip = if starts("//") {
            rest.iter().position(|c| *c == '\n').unwrap_or(rest.len())
        } else if starts("/*") {
            find(rest, "*/").map_or(rest.len(), |at| at + 2)
        } else if starts("r#\"") || starts("r\"") {
            let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let open = 2 + hashes;
            find(&rest[open..], &close).map_or(rest.len(), |at| open + at + close.len())
        } else if rest[0] == '"' {
            let mut n = 1;
            while n < rest.len() && rest[n] != '"' {
                n += if rest[n] == '\\' { 2 } else { 1 };
            }
            n + 1
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') {
            rest[2..]
                .iter()
                .position(|c| *c == '\'')
                .map_or(rest.len(), |at| at + 3)
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            3
        } else {
            0
        };
        if skip == 0 {
            code.push(rest[0]);
            i += 1;
        } else {
            // A literal or a comment: gone, but its lines stay lines.
            let skip = skip.min(rest.len());
            code.extend(rest[..skip].iter().filter(|c| **c == '\n'));
            i += skip;
        }
    }
    code
}

/// Where `pattern` first starts in `chars`.
fn find(chars: &[char], pattern: &str) -> Option<usize> {
    let pattern: Vec<char> = pattern.chars().collect();
    chars
        .windows(pattern.len())
        .position(|w| w == pattern.as_slice())
}

/// The modules `code` (of module `me`) reaches by `crate::…` or
/// `super::…` paths, `use` lines included (braces expanded one level).
fn reached(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{' || c == ','))
        .collect();
    for word in words {
        let head = word.split('{').next().unwrap_or_default();
        let segments: Vec<&str> = head.split("::").filter(|s| !s.is_empty()).collect();
        let (mut base, rest) = match segments.first() {
            Some(&"crate") => (Vec::new(), &segments[1..]),
            Some(&"super") => {
                let mut base = me.to_vec();
                let mut rest = &segments[..];
                while rest.first() == Some(&"super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            _ => continue,
        };
        base.extend(rest.iter().map(|s| (*s).to_owned()));
        paths.push(base.clone());
        // `use crate::a::{b, c}`: each of b and c under a.
        if let Some(inner) = word.split_once('{').map(|(_, i)| i) {
            for item in inner.split(',') {
                let item = item.trim_matches(|c| c == '{' || c == '}' || c == ' ');
                let mut path = base.clone();
                path.extend(
                    item.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                paths.push(path);
            }
        }
    }
    paths
}

/// The top-level modules `text` names as `crate::<module>`, also inside
/// `use crate::{a::…, b::…}`.
fn top_modules_named(text: &str) -> BTreeSet<String> {
    let name = |item: &str| -> String {
        item.trim()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect()
    };
    let mut named = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            named.insert(name(rest));
            continue;
        };
        // Each item of the group at its top level (`a::{x, y}, b`).
        let mut depth = 0;
        let mut item_starts = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_starts = true,
                _ if item_starts && !c.is_whitespace() => {
                    named.insert(name(&group[i..]));
                    item_starts = false;
                }
                _ => {}
            }
        }
    }
    named.remove("");
    named
}

#[test]
fn the_top_level_modules_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let Some(top) = module.first() else {
            continue; // lib.rs
        };
        if file.ends_with("main.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("readable");
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let named = top_modules_named(text).into_iter().filter(|n| n != top);
        edges.entry(top.clone()).or_default().extend(named);
    }
    // A circle exists if some module reaches itself.
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges.get(from).into_iter().flatten().collect();
        while let Some(next) = todo.pop() {
            if seen.insert(next.clone()) {
                todo.extend(edges.get(next).into_iter().flatten());
            }
        }
        seen.contains(from)
    };
    let circled: Vec<&String> = edges.keys().filter(|m| reaches(m)).collect();
    assert!(
        circled.is_empty(),
        "modules in a circle of crate:: references: {circled:?}"
    );
}

#[test]
fn no_two_files_reach_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter(|f| !f.ends_with("main.rs"))
        .map(|f| (module_of(&src, f), f.clone()))
        .collect();
    let mut edges: BTreeSet<(Vec<String>, Vec<String>)> = BTreeSet::new();
    for (me, file) in &modules {
        let code = code_of(&std::fs::read_to_string(file).expect("readable"));
        for path in reached(&code, me) {
            // The longest prefix of the path that is a file's module.
            let Some(target) = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| modules.contains_key(m))
            else {
                continue;
            };
            let parent_or_child = target.len() + 1 == me.len() && me.starts_with(&target)
                || me.len() + 1 == target.len() && target.starts_with(me);
            if target != *me && !parent_or_child {
                edges.insert((me.clone(), target));
            }
        }
    }
    let cycles: Vec<String> = edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .map(|(a, b)| format!("{} <-> {}", a.join("::"), b.join("::")))
        .collect();
    assert!(cycles.is_empty(), "files that reach each other: {cycles:?}");
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut long = Vec::new();
    for file in &files {
        let code = code_of(&std::fs::read_to_string(file).expect("readable"));
        let lines: Vec<&str> = code.lines().collect();
        let mut at = 0;
        while at < lines.len() {
            let line = lines[at].trim_start();
            let is_fn = [
                "fn ",
                "pub fn ",
                "async fn ",
                "pub async fn ",
                "pub(super) fn ",
            ]
            .iter()
            .chain(&[
                "pub(super) async fn ",
                "pub(crate) fn ",
                "pub(crate) async fn ",
            ])
            .any(|p| line.starts_with(p));
            if !is_fn {
                at += 1;
                continue;
            }
            // Until the body's braces balance (or a `;` ends a signature:
            // one outside brackets, so that `[T; N]` in a signature does
            // not end it).
            let (mut depth, mut opened, mut end) = (0i32, false, at);
            let mut nested = 0i32;
            'scan: for (n, text) in lines.iter().enumerate().skip(at) {
                for c in text.chars() {
                    match c {
                        '{' => (depth, opened) = (depth + 1, true),
                        '}' => depth -= 1,
                        '(' | '[' if !opened => nested += 1,
                        ')' | ']' if !opened => nested -= 1,
                        ';' if !opened && nested == 0 => {
                            end = n;
                            break 'scan;
                        }
                        _ => {}
                    }
                }
                end = n;
                if opened && depth == 0 {
                    break;
                }
            }
            let length = end - at + 1;
            if opened && length > MAX_FN_LINES {
                let name = file.strip_prefix(&src).expect("under src").display();
                long.push(format!("{name}:{} ({length} lines)", at + 1));
            }
            at = end + 1;
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: {long:?}"
    );
}
