//! RECONCILE: compare the sale with the order ledger, and with APPLY make it
//! agree. The ledger (the order database) is the truth.

use crate::rules::effect::Effect;
use crate::rules::reservation::{Reservation, State};
use crate::rules::sale::Sale;

/// One order row from the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order<'a> {
    pub rid: &'a [u8],
    pub user: &'a [u8],
    pub qty: u64,
}

/// How each order row compares with the sale. Every row is in one class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrdersReport {
    pub ok: u64,
    pub pending: Vec<Box<[u8]>>,
    pub released: Vec<Box<[u8]>>,
    pub unknown: Vec<Box<[u8]>>,
    /// With APPLY: released or unknown orders the stock could not cover;
    /// on a draw sale also (APPLY or not) those the draw did not make.
    pub conflict: Vec<Box<[u8]>>,
}

/// Classifies `orders` in order and, with `apply`, hands each fix to
/// `commit` (which applies it to the sale) before the next
/// row is looked at, so later rows see the stock earlier fixes took. The
/// caller publishes the fixes of one call as one effect (`Effect::Batch`).
/// For ids the sale knows, its own record (user, qty) is kept. On a draw
/// sale the draw's stock goes to the draw's reservations only: an order
/// that is not a reservation the draw made (`Sale::is_draw_reservation`)
/// and would take stock (unknown, or released) is a conflict and takes
/// nothing, with or without APPLY.
pub fn reconcile_orders(
    sale: &mut Sale,
    orders: &[Order],
    apply: bool,
    now_ms: u64,
    mut commit: impl FnMut(&mut Sale, Effect),
) -> OrdersReport {
    let mut report = OrdersReport::default();
    for order in orders {
        let rid: Box<[u8]> = order.rid.into();
        let state = sale.get(order.rid).map(|r| r.state());
        let takes_stock = !matches!(state, Some(State::Confirmed | State::Pending));
        if takes_stock && sale.is_draw() && !sale.is_draw_reservation(order.rid) {
            report.conflict.push(rid);
            continue;
        }
        let fix = match state {
            Some(State::Confirmed) => {
                report.ok += 1;
                continue;
            }
            Some(State::Pending) => {
                report.pending.push(rid.clone());
                Some(Effect::Confirm(rid))
            }
            Some(State::Released | State::Expired) => match sale.plan_retake(order.rid) {
                Some(takes) if apply => {
                    report.released.push(rid.clone());
                    Some(Effect::Retake(rid, takes))
                }
                None if apply => {
                    report.conflict.push(rid);
                    None
                }
                _ => {
                    report.released.push(rid);
                    None
                }
            },
            None => match sale.plan_adopt(order.user, order.qty) {
                Some(takes) if apply => {
                    report.unknown.push(rid.clone());
                    Some(Effect::Records(vec![Reservation {
                        id: rid,
                        user: order.user.into(),
                        qty: order.qty,
                        state: State::Confirmed,
                        created_ms: sale.stamp(now_ms),
                        deadline_ms: 0,
                        takes,
                    }]))
                }
                None if apply => {
                    report.conflict.push(rid);
                    None
                }
                _ => {
                    report.unknown.push(rid);
                    None
                }
            },
        };
        if let (true, Some(effect)) = (apply, fix) {
            commit(sale, effect);
        }
    }
    report
}
