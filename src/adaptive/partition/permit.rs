//! Permits: one admitted request each, given back when dropped.

use std::fmt;

use crate::sync::Arc;

use super::Partitions;

/// One admitted request of a [`Partitions`], given back when dropped or
/// [`release`](Self::release)d.
///
/// # Examples
///
/// ```
/// use tollgate::adaptive::partition::Partitions;
///
/// let partitions = Partitions::builder(4).partition("live", 1.0).build()?;
/// let permit = partitions.try_acquire("live")?;
/// assert_eq!(permit.in_flight(), 1);
/// assert_eq!(partitions.in_flight(), 1);
/// permit.release();
/// assert_eq!(partitions.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the request is given back as soon as the permit is dropped"]
pub struct PartitionPermit<'a> {
    partitions: &'a Partitions,
    held: Held,
}

/// One admitted request of a [`Partitions`] held through an `Arc`, given back when
/// dropped or [`release`](Self::release)d. Being `'static`, it can move into spawned
/// threads and tasks, or into an adaptive limiter's guard.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::adaptive::partition::Partitions;
///
/// let partitions = Arc::new(Partitions::builder(4).partition("live", 1.0).build()?);
/// let permit = partitions.try_acquire_owned("live")?;
/// std::thread::spawn(move || drop(permit)).join().unwrap();
/// assert_eq!(partitions.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the request is given back as soon as the permit is dropped"]
pub struct OwnedPartitionPermit {
    partitions: Arc<Partitions>,
    held: Held,
}

/// What a permit gives back: a partition's slot, or nothing for a bypass.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    slot: Option<usize>,
    in_flight: u64,
}

impl Held {
    pub(super) fn slot(slot: usize, in_flight: u64) -> Held {
        Held {
            slot: Some(slot),
            in_flight,
        }
    }

    pub(super) fn bypass() -> Held {
        Held {
            slot: None,
            in_flight: 0,
        }
    }

    fn give_back(&mut self, partitions: &Partitions) {
        if let Some(slot) = self.slot.take() {
            partitions.release(slot);
        }
    }
}

impl<'a> PartitionPermit<'a> {
    pub(super) fn new(partitions: &'a Partitions, held: Held) -> PartitionPermit<'a> {
        PartitionPermit { partitions, held }
    }

    /// Global in-flight right after this request was admitted, itself included (what
    /// an adaptive limit's sample records); 0 for a bypass, which is not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(4).partition("live", 0.5).build()?;
    /// let first = partitions.try_acquire("live")?;
    /// let second = partitions.try_acquire("other")?; // the unshared half
    /// assert_eq!((first.in_flight(), second.in_flight()), (1, 2));
    /// assert_eq!(partitions.bypass().in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.held.in_flight
    }

    /// Whether this permit came from [`Partitions::bypass`] and counts nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(4).partition("live", 1.0).build()?;
    /// assert!(partitions.bypass().is_bypass());
    /// assert!(!partitions.try_acquire("live")?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_bypass(&self) -> bool {
        self.held.slot.is_none()
    }

    /// Gives the request back now; the same as dropping the permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Partitions::builder(1).partition("live", 1.0).build()?;
    /// let permit = partitions.try_acquire("live")?;
    /// assert!(partitions.try_acquire("live").is_err());
    /// permit.release();
    /// assert!(partitions.try_acquire("live").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(self) {}
}

impl OwnedPartitionPermit {
    pub(super) fn new(partitions: Arc<Partitions>, held: Held) -> OwnedPartitionPermit {
        OwnedPartitionPermit { partitions, held }
    }

    /// Global in-flight right after this request was admitted, itself included (what
    /// an adaptive limit's sample records); 0 for a bypass, which is not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(4).partition("live", 1.0).build()?);
    /// let first = partitions.try_acquire_owned("live")?;
    /// let second = partitions.try_acquire_owned("live")?;
    /// assert_eq!((first.in_flight(), second.in_flight()), (1, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> u64 {
        self.held.in_flight
    }

    /// Whether this permit came from [`Partitions::bypass_owned`] and counts nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(4).partition("live", 1.0).build()?);
    /// assert!(partitions.bypass_owned().is_bypass());
    /// assert!(!partitions.try_acquire_owned("live")?.is_bypass());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_bypass(&self) -> bool {
        self.held.slot.is_none()
    }

    /// The partitions the request was admitted by.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(4).partition("live", 1.0).build()?);
    /// let permit = partitions.try_acquire_owned("live")?;
    /// assert!(Arc::ptr_eq(permit.partitions(), &partitions));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partitions(&self) -> &Arc<Partitions> {
        &self.partitions
    }

    /// Gives the request back now; the same as dropping the permit.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::partition::Partitions;
    ///
    /// let partitions = Arc::new(Partitions::builder(1).partition("live", 1.0).build()?);
    /// let permit = partitions.try_acquire_owned("live")?;
    /// permit.release();
    /// assert_eq!(partitions.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(self) {}
}

impl Drop for PartitionPermit<'_> {
    fn drop(&mut self) {
        self.held.give_back(self.partitions);
    }
}

impl Drop for OwnedPartitionPermit {
    fn drop(&mut self) {
        self.held.give_back(&self.partitions);
    }
}

impl fmt::Debug for PartitionPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionPermit")
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for OwnedPartitionPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPartitionPermit")
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}
