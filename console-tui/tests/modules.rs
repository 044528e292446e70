//! The crate's shape: no import circle of more than two files, and no file with more
//! than 600 lines of product code (unit tests apart).
//!
//! The sources are read as text. Each path that names one of the crate's modules, in a
//! `use` or inline (`crate::state::Model`, `super::fit::fit_columns`, `rates::push` for
//! a child module, `crate::ui::draw` through a module's other name), is an edge from its
//! file to the file of the deepest module it names. A `mod` declaration is not an edge:
//! it places a file, it does not use it. Comments and literals are skipped. Two files may
//! use each other (a module and the child it re-exports from); a longer circle is a
//! failure, listed with its files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Product lines a file may have.
const MAX_PRODUCT_LINES: usize = 600;

/// `text` with comments and the contents of string and char literals blanked out (same
/// length, newlines kept), so what is left is code.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            let end = c[i..].iter().position(|&x| x == '\n').map_or(c.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c[i] == 'r' && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2])))) && {
            let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
            c.get(i + 1 + hashes) == Some(&'"')
        } {
            // A raw string: r"..." or r#"..."#, closed by a quote and as many hashes.
            let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
            let mut j = i + 2 + hashes;
            while j < c.len()
                && !(c[j] == '"' && c[j + 1..].iter().take(hashes).filter(|&&x| x == '#').count() == hashes)
            {
                j += 1;
            }
            let end = (j + 1 + hashes).min(c.len());
            blank(&mut out, i + 1, end);
            i = end;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j.min(c.len()));
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1}'), or a lifetime ('a), which stays.
            if c.get(i + 1) == Some(&'\\') {
                let end = c[i + 2..].iter().position(|&x| x == '\'').map_or(c.len(), |p| i + 2 + p);
                blank(&mut out, i + 1, end);
                i = end + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// A token: an identifier or one punctuation mark (`::` counts as one), and the line it
/// is on.
#[derive(Clone, Debug, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok { text: c[start..i].iter().collect(), line });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok { text: "::".into(), line });
            i += 2;
        } else {
            out.push(Tok { text: ch.to_string(), line });
            i += 1;
        }
    }
    out
}

/// One source file of the crate.
struct File {
    /// Relative to `src/`.
    name: String,
    /// The module the file is (`["state", "rates"]`; empty for the crate root).
    module: Vec<String>,
    toks: Vec<Tok>,
    lines: usize,
    /// Declared under `#[cfg(test)]`: all of it is test code.
    test_only: bool,
}

/// The crate's modules: each module's path to the file holding it, and the names a
/// module gives other modules (`pub use view as ui`, `use crate::record::{self, ...}`).
#[derive(Default)]
struct Tree {
    file_of: BTreeMap<Vec<String>, usize>,
    aliases: HashMap<Vec<String>, HashMap<String, Vec<String>>>,
    /// The modules whose names a module takes in whole (`use super::*`).
    globs: HashMap<Vec<String>, BTreeSet<Vec<String>>>,
}

impl Tree {
    fn is_module(&self, m: &[String]) -> bool {
        self.file_of.contains_key(m)
    }

    /// The module a step from `m` by `name` reaches: a child, another name for one, or
    /// either of those of a module `m` takes in whole.
    fn step(&self, m: &[String], name: &str) -> Option<Vec<String>> {
        let direct = |m: &[String]| {
            let mut child = m.to_vec();
            child.push(name.to_string());
            if self.is_module(&child) {
                return Some(child);
            }
            self.aliases.get(m).and_then(|a| a.get(name)).cloned()
        };
        direct(m).or_else(|| self.globs.get(m)?.iter().find_map(|g| direct(g)))
    }

    /// The deepest module `path` names, read from inside module `at`, and whether it
    /// named modules all the way to its end. `None`: it names none of the crate's.
    fn resolve(&self, at: &[String], path: &[String]) -> Option<(Vec<String>, bool)> {
        let (mut m, rest) = match path.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &path[1..]),
            Some("self") => (at.to_vec(), &path[1..]),
            Some("super") => {
                let mut m = at.to_vec();
                let mut rest = path;
                while rest.first().map(String::as_str) == Some("super") {
                    m.pop()?;
                    rest = &rest[1..];
                }
                (m, rest)
            }
            Some(first) => (self.step(at, first)?, &path[1..]),
            None => return None,
        };
        for seg in rest {
            match self.step(&m, seg) {
                Some(next) => m = next,
                None => return Some((m, false)),
            }
        }
        Some((m, true))
    }
}

