//! Random ids for requests that need one (a delegation's `request_id`, a task's
//! `task_id`) and seeds for jitter: from the standard library's random hasher keys
//! and the clock, no dependency.

use std::hash::{BuildHasher, Hasher};

/// A random 64-bit value.
pub fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.finish()
}

/// A random id: 32 hex digits.
pub fn random_id() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// A draw in `[0, 1)` from the generator state `state` (splitmix64: seedable, so a
/// test can fix the jitter).
pub fn unit_draw(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let (a, b) = (super::random_id(), super::random_id());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let mut state = 7;
        let draws: Vec<f64> = (0..1_000).map(|_| super::unit_draw(&mut state)).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.iter().any(|d| *d < 0.1) && draws.iter().any(|d| *d > 0.9));
    }
}
