//! Restores what `build.rs` deflated (`deflate.rs`): RFC 1951 DEFLATE blocks with the fixed
//! Huffman codes, the only kind written there; any other block type, a distance before the
//! start or an output over `limit` is refused (`None`). Runs once per asset, the first time it
//! is served.

/// The input's bits, least significant first.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Option<u32> {
        let byte = *self.data.get(self.pos / 8)?;
        self.pos += 1;
        Some(u32::from((byte >> ((self.pos - 1) % 8)) & 1))
    }

    /// An `n`-bit number (extra bits, header fields).
    fn number(&mut self, n: u32) -> Option<u32> {
        (0..n).try_fold(0, |v, i| Some(v | (self.bit()? << i)))
    }

    /// `n` more bits of a Huffman code after `v`, most significant first.
    fn code(&mut self, n: u32, v: u32) -> Option<u32> {
        (0..n).try_fold(v, |v, _| Some((v << 1) | self.bit()?))
    }

    /// A symbol of the fixed literal/length code (RFC 1951 3.2.6).
    fn symbol(&mut self) -> Option<u32> {
        let v = self.code(7, 0)?;
        if v < 0x18 {
            return Some(256 + v);
        }
        match self.code(1, v)? {
            v @ 0x30..=0xBF => Some(v - 0x30),
            v @ 0xC0..=0xC7 => Some(v - 0xC0 + 280),
            v => Some(self.code(1, v)? - 0x190 + 144),
        }
    }
}

/// (base, extra bits) of length code `c` (symbol 257 + c, c < 29) and of distance code `d`.
fn length(c: u32) -> (u32, u32) {
    match c {
        0..=7 => (c + 3, 0),
        28 => (258, 0),
        _ => {
            let extra = (c - 4) / 4;
            (((4 + c % 4) << extra) + 3, extra)
        }
    }
}

fn distance(d: u32) -> (u32, u32) {
    if d < 4 {
        return (d + 1, 0);
    }
    let extra = (d - 2) / 2;
    (((2 + d % 2) << extra) + 1, extra)
}

/// The bytes `data` holds, at most `limit` of them.
pub fn inflate(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut bits = Bits { data, pos: 0 };
    let mut out = Vec::new();
    loop {
        let last = bits.bit()? == 1;
        if bits.number(2)? != 1 {
            return None;
        }
        loop {
            let sym = bits.symbol()?;
            match sym {
                0..=255 => out.push(sym as u8),
                256 => break,
                257..=285 => {
                    let (base, extra) = length(sym - 257);
                    let len = (base + bits.number(extra)?) as usize;
                    let d = bits.code(5, 0)?;
                    if d > 29 {
                        return None;
                    }
                    let (base, extra) = distance(d);
                    let dist = (base + bits.number(extra)?) as usize;
                    let start = out.len().checked_sub(dist)?;
                    for i in start..start + len {
                        out.push(out[i]);
                    }
                }
                _ => return None,
            }
            if out.len() > limit {
                return None;
            }
        }
        if last {
            return Some(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deflate::deflate;

    /// Bytes with repeats of every length 3..=258 at distances up to the whole window, and runs
    /// that overlap themselves (distance < length).
    fn sample() -> Vec<u8> {
        let mut x: u32 = 12345;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut v: Vec<u8> = (0..40_000).map(|_| rnd() as u8).collect();
        for len in 3..=258 {
            let from = rnd() as usize % (v.len() - len);
            let piece = v[from..from + len].to_vec();
            v.extend(piece);
            v.extend((0..rnd() % 64).map(|_| rnd() as u8));
        }
        v.extend(std::iter::repeat_n(b'a', 1000));
        v.extend(b"abcabcabcabcabcabcabcabcabcabcabcabcabcabc");
        v
    }

    #[test]
    fn inflates_what_deflate_writes() {
        for data in [sample(), Vec::new(), b"a".to_vec(), b"abc".to_vec(), (0..=255u8).collect()] {
            let packed = deflate(&data);
            assert_eq!(inflate(&packed, data.len()).as_deref(), Some(&data[..]));
        }
        let data = sample();
        assert!(deflate(&data).len() < data.len(), "the repeats are found");
    }

    #[test]
    fn refuses_what_it_does_not_read() {
        let data = sample();
        let packed = deflate(&data);
        // Over the limit, cut short, a stored block (BTYPE 00), a dynamic one (10), a distance
        // before the start.
        assert_eq!(inflate(&packed, data.len() - 1), None);
        assert_eq!(inflate(&packed[..packed.len() / 2], usize::MAX), None);
        assert_eq!(inflate(&[0b001, 0, 0, 0xff, 0xff], usize::MAX), None);
        assert_eq!(inflate(&[0b101], usize::MAX), None);
        // BFINAL 1, BTYPE 01 and the end of block (0000000): nothing. The same block with length
        // code 257 (0000001) and distance code 0 (00000) first: a copy from before the start.
        assert_eq!(inflate(&[0b0000_0011, 0, 0], usize::MAX).as_deref(), Some(&[][..]));
        assert_eq!(inflate(&[0b0000_0011, 0b0000_0010, 0], usize::MAX), None);
    }
}
