//! The buckets Envoys report, who reports each, and what each is assigned: the state
//! of the quota service, without gRPC or Redis.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::fleet::{MAX_TOKENS, Want};
use super::share::{HEADROOM, split};

/// A bucket: the domain and the bucket id's pairs, sorted by key.
pub type BucketKey = (String, Vec<(String, String)>);

/// What the domain files say of a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketLimit {
    /// No limit matches (or the limit is in shadow mode): every request passes.
    None,
    /// `unlimited: true`.
    Unlimited,
    /// `tokens` per `unit`, shared by every Envoy reporting the bucket.
    Limited {
        /// `requests_per_unit`.
        tokens: u64,
        /// The unit's length.
        unit: Duration,
    },
}

/// What one Envoy is told to do with a bucket's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// Admit every request.
    AllowAll,
    /// Refuse every request: no share of the limit, or a limit of 0.
    DenyAll,
    /// A token bucket of `tokens`, refilled with `tokens` every `unit`.
    Tokens {
        /// The share of the limit.
        tokens: u64,
        /// The limit's unit.
        unit: Duration,
    },
}

/// What one Envoy reported of one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Requests it admitted since its last report.
    pub allowed: u64,
    /// Requests it refused since its last report.
    pub denied: u64,
    /// The time since its last report (0 in the first).
    pub elapsed: Duration,
}

/// What this process hands out of a bucket's limit to its Envoys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// This many tokens per unit: the whole limit for one process, or the grant of
    /// its lease when replicas share the limit.
    Tokens(u64),
    /// A grant the lease could not renew, kept while its record surely lives in
    /// Redis (`--store-failure allow`): assignments made from it live `ttl`, what
    /// remains of the record's life, not the service's time to live.
    Kept {
        /// The grant.
        tokens: u64,
        /// Whole seconds, at least one.
        ttl: Duration,
    },
    /// Every request passes: the lease could not be renewed and the store fails
    /// open (`--store-failure allow`).
    AllowAll,
}

/// A message for one stream about one bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The stream it goes to.
    pub stream: u64,
    /// The bucket.
    pub key: BucketKey,
    /// `None`: abandon the bucket (forget it and its usage).
    pub assignment: Option<Assignment>,
    /// A time to live shorter than the service's, for an assignment of a
    /// [`Share::Kept`].
    pub ttl: Option<Duration>,
}

#[derive(Debug, Default)]
struct Reporter {
    /// Tokens per unit it asked for, from its last report of at least a second.
    demand: Option<f64>,
    /// Reports in a row without a request.
    idle: u32,
    assigned: Option<Assignment>,
}

#[derive(Debug)]
struct Bucket {
    limit: BucketLimit,
    /// The share set last and its sequence number; `None`: the whole limit.
    share: Option<(u64, Share)>,
    reporters: BTreeMap<u64, Reporter>,
}

/// Every bucket reported, and each one's reporters.
#[derive(Debug)]
pub struct Buckets {
    buckets: HashMap<BucketKey, Bucket>,
    abandon_after: u32,
    /// Limited buckets wait for a share before any assignment.
    leased: bool,
}

impl Buckets {
    /// No buckets; a reporter that reports a bucket idle `abandon_after` times in a row
    /// is told to abandon it (0: never).
    pub fn new(abandon_after: u32) -> Buckets {
        Buckets {
            buckets: HashMap::new(),
            abandon_after,
            leased: false,
        }
    }

    /// The same, for replicas sharing the limits: a limited bucket is assigned only
    /// once its share is set ([`set_share`](Buckets::set_share)), never the whole
    /// limit by default.
    pub fn leased(self) -> Buckets {
        Buckets {
            leased: true,
            ..self
        }
    }

    /// `stream` reports `usage` of the bucket `key`, whose limit is now `limit`: the
    /// updates to send. The reporter always gets its own (which renews its
    /// assignment's time to live); others of the bucket get one when their share
    /// changed.
    pub fn report(
        &mut self,
        stream: u64,
        key: &BucketKey,
        limit: BucketLimit,
        usage: Usage,
    ) -> Vec<Update> {
        match self.record(stream, key, limit, usage) {
            Some(abandoned) => abandoned,
            None => self.rebalance(key, Some(stream)),
        }
    }

