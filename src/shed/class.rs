//! Criticality classes: [`Classes`], an ordered set of names, and the [`Class`] of a
//! request.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use crate::error::ConfigError;
use crate::sync::Arc;

/// Google's criticality names, most critical first.
const GOOGLE: [&str; 4] = ["critical_plus", "critical", "sheddable_plus", "sheddable"];

/// An ordered set of criticality class names, most critical first, with a default
/// class for requests whose class is missing or unknown.
///
/// [`Classes::google`] (also the [`Default`]) is Google's
/// `critical_plus > critical > sheddable_plus > sheddable`, whose default class is
/// `critical`, as Google's RPC default criticality is. A set built with
/// [`Classes::new`] defaults to its *least* critical class, so that an unlabelled
/// request never outranks a labelled one; [`with_default`](Classes::with_default)
/// changes it.
///
/// Names are compared without regard to ASCII case. Clones share the names.
///
/// **One set.** Two sets with the same names in the same order are one set, whatever
/// their defaults: clones, [`with_default`](Classes::with_default) and two calls of
/// [`Classes::google`] all are. A [`Class`] of another set is read by its name, as a
/// request's label is ([`resolve`](Classes::resolve)): every shedder does so, so that
/// a class is never taken for whatever this set has at its position.
///
/// # Examples
///
/// ```
/// use tollgate::shed::Classes;
///
/// let classes = Classes::google();
/// let plus = classes.parse("CRITICAL_PLUS");
/// let sheddable = classes.parse("sheddable");
/// assert!(plus > sheddable);
/// assert_eq!(classes.parse("no-such-class").name(), "critical"); // the default
///
/// let mine = Classes::new(["user", "batch"])?;
/// assert_eq!(mine.parse("").name(), "batch");
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Classes {
    names: Arc<[Arc<str>]>,
    default: usize,
}

