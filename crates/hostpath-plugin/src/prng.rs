//! A small pseudo-random generator (SplitMix64) for volume and snapshot IDs and fault probabilities.
//! Nothing here is security-relevant, so a dependency on `rand` would buy nothing.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub struct Prng {
    state: u64,
}

impl Prng {
    /// A generator with a fixed seed, for reproducible tests.
    pub fn seeded(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator seeded from the clock and the process ID, so two plugin processes (or a restarted one)
    /// do not produce the same IDs.
    pub fn from_entropy() -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        let local = 0u8;
        let address = &local as *const u8 as u64;
        Self::seeded(nanos ^ (u64::from(std::process::id()) << 32) ^ address.rotate_left(17))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float uniformly distributed in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        // The top 53 bits fill an f64 mantissa exactly.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A random (version 4) UUID in its usual text form; used for volume, snapshot and group snapshot IDs.
    pub fn uuid(&mut self) -> String {
        let high = (self.next_u64() & !0xF000) | 0x4000;
        let low = (self.next_u64() & !(0b11 << 62)) | (0b10 << 62);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xFFFF,
            high & 0xFFFF,
            low >> 48,
            low & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_look_like_version_4() {
        let mut prng = Prng::seeded(7);
        let id = prng.uuid();
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('4'), "{id}");
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'), "{id}");
        assert_ne!(prng.uuid(), id);
    }

    #[test]
    fn floats_stay_in_range() {
        let mut prng = Prng::seeded(1);
        for _ in 0..10_000 {
            let x = prng.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
