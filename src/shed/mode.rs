//! [`Mode`] and the [`ModeSwitch`] that sets it at run time: enforcing, shadow
//! (dark launch) or off (the kill switch).

use std::fmt;

use crate::sync::{Arc, AtomicU8, Ordering};

/// How a shedder applies its decisions.
///
/// # Examples
///
/// ```
/// use tollgate::shed::Mode;
///
/// assert_eq!(Mode::default(), Mode::Enforce);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Sheds what it decides to shed.
    #[default]
    Enforce,
    /// Dark launch: admits everything, answering
    /// [`WouldShed`](super::ShedDecision::WouldShed) (and emitting
    /// [`EventKind::WouldShed`](crate::observe::EventKind::WouldShed)) for what it
    /// would have shed.
    Shadow,
    /// The kill switch: admits everything and reports nothing as shed. Slots are
    /// still counted, so that switching back on starts from the true load.
    Off,
}

impl Mode {
    const fn to_u8(self) -> u8 {
        match self {
            Mode::Enforce => 0,
            Mode::Shadow => 1,
            Mode::Off => 2,
        }
    }

    const fn from_u8(value: u8) -> Mode {
        match value {
            0 => Mode::Enforce,
            1 => Mode::Shadow,
            _ => Mode::Off,
        }
    }
}

/// A shared, atomic [`Mode`], settable at run time: the shadow-mode flag and the
/// kill switch of one or several shedders.
///
/// Clones share the mode: give one switch to every shedder of a service and a single
/// [`set`](ModeSwitch::set) turns them all off. Reading it is one relaxed load per
/// decision.
///
/// # Examples
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, Mode, ModeSwitch, Shedder};
///
/// let switch = ModeSwitch::new(Mode::Enforce);
/// let classes = Classes::google();
/// let fleet = FleetShedder::new(classes.clone(), 1, 0.0)?.with_mode(switch.clone());
/// let _held = fleet.decide(&classes.lowest());
/// assert!(!fleet.decide(&classes.lowest()).is_admitted());
///
/// switch.set(Mode::Off); // the kill switch
/// assert!(fleet.decide(&classes.lowest()).is_admitted());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ModeSwitch {
    mode: Arc<AtomicU8>,
}

impl ModeSwitch {
    /// A switch set to `mode`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Mode, ModeSwitch};
    ///
    /// let switch = ModeSwitch::new(Mode::Shadow);
    /// assert_eq!(switch.get(), Mode::Shadow);
    /// ```
    pub fn new(mode: Mode) -> ModeSwitch {
        ModeSwitch {
            mode: Arc::new(AtomicU8::new(mode.to_u8())),
        }
    }

    /// The mode now.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Mode, ModeSwitch};
    ///
    /// assert_eq!(ModeSwitch::default().get(), Mode::Enforce);
    /// ```
    #[inline]
    pub fn get(&self) -> Mode {
        Mode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// Sets the mode for every shedder sharing this switch; decisions already made
    /// stand.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::{Mode, ModeSwitch};
    ///
    /// let switch = ModeSwitch::default();
    /// let shared = switch.clone(); // given to a shedder
    /// switch.set(Mode::Off); // the kill switch
    /// assert_eq!(shared.get(), Mode::Off);
    /// ```
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode.to_u8(), Ordering::Relaxed);
    }
}

impl Default for ModeSwitch {
    /// A switch set to [`Mode::Enforce`].
    fn default() -> ModeSwitch {
        ModeSwitch::new(Mode::Enforce)
    }
}

impl fmt::Debug for ModeSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ModeSwitch").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_mode() {
        let switch = ModeSwitch::default();
        let other = switch.clone();
        for mode in [Mode::Shadow, Mode::Off, Mode::Enforce] {
            other.set(mode);
            assert_eq!(switch.get(), mode);
        }
    }
}
