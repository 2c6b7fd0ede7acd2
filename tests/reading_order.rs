//! The crate docs' reading order of one call (`src/lib.rs`, "Reading order") counted
//! honestly: every file of the tower glue (`src/timeout/`) and the attempt engine
//! (`src/attempts/`) is either on the unary call's list, among the hedged call's
//! extras, or named as off the path; every file the docs name exists; and the count the
//! docs give in words is the length of their list.

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
