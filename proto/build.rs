//! Nothing to do by default: the code generated from the crate's `.proto` files ships
//! in `src/generated/`, so building the crate needs no code generator. With the feature
//! `regenerate` (`cargo build -p sw4rm-proto --features regenerate`), the generator
//! (`build/generate.rs`) writes it there anew; `tests/generated_code.rs` fails when the
//! shipped code is stale.

#[cfg(feature = "regenerate")]
#[path = "build/generate.rs"]
mod generate;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "regenerate")]
    {
        for proto in generate::PROTOS {
            println!("cargo:rerun-if-changed={proto}");
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        generate::generate(root, &root.join("src/generated"))?;
    }
    println!("cargo:rerun-if-changed=build.rs");
    Ok(())
}
