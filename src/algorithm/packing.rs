//! [`Packing`]: how an algorithm whose state is one `u64` packs its configuration into
//! a few words, so that an in-process limiter can run it without a lock.

use std::fmt;

use super::Algorithm;

/// How many `u64` words a packed configuration may use.
pub const CONFIG_WORDS: usize = 4;

/// The word form of an algorithm's configuration and state: what a limiter needs to
/// keep both in atomics and decide with one compare-and-swap.
///
/// An algorithm offers it through [`Algorithm::PACKING`]; without it, a limiter holds
/// the algorithm and its state under a short lock. `unpack(pack(a))` must decide
/// exactly as `a` does.
///
/// # Examples
///
/// ```
/// use tollgate::algorithm::{Algorithm, Gcra};
/// use tollgate::Quota;
///
/// let gcra = Gcra::new(Quota::per_second(10)?);
/// let packing = Gcra::PACKING.expect("GCRA runs lock-free");
/// assert_eq!((packing.unpack)((packing.pack)(&gcra)), gcra);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct Packing<A: Algorithm> {
    /// The configuration as words.
    pub pack: fn(&A) -> [u64; CONFIG_WORDS],
    /// The configuration back from [`pack`](Packing::pack)'s words.
    pub unpack: fn([u64; CONFIG_WORDS]) -> A,
    /// The state as one word.
    pub state_to_word: fn(&A::State) -> u64,
    /// The state back from its word.
    pub word_to_state: fn(u64) -> A::State,
}

impl<A: Algorithm<State = u64>> Packing<A> {
    /// The packing of an algorithm whose state is already one `u64`.
    pub const fn new(
        pack: fn(&A) -> [u64; CONFIG_WORDS],
        unpack: fn([u64; CONFIG_WORDS]) -> A,
    ) -> Packing<A> {
        Packing {
            pack,
            unpack,
            state_to_word: copy_word,
            word_to_state: identity_word,
        }
    }
}

#[inline]
fn copy_word(word: &u64) -> u64 {
    *word
}

#[inline]
fn identity_word(word: u64) -> u64 {
    word
}

impl<A: Algorithm> Clone for Packing<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Algorithm> Copy for Packing<A> {}

impl<A: Algorithm> fmt::Debug for Packing<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packing").finish_non_exhaustive()
    }
}
