//! `numpy.random.default_rng(seed).permutation(n)`, number for number: numpy's `SeedSequence`
//! (its hash mixing of the seed's 32-bit words into a pool of four, then the state words), the
//! `PCG64` bit generator it seeds (128-bit LCG, XSL-RR output, 32-bit draws taken as halves of
//! a 64-bit one, low half first) and `Generator.shuffle`'s Fisher–Yates with masked rejection
//! sampling. datatrove shuffles a rank's documents with it (`DocumentTokenizer(seed=…)`), so
//! our shuffled files equal its own for the same seed.

const MASK32: u64 = 0xffff_ffff;
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const PCG_MULT: u128 = 0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645;

/// `SeedSequence(seed).generate_state(4, uint64)`.
fn seed_state(seed: u64) -> [u64; 4] {
    let mut entropy = vec![(seed & MASK32) as u32];
    if seed >> 32 != 0 {
        entropy.push((seed >> 32) as u32);
    }
    let mut hash = INIT_A;
    let mut hashmix = |v: u32| {
        let mut v = v ^ hash;
        hash = hash.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash);
        v ^ (v >> 16)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> 16)
    };
    let mut pool = [0u32; 4];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..4 {
        for dst in 0..4 {
            if src != dst {
                let h = hashmix(pool[src]);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    let mut hash = INIT_B;
    let mut words = [0u32; 8];
    for (i, w) in words.iter_mut().enumerate() {
        let mut v = pool[i % 4] ^ hash;
        hash = hash.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash);
        *w = v ^ (v >> 16);
    }
    std::array::from_fn(|i| words[2 * i] as u64 | (words[2 * i + 1] as u64) << 32)
}

/// numpy's `PCG64`.
struct Pcg64 {
    state: u128,
    inc: u128,
    half: Option<u32>,
}

impl Pcg64 {
    fn new(seed: u64) -> Pcg64 {
        let v = seed_state(seed);
        let init_state = (v[0] as u128) << 64 | v[1] as u128;
        let init_seq = (v[2] as u128) << 64 | v[3] as u128;
        let mut g = Pcg64 { state: 0, inc: init_seq << 1 | 1, half: None };
        g.step();
        g.state = g.state.wrapping_add(init_state);
        g.step();
        g
    }
    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }
    fn next_u64(&mut self) -> u64 {
        self.step();
        let rot = (self.state >> 122) as u32;
        (((self.state >> 64) as u64) ^ (self.state as u64)).rotate_right(rot)
    }
    fn next_u32(&mut self) -> u32 {
        if let Some(h) = self.half.take() {
            return h;
        }
        let n = self.next_u64();
        self.half = Some((n >> 32) as u32);
        (n & MASK32) as u32
    }
    /// A uniform draw from `0..=max` (numpy's `random_interval`).
    fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mut mask = max;
        for s in [1, 2, 4, 8, 16, 32] {
            mask |= mask >> s;
        }
        loop {
            let v = if max <= MASK32 { self.next_u32() as u64 & mask } else { self.next_u64() & mask };
            if v <= max {
                return v;
            }
        }
    }
}

/// `numpy.random.default_rng(seed)`: permutations drawn one after another from the same
/// generator (datatrove draws the documents' order, then the chunks').
pub struct Rng(Pcg64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Pcg64::new(seed))
    }

    /// The generator's next `permutation(n)`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut a: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.0.interval(i as u64) as usize;
            a.swap(i, j);
        }
        a
    }
}

/// `numpy.random.default_rng(seed).permutation(n)`.
pub fn permutation(seed: u64, n: usize) -> Vec<usize> {
    Rng::new(seed).permutation(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_and_permutations_equal_numpys() {
        // numpy 2.4: default_rng(42).bit_generator.random_raw(2)
        let mut g = Pcg64::new(42);
        assert_eq!([g.next_u64(), g.next_u64()], [14276969152011380360, 8095878257575067585]);
        // default_rng(0).permutation(10), default_rng(7).permutation(20)
        assert_eq!(permutation(0, 10), [4, 6, 2, 7, 3, 5, 9, 0, 8, 1]);
        assert_eq!(permutation(7, 20), [3, 8, 12, 13, 14, 16, 10, 15, 1, 6, 0, 7, 4, 18, 5, 19, 17, 2, 9, 11]);
        assert_eq!(permutation(3, 0), Vec::<usize>::new());
        // Two draws from one generator, as datatrove's documents then chunks:
        // g = default_rng(5); g.permutation(7); g.permutation(13)
        let mut g = Rng::new(5);
        assert_eq!(g.permutation(7), [1, 4, 2, 3, 6, 5, 0]);
        assert_eq!(g.permutation(13), [9, 6, 3, 7, 1, 0, 8, 12, 11, 2, 4, 5, 10]);
    }
}
