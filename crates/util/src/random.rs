//! Randomness: secret tokens from the OS, and a deterministic generator for the fuzz tests.

use ring::rand::SecureRandom;

use crate::encoding::hex;

/// `n` random bytes from the OS (the getrandom system call through ring: no file descriptor,
/// so it works when descriptors run out).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    // getrandom(2) fails only on kernels older than 3.17, which gosling does not run on.
    ring::rand::SystemRandom::new().fill(&mut buf).expect("getrandom(2) is available on Linux >= 3.17");
    buf
}

/// `random_bytes(n)`, hex-encoded.
pub fn random_hex(n: usize) -> String {
    hex(&random_bytes(n))
}

/// xorshift64*: a deterministic PRNG for the fuzz tests (a fixed seed gives the same inputs
/// on every run and machine). Not for anything secret: use `random_hex` for that.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `seed` with 1–`max_edits` random edits: delete a byte, insert one from `alphabet`,
    /// overwrite one with any byte, or cut the tail.
    pub fn mutate(&mut self, seed: &[u8], alphabet: &[u8], max_edits: usize) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..=self.below(max_edits) {
            match self.below(4) {
                0 if !b.is_empty() => {
                    let at = self.below(b.len());
                    b.remove(at);
                }
                1 => {
                    let at = self.below(b.len() + 1);
                    b.insert(at, alphabet[self.below(alphabet.len())]);
                }
                2 if !b.is_empty() => {
                    let at = self.below(b.len());
                    b[at] = self.next_u64() as u8;
                }
                _ => {
                    let cut = self.below(b.len() + 1);
                    b.truncate(cut);
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_tokens_have_twice_the_bytes() {
        assert_eq!(super::random_hex(4).len(), 8);
        assert_ne!(super::random_hex(16), super::random_hex(16));
    }
}
