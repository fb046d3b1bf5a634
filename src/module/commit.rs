//! The one write path. `Committer::write` brackets every change to a sale
//! that exists: the holds that ran out first (lazy expiry, or the timer's
//! chunk), then the caller's change, then the stock-edge event. Inside it a
//! change is made through a `Writer`: apply the effect to the sale,
//! replicate it, notify, and (on the master) append its entries to the
//! reservation stream. Commands, the expiry timer and the replica's EFFECT
//! command all go through here, so a change and its propagation can never
//! drift apart.

use redis_module::key::RedisKeyWritable;
use redis_module::{Context, RedisError, RedisString};

use crate::module::datatype::SALE_TYPE;

use crate::module::ffi::{self, replicate::Arg};
use crate::module::stats;
use crate::module::stream::StreamKey;
use crate::rules::effect::{single_record, Effect, Event};
use crate::rules::reservation::NewRecord;
use crate::rules::sale::{Accepted, EffectError, Sale, SaleConfig};
use crate::wire::effect_args::{pending_form, EffectArgs, EFFECT_COMMAND};

/// Holds a command releases lazily before its own work; the timer does the
/// rest.
pub const LAZY_CHUNK: usize = 128;

/// A stream key the command opened, or one opened for this commit.
enum Opened<'a> {
    Borrowed(&'a StreamKey),
    Owned(StreamKey),
}

impl Opened<'_> {
    fn key(&self) -> &StreamKey {
        match self {
            Opened::Borrowed(k) => k,
            Opened::Owned(k) => k,
        }
    }
}

/// RESERVE's stream entry, appended on the master and carried in its effect.
struct Carried<'a> {
    stream: Opened<'a>,
    added: crate::module::stream::Added,
    rec: NewRecord<'a>,
    user: Arg<'a>,
    nums: crate::rules::digits::Digits,
}

/// What `publish_change` propagates: an effect, or the record a RESERVE accepted,
/// which the hot path publishes as it is, without building an `Effect`.
#[derive(Clone, Copy)]
enum Change<'e> {
    Effect(&'e Effect),
    /// With the user as the command passed it (replicated by reference).
    Reserved(NewRecord<'e>, Arg<'e>),
}

impl<'e> Change<'e> {
    /// The new pending record, its user argument and its PENDING numbers,
    /// when the change has that short wire form.
    fn pending(self) -> Option<(NewRecord<'e>, Arg<'e>, crate::rules::digits::Digits)> {
        let (rec, user) = match self {
            Change::Reserved(rec, user) => (rec, user),
            Change::Effect(effect) => {
                let rec = single_record(effect)?.as_new();
                (rec, Arg::Bytes(rec.user))
            }
        };
        Some((rec, user, pending_form(&rec)?))
    }

    fn for_each_event(self, mut f: impl FnMut(Event, &[u8])) {
        match self {
            Change::Effect(effect) => effect.for_each_event(f),
            Change::Reserved(rec, _) => f(Event::Reserved, rec.id),
        }
    }
}

/// Where an effect comes from decides what else it does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Decided here: replicate the effect, append to the stream.
    Master,
    /// Received as SECKILL.EFFECT (replication link, AOF, or a client):
    /// replicate it verbatim; the stream entries arrive as their own XADDs,
    /// except RESERVE's, which travels inside its PENDING effect (appended
    /// by the EFFECT command, `commands::effect`).
    Replayed,
}

/// A command's (or the timer's, or a replayed effect's) access to one sale
/// key: everything a change needs to be replicated, announced and streamed.
pub struct Committer<'a> {
    pub ctx: &'a Context,
    pub key: &'a RedisString,
    pub origin: Origin,
    /// The sale's stream key when the command opened (and checked) it.
    pub stream: Option<&'a StreamKey>,
}

/// The holds a write releases before its own change: those due at `now`,
/// at most `max`, as one effect.
#[derive(Clone, Copy)]
pub struct DueHolds {
    pub now: u64,
    pub max: usize,
}

impl DueHolds {
    /// A command's lazy expiry: a chunk of the due holds, before the
    /// command's own change; the timer does the rest.
    pub fn lazy(now: u64) -> DueHolds {
        DueHolds { now, max: LAZY_CHUNK }
    }
}

/// The handle a write's change commits through (`Committer::write`): its
/// methods are the only way to replicate and announce a change to a sale
/// that exists, so none can miss the lazy expiry before it or the
/// stock-edge event after it.
#[derive(Clone, Copy)]
pub struct Writer<'c, 'a>(&'c Committer<'a>);

impl Writer<'_, '_> {
    /// Applies `effect` and propagates it. A refused effect changes nothing
    /// and propagates nothing.
    pub fn commit(self, sale: &mut Sale, effect: &Effect) -> Result<(), EffectError> {
        self.0.commit(sale, effect)
    }

