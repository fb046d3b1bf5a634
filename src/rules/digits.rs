//! A number or an id written into a buffer on the stack: the hot paths
//! (generated reservation ids, the PENDING effect, stream entry ids) format
//! without allocating.

/// Decimal numbers written into a stack buffer, without formatting machinery.
#[derive(Clone, Copy)]
pub struct Digits {
    buf: [u8; 96],
    len: usize,
}

impl std::fmt::Debug for Digits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl Default for Digits {
    fn default() -> Self {
        Digits { buf: [0; 96], len: 0 }
    }
}

impl Digits {
    pub fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    /// Writes `n` in decimal, two digits per division (a PENDING effect
    /// writes its 13-digit times on every RESERVE). One digit (a quantity,
    /// a bucket, the zero deadline of a sale without HOLD: most of a
    /// PENDING effect's numbers) is one byte, without the scratch buffer
    /// and its copy.
    pub fn push_u64(&mut self, mut n: u64) {
        if n < 10 {
            return self.push(b'0' + n as u8);
        }
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        // Digits end at 20; the window after them lets a fixed-size copy
        // move them (no memcpy call) when the buffer has room for it.
        let mut tmp = [0u8; 40];
        let mut i = 20;
        while n >= 100 {
            let pair = (n % 100) as usize * 2;
            n /= 100;
            i -= 2;
            tmp[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            i -= 2;
            tmp[i..i + 2].copy_from_slice(&PAIRS[n as usize * 2..n as usize * 2 + 2]);
        } else {
            i -= 1;
            tmp[i] = b'0' + n as u8;
        }
        let n = 20 - i;
        match self.buf.get_mut(self.len..self.len + 20) {
            Some(window) => {
                window.copy_from_slice(&tmp[i..i + 20]);
                self.len += n;
            }
            None => self.extend_near_end(&tmp[i..20]),
        }
    }

    /// `extend`, apart from `push_u64`'s fixed-size copy: were the two
    /// copies one call site, the compiler would make both a memcpy call.
    #[cold]
    #[inline(never)]
    fn extend_near_end(&mut self, bytes: &[u8]) {
        self.extend(bytes);
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Drops what was written after the first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

#[cfg(test)]
mod tests {
    use super::Digits;

    #[test]
    fn numbers_match_to_string() {
        let mut samples = vec![0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1_732_000_000_123, u64::MAX, u64::MAX - 1];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        // Every length's first and last number.
        for k in 1..20 {
            samples.extend([10u64.pow(k) - 1, 10u64.pow(k), 10u64.pow(k) + 1]);
        }
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(x >> (x % 64));
        }
        for n in samples {
            let mut d = Digits::default();
            d.push_u64(n);
            assert_eq!(d.as_bytes(), n.to_string().as_bytes(), "{n}");
            // Near the end of the buffer, where the 20-byte window does not
            // fit and the digits are copied as they are.
            let text = n.to_string();
            let mut full = Digits::default();
            full.extend(&[b'x'; 96][..96 - text.len()]);
            full.push_u64(n);
            assert_eq!(&full.as_bytes()[96 - text.len()..], text.as_bytes(), "{n}");
            assert_eq!(full.len(), 96);
        }
    }
}
