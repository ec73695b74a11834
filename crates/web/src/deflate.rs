//! The encoder of the page's files, run by `build.rs` at build time (and by this crate's unit
//! tests, which check that `inflate` restores what it writes); never part of the binary.
//!
//! RFC 1951 DEFLATE with the fixed Huffman codes only (one block of type 01): greedy LZ77 with
//! one step of lazy matching over a 32 KiB window, then the fixed code table. ~35% of the text
//! (zlib's best with dynamic codes: ~30%), with an inflater of a few hundred bytes.

const WINDOW: usize = 32 * 1024;
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = 258;
/// How many earlier positions with the same 3-byte hash are tried per match (build time only).
const CHAIN: usize = 4096;

/// Bits written least significant first, as DEFLATE packs them.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, count: u32) {
        self.acc |= u64::from(value) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code: sent most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// The fixed literal/length code of `sym` (RFC 1951 3.2.6).
fn literal(bits: &mut Bits, sym: u32) {
    match sym {
        0..=143 => bits.code(0x30 + sym, 8),
        144..=255 => bits.code(0x190 + sym - 144, 9),
        256..=279 => bits.code(sym - 256, 7),
        _ => bits.code(0xC0 + sym - 280, 8),
    }
}

/// (base, extra bits) of the length codes 257..=285 and of the distance codes 0..=29.
#[rustfmt::skip]
const LENGTHS: [(u32, u32); 29] = [
    (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 0), (9, 0), (10, 0), (11, 1), (13, 1), (15, 1), (17, 1),
    (19, 2), (23, 2), (27, 2), (31, 2), (35, 3), (43, 3), (51, 3), (59, 3), (67, 4), (83, 4), (99, 4),
    (115, 4), (131, 5), (163, 5), (195, 5), (227, 5), (258, 0),
];
#[rustfmt::skip]
const DISTANCES: [(u32, u32); 30] = [
    (1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (7, 1), (9, 2), (13, 2), (17, 3), (25, 3), (33, 4), (49, 4),
    (65, 5), (97, 5), (129, 6), (193, 6), (257, 7), (385, 7), (513, 8), (769, 8), (1025, 9), (1537, 9),
    (2049, 10), (3073, 10), (4097, 11), (6145, 11), (8193, 12), (12289, 12), (16385, 13), (24577, 13),
];

fn pair(bits: &mut Bits, len: usize, dist: usize) {
    let (len, dist) = (len as u32, dist as u32);
    let i = LENGTHS.iter().rposition(|&(base, _)| base <= len).expect("a match is at least 3 long");
    literal(bits, 257 + i as u32);
    bits.put(len - LENGTHS[i].0, LENGTHS[i].1);
    let d = DISTANCES.iter().rposition(|&(base, _)| base <= dist).expect("a distance is at least 1");
    bits.code(d as u32, 5);
    bits.put(dist - DISTANCES[d].0, DISTANCES[d].1);
}

/// Earlier positions by the hash of their next three bytes, each chained to the one before.
struct Matcher<'a> {
    data: &'a [u8],
    head: Vec<usize>,
    prev: Vec<usize>,
}

impl Matcher<'_> {
    fn hash(&self, i: usize) -> usize {
        let d = self.data;
        (usize::from(d[i]) << 10 ^ usize::from(d[i + 1]) << 5 ^ usize::from(d[i + 2])) & 0x7fff
    }

    fn insert(&mut self, i: usize) {
        if i + MIN_MATCH <= self.data.len() {
            let h = self.hash(i);
            self.prev[i] = self.head[h];
            self.head[h] = i;
        }
    }

    /// The longest earlier match at `i` within the window: (length, distance), length 0 if none.
    fn longest(&self, i: usize) -> (usize, usize) {
        let data = self.data;
        if i + MIN_MATCH > data.len() {
            return (0, 0);
        }
        let max = MAX_MATCH.min(data.len() - i);
        let (mut best, mut dist) = (0, 0);
        let mut cand = self.head[self.hash(i)];
        for _ in 0..CHAIN {
            if cand == usize::MAX || i - cand > WINDOW {
                break;
            }
            let len = data[cand..].iter().zip(&data[i..i + max]).take_while(|(a, b)| a == b).count();
            if len > best {
                (best, dist) = (len, i - cand);
                if len == max {
                    break;
                }
            }
            cand = self.prev[cand];
        }
        if best >= MIN_MATCH {
            (best, dist)
        } else {
            (0, 0)
        }
    }
}

/// One final fixed-Huffman block holding all of `data`.
pub fn deflate(data: &[u8]) -> Vec<u8> {
    let mut bits = Bits { out: Vec::new(), acc: 0, n: 0 };
    bits.put(1, 1); // BFINAL
    bits.put(1, 2); // BTYPE 01: fixed Huffman codes
    let mut m = Matcher { data, head: vec![usize::MAX; 0x8000], prev: vec![usize::MAX; data.len()] };
    let mut i = 0;
    while i < data.len() {
        let (len, dist) = m.longest(i);
        m.insert(i);
        // Lazy matching: a longer match one byte later wins over this one.
        if len == 0 || m.longest(i + 1).0 > len {
            literal(&mut bits, u32::from(data[i]));
            i += 1;
            continue;
        }
        pair(&mut bits, len, dist);
        for j in i + 1..i + len {
            m.insert(j);
        }
        i += len;
    }
    literal(&mut bits, 256); // end of block
    bits.finish()
}