    /// Applies a RESERVE the sale accepted and propagates it: the same
    /// `add_record` a replayed PENDING effect runs, with no `Effect` built.
    /// `user` is the accepted user as the command passed it.
    pub fn commit_reserve(self, sale: &mut Sale, accepted: &Accepted, user: Arg) -> Result<(), EffectError> {
        let rec = accepted.as_new();
        self.0.apply_and_publish(sale, Change::Reserved(rec, user), |sale| sale.add_accepted(accepted))
    }

    /// Propagates an effect already applied to `sale` (`had_holds`: whether
    /// the sale had holds before). RELEASE and CONFIRM apply theirs with
    /// `Sale::release`/`confirm`, whose outcome names the reply; RECONCILE
    /// applies its fixes row by row, since each row must see the stock the
    /// previous ones took, then publishes them as one effect.
    pub fn publish(self, sale: &Sale, effect: &Effect, had_holds: bool) {
        self.0.publish_change(sale, Change::Effect(effect), had_holds);
    }
}

impl<'a> Committer<'a> {
    /// The one write path to a sale that exists (INIT, which creates one,
    /// is `init`): releases the holds that `due` names, makes the caller's
    /// `change` (which commits through the `Writer` it is given), then
    /// emits `seckill.soldout` or `seckill.restock` if the stock crossed
    /// zero. A change that fails returns its error at once, with no
    /// stock-edge event.
    ///
    /// Inlined into each command: RESERVE keeps its decision in place
    /// around it, and a call in between costs measurable instructions on
    /// the hot path (`bench/callgrind.sh`).
    #[inline(always)]
    pub fn write<T, E>(
        &self,
        sale: &mut Sale,
        due: Option<DueHolds>,
        change: impl FnOnce(Writer<'_, 'a>, &mut Sale) -> Result<T, E>,
    ) -> Result<T, E> {
        let before = sale.remaining();
        if let Some(due) = due {
            self.expire_due(sale, due);
        }
        let out = change(Writer(self), sale)?;
        match due {
            Some(due) => self.promote_waitlist(sale, due),
            None => self.keep_waitlist_visit(sale),
        }
        self.notify_stock_edge(before, sale.remaining());
        Ok(out)
    }

    /// A draw sale whose draw is complete hands the units that came back
    /// to its waitlist, at most `due.max` promotions and
    /// `rules::sale::SCAN_STEPS` new places of the draw order per write;
    /// the timer continues the rest. Decided on the master only.
    #[inline(always)]
    fn promote_waitlist(&self, sale: &mut Sale, due: DueHolds) {
        if self.origin == Origin::Master && sale.is_draw() {
            self.promote_now(sale, due);
        }
    }

    #[inline(never)]
    fn promote_now(&self, sale: &mut Sale, due: DueHolds) {
        let had_holds = sale.next_deadline().is_some();
        let step = sale.promote_step(due.max, due.now, crate::module::node::replid);
        let n = step.records.len();
        if n > 0 {
            stats::PROMOTED.add(n as u64);
            self.publish_change(sale, Change::Effect(&Effect::Promoted(step.records)), had_holds);
        }
        if step.more {
            // More may fit, or the search for the next fit stopped at its
            // bound: the timer comes back at once and continues it.
            crate::module::expiry_registry::schedule(ffi::keyspace::selected_db(self.ctx), self.key.as_slice(), due.now);
        }
    }

    /// A replayed effect (a replica's, the AOF's) leaves the waitlist to
    /// the master that decided it, which may have stopped a promotion's
    /// search at its bound. Should this node come to decide (a failover, a
    /// start from the AOF), a draw sale whose waitlist may have work is
    /// visited at once: scheduled now, which the timer leaves alone until
    /// the node decides.
    #[inline(always)]
    fn keep_waitlist_visit(&self, sale: &Sale) {
        if self.origin == Origin::Replayed && sale.is_draw() && sale.waitlist_may_promote() {
            crate::module::expiry_registry::schedule(ffi::keyspace::selected_db(self.ctx), self.key.as_slice(), 0);
        }
    }

    /// A write that only releases due holds: the expiry timer's visit.
    pub fn expire(&self, sale: &mut Sale, due: DueHolds) {
        let _ = self.write(sale, Some(due), |_, _| Ok::<(), ()>(()));
    }

    fn commit(&self, sale: &mut Sale, effect: &Effect) -> Result<(), EffectError> {
        self.apply_and_publish(sale, Change::Effect(effect), |sale| effect.apply(sale))
    }