    /// [`report`](Buckets::report) without the rebalance: `None` when the reporter
    /// keeps the bucket (then [`rebalance`](Buckets::rebalance) it, once its share
    /// is known), or the updates when it abandons it.
    pub fn record(
        &mut self,
        stream: u64,
        key: &BucketKey,
        limit: BucketLimit,
        usage: Usage,
    ) -> Option<Vec<Update>> {
        let bucket = self.buckets.entry(key.clone()).or_insert_with(|| Bucket {
            limit,
            share: None,
            reporters: BTreeMap::new(),
        });
        bucket.limit = limit;
        let reporter = bucket.reporters.entry(stream).or_default();
        let requests = usage.allowed.saturating_add(usage.denied);
        if let BucketLimit::Limited { unit, .. } = limit
            && usage.elapsed >= Duration::from_secs(1)
        {
            let per_second = requests as f64 / usage.elapsed.as_secs_f64();
            reporter.demand = Some(per_second * unit.as_secs_f64());
        }
        reporter.idle = if requests == 0 {
            reporter.idle.saturating_add(1)
        } else {
            0
        };
        if self.abandon_after > 0 && reporter.idle >= self.abandon_after {
            bucket.reporters.remove(&stream);
            let mut updates = vec![Update {
                stream,
                key: key.clone(),
                assignment: None,
                ttl: None,
            }];
            updates.extend(self.rebalance(key, None));
            return Some(updates);
        }
        None
    }

    /// What this process's reporters of `key` ask for together (`None` for a bucket
    /// nobody reports): their demands with [`HEADROOM`], at least a token each, or
    /// [`Want::Unbounded`] while one is not yet measured.
    pub fn want(&self, key: &BucketKey) -> Option<Want> {
        let bucket = self.buckets.get(key)?;
        let mut total = 0.0;
        for reporter in bucket.reporters.values() {
            match reporter.demand {
                Some(d) if d.is_finite() && d >= 0.0 => total += (d * HEADROOM).max(1.0),
                _ => return Some(Want::Unbounded),
            }
        }
        // Saturating: a float above 2^52 is counted as 2^52.
        Some(Want::Tokens((total.ceil() as u64).min(MAX_TOKENS)))
    }

    /// Sets the share of `key` this process hands out, unless a later one (by `seq`)
    /// is already set: whether it was set. Call [`rebalance`](Buckets::rebalance)
    /// then.
    pub fn set_share(&mut self, key: &BucketKey, seq: u64, share: Share) -> bool {
        match self.buckets.get_mut(key) {
            Some(bucket) if bucket.share.is_none_or(|(set, _)| set <= seq) => {
                bucket.share = Some((seq, share));
                true
            }
            _ => false,
        }
    }

    /// Whether `key` has a reporter in this process.
    pub fn contains(&self, key: &BucketKey) -> bool {
        self.buckets.contains_key(key)
    }

    /// The buckets `stream` reports.
    pub fn keys_of(&self, stream: u64) -> Vec<BucketKey> {
        self.buckets
            .iter()
            .filter(|(_, b)| b.reporters.contains_key(&stream))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// `stream` is gone: the updates for the reporters left in its buckets.
    pub fn leave(&mut self, stream: u64) -> Vec<Update> {
        let keys: Vec<BucketKey> = self
            .buckets
            .iter()
            .filter(|(_, b)| b.reporters.contains_key(&stream))
            .map(|(k, _)| k.clone())
            .collect();
        let mut updates = Vec::new();
        for key in keys {
            if let Some(bucket) = self.buckets.get_mut(&key) {
                bucket.reporters.remove(&stream);
            }
            updates.extend(self.rebalance(&key, None));
        }
        updates
    }

    /// Buckets with at least one reporter.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// No bucket has a reporter.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The assignments of `key`'s reporters, from their demands and the bucket's
    /// share: those that changed, and `always`'s whatever it is. A bucket without
    /// reporters is forgotten.
    pub fn rebalance(&mut self, key: &BucketKey, always: Option<u64>) -> Vec<Update> {
        let Some(bucket) = self.buckets.get_mut(key) else {
            return Vec::new();
        };
        if bucket.reporters.is_empty() {
            self.buckets.remove(key);
            return Vec::new();
        }
        let share = bucket.share.map(|(_, share)| share);
        // A limit of 0 needs no lease: it denies everything.
        if self.leased
            && share.is_none()
            && matches!(bucket.limit, BucketLimit::Limited { tokens, .. } if tokens > 0)
        {
            return Vec::new();
        }
        let assignments: Vec<Assignment> = match bucket.limit {
            BucketLimit::None | BucketLimit::Unlimited => {
                vec![Assignment::AllowAll; bucket.reporters.len()]
            }
            BucketLimit::Limited { .. } if share == Some(Share::AllowAll) => {
                vec![Assignment::AllowAll; bucket.reporters.len()]
            }
            BucketLimit::Limited { tokens, unit } => {
                let tokens = match share {
                    Some(
                        Share::Tokens(granted)
                        | Share::Kept {
                            tokens: granted, ..
                        },
                    ) => granted.min(tokens),
                    _ => tokens,
                };
                let demands: Vec<Option<f64>> =
                    bucket.reporters.values().map(|r| r.demand).collect();
                split(tokens, &demands)
                    .into_iter()
                    .map(|share| {
                        if share == 0 {
                            Assignment::DenyAll
                        } else {
                            Assignment::Tokens {
                                tokens: share,
                                unit,
                            }
                        }
                    })
                    .collect()
            }
        };
        let ttl = match share {
            Some(Share::Kept { ttl, .. }) => Some(ttl),
            _ => None,
        };
        let mut updates = Vec::new();
        for ((&stream, reporter), assignment) in bucket.reporters.iter_mut().zip(assignments) {
            if reporter.assigned != Some(assignment) || always == Some(stream) {
                reporter.assigned = Some(assignment);
                updates.push(Update {
                    stream,
                    key: key.clone(),
                    assignment: Some(assignment),
                    ttl,
                });
            }
        }
        updates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);
    const LIMIT: BucketLimit = BucketLimit::Limited {
        tokens: 100,
        unit: MINUTE,
    };

    fn key(user: &str) -> BucketKey {
        ("test".into(), vec![("user".into(), user.into())])
    }

    fn tokens(n: u64) -> Option<Assignment> {
        Some(Assignment::Tokens {
            tokens: n,
            unit: MINUTE,
        })
    }

    /// Envoy's first report of a bucket: sent on its first request, no time elapsed.
    fn first() -> Usage {
        Usage {
            allowed: 1,
            ..Usage::default()
        }
    }

    fn used(allowed: u64, seconds: u64) -> Usage {
        Usage {
            allowed,
            denied: 0,
            elapsed: Duration::from_secs(seconds),
        }
    }

    #[test]
    fn one_envoy_gets_the_whole_limit_two_share_it_and_it_comes_back() {
        let mut buckets = Buckets::new(0);
        let alice = key("alice");
        let updates = buckets.report(1, &alice, LIMIT, first());
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].assignment, tokens(100));

