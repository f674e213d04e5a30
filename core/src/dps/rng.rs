//! A tiny seeded generator for DPS's random choices (002 §2.1: the
//! random_trigger and the uniform tie-breaks), so every run is reproducible
//! bit for bit (DESIGN.md, Determinism).

/// splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): one `u64` of state, passes BigCrush, and is
/// the generator the rest of opsel uses for its seeded choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is splitmix64's first output for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Bernoulli(p): true with probability `p` (p ≤ 0 never, p ≥ 1 always,
    /// without consuming a draw in either case so p = 1 runs do not depend
    /// on the seed).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        if p >= 1.0 {
            return true;
        }
        if p.is_nan() || p <= 0.0 {
            return false;
        }
        self.next_f64() < p
    }

    /// Uniform in `0..n` without modulo bias (Lemire's multiply-shift with
    /// rejection). `n == 0` returns 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// A uniformly chosen set bit of `mask` (bit i = candidate i), or `None`
    /// for an empty mask.
    pub fn choose_bit(&mut self, mask: u32) -> Option<usize> {
        let k = mask.count_ones();
        if k == 0 {
            return None;
        }
        let mut nth = self.below(k as u64) as u32;
        let mut m = mask;
        loop {
            let i = m.trailing_zeros();
            if nth == 0 {
                return Some(i as usize);
            }
            nth -= 1;
            m &= m - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference outputs of splitmix64 seeded with 0 (the C reference
    /// implementation by Vigna, `splitmix64.c`).
    #[test]
    fn golden_seed_zero() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_and_choose_are_uniform_enough() {
        let mut r = SplitMix64::new(7);
        let mut c = [0u32; 4];
        for _ in 0..30_000 {
            c[r.choose_bit(0b1011).unwrap()] += 1;
        }
        assert_eq!(c[2], 0, "bit 2 is not in the mask");
        for i in [0, 1, 3] {
            assert!((c[i] as f64 - 10_000.0).abs() < 400.0, "{c:?}");
        }
        assert_eq!(r.choose_bit(0), None);
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn bernoulli_edges_do_not_draw() {
        let mut a = SplitMix64::new(3);
        let b = a;
        assert!(a.bernoulli(1.0));
        assert!(!a.bernoulli(0.0));
        assert!(!a.bernoulli(f64::NAN));
        assert_eq!(a, b);
        let hits = (0..10_000).filter(|_| a.bernoulli(0.25)).count();
        assert!((hits as f64 - 2500.0).abs() < 200.0, "{hits}");
    }
}