impl Classes {
    /// A set of `names`, most critical first; its default class is the last.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for an empty list; [`ConfigError::OutOfRange`] for an
    /// empty name or two names equal but for ASCII case.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::ConfigError;
    /// use tollgate::shed::Classes;
    ///
    /// let classes = Classes::new(["interactive", "prefetch"])?;
    /// assert_eq!(classes.len(), 2);
    /// assert_eq!(
    ///     Classes::new(Vec::<String>::new()).unwrap_err(),
    ///     ConfigError::Zero { parameter: "classes" }
    /// );
    /// assert!(Classes::new(["a", "A"]).is_err());
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new<I, S>(names: I) -> Result<Classes, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list: Vec<Arc<str>> = Vec::new();
        for name in names {
            let name = name.as_ref();
            if name.is_empty() {
                return Err(ConfigError::OutOfRange {
                    parameter: "classes",
                    expected: "non-empty names",
                });
            }
            if list.iter().any(|seen| seen.eq_ignore_ascii_case(name)) {
                return Err(ConfigError::OutOfRange {
                    parameter: "classes",
                    expected: "distinct names (compared without ASCII case)",
                });
            }
            list.push(Arc::from(name));
        }
        if list.is_empty() {
            return Err(ConfigError::Zero {
                parameter: "classes",
            });
        }
        let default = list.len() - 1;
        Ok(Classes {
            names: Arc::from(list),
            default,
        })
    }

    /// Google's classes, `critical_plus > critical > sheddable_plus > sheddable`,
    /// defaulting to `critical`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let classes = Classes::google();
    /// let names: Vec<&str> = classes.names().collect();
    /// assert_eq!(names, ["critical_plus", "critical", "sheddable_plus", "sheddable"]);
    /// assert_eq!(classes.default_class().name(), "critical");
    /// ```
    pub fn google() -> Classes {
        Classes {
            names: GOOGLE.iter().map(|&name| Arc::from(name)).collect(),
            default: 1,
        }
    }

    /// The same set with `name` as its default class.
    ///
    /// # Errors
    ///
    /// [`ConfigError::OutOfRange`] when `name` is not in the set.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let classes = Classes::google().with_default("sheddable")?;
    /// assert_eq!(classes.parse("unknown").name(), "sheddable");
    /// assert!(Classes::google().with_default("nope").is_err());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn with_default(self, name: &str) -> Result<Classes, ConfigError> {
        let class = self.get(name).ok_or(ConfigError::OutOfRange {
            parameter: "default_class",
            expected: "the name of a class in the set",
        })?;
        Ok(Classes {
            default: class.index,
            ..self
        })
    }

    /// The class named `name` (ASCII case ignored), or the
    /// [default class](Classes::default_class) when there is none: what a request
    /// with a missing or unknown label gets.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let classes = Classes::google();
    /// assert_eq!(classes.parse("Sheddable_Plus").name(), "sheddable_plus");
    /// assert_eq!(classes.parse("gold").name(), "critical");
    /// ```
    pub fn parse(&self, name: &str) -> Class {
        self.get(name).unwrap_or_else(|| self.default_class())
    }

    /// The class named `name` (ASCII case ignored), if the set has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// assert_eq!(Classes::google().get("critical").map(|c| c.index()), Some(1));
    /// assert!(Classes::google().get("gold").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<Class> {
        self.names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|index| self.at(index))
    }

    /// The class at `index` (0 is the most critical), if the set is that long.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// assert_eq!(Classes::google().by_index(3).map(|c| c.name().to_owned()), Some("sheddable".into()));
    /// assert!(Classes::google().by_index(4).is_none());
    /// ```
    pub fn by_index(&self, index: usize) -> Option<Class> {
        (index < self.names.len()).then(|| self.at(index))
    }

    /// The class of requests with no label or an unknown one.
    pub fn default_class(&self) -> Class {
        self.at(self.default)
    }

    /// The most critical class.
    pub fn highest(&self) -> Class {
        self.at(0)
    }

    /// The least critical class: the first one shed.
    pub fn lowest(&self) -> Class {
        self.at(self.names.len() - 1)
    }

    /// How many classes the set has (at least one).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always `false`: a set has at least one class. (Here for the convention that
    /// goes with [`len`](Classes::len).)
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The classes, most critical first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Class> + '_ {
        (0..self.names.len()).map(|index| self.at(index))
    }

    /// The names, most critical first.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let classes = Classes::new(["user", "prefetch"])?;
    /// assert_eq!(classes.names().collect::<Vec<_>>(), ["user", "prefetch"]);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.names.iter().map(|name| &**name)
    }

    /// Whether `class` is of this set: one with the same names in the same order.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let google = Classes::google();
    /// let mine = Classes::new(["user", "batch"])?;
    /// assert!(google.contains(&Classes::google().parse("critical")));
    /// assert!(google.contains(&google.clone().with_default("sheddable")?.lowest()));
    /// assert!(!google.contains(&mine.highest()));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn contains(&self, class: &Class) -> bool {
        same_names(&self.names, &class.set)
    }

    /// `class` as a class of this set: itself if it is one
    /// ([`contains`](Classes::contains)), otherwise read by its name as a request's
    /// label is, so the class of that name (ASCII case ignored) or, when the set has
    /// none, the [default class](Classes::default_class). Shedders read every class
    /// they are given this way.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::shed::Classes;
    ///
    /// let google = Classes::google();
    /// let mine = Classes::new(["critical", "batch"])?;
    /// // `critical` is at index 1 in Google's set, at 0 in this one.
    /// let critical = google.parse("critical");
    /// assert_eq!(mine.resolve(&critical).index(), 0);
    /// // A name this set lacks is its default class, as an unknown label is.
    /// assert_eq!(mine.resolve(&google.highest()).name(), "batch");
    /// assert_eq!(google.resolve(&critical).index(), 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn resolve(&self, class: &Class) -> Class {
        // Made by this set's names, so that `made` holds for the answer.
        if self.contains(class) {
            self.at(class.index)
        } else {
            self.parse(class.name())
        }
    }

    /// Whether `class` was made by this set or a clone of it: one pointer
    /// comparison, the path of every decision. A class of an equal set made apart
    /// is not, and goes through [`resolve`](Classes::resolve).
    #[inline]
    pub(crate) fn made(&self, class: &Class) -> bool {
        Arc::ptr_eq(&self.names, &class.set)
    }

    /// `class` as one of this set: itself when this set made it (no clone on the
    /// path of every decision), else [resolved](Classes::resolve).
    #[inline]
    pub(crate) fn own<'a>(&self, class: &'a Class) -> Cow<'a, Class> {
        if self.made(class) {
            Cow::Borrowed(class)
        } else {
            Cow::Owned(self.resolve(class))
        }
    }

    /// The position of `class` once [resolved](Classes::resolve).
    #[inline]
    pub(crate) fn index_of(&self, class: &Class) -> usize {
        if self.made(class) {
            class.index
        } else {
            self.resolve(class).index
        }
    }

    fn at(&self, index: usize) -> Class {
        Class {
            index,
            set: Arc::clone(&self.names),
        }
    }
}

/// Whether two sets of names are one set: the same names in the same order.
fn same_names(a: &Arc<[Arc<str>]>, b: &Arc<[Arc<str>]>) -> bool {
    Arc::ptr_eq(a, b) || a[..] == b[..]
}

impl Default for Classes {
    /// [`Classes::google`].
    fn default() -> Classes {
        Classes::google()
    }
}

impl fmt::Debug for Classes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classes")
            .field("names", &self.names)
            .field("default", &self.names[self.default])
            .finish()
    }
}

