//! Requests of several checks, each with or without a count of its own, for the tests
//! of `Store::execute_each`: a few rules (fixed windows that count denied acquires
//! among them), each on a key of its own, and random requests over them.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::Quota;
use tollgate::Reservation;
use tollgate::algorithm::{FixedWindow, Gcra, SlidingLog};
use tollgate::store::{Check, Op, Reply, Request, Rule};

/// A realistic "now": µs since the epoch in 2023, on a whole second.
pub const EPOCH_MICROS: u64 = 1_700_000_000_000_000;

/// The rules a case draws its checks from; rule `i` is on key `r{i}`.
pub fn rules() -> Vec<Rule> {
    let second = Duration::from_secs(1);
    vec![
        FixedWindow::new(3, second).unwrap().into(),
        FixedWindow::new(4, second)
            .unwrap()
            .counting_denied()
            .unwrap()
            .into(),
        FixedWindow::from_first_hit(2, Duration::from_millis(500))
            .unwrap()
            .counting_denied()
            .unwrap()
            .into(),
        Gcra::new(Quota::per_second(2).unwrap().burst(3).unwrap()).into(),
        SlidingLog::new(3, second).unwrap().into(),
    ]
}

/// The key of rule `i`.
pub fn key(i: usize) -> String {
    format!("r{i}")
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    Acquire,
    Peek,
    Reserve,
    Refund,
}

/// One request: after `dt_ms`, `ask` for `n` on tag `t{tag}`, checking rules
/// `checks` (each with its own count, or the op's).
#[derive(Clone, Debug)]
pub struct Call {
    pub dt_ms: u64,
    pub ask: Ask,
    pub n: u64,
    pub tag: u8,
    pub checks: Vec<(usize, Option<u64>)>,
}

impl Call {
    pub fn op(&self) -> Op {
        match self.ask {
            Ask::Acquire => Op::Acquire(self.n),
            Ask::Peek => Op::Peek(self.n),
            Ask::Reserve => Op::Reserve {
                n: self.n,
                max_wait: Duration::from_millis(300),
            },
            Ask::Refund => Op::Refund(self.n),
        }
    }

    pub fn tag(&self) -> String {
        format!("t{}", self.tag)
    }

    /// The checks of this request over `rules`, with the keys `keys`.
    pub fn checks<'a>(&self, rules: &'a [Rule], keys: &'a [String]) -> Vec<Check<'a>> {
        self.checks
            .iter()
            .map(|&(i, own)| {
                let check = Check::new(&keys[i], &rules[i]);
                match own {
                    Some(n) => check.with_permits(n),
                    None => check,
                }
            })
            .collect()
    }
}

/// Requests up to 400 ms apart, of one to three distinct rules (of five), each check
/// with a count of its own half the time (0 to 5: past some rules' capacity), on one
/// of two tags. A reservation's checks ask its `n` (a check asking another count is an
/// error, tested apart).
pub fn asks(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Call>> {
    let ask = prop_oneof![
        6 => Just(Ask::Acquire),
        1 => Just(Ask::Peek),
        1 => Just(Ask::Reserve),
        1 => Just(Ask::Refund),
    ];
    let own = prop_oneof![1 => Just(None), 1 => (0u64..=5).prop_map(Some)];
    let one = (
        prop_oneof![1 => Just(0u64), 3 => 0u64..400],
        ask,
        0u64..=4,
        0u8..2,
        prop::sample::subsequence((0..5).collect::<Vec<usize>>(), 1..=3).prop_shuffle(),
        prop::collection::vec(own, 3),
    )
        .prop_map(|(dt_ms, ask, n, tag, rules, owns)| Call {
            dt_ms,
            ask,
            n,
            tag,
            checks: rules
                .into_iter()
                .zip(owns)
                .map(|(i, own)| match ask {
                    Ask::Reserve => (i, own.map(|_| n)),
                    _ => (i, own),
                })
                .collect(),
        });
    prop::collection::vec(one, len)
}

/// `request`'s check `i` alone, as `Store::execute_each` answers for it: the same op
/// for the check's count, but a reservation of several checks is an immediate
/// acquire.
pub fn alone<'a>(request: &Request<'a>, check: &'a [Check<'a>]) -> Request<'a> {
    let n = check[0].permits().unwrap_or(request.op.permits());
    let op = match request.op {
        Op::Reserve { .. } if request.checks.len() > 1 => Op::Acquire(n),
        op => op,
    };
    let mut alone = Request::new(request.tag, check, op);
    alone.at = request.at;
    alone
}

/// The answer of [`alone`]'s request as the check's answer within `request`.
pub fn as_within(request: &Request<'_>, n: u64, reply: Reply) -> Reply {
    match (request.op, reply) {
        (Op::Reserve { .. }, Reply::Decision(d)) if request.checks.len() > 1 => {
            Reply::Reservation(d.map(|_| Reservation::new(n, Duration::ZERO)))
        }
        (_, reply) => reply,
    }
}
