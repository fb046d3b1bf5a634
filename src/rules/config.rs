//! A sale's configuration (INIT's options) and its one validation: INIT's
//! arguments, the INIT effect and the RDB payload are all checked by
//! `SaleConfig::check`, against the same bounds.

use crate::rules::fence::ReplId;
use crate::rules::reservation::valid_id;

pub const MAX_TOTAL: u64 = 1_000_000_000_000_000;
pub const MAX_SHARDS: u32 = 1024;
pub const OPEN_END: u64 = u64::MAX;
/// Milliseconds up to year 9999 are accepted as times (and as HOLD).
pub const MAX_TIME_MS: u64 = 253_402_300_799_999;
/// Peers one key of a split sale may declare: it bounds every scan of them
/// (the report, a restore) and the state a RECV can add.
pub const MAX_PEERS: usize = 1024;
/// Bytes of a split sale's round id.
pub const MAX_ROUND: usize = 64;

/// Why a configuration is refused: the text after `ERR `, naming the option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

/// The range of one numeric option.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub name: &'static str,
    pub min: u64,
    pub max: u64,
}

impl Bound {
    pub fn check(&self, value: u64) -> Result<u64, ConfigError> {
        if value < self.min || value > self.max {
            return Err(ConfigError(format!("{} must be from {} to {}", self.name, self.min, self.max)));
        }
        Ok(value)
    }
}

pub const TOTAL: Bound = Bound { name: "TOTAL", min: 0, max: MAX_TOTAL };
pub const SHARDS: Bound = Bound { name: "SHARDS", min: 1, max: MAX_SHARDS as u64 };
pub const LIMIT: Bound = Bound { name: "LIMIT", min: 1, max: MAX_TOTAL };
pub const HOLD: Bound = Bound { name: "HOLD", min: 0, max: MAX_TIME_MS };
pub const START: Bound = Bound { name: "START", min: 0, max: MAX_TIME_MS };
pub const END: Bound = Bound { name: "END", min: 1, max: MAX_TIME_MS };
pub const MAXLEN: Bound = Bound { name: "MAXLEN", min: 1, max: i64::MAX as u64 };
pub const PEERS: Bound = Bound { name: "SPLIT peer count", min: 1, max: MAX_PEERS as u64 };

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamConfig {
    pub key: Box<[u8]>,
    /// Approximate trim length; `None` keeps every entry.
    pub maxlen: Option<u64>,
    /// The sale key this stream was created for. A sale under any other name
    /// (a COPY, a RESTORE under a new name) writes no stream entries, so a
    /// backup can never write into the live sale's stream; RENAME carries
    /// the owner along. Empty when unknown (a payload from before owners
    /// were kept, loaded without its key name): then any name writes.
    pub owner: Box<[u8]>,
}

impl StreamConfig {
    /// Whether the sale at `key` may append to this stream.
    pub fn writes_from(&self, key: &[u8]) -> bool {
        self.owner.is_empty() || *self.owner == *key
    }
}

/// A key's place in a split sale (`INIT ... SPLIT`): the round it belongs
/// to and the peer keys it may move stock with. Every transfer names the
/// round, so a transfer, a repair or a cached total from before an
/// `INIT ... REPLACE` changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitConfig {
    /// 1 to `MAX_ROUND` bytes.
    pub round: Box<[u8]>,
    /// Sorted and distinct, 1 to `MAX_PEERS` of them.
    pub peers: Box<[Box<[u8]>]>,
}

impl SplitConfig {
    pub fn declares(&self, peer: &[u8]) -> bool {
        self.peers.binary_search_by(|p| (**p).cmp(peer)).is_ok()
    }
}

/// A declared beacon's name (INIT's `BEACON name`), bytes at the most.
pub const MAX_BEACON_NAME: usize = 256;
/// A beacon value (DRAW's `BEACON value`), bytes at the most.
pub const MAX_BEACON_VALUE: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SaleConfig {
    pub total: u64,
    pub shards: u32,
    pub limit: u64,
    /// 0: holds never run out.
    pub hold_ms: u64,
    pub start_ms: u64,
    /// `OPEN_END` when the sale has no end.
    pub end_ms: u64,
    pub stream: Option<StreamConfig>,
    /// Random per round (made on the master), prefix of generated ids so
    /// they do not repeat across REPLACE rounds.
    pub tag: u32,
    /// `Some` for the pool and the parts of a split sale.
    pub split: Option<SplitConfig>,
    /// A draw sale's secret seed (`INIT ... DRAW`), drawn on the master:
    /// replicas and the AOF get it inside INIT's effect.
    pub draw: Option<[u8; 32]>,
    /// A draw sale's declared beacon (`DRAW BEACON name`): the name of the
    /// public value its first DRAW must take.
    pub beacon: Option<Box<[u8]>>,
    /// A FENCE sale's recorded replication id (`rules::fence`): the
    /// master's at INIT and at each UNFENCE, carried inside the effects.
    /// `None`: a sale without FENCE, which never asks for the current id.
    pub fence: Option<ReplId>,
    /// The secret key of generated reservation ids (`rules::sale::ids`),
    /// 16 random bytes drawn on the master at INIT: replicas and the AOF
    /// get it inside INIT's effect, RDB and DUMP inside the payload. `None`
    /// for a sale from before id keys, which keeps issuing `<tag>-<seq>`.
    pub id_key: Option<[u8; 16]>,
}

