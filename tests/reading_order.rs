//! The crate docs' reading order of one call (`src/lib.rs`, "Reading order") counted
//! honestly: every file of the tower glue (`src/timeout/`) and the attempt engine
//! (`src/attempts/`) is either on the unary call's list, among the hedged call's
//! extras, or named as off the path; every file the docs name exists; and the count the
//! docs give in words is the length of their list. A file placed off the path is off
//! it for a reason read from the code: compiled for tests only, every function it
//! defines `#[cold]`, or no file on the list calls a function it defines.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The docs' section, from its heading to the next.
fn section() -> String {
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    let start = lib
        .find("## Reading order")
        .expect("the reading order's heading");
    let end = start + lib[start..].find("## Features").expect("the next heading");
    lib[start..end]
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The backquoted source paths (`timeout/x.rs`, `timeout/handoff/`) in `text`.
fn paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| {
            (p.starts_with("timeout/") || p.starts_with("attempts/"))
                && (p.ends_with(".rs") || p.ends_with('/'))
        })
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir`, relative to `src/`.
fn files(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let src = Path::new(ROOT).join("src");
            out.insert(
                path.strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
}

const WORDS: [&str; 31] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "twenty-one",
    "twenty-two",
    "twenty-three",
    "twenty-four",
    "twenty-five",
    "twenty-six",
    "twenty-seven",
    "twenty-eight",
    "twenty-nine",
    "thirty",
];

#[test]
fn the_reading_order_names_every_file_of_the_glue_and_the_engine_once() {
    let text = section();
    // The numbered list: one file per step, numbered from 1.
    let mut unary = Vec::new();
    for line in text.lines() {
        let Some((number, rest)) = line.split_once(". `") else {
            continue;
        };
        let Ok(n) = number.parse::<usize>() else {
            continue;
        };
        assert_eq!(n, unary.len() + 1, "step {n} out of order");
        unary.push(rest.split('`').next().unwrap().to_owned());
    }
    let count = WORDS[unary.len()];
    assert!(
        text.contains(&format!("that is {count} files")),
        "the docs must say the list's length ({count} files)"
    );

    let listed: BTreeSet<String> = paths(&text).into_iter().collect();
    let src = PathBuf::from(ROOT).join("src");
    for path in &listed {
        assert!(
            src.join(path).exists(),
            "the docs name {path}, which does not exist"
        );
    }
    let mut tree = BTreeSet::new();
    files(&src.join("timeout"), &mut tree);
    files(&src.join("attempts"), &mut tree);
    let mod_files = text.contains("each folder's `mod.rs`");
    for file in &tree {
        let named = listed.contains(file)
            || listed
                .iter()
                .any(|p| p.ends_with('/') && file.starts_with(p.as_str()))
            || (mod_files && file.ends_with("/mod.rs"));
        assert!(
            named,
            "{file} is on no list of the reading order: on the call's path, or off it?"
        );
    }
    // The list names each file once, and no folder.
    let unique: BTreeSet<&String> = unary.iter().collect();
    assert_eq!(unique.len(), unary.len(), "a file listed twice: {unary:?}");
    assert!(unary.iter().all(|p| p.ends_with(".rs")), "{unary:?}");
}

/// Every module a folder of the glue or the engine declares (test modules aside) is
/// named in that folder's own reading order, its `mod.rs` docs: a file added to a
/// folder is placed in the folder's story, not only in the crate's.
#[test]
fn each_folder_names_every_module_it_declares() {
    let src = PathBuf::from(ROOT).join("src");
    let mut folders = Vec::new();
    for top in ["timeout", "attempts"] {
        let mut tree = BTreeSet::new();
        files(&src.join(top), &mut tree);
        folders.extend(tree.into_iter().filter(|f| f.ends_with("/mod.rs")));
    }
    assert!(folders.len() >= 5, "{folders:?}");
    for folder in folders {
        let text = std::fs::read_to_string(src.join(&folder)).unwrap();
        let docs: String = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let decl = line.trim_start();
            let decl = decl.strip_prefix("pub(crate) ").unwrap_or(decl);
            let decl = decl.strip_prefix("pub ").unwrap_or(decl);
            let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) else {
                continue;
            };
            let test_only =
                i > 0 && lines[i - 1].contains("#[cfg(") && lines[i - 1].contains("test");
            if test_only {
                continue;
            }
            let named =
                docs.contains(&format!("`{name}.rs`")) || docs.contains(&format!("`{name}/`"));
            assert!(
                named,
                "{folder} declares `mod {name}` but its reading order never names it"
            );
        }
    }
}

/// A file's code outside its tests (up to its `#[cfg(test)]` module).
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A function a file defines: the type its `impl` block is for (if any), its name,
/// whether it takes `self`, and whether it is marked `#[cold]`.
struct Defined {
    owner: Option<String>,
    name: String,
    method: bool,
    cold: bool,
}

