//! A split sale's part (docs/cluster.md): what SEND, RECV and a restore
//! may change on the sale, and the checks before them; the moves
//! themselves are `rules::transfers`.

use crate::rules::buckets::Take;
use crate::rules::outcome::{EffectError, TransferRefusal};
use crate::rules::transfers::{self, Counters, SendDecision, Transfers};

use super::Sale;

impl Sale {
    /// Units sent and received, summed over peers (zero for a plain sale).
    pub fn transfer_totals(&self) -> Counters {
        transfers::totals(self.transfers.as_deref())
    }

    /// See `transfers::check_transfer`.
    pub fn check_transfer(&self, peer: &[u8], round: &[u8]) -> Result<(), TransferRefusal> {
        transfers::check_transfer(self.config.split.as_ref(), peer, round)
    }

    /// Whether a SEND of `tid` may go ahead: a draw part that has begun
    /// drawing sends nothing more (its stock was fixed when the draw began,
    /// and a split draw's shares must stay what its entrants imply); a
    /// repeated tid, which takes nothing, is still answered.
    pub fn check_send_move(&self, tid: &[u8]) -> Result<(), TransferRefusal> {
        let repeated = self.transfers.as_deref().is_some_and(|t| t.tids.contains(tid));
        if self.has_begun_drawing() && !repeated {
            return Err(TransferRefusal::Drawing);
        }
        Ok(())
    }

    /// Whether a RECV of `sent_total` from `peer` may go ahead: a draw
    /// part that has begun drawing is credited nothing more; a RECV that
    /// would credit nothing is still answered.
    pub fn check_recv_move(&self, peer: &[u8], sent_total: u64) -> Result<(), TransferRefusal> {
        if self.has_begun_drawing() && sent_total > self.transfer_counters(peer).received {
            return Err(TransferRefusal::Drawing);
        }
        Ok(())
    }

    pub fn transfers(&self) -> Option<&Transfers> {
        self.transfers.as_deref()
    }

    /// See `transfers::decide_send`.
    pub fn decide_send(&self, qty: u64, min: u64, tid: &[u8]) -> SendDecision {
        transfers::decide_send(self.transfers.as_deref(), &self.buckets, self.remaining, qty, min, tid)
    }

    /// See `transfers::Parts::send`.
    pub fn send(&mut self, peer: &[u8], tid: &[u8], takes: &[Take], to: Option<u32>) -> Result<(), EffectError> {
        if self.has_begun_drawing() {
            return Err(EffectError("a draw part that has begun drawing moves no stock"));
        }
        self.transfer_parts().send(peer, tid, takes, to)
    }

    /// This key's incarnation (docs/cluster.md, "Rounds"): its tag, drawn
    /// anew at every INIT.
    pub fn incarnation(&self) -> u32 {
        self.config.tag
    }

    /// Whether a SEND to `peer`'s incarnation `to` may go ahead (see
    /// `transfers::check_send_to`).
    pub fn check_send_to(&self, peer: &[u8], to: u32) -> Result<(), TransferRefusal> {
        transfers::check_send_to(self.transfers.as_deref(), peer, to)
    }

    /// Whether a RECV of a total counted for incarnation `to` may go ahead:
    /// only a total counted for this very key.
    pub fn check_recv_to(&self, to: u32) -> Result<(), TransferRefusal> {
        if to != self.incarnation() {
            return Err(TransferRefusal::OtherIncarnation);
        }
        Ok(())
    }

    /// See `transfers::Parts::restore_sent_to`.
    pub fn restore_sent_to(&mut self, sent_to: Vec<(Box<[u8]>, u32)>) -> Result<(), EffectError> {
        self.transfer_parts().restore_sent_to(sent_to)
    }

    pub fn transfer_counters(&self, peer: &[u8]) -> Counters {
        transfers::counters(self.transfers.as_deref(), peer)
    }

    /// See `transfers::plan_recv`.
    pub fn plan_recv(&self, peer: &[u8], sent_total: u64) -> Result<Option<Vec<Take>>, EffectError> {
        transfers::plan_recv(self.transfers.as_deref(), self.config.total, &self.buckets, peer, sent_total)
    }

    /// See `transfers::Parts::recv`.
    pub fn recv(&mut self, peer: &[u8], sent_total: u64, credits: &[Take]) -> Result<(), EffectError> {
        if self.has_begun_drawing() && !credits.is_empty() {
            return Err(EffectError("a draw part that has begun drawing moves no stock"));
        }
        self.transfer_parts().recv(peer, sent_total, credits)
    }

    /// Restores the transfer state of a sale without records (AOF rewrite,
    /// RDB load); see `transfers::Parts::restore`.
    pub fn restore_transfers(
        &mut self,
        allocation: Vec<u64>,
        peers: Vec<(Box<[u8]>, Counters)>,
        tids: Vec<Box<[u8]>>,
    ) -> Result<(), EffectError> {
        if self.records.len() > 0 || allocation.len() != self.config.shards as usize {
            return Err(EffectError("transfers restore into a sale without records"));
        }
        self.transfer_parts().restore(allocation, peers, tids)
    }

    /// What SEND, RECV and a restore may change, and nothing else.
    fn transfer_parts(&mut self) -> transfers::Parts<'_> {
        transfers::Parts { config: &self.config, log: &mut self.transfers, buckets: &mut self.buckets, remaining: &mut self.remaining }
    }
}
