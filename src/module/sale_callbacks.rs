//! What the `seckill--` type's callbacks do with a sale (`datatype`): load
//! and save the RDB form, rebuild it in an AOF rewrite, keep the list of
//! sales and the expiry registry in step with loads and unlinks, and
//! report memory usage.

use redis_module::ContextFlags;

use crate::module::datatype::ENCODING_VERSION;
use crate::module::ffi::type_methods::{AofIo, Place, RdbIo, TypeValue};
use crate::rules::sale::Sale;
use crate::wire::effect_args::{EffectArgs, EFFECT_COMMAND};
use crate::wire::encoding;

/// Records per SECKILL.EFFECT command in an AOF rewrite.
const AOF_BATCH: usize = 64;

impl TypeValue for Sale {
    fn load(io: &RdbIo, encver: i32) -> Option<Sale> {
        if !(1..=ENCODING_VERSION).contains(&encver) {
            return None;
        }
        let buf = io.read_buffer()?;
        let place = io.place();
        let sale = encoding::decode_as(buf.as_ref(), place.as_ref().map(|(_, key)| &key[..])).ok()?;
        if let Some((db, key)) = &place {
            if !stream_slot_allowed(io, key, &sale) {
                return None;
            }
            crate::module::expiry_registry::on_loaded(*db, key, &sale);
            crate::module::sales::on_loaded(*db, key);
        }
        Some(sale)
    }

    /// The persisted form is canonical (records in creation order, derived
    /// state left out), so equal digests mean equal sales.
    fn save(&self) -> Vec<u8> {
        encoding::encode(self)
    }

    /// Rebuilds the sale with the same SECKILL.EFFECT commands replication
    /// uses (`effect::rebuild`: INIT, the transfer state, the records).
    fn rewrite(&self, aof: &AofIo) {
        crate::rules::effect::rebuild(self, AOF_BATCH, |e| aof.emit(EFFECT_COMMAND, &e.to_args()));
    }

    /// The value left the keyspace under its name (DEL, UNLINK, expiry,
    /// eviction, the old name of a RENAME or MOVE, a value written over):
    /// the name leaves the list of sales.
    fn unlinked(place: Option<Place>) {
        if let Some((db, key)) = place {
            crate::module::sales::on_unlinked(db, &key);
        }
    }

    fn memory(&self) -> usize {
        self.heap_estimate()
    }
}

/// The sale writes its stream from the server, outside any ACL check: a
/// payload must not name a stream in another slot than its key. RESTORE
/// (a payload from a client) refuses one in every deployment, as INIT does;
/// a load from this server's own RDB or its master refuses one only in a
/// cluster, where the slot may be another node's (outside a cluster a
/// RENAME can legitimately have moved the sale away from its stream).
fn stream_slot_allowed(io: &RdbIo, key: &[u8], sale: &Sale) -> bool {
    let Some(stream) = &sale.config().stream else {
        return true;
    };
    if crate::wire::slot::key_slot(&stream.key) == crate::wire::slot::key_slot(key) {
        return true;
    }
    let flags = io.flags();
    let loading = flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING);
    loading && !flags.contains(ContextFlags::CLUSTER)
}