/// The leaves of the use tree starting at `toks[i]` (after `use`), each as a path and
/// the name it binds (`None` for a glob), and the index past the tree.
fn use_tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| t.text.as_str()) {
            Some("{") => {
                i += 1;
                while toks.get(i).is_some_and(|t| t.text != "}") {
                    i = use_tree(toks, i, &path, out);
                    if toks.get(i).is_some_and(|t| t.text == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some("*") => {
                out.push((path, None));
                return i + 1;
            }
            Some(t) if t.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                // `{self, ...}` names the prefix itself.
                if !(t == "self" && !prefix.is_empty() && path == prefix) {
                    path.push(t.to_string());
                }
                i += 1;
                if toks.get(i).is_some_and(|t| t.text == "::") {
                    i += 1;
                    continue;
                }
                let mut name = path.last().cloned();
                if toks.get(i).is_some_and(|t| t.text == "as") {
                    name = toks.get(i + 1).map(|t| t.text.clone());
                    i += 2;
                }
                out.push((path, name));
                return i;
            }
            _ => return i + 1,
        }
    }
}

/// Where each file's inline modules open and close: for each token, the module it is in.
fn modules_by_token(file: &File) -> Vec<Vec<String>> {
    let toks = &file.toks;
    let mut at = Vec::with_capacity(toks.len());
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate() {
        let mut m = file.module.clone();
        m.extend(stack.iter().map(|s| s.0.clone()));
        at.push(m);
        match t.text.as_str() {
            "{" => {
                depth += 1;
                if i >= 2 && toks[i - 2].text == "mod" {
                    stack.push((toks[i - 1].text.clone(), depth));
                }
            }
            "}" => {
                if stack.last().is_some_and(|s| s.1 == depth) {
                    stack.pop();
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    at
}

/// Whether the item starting at `toks[i]` has `#[cfg(test)]` among the attributes just
/// before it.
fn cfg_test_before(toks: &[Tok], i: usize) -> bool {
    let mut j = i;
    loop {
        if j == 0 || toks[j - 1].text != "]" {
            return false;
        }
        let close = j - 1;
        let mut k = close;
        let mut depth = 0;
        loop {
            match toks[k].text.as_str() {
                "]" => depth += 1,
                "[" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            if k == 0 {
                return false;
            }
            k -= 1;
        }
        let attr: Vec<&str> = toks[k + 1..close].iter().map(|t| t.text.as_str()).collect();
        if attr == ["cfg", "(", "test", ")"] {
            return true;
        }
        if k == 0 || toks[k - 1].text != "#" {
            return false;
        }
        j = k - 1;
    }
}

/// Read the crate rooted at `root` (`lib.rs`): its files and module tree.
fn read_crate(src: &Path, root: &str) -> (Vec<File>, Tree) {
    let mut files = Vec::new();
    let mut tree = Tree::default();
    let mut todo = vec![(PathBuf::from(root), Vec::<String>::new(), false)];
    while let Some((rel, module, test_only)) = todo.pop() {
        let text = std::fs::read_to_string(src.join(&rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let toks = tokens(&code_only(&text));
        let name = rel.to_string_lossy().into_owned();
        // A `mod.rs`, `lib.rs` or `main.rs` holds its children beside it; `a.rs` in `a/`.
        let dir = match rel.file_name().and_then(|f| f.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => rel.parent().unwrap_or(Path::new("")).to_path_buf(),
            _ => rel.with_extension(""),
        };
        let mut depth = 0;
        for (i, t) in toks.iter().enumerate() {
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => depth -= 1,
                // Files are declared at the top of a file in this crate (no `mod a { mod b; }`).
                "mod" if depth == 0 && toks.get(i + 2).is_some_and(|t| t.text == ";") => {
                    let child = &toks[i + 1].text;
                    let mut m = module.clone();
                    m.push(child.clone());
                    let flat = dir.join(format!("{child}.rs"));
                    let rel = if src.join(&flat).exists() { flat } else { dir.join(child).join("mod.rs") };
                    let mut k = i;
                    while k > 0 && matches!(toks[k - 1].text.as_str(), "pub" | "(" | ")" | "crate" | "super" | "in") {
                        k -= 1;
                    }
                    todo.push((rel, m, test_only || cfg_test_before(&toks, k)));
                }
                _ => {}
            }
        }
        tree.file_of.insert(module.clone(), files.len());
        files.push(File { name, module, lines: text.lines().count(), toks, test_only });
    }
    // Inline modules (`mod tests { ... }`) are modules of their file.
    for (f, file) in files.iter().enumerate() {
        for m in modules_by_token(file) {
            tree.file_of.entry(m).or_insert(f);
        }
    }
    // The other names modules give modules, to a fixed point (a name may go through another).
    for _ in 0..4 {
        for file in &files {
            let at = modules_by_token(file);
            for (i, t) in file.toks.iter().enumerate() {
                if t.text != "use" {
                    continue;
                }
                let mut leaves = Vec::new();
                use_tree(&file.toks, i + 1, &[], &mut leaves);
                for (path, name) in leaves {
                    let Some((m, true)) = tree.resolve(&at[i], &path) else { continue };
                    match name {
                        None => {
                            tree.globs.entry(at[i].clone()).or_default().insert(m);
                        }
                        Some(name) if !matches!(name.as_str(), "self" | "super" | "crate") => {
                            tree.aliases.entry(at[i].clone()).or_default().insert(name, m);
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
    (files, tree)
}

/// Each file's edges: the files it uses, with a line that does.
fn edges(files: &[File], tree: &Tree) -> Vec<BTreeMap<usize, usize>> {
    let mut out = vec![BTreeMap::new(); files.len()];
    for (f, file) in files.iter().enumerate() {
        let at = modules_by_token(file);
        let toks = &file.toks;
        let mut add = |m: &[String], line: usize| {
            if let Some(&to) = tree.file_of.get(m) {
                if to != f {
                    out[f].entry(to).or_insert(line);
                }
            }
        };
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i];
            if t.text == "use" {
                let mut leaves = Vec::new();
                let end = use_tree(toks, i + 1, &[], &mut leaves);
                for (path, _) in leaves {
                    if let Some((m, _)) = tree.resolve(&at[i], &path) {
                        add(&m, t.line);
                    }
                }
                i = end;
                continue;
            }
            let starts_path = t.text.chars().all(|c| c.is_alphanumeric() || c == '_')
                && toks.get(i + 1).is_some_and(|n| n.text == "::")
                && (i == 0 || toks[i - 1].text != "::");
            if starts_path {
                let mut path = vec![t.text.clone()];
                let mut j = i + 1;
                while toks.get(j).is_some_and(|n| n.text == "::")
                    && toks.get(j + 1).is_some_and(|n| n.text.chars().all(|c| c.is_alphanumeric() || c == '_'))
                {
                    path.push(toks[j + 1].text.clone());
                    j += 2;
                }
                if let Some((m, _)) = tree.resolve(&at[i], &path) {
                    add(&m, t.line);
                }
                i = j;
                continue;
            }
            i += 1;
        }
    }
    out
}

/// The strongly connected components of the file graph with more than `max` files.
fn circles(edges: &[BTreeMap<usize, usize>], max: usize) -> Vec<BTreeSet<usize>> {
    let n = edges.len();
    let reach: Vec<Vec<bool>> = (0..n)
        .map(|s| {
            let mut seen = vec![false; n];
            let mut stack = vec![s];
            while let Some(v) = stack.pop() {
                for &w in edges[v].keys() {
                    if !seen[w] {
                        seen[w] = true;
                        stack.push(w);
                    }
                }
            }
            seen[s] = true;
            seen
        })
        .collect();
    let mut found: Vec<BTreeSet<usize>> = Vec::new();
    for (v, from_v) in reach.iter().enumerate() {
        let scc: BTreeSet<usize> = (0..n).filter(|&w| from_v[w] && reach[w][v]).collect();
        if scc.len() > max && !found.contains(&scc) {
            found.push(scc);
        }
    }
    found
}

/// Lines of `file` outside `#[cfg(test)]` items (a file declared under it is all test).
fn product_lines(file: &File) -> usize {
    if file.test_only {
        return 0;
    }
    let toks = &file.toks;
    let mut test_lines = 0;
    let mut i = 0;
    while i < toks.len() {
        let attr: Vec<&str> = toks[i..(i + 7).min(toks.len())].iter().map(|t| t.text.as_str()).collect();
        if attr != ["#", "[", "cfg", "(", "test", ")", "]"] {
            i += 1;
            continue;
        }
        // The item runs to its `;`, or to the end of its first block.
        let mut k = i + 7;
        let mut depth = 0;
        while k < toks.len() {
            match toks[k].text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" => depth -= 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ";" if depth == 0 => break,
                _ => {}
            }
            k += 1;
        }
        let end = toks.get(k).map_or(file.lines, |t| t.line);
        test_lines += end + 1 - toks[i].line;
        i = k + 1;
    }
    file.lines - test_lines
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_import_circle_of_more_than_two_files() {
    for root in ["lib.rs", "main.rs"] {
        let (files, tree) = read_crate(&src(), root);
        let edges = edges(&files, &tree);
        let found = circles(&edges, 2);
        let report: Vec<String> = found
            .iter()
            .map(|scc| {
                let mut lines = vec![format!("a circle of {} files:", scc.len())];
                for &f in scc {
                    for (&to, line) in edges[f].iter().filter(|(to, _)| scc.contains(to)) {
                        lines.push(format!("  {}:{line} uses {}", files[f].name, files[to].name));
                    }
                }
                lines.join("\n")
            })
            .collect();
        assert!(found.is_empty(), "{}", report.join("\n"));
    }
}

#[test]
fn no_file_has_more_than_600_product_lines() {
    let (files, _) = read_crate(&src(), "lib.rs");
    let (bin, _) = read_crate(&src(), "main.rs");
    let long: Vec<String> = files
        .iter()
        .chain(&bin)
        .map(|f| (f, product_lines(f)))
        .filter(|(_, n)| *n > MAX_PRODUCT_LINES)
        .map(|(f, n)| format!("{}: {n} lines of product code", f.name))
        .collect();
    assert!(long.is_empty(), "over {MAX_PRODUCT_LINES}: {long:?}");
}

/// The reader itself, on snippets: what it keeps of code, and how it reads a use tree.
#[test]
fn the_reader_skips_comments_and_literals_and_reads_use_trees() {
    let code =
        code_only("use a::b; // use c::d\nlet s = \"crate::x\"; let q = '\"'; fn f<'a>(x: &'a str) {} /* e::f */");
    let toks: Vec<String> = tokens(&code).into_iter().map(|t| t.text).collect();
    let want = "use a :: b ; let s = \" \" ; let q = ' ' ; fn f < ' a > ( x : & ' a str ) { }";
    assert_eq!(toks.join(" "), want);
    let raw = code_only("let r = r#\"crate::y \"quoted\" \"#; crate::z");
    assert_eq!(tokens(&raw).into_iter().map(|t| t.text).collect::<Vec<_>>().join(" "), "let r = r ; crate :: z");
    let mut leaves = Vec::new();
    let toks = tokens("crate::a::{self, b::{C, d as e}, *};");
    use_tree(&toks, 0, &[], &mut leaves);
    let paths: Vec<String> = leaves.iter().map(|(p, n)| format!("{}={n:?}", p.join("::"))).collect();
    assert_eq!(
        paths,
        ["crate::a=Some(\"a\")", "crate::a::b::C=Some(\"C\")", "crate::a::b::d=Some(\"e\")", "crate::a=None"]
    );
}

/// Paths resolved and circles found on a made-up crate: the root, `a` with its child
/// `b` (which `a` also names `c`), and `d`, which takes in `a`'s names whole.
#[test]
fn paths_resolve_to_the_deepest_module_and_circles_are_found() {
    let m = |p: &str| -> Vec<String> { p.split("::").filter(|s| !s.is_empty()).map(String::from).collect() };
    let mut tree = Tree::default();
    for (i, p) in ["", "a", "a::b", "d"].iter().enumerate() {
        tree.file_of.insert(m(p), i);
    }
    tree.aliases.entry(m("a")).or_default().insert("c".into(), m("a::b"));
    tree.globs.entry(m("d")).or_default().insert(m("a"));
    assert_eq!(tree.resolve(&m("d"), &m("crate::a::b::Item")), Some((m("a::b"), false)));
    assert_eq!(tree.resolve(&m("a::b"), &m("super::Item")), Some((m("a"), false)));
    assert_eq!(tree.resolve(&m("a::b"), &m("super::super::d")), Some((m("d"), true)));
    assert_eq!(tree.resolve(&m("a"), &m("c::f")), Some((m("a::b"), false)), "through another name");
    assert_eq!(tree.resolve(&m("d"), &m("b::f")), Some((m("a::b"), false)), "through a glob");
    assert_eq!(tree.resolve(&m("a"), &m("proto::Event")), None, "not the crate's");
    let graph = |edges: &[(usize, usize)], n: usize| {
        let mut out = vec![BTreeMap::new(); n];
        for &(from, to) in edges {
            out[from].insert(to, 1);
        }
        out
    };
    assert!(circles(&graph(&[(0, 1), (1, 0), (2, 1)], 3), 2).is_empty(), "two files may use each other");
    assert_eq!(circles(&graph(&[(0, 1), (1, 2), (2, 0), (3, 0)], 4), 2), vec![BTreeSet::from([0, 1, 2])]);
}
