//! Instructions per call, for `valgrind --tool=callgrind` (deterministic, unlike time):
//! 20,000 unary calls, each a request as a generated client hands it to the channel,
//! through one variant against an in-memory service that answers at once.
//!
//! ```sh
//! cargo bench --bench instructions --no-run   # prints the executable's path
//! for v in plain retries-off retries-on reloadable plain-extension extension; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$v EXECUTABLE $v
//! done
//! ```
//!
//! The layer's instructions per call are a variant's total minus `plain`'s, divided by
//! 20,000 (setting up the layer is a few thousand instructions in all); `reloadable` is
//! `retries-on` with its table behind a `ReloadHandle`. `extension` is `retries-on`
//! with a value of the caller's own in each request's extensions (no override of the
//! layer's), measured against `plain-extension`, plain with the same value. Run without a
//! variant (as `cargo bench` does), it runs each once and prints nothing else.

use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower::{Layer, Service};

#[path = "support/in_memory.rs"]
mod in_memory;

use in_memory::{drive, request, InMemory, Request};

const CALLS: usize = 20_000;
const PATH: &str = "/sw4rm.registry.RegistryService/Heartbeat";

/// `CALLS` calls; with `extension`, each request carries a value of the caller's own.
async fn calls<S, B>(svc: &mut S, extension: bool)
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    for _ in 0..CALLS {
        let mut req = request(PATH, false);
        if extension {
            req.extensions_mut().insert(7u8);
        }
        drive(svc, req).await;
    }
}

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let on = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let off = on.clone().without_retries();
    let (live, _handle) = on.clone().reloadable();
    rt.block_on(async {
        match variant.as_str() {
            "plain" => calls(&mut InMemory::empty(), false).await,
            "retries-off" => calls(&mut off.layer(InMemory::empty()), false).await,
            "retries-on" => calls(&mut on.layer(InMemory::empty()), false).await,
            "reloadable" => calls(&mut live.layer(InMemory::empty()), false).await,
            "plain-extension" => calls(&mut InMemory::empty(), true).await,
            "extension" => calls(&mut on.layer(InMemory::empty()), true).await,
            _ => {
                calls(&mut InMemory::empty(), false).await;
                calls(&mut off.layer(InMemory::empty()), false).await;
                calls(&mut on.layer(InMemory::empty()), false).await;
                calls(&mut live.layer(InMemory::empty()), false).await;
                calls(&mut InMemory::empty(), true).await;
                calls(&mut on.layer(InMemory::empty()), true).await;
            }
        }
    });
}
