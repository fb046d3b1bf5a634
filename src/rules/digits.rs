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
    /// writes two 13-digit times on every RESERVE).
    pub fn push_u64(&mut self, mut n: u64) {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
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
        let digits = &tmp[i..];
        self.buf[self.len..self.len + digits.len()].copy_from_slice(digits);
        self.len += digits.len();
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
        }
    }
}
