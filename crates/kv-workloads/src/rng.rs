//! Small helpers over the project's seeded PRNG ([`loadgen::SeededRng`]).

pub(crate) use loadgen::SeededRng;

/// Uniform integer in `0..n` (`n > 0`), by a 128-bit multiply (bias below 2^-40 for the
/// ranges used here).
pub(crate) fn below(rng: &mut SeededRng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// Uniform integer in `lo..=hi` (`lo <= hi`).
pub(crate) fn range_incl(rng: &mut SeededRng, lo: u64, hi: u64) -> u64 {
    lo + below(rng, hi - lo + 1)
}

/// A seed derived from `seed` and a stream number, so that independent streams of one
/// workload (load set, requests, epochs) do not share draws.
pub(crate) fn derive(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SeededRng::new(3);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[below(&mut rng, 7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
        for _ in 0..1000 {
            let v = range_incl(&mut rng, 5, 9);
            assert!((5..=9).contains(&v));
        }
    }
}