        // A second Envoy: both halves, the first told without asking.
        let updates = buckets.report(2, &alice, LIMIT, first());
        let by_stream: Vec<(u64, Option<Assignment>)> =
            updates.iter().map(|u| (u.stream, u.assignment)).collect();
        assert_eq!(by_stream, vec![(1, tokens(50)), (2, tokens(50))]);

        // The second leaves: the first has it all again.
        let updates = buckets.leave(2);
        assert_eq!(updates.len(), 1);
        assert_eq!((updates[0].stream, updates[0].assignment), (1, tokens(100)));
    }

    #[test]
    fn shares_follow_demand() {
        let mut buckets = Buckets::new(0);
        let alice = key("alice");
        buckets.report(1, &alice, LIMIT, first());
        buckets.report(2, &alice, LIMIT, first());
        // Stream 1 used 5 in 5 s: 60 a minute, 90 with headroom; stream 2 unknown.
        let updates = buckets.report(1, &alice, LIMIT, used(5, 5));
        let shares: Vec<(u64, Option<Assignment>)> =
            updates.iter().map(|u| (u.stream, u.assignment)).collect();
        // 90 is more than half of 100: each is held to an equal share, so only the
        // reporter hears (its assignment renewed).
        assert_eq!(shares, vec![(1, tokens(50))]);
        // Stream 1 slows to 1 in 5 s (12 a minute): 18, and the rest to stream 2.
        let updates = buckets.report(1, &alice, LIMIT, used(1, 5));
        let shares: Vec<(u64, Option<Assignment>)> =
            updates.iter().map(|u| (u.stream, u.assignment)).collect();
        assert_eq!(shares, vec![(1, tokens(18)), (2, tokens(82))]);
    }

    #[test]
    fn unlimited_unmatched_and_zero_limits() {
        let mut buckets = Buckets::new(0);
        let u = buckets.report(1, &key("a"), BucketLimit::Unlimited, first());
        assert_eq!(u[0].assignment, Some(Assignment::AllowAll));
        let u = buckets.report(1, &key("b"), BucketLimit::None, first());
        assert_eq!(u[0].assignment, Some(Assignment::AllowAll));
        let zero = BucketLimit::Limited {
            tokens: 0,
            unit: MINUTE,
        };
        let u = buckets.report(1, &key("c"), zero, first());
        assert_eq!(u[0].assignment, Some(Assignment::DenyAll));
        // More Envoys than tokens: the last is refused until shares move.
        let one = BucketLimit::Limited {
            tokens: 1,
            unit: MINUTE,
        };
        buckets.report(1, &key("d"), one, first());
        let u = buckets.report(2, &key("d"), one, first());
        assert_eq!(u.last().unwrap().assignment, Some(Assignment::DenyAll));
    }

    #[test]
    fn a_leased_bucket_splits_its_share_and_waits_for_one() {
        let mut buckets = Buckets::new(0).leased();
        let alice = key("alice");
        // No share yet: nothing is assigned (never the whole limit by default).
        assert_eq!(buckets.record(1, &alice, LIMIT, first()), None);
        assert!(buckets.rebalance(&alice, Some(1)).is_empty());
        assert_eq!(buckets.want(&alice), Some(Want::Unbounded));
        assert!(buckets.set_share(&alice, 2, Share::Tokens(30)));
        let u = buckets.rebalance(&alice, Some(1));
        assert_eq!(u[0].assignment, tokens(30));
        // An older share does not replace a newer one.
        assert!(!buckets.set_share(&alice, 1, Share::Tokens(5)));
        // Two Envoys split the share; a share above the limit is cut to it.
        buckets.record(2, &alice, LIMIT, first());
        assert!(buckets.set_share(&alice, 3, Share::Tokens(500)));
        let shares: Vec<Option<Assignment>> = buckets
            .rebalance(&alice, Some(2))
            .iter()
            .map(|u| u.assignment)
            .collect();
        assert_eq!(shares, vec![tokens(50), tokens(50)]);
        // A kept grant: its assignments live only what is left of its record.
        let three = Duration::from_secs(3);
        buckets.set_share(
            &alice,
            4,
            Share::Kept {
                tokens: 40,
                ttl: three,
            },
        );
        let u = buckets.rebalance(&alice, Some(1));
        assert_eq!(u.len(), 2, "both shares moved: {u:?}");
        assert!(
            u.iter()
                .all(|u| u.assignment == tokens(20) && u.ttl == Some(three))
        );
        // Failing open: every Envoy of the bucket allows all.
        buckets.set_share(&alice, 5, Share::AllowAll);
        let u = buckets.rebalance(&alice, None);
        assert!(u.iter().all(|u| u.assignment == Some(Assignment::AllowAll)));
        // A limit of 0 needs no share.
        let zero = BucketLimit::Limited {
            tokens: 0,
            unit: MINUTE,
        };
        assert_eq!(
            buckets.report(1, &key("z"), zero, first())[0].assignment,
            Some(Assignment::DenyAll)
        );
        assert_eq!(buckets.keys_of(2), vec![alice.clone()]);
        assert!(buckets.contains(&alice) && !buckets.contains(&key("nobody")));
    }

    #[test]
    fn a_want_adds_the_demands_with_headroom() {
        let mut buckets = Buckets::new(0);
        let alice = key("alice");
        assert_eq!(buckets.want(&alice), None);
        // 5 in 5 s is 60 a minute: 90 with headroom.
        buckets.report(1, &alice, LIMIT, used(5, 5));
        assert_eq!(buckets.want(&alice), Some(Want::Tokens(90)));
        // A quiet Envoy still wants a token.
        buckets.report(2, &alice, LIMIT, used(0, 5));
        assert_eq!(buckets.want(&alice), Some(Want::Tokens(91)));
        // One not yet measured wants everything.
        buckets.report(3, &alice, LIMIT, first());
        assert_eq!(buckets.want(&alice), Some(Want::Unbounded));
        // Counted up to 2^52.
        let huge = BucketLimit::Limited {
            tokens: 1,
            unit: Duration::from_secs(u32::MAX.into()),
        };
        buckets.report(1, &key("b"), huge, used(u64::MAX, 1));
        assert_eq!(buckets.want(&key("b")), Some(Want::Tokens(MAX_TOKENS)));
    }

    #[test]
    fn an_idle_bucket_is_abandoned_and_its_share_goes_to_the_others() {
        let mut buckets = Buckets::new(3);
        let alice = key("alice");
        buckets.report(1, &alice, LIMIT, first());
        buckets.report(2, &alice, LIMIT, used(10, 5));
        for _ in 0..2 {
            let u = buckets.report(1, &alice, LIMIT, used(0, 5));
            assert!(u.iter().all(|u| u.assignment.is_some()));
        }
        let u = buckets.report(1, &alice, LIMIT, used(0, 5));
        assert_eq!(u[0].stream, 1);
        assert_eq!(u[0].assignment, None, "abandoned");
        assert_eq!((u[1].stream, u[1].assignment), (2, tokens(100)));
        // The last reporter gone, the bucket is forgotten.
        buckets.leave(2);
        assert!(buckets.is_empty());
    }
}