/// A request's criticality class: its position in its [`Classes`] and its name.
///
/// Classes order by criticality: the more critical is the greater
/// (`critical_plus > sheddable`). Two classes are equal when they are at the same
/// position of one set (see [`Classes`], "One set"); classes of different sets are
/// never equal, and order by position first.
///
/// **A class of another set.** A class carries its set. Given to a shedder built on
/// another set, it is read by its name, as a request's label would be
/// ([`Classes::resolve`]): the class of that name in the shedder's set, or its
/// default class when it has none. Its position in its own set means nothing there.
///
/// # Examples
///
/// ```
/// use tollgate::shed::Classes;
///
/// let classes = Classes::google();
/// let critical = classes.parse("critical");
/// assert_eq!(critical.index(), 1);
/// assert_eq!(critical.name(), "critical");
/// assert!(critical > classes.lowest());
/// assert!(critical < classes.highest());
/// ```
///
/// A class of another set is read by its name:
///
/// ```
/// use tollgate::shed::{Classes, FleetShedder, Measure, Shedder, UtilisationShedder};
///
/// let google = Classes::google();
/// let mine = Classes::new(["interactive", "batch"])?;
/// // `sheddable` (index 3 of Google's set) is not a name of `mine`: it is read as
/// // `mine`'s default class, `batch`, never as "past the end of the set".
/// let shedder = UtilisationShedder::builder(mine.clone(), Measure::Reported).build()?;
/// let decision = shedder.decide(&google.lowest());
/// assert!(decision.is_admitted()); // level 0 sheds nothing
///
/// // `critical` is the fleet's critical class by name, whatever its index.
/// let fleet = FleetShedder::new(Classes::new(["critical", "bulk"])?, 10, 0.5)?;
/// assert!(fleet.is_critical(&google.parse("critical")));
/// assert!(!fleet.is_critical(&google.parse("critical_plus")));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Class {
    index: usize,
    /// The names of its set; the class's own is at `index`.
    set: Arc<[Arc<str>]>,
}

impl Class {
    /// The position in its set: 0 is the most critical.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The name, as the set spells it.
    pub fn name(&self) -> &str {
        &self.set[self.index]
    }
}

impl PartialEq for Class {
    fn eq(&self, other: &Class) -> bool {
        self.index == other.index && same_names(&self.set, &other.set)
    }
}

impl Eq for Class {}

impl PartialOrd for Class {
    fn partial_cmp(&self, other: &Class) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Class {
    /// The more critical (lower index) is the greater; at one index, classes of
    /// different sets order by their sets' names, so that only equal classes tie.
    fn cmp(&self, other: &Class) -> Ordering {
        other.index.cmp(&self.index).then_with(|| {
            if same_names(&self.set, &other.set) {
                Ordering::Equal
            } else {
                self.set[..].cmp(&other.set[..])
            }
        })
    }
}

impl std::hash::Hash for Class {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.index.hash(state)
    }
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Class({}: {:?})", self.index, self.name())
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_classes_order_most_critical_first() {
        let classes = Classes::google();
        let ranked: Vec<Class> = classes.iter().collect();
        assert!(ranked.windows(2).all(|pair| pair[0] > pair[1]));
        assert_eq!(classes.highest().name(), "critical_plus");
        assert_eq!(classes.lowest().name(), "sheddable");
    }

    #[test]
    fn parsing_ignores_case_and_falls_back_to_the_default() {
        let classes = Classes::google();
        assert_eq!(classes.parse("CRITICAL").index(), 1);
        assert_eq!(classes.parse("Sheddable").index(), 3);
        assert_eq!(classes.parse("").index(), 1);
        assert_eq!(classes.parse("critical ").index(), 1);
        let custom = Classes::new(["a", "b", "c"]).unwrap();
        assert_eq!(custom.parse("zzz").name(), "c");
        assert_eq!(custom.with_default("A").unwrap().parse("zzz").name(), "a");
    }

    #[test]
    fn bad_class_lists_are_typed_errors() {
        assert_eq!(
            Classes::new(Vec::<&str>::new()).unwrap_err(),
            ConfigError::Zero {
                parameter: "classes"
            }
        );
        assert_eq!(
            Classes::new(["x", "y", "X"]).unwrap_err().parameter(),
            "classes"
        );
        assert_eq!(Classes::new(["x", ""]).unwrap_err().parameter(), "classes");
        assert_eq!(
            Classes::google()
                .with_default("gold")
                .unwrap_err()
                .parameter(),
            "default_class"
        );
    }

    #[test]
    fn a_resolved_class_is_made_by_the_set_that_resolved_it() {
        let google = Classes::google();
        let apart = Classes::google();
        let other = Classes::new(["critical", "bulk"]).unwrap();
        assert!(google.made(&google.clone().lowest()));
        assert!(!google.made(&apart.lowest()) && google.contains(&apart.lowest()));
        for class in [apart.lowest(), other.highest(), other.lowest()] {
            assert!(google.made(&google.resolve(&class)), "{class:?}");
        }
        assert_eq!(google.index_of(&apart.lowest()), 3);
        assert_eq!(google.index_of(&other.highest()), 1);
        assert_eq!(google.index_of(&other.lowest()), 1, "the default class");
    }

    #[test]
    fn one_class_is_a_set() {
        let one = Classes::new(["only"]).unwrap();
        assert_eq!(one.len(), 1);
        assert!(!one.is_empty());
        assert_eq!(one.highest(), one.lowest());
        assert!(one.by_index(1).is_none());
    }
}