fn defined(code: &str) -> Vec<Defined> {
    let lines: Vec<&str> = code.lines().collect();
    let mut owner = None;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("impl") {
            // `impl<T> Trait for Type<T> {` or `impl Type {`: the type is the last
            // path before the brace.
            let head = match line.split_once(" for ") {
                Some((_, ty)) => ty,
                None => match line.strip_prefix("impl<") {
                    // Past the generic parameters' closing `>` (nested ones counted).
                    Some(rest) => {
                        let mut depth = 1;
                        let at = rest
                            .char_indices()
                            .find(|&(_, c)| {
                                depth += i32::from(c == '<') - i32::from(c == '>');
                                depth == 0
                            })
                            .map_or(0, |(at, _)| at + 1);
                        &rest[at..]
                    }
                    None => line.trim_start_matches("impl"),
                },
            };
            let name: String = head
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            owner = Some(name);
        } else if line.starts_with('}') {
            owner = None;
        }
        let Some((_, rest)) = line.split_once("fn ") else {
            continue;
        };
        let lead = line.split("fn ").next().unwrap().trim();
        if !(lead.is_empty() || lead.starts_with("pub") || lead == "const") {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let signature: String = std::iter::once(rest)
            .chain(lines[i + 1..].iter().copied())
            .take(8)
            .collect::<Vec<_>>()
            .join(" ");
        let signature = signature.split(')').next().unwrap_or("");
        let cold = i > 0
            && lines[..i]
                .iter()
                .rev()
                .take(3)
                .any(|l| l.contains("#[cold]"));
        out.push(Defined {
            owner: owner.clone(),
            name,
            method: signature.contains("self"),
            cold,
        });
    }
    out
}

/// Method names the standard library's types also have (`Option::get_mut`,
/// `Mutex::into_inner`, ...): a `.name(` call of one says nothing of whose it is.
const STD_METHODS: [&str; 14] = [
    "get",
    "get_mut",
    "into_inner",
    "as_ref",
    "clone",
    "take",
    "len",
    "is_empty",
    "fmt",
    "insert",
    "remove",
    "push",
    "read",
    "write",
];

/// Whether `code` calls `f`: `Type::f(` for any function of an `impl Type`,
/// `.f(` for a method (unless the name is one of the standard library's, then only
/// `Type::f(` counts), `f(` for a free function.
fn calls(code: &str, f: &Defined) -> bool {
    if let Some(owner) = &f.owner {
        if code.contains(&format!("{owner}::{}(", f.name)) {
            return true;
        }
    }
    if f.method {
        return !STD_METHODS.contains(&f.name.as_str()) && code.contains(&format!(".{}(", f.name));
    }
    f.owner.is_none()
        && code.match_indices(&format!("{}(", f.name)).any(|(at, _)| {
            let before = code[..at].chars().next_back().unwrap_or(' ');
            // `Type::f(` is another type's function of the same name.
            let of_a_type = code[..at].strip_suffix("::").is_some_and(|path| {
                let mut segment = path.rsplit(|c: char| !(c.is_alphanumeric() || c == '_'));
                segment
                    .next()
                    .is_some_and(|s| s.starts_with(char::is_uppercase))
            });
            let another = before.is_alphanumeric() || before == '_' || before == '.';
            !(another || of_a_type || code[..at].ends_with("fn "))
        })
}

/// A file the docs place off a plain call's path is off it for a reason the test
/// can check: its module is compiled for tests only, or every function it defines is
/// `#[cold]` (reached only on a branch the compiler is told is rare: a timeout, a
/// cancel, a clamp), or no file on the unary list calls any function it defines
/// (building the layer, reloading it, reading what it observed).
#[test]
fn a_file_off_the_path_is_off_it_for_a_checkable_reason() {
    let text = section();
    let src = PathBuf::from(ROOT).join("src");
    let (before, off) = text
        .split_once("Off a plain call's path:")
        .expect("the docs' list of files off the path");
    // Files the docs place on another call's path (a hedged call's, a stream's).
    let elsewhere = paths(before);
    let unary: Vec<String> = before
        .lines()
        .filter_map(|l| l.split_once(". `"))
        .filter(|(n, _)| n.parse::<usize>().is_ok())
        .map(|(_, rest)| rest.split('`').next().unwrap().to_owned())
        .collect();
    let path_code: String = unary.iter().map(|f| code_of(&src.join(f))).collect();
    let mut checked = 0;
    for listed in paths(off) {
        let mut tree = BTreeSet::new();
        match listed.strip_suffix('/') {
            Some(folder) => files(&src.join(folder), &mut tree),
            None => drop(tree.insert(listed.clone())),
        }
        for file in tree {
            if file.ends_with("/mod.rs") && listed.ends_with('/') {
                // A folder's own `mod.rs` declares the folder: the folder is the case.
                let parent = src.join(&file).parent().unwrap().to_path_buf();
                let name = parent.file_name().unwrap().to_string_lossy().into_owned();
                let decl = code_of(&parent.parent().unwrap().join("mod.rs"));
                let test_only = decl
                    .split(&format!("mod {name};"))
                    .next()
                    .and_then(|before| before.lines().last())
                    .is_some_and(|l| l.contains("cfg(") && l.contains("test"));
                if test_only {
                    checked += 1;
                    break;
                }
            }
            if elsewhere.contains(&file) {
                continue; // a folder's file that is on a call's path, named there
            }
            let code = code_of(&src.join(&file));
            let on_path: Vec<String> = defined(&code)
                .iter()
                .filter(|f| !f.cold && calls(&path_code, f))
                .map(|f| match &f.owner {
                    Some(owner) => format!("{owner}::{}", f.name),
                    None => f.name.clone(),
                })
                .collect();
            assert!(
                on_path.is_empty(),
                "{file} is listed as off a plain call's path, but the path calls {on_path:?} \
                 (mark a rare branch #[cold], or list the file on the path)"
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} files checked");
}
