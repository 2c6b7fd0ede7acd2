//! The generated code that ships in `src/generated/` is what `build/generate.rs`
//! makes from the crate's `.proto` files today: a change to a `.proto` file without regenerating fails
//! here. `SW4RM_BLESS=1 cargo test -p sw4rm-proto --test generated_code` (or `cargo build
//! -p sw4rm-proto --features regenerate`) writes it anew.

#[path = "../build/generate.rs"]
mod generate;

use std::path::Path;

#[test]
fn the_shipped_code_is_generated_from_the_protos() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = root.join("src/generated");
    let fresh = std::env::temp_dir().join(format!("sw4rm-generated-{}", std::process::id()));
    std::fs::create_dir_all(&fresh).unwrap();
    generate::generate(root, &fresh).unwrap();

    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".rs"))
            .collect();
        names.sort();
        names
    };
    if std::env::var_os("SW4RM_BLESS").is_some() {
        for name in names(&shipped) {
            std::fs::remove_file(shipped.join(name)).unwrap();
        }
        for name in names(&fresh) {
            std::fs::copy(fresh.join(&name), shipped.join(&name)).unwrap();
        }
    }
    assert_eq!(names(&shipped), names(&fresh), "one file per package");
    for name in names(&fresh) {
        let want = std::fs::read_to_string(fresh.join(&name)).unwrap();
        let have = std::fs::read_to_string(shipped.join(&name)).unwrap();
        assert!(
            have == want,
            "src/generated/{name} is stale against the .proto files: regenerate with \
             `SW4RM_BLESS=1 cargo test -p sw4rm-proto --test generated_code`"
        );
    }
    std::fs::remove_dir_all(fresh).ok();
}
