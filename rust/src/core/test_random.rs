//! Reproducible random numbers for the core's tests: a linear congruential generator (Knuth's
//! MMIX constants), the same sequence on every run and every machine.

pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next state, all 64 bits (the low ones are the least random).
    pub fn state(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// A number in `0..n`, from the high bits of the next state.
    pub fn below(&mut self, n: u64) -> u64 {
        (self.state() >> 33) % n
    }
}
