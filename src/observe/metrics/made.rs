//! The instruments a layer records into, made on a meter: SW4-002's two, the counters
//! beside them (the reload counter at 0 from the start), the opt-in families off.

use opentelemetry::metrics::Meter;
use opentelemetry::KeyValue;

use super::{
    Instruments, CANCELLED_TOTAL, DURATION_BOUNDARIES_MS, DURATION_MS, HEDGES_TOTAL,
    HEDGE_WINS_TOTAL, RELOADS_TOTAL, RETRIES_TOTAL, TIMEOUT_TOTAL,
};

impl Instruments {
    /// The always-on instruments on `meter`; the opt-in families off.
    pub(super) fn from_meter(meter: Meter) -> Self {
        let instruments = Self::build(meter);
        // The reload counter exists at 0 from the start, by outcome: a dashboard's
        // Reloads panel reads 0 before the first reload, not "no data".
        for outcome in ["applied", "refused"] {
            instruments
                .reloads
                .add(0, &[KeyValue::new("outcome", outcome)]);
        }
        instruments
    }

    fn build(meter: Meter) -> Self {
        Instruments {
            timeouts: meter
                .u64_counter(TIMEOUT_TOTAL)
                .with_description("SW4RM RPCs that exceeded their timeout profile (SW4-002)")
                .build(),
            duration: meter
                .f64_histogram(DURATION_MS)
                .with_description(
                    "Duration of SW4RM RPCs in milliseconds, by timeout profile (SW4-002)",
                )
                .with_unit("ms")
                .with_boundaries(DURATION_BOUNDARIES_MS.to_vec())
                .build(),
            retries: meter
                .u64_counter(RETRIES_TOTAL)
                .with_description("SW4RM RPC attempts sent after the first (SW4-002 §5.2)")
                .build(),
            hedges: meter
                .u64_counter(HEDGES_TOTAL)
                .with_description("SW4RM RPC hedges sent (attempts after the first)")
                .build(),
            hedge_wins: meter
                .u64_counter(HEDGE_WINS_TOTAL)
                .with_description("SW4RM RPCs answered by a hedge rather than the first attempt")
                .build(),
            cancelled: meter
                .u64_counter(CANCELLED_TOTAL)
                .with_description(
                    "SW4RM RPCs cancelled because the work they were made for was (SW4-004)",
                )
                .build(),
            reloads: meter
                .u64_counter(RELOADS_TOTAL)
                .with_description("SW4RM timeout tables applied or refused by a reload handle")
                .build(),
            meter,
            sw4_003: None,
            rpc_duration: None,
            attempts: None,
            grpc_retries: None,
            configured: None,
            target: KeyValue::new("grpc.target", "unknown"),
        }
    }
}