impl SplitConfig {
    /// A split sale's round and declared peers (INIT's `SPLIT round n
    /// peer...`): the round 1 to `MAX_ROUND` bytes, each peer a key name
    /// other than `key` (when known), no peer twice. Stored sorted.
    pub fn new(key: Option<&[u8]>, round: &[u8], peers: &[&[u8]]) -> Result<SplitConfig, ConfigError> {
        if round.is_empty() || round.len() > MAX_ROUND {
            return Err(ConfigError(format!("SPLIT round must be 1 to {MAX_ROUND} bytes")));
        }
        PEERS.check(peers.len() as u64)?;
        let mut sorted = Vec::with_capacity(peers.len());
        for &p in peers {
            if !valid_id(p) {
                return Err(ConfigError("SPLIT peer must be 1 to 256 bytes".into()));
            }
            if key == Some(p) {
                return Err(ConfigError("SPLIT peer must differ from the key: a key cannot send to itself".into()));
            }
            sorted.push(Box::<[u8]>::from(p));
        }
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(ConfigError("SPLIT names a peer twice".into()));
        }
        Ok(SplitConfig { round: round.into(), peers: sorted.into() })
    }
}

impl SaleConfig {
    /// A sale of `total` units in `shards` buckets with INIT's defaults:
    /// LIMIT 1, no HOLD, no window, tag 0, and none of the options that
    /// add state (STREAM, SPLIT, DRAW, FENCE).
    pub fn plain(total: u64, shards: u32) -> SaleConfig {
        SaleConfig {
            total,
            shards,
            limit: 1,
            hold_ms: 0,
            start_ms: 0,
            end_ms: OPEN_END,
            stream: None,
            tag: 0,
            split: None,
            draw: None,
            beacon: None,
            fence: None,
            id_key: None,
        }
    }

    /// Every rule a configuration must meet, whoever made it: INIT, an INIT
    /// effect (replication, AOF) or an RDB payload. `tag` takes any value.
    pub fn check(&self) -> Result<(), ConfigError> {
        TOTAL.check(self.total)?;
        SHARDS.check(u64::from(self.shards))?;
        LIMIT.check(self.limit)?;
        HOLD.check(self.hold_ms)?;
        START.check(self.start_ms)?;
        if self.end_ms != OPEN_END {
            END.check(self.end_ms)?;
        }
        if self.start_ms >= self.end_ms {
            return Err(ConfigError("START must be before END".into()));
        }
        if let Some(stream) = &self.stream {
            if !valid_id(&stream.key) {
                return Err(ConfigError("STREAM key must be 1 to 256 bytes".into()));
            }
            if let Some(n) = stream.maxlen {
                MAXLEN.check(n)?;
            }
        }
        if let Some(name) = &self.beacon {
            if self.draw.is_none() {
                return Err(ConfigError("BEACON needs DRAW".into()));
            }
            if name.is_empty() || name.len() > MAX_BEACON_NAME {
                return Err(ConfigError(format!("BEACON name must be 1 to {MAX_BEACON_NAME} bytes")));
            }
        }
        if self.draw.is_some() && self.end_ms == OPEN_END {
            return Err(ConfigError("DRAW needs END: the end of registration".into()));
        }
        if let Some(split) = &self.split {
            let peers: Vec<&[u8]> = split.peers.iter().map(|p| &**p).collect();
            if SplitConfig::new(None, &split.round, &peers)? != *split {
                return Err(ConfigError("SPLIT peers must be sorted".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> SaleConfig {
        SaleConfig::plain(10, 1)
    }

    #[test]
    fn one_check_for_every_source() {
        assert_eq!(plain().check(), Ok(()));
        let bad = [
            (SaleConfig { total: MAX_TOTAL + 1, ..plain() }, "TOTAL must be from 0 to 1000000000000000"),
            (SaleConfig { shards: 0, ..plain() }, "SHARDS must be from 1 to 1024"),
            (SaleConfig { limit: 0, ..plain() }, "LIMIT must be from 1 to"),
            (SaleConfig { hold_ms: MAX_TIME_MS + 1, ..plain() }, "HOLD must be from 0 to"),
            (SaleConfig { start_ms: 5, end_ms: 5, ..plain() }, "START must be before END"),
            (SaleConfig { end_ms: MAX_TIME_MS + 1, ..plain() }, "END must be from 1 to"),
            (
                SaleConfig { stream: Some(StreamConfig { key: Box::default(), maxlen: None, owner: Box::default() }), ..plain() },
                "STREAM key",
            ),
            (
                SaleConfig { stream: Some(StreamConfig { key: b"s".to_vec().into(), maxlen: Some(0), owner: Box::default() }), ..plain() },
                "MAXLEN",
            ),
            (
                SaleConfig {
                    split: Some(SplitConfig {
                        round: b"r".to_vec().into(),
                        peers: vec![b"b".to_vec().into(), b"a".to_vec().into()].into(),
                    }),
                    ..plain()
                },
                "sorted",
            ),
        ];
        for (config, text) in bad {
            let err = config.check().unwrap_err().0;
            assert!(err.contains(text), "{err:?} for {config:?}");
        }
    }

    #[test]
    fn split_rules() {
        let s = SplitConfig::new(Some(b"k"), b"r1", &[b"p2", b"p0"]).unwrap();
        assert_eq!(&*s.peers[0], b"p0");
        assert!(s.declares(b"p2") && !s.declares(b"k"));
        for (round, peers, text) in [
            (&b""[..], vec![&b"a"[..]], "SPLIT round"),
            (&b"r"[..], vec![], "SPLIT peer count"),
            (&b"r"[..], vec![&b"k"[..]], "differ"),
            (&b"r"[..], vec![&b"a"[..], &b"a"[..]], "twice"),
            (&b"r"[..], vec![&b""[..]], "SPLIT peer must"),
        ] {
            let err = SplitConfig::new(Some(b"k"), round, &peers).unwrap_err().0;
            assert!(err.contains(text), "{err}");
        }
    }
}