    fn apply_and_publish(
        &self,
        sale: &mut Sale,
        change: Change,
        apply: impl FnOnce(&mut Sale) -> Result<(), EffectError>,
    ) -> Result<(), EffectError> {
        let had_holds = sale.next_deadline().is_some();
        if let Err(e) = apply(sale) {
            stats::EFFECTS_REFUSED.add(1);
            return Err(e);
        }
        self.publish_change(sale, change, had_holds);
        Ok(())
    }

    fn publish_change(&self, sale: &Sale, change: Change, had_holds: bool) {
        stats::EFFECTS_APPLIED.add(1);
        // The timer forgets a sale once its holds are gone; it needs it
        // back when they return. Later holds run out later, so a sale that
        // had holds is already scheduled early enough. (Loads, renames and
        // SWAPDB schedule it elsewhere.)
        if let (false, Some(deadline)) = (had_holds, sale.next_deadline()) {
            crate::module::expiry_registry::schedule(ffi::keyspace::selected_db(self.ctx), self.key.as_slice(), deadline);
        }
        // RESERVE's entry travels inside its effect: one replicated command.
        let carried = match self.origin {
            Origin::Master => self.append_carried(sale, change),
            Origin::Replayed => None,
        };
        match (&carried, change) {
            (Some(c), _) => self.replicate_pending(c),
            (None, Change::Effect(effect)) => self.propagate(effect),
            (None, Change::Reserved(rec, user)) => self.replicate_reserved(rec, user),
        }
        ffi::keyspace::signal_modified(self.ctx, self.key);
        let via = match change {
            Change::Effect(effect) => effect.via(),
            Change::Reserved(..) => None,
        };
        change.for_each_event(|event, id| {
            ffi::keyspace::notify(self.ctx, event.notification(), self.key);
            if self.origin == Origin::Master {
                if event == Event::Expired {
                    stats::EXPIRED.add(1);
                }
                match &carried {
                    Some(c) => crate::module::stream::announce(self.ctx, c.stream.key()),
                    None => self.append_stream(sale, event, id, via),
                }
            }
        });
    }

    /// The master's stream append for a PENDING effect (RESERVE), made before
    /// the effect is replicated so the entry's id and the length after
    /// trimming can travel inside it. `None`: not that form, no stream, or
    /// the append failed (then nothing of the stream is replicated, as before).
    fn append_carried<'s>(&'s self, sale: &Sale, change: Change<'s>) -> Option<Carried<'s>> {
        let stream = self.stream_of(sale)?;
        let (rec, user, nums) = change.pending()?;
        let view = sale.get(rec.id)?;
        let opened = self.open_stream(&stream.key)?;
        let entry = crate::module::stream::Entry {
            event: Event::Reserved.word().as_bytes(),
            rid: rec.id,
            user: view.user(),
            qty: view.qty(),
            via: None,
        };
        match crate::module::stream::append_unreplicated(opened.key(), stream.maxlen, &entry) {
            Ok(added) => Some(Carried { stream: opened, added, rec, user, nums }),
            Err(e) => {
                crate::module::warn::limited(self.ctx, &format!("seckill: {e}"));
                None
            }
        }
    }

    /// The sale's stream, if this key may write it: a copy of a sale under
    /// another name (COPY, RESTORE) writes no entries to its original's
    /// stream.
    fn stream_of<'s>(&self, sale: &'s Sale) -> Option<&'s crate::rules::sale::StreamConfig> {
        sale.config().stream.as_ref().filter(|s| s.writes_from(self.key.as_slice()))
    }

    /// The command's stream key, or the sale's opened now.
    fn open_stream(&self, key: &[u8]) -> Option<Opened<'_>> {
        match self.stream {
            Some(k) => Some(Opened::Borrowed(k)),
            None => match crate::module::stream::open(self.ctx, key) {
                Ok(k) => Some(Opened::Owned(k)),
                Err(e) => {
                    crate::module::warn::limited(self.ctx, &format!("seckill: {e}"));
                    None
                }
            },
        }
    }

    /// `SECKILL.EFFECT key PENDING id user nums ms-seq [length]`.
    fn replicate_pending(&self, c: &Carried) {
        let (r, nums, added) = (c.rec, c.nums.as_bytes(), &c.added);
        let mut len = crate::rules::digits::Digits::default();
        let head = [Arg::Bytes(r.id), c.user, Arg::Bytes(nums), Arg::Bytes(added.id.as_bytes())];
        let all: &[Arg] = match added.length {
            Some(n) => {
                len.push_u64(n);
                &[head[0], head[1], head[2], head[3], Arg::Bytes(len.as_bytes())]
            }
            None => &head,
        };
        ffi::replicate::replicate_args(self.ctx, EFFECT_COMMAND, self.key.inner, c"PENDING", all);
    }

    /// INIT's effect: creates (or replaces) the sale at the open key, on the
    /// master and on replay alike.
    pub fn init(&self, key: &RedisKeyWritable, config: SaleConfig, before: Option<u64>) -> Result<(), RedisError> {
        let total = config.total;
        key.set_value(&SALE_TYPE, Sale::new(config.clone()))?;
        crate::module::sales::on_created(ffi::keyspace::selected_db(self.ctx), self.key.as_slice());
        self.propagate(&Effect::Init(config));
        ffi::keyspace::signal_modified(self.ctx, self.key);
        if let Some(before) = before {
            self.notify_stock_edge(before, total);
        }
        Ok(())
    }

    /// Replicas and the AOF get the master's effect, or the replayed one as
    /// it came.
    fn propagate(&self, effect: &Effect) {
        match self.origin {
            Origin::Master => self.replicate(effect),
            Origin::Replayed => self.ctx.replicate_verbatim(),
        }
    }

    fn replicate(&self, effect: &Effect) {
        // The forms every sale and every settlement uses go out without
        // building argument vectors first.
        match effect {
            Effect::Records(_) => {
                if let Some((rec, user, nums)) = Change::Effect(effect).pending() {
                    return self.replicate_pending_form(rec, user, &nums);
                }
            }
            Effect::Release(id) => {
                return ffi::replicate::replicate_args(self.ctx, EFFECT_COMMAND, self.key.inner, c"RELEASE", &[Arg::Bytes(id)])
            }
            Effect::Confirm(id) => {
                return ffi::replicate::replicate_args(self.ctx, EFFECT_COMMAND, self.key.inner, c"CONFIRM", &[Arg::Bytes(id)])
            }
            _ => {}
        }
        ffi::replicate::replicate(self.ctx, EFFECT_COMMAND, self.key.inner, &effect.to_args());
    }

    /// A RESERVE's record on the master: the PENDING form, or (a take from
    /// several buckets) the general RECORDS form.
    fn replicate_reserved(&self, rec: NewRecord, user: Arg) {
        match pending_form(&rec) {
            Some(nums) => self.replicate_pending_form(rec, user, &nums),
            None => {
                self.replicate(&Effect::Records(vec![rec.to_owned()]));
            }
        }
    }

    /// `SECKILL.EFFECT key PENDING id user nums`.
    fn replicate_pending_form(&self, rec: NewRecord, user: Arg, nums: &crate::rules::digits::Digits) {
        let args = [Arg::Bytes(rec.id), user, Arg::Bytes(nums.as_bytes())];
        ffi::replicate::replicate_args(self.ctx, EFFECT_COMMAND, self.key.inner, c"PENDING", &args);
    }

    /// One stream entry per event, in the same atomic step (see `stream`).
    fn append_stream(&self, sale: &Sale, event: Event, id: &[u8], via: Option<&str>) {
        // A sale without a stream looks nothing up.
        let Some(stream) = self.stream_of(sale) else { return };
        let Some(rec) = sale.get(id) else { return };
        let entry = crate::module::stream::Entry {
            event: event.word().as_bytes(),
            rid: id,
            user: rec.user(),
            qty: rec.qty(),
            via: via.map(str::as_bytes),
        };
        let Some(opened) = self.open_stream(&stream.key) else {
            return;
        };
        if let Err(e) = crate::module::stream::append(self.ctx, opened.key(), stream.maxlen, &entry) {
            // The key's type and the caller's ACL were checked before the change.
            crate::module::warn::limited(self.ctx, &format!("seckill: {e}"));
        }
    }

    /// Releases the holds `due` names, oldest first, as one effect. Most
    /// writes find none due: that test is inlined into `write`.
    #[inline(always)]
    fn expire_due(&self, sale: &mut Sale, due: DueHolds) {
        if sale.next_deadline().is_some_and(|d| d <= due.now) {
            self.expire_now(sale, due);
        }
    }

    #[inline(never)]
    fn expire_now(&self, sale: &mut Sale, due: DueHolds) {
        let due = sale.due_holds(due.now, due.max);
        if let Err(e) = self.commit(sale, &Effect::Expire(due)) {
            crate::module::warn::limited(self.ctx, &format!("seckill: hold expiry refused: {}", e.0));
        }
    }

    /// Emits `seckill.soldout` / `seckill.restock` when the command moved
    /// the remaining stock to or away from zero.
    fn notify_stock_edge(&self, before: u64, after: u64) {
        let event = match (before, after) {
            (b, 0) if b > 0 => c"seckill.soldout",
            (0, a) if a > 0 => c"seckill.restock",
            _ => return,
        };
        ffi::keyspace::notify(self.ctx, event, self.key);
    }
}
