//! Where the machine's CPU usage and load average come from: the [`SystemReadings`]
//! trait, [`ProcReadings`] over Linux's `/proc`, and [`ManualReadings`] for tests.
//!
//! `/proc/stat` and `/proc/loadavg` are parsed by hand rather than through a crate:
//! two one-line formats, Linux only, behind the trait, so a crate such as `sysinfo`
//! (which reads far more than this needs) would cost more than it saves.

use std::fmt;

use crate::sync::{Arc, Mutex};

/// One reading of the machine: CPU usage and load average, each `None` when the
/// source cannot tell (yet).
///
/// A value that is NaN, infinite or negative is taken as `None`:
/// [`SystemProtection`](super::SystemProtection) keeps the last good one.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::Reading;
///
/// let reading = Reading { cpu_usage: Some(0.75), load_average: Some(2.5) };
/// assert_eq!(reading.cpu_usage, Some(0.75));
/// assert_eq!(Reading::default().load_average, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// The share of CPU time spent busy since the previous reading, in `[0, 1]`
    /// across all cores (Sentinel's `getSystemCpuLoad`).
    pub cpu_usage: Option<f64>,
    /// The 1-minute load average (Sentinel's `getSystemLoadAverage`).
    pub load_average: Option<f64>,
}

/// Why a reading could not be taken.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::ReadingError;
///
/// assert_eq!(ReadingError::Unsupported.to_string(), "system readings are unavailable on this platform");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadingError {
    /// The platform has no source this type reads (`/proc` outside Linux).
    Unsupported,
    /// A file could not be read.
    Io {
        /// Which file.
        file: &'static str,
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
    },
    /// A file did not have the expected format.
    Malformed {
        /// Which file.
        file: &'static str,
    },
}

impl fmt::Display for ReadingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadingError::Unsupported => {
                write!(f, "system readings are unavailable on this platform")
            }
            ReadingError::Io { file, kind } => write!(f, "cannot read {file}: {kind}"),
            ReadingError::Malformed { file } => write!(f, "{file} has an unexpected format"),
        }
    }
}

impl std::error::Error for ReadingError {}

/// A source of [`Reading`]s. [`SystemProtection`](super::SystemProtection) calls
/// [`read`](SystemReadings::read) at most once per sampling interval, never per
/// request.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::{Reading, ReadingError, SystemReadings};
///
/// /// A machine that is always half busy.
/// #[derive(Debug)]
/// struct HalfBusy;
///
/// impl SystemReadings for HalfBusy {
///     fn read(&self) -> Result<Reading, ReadingError> {
///         Ok(Reading { cpu_usage: Some(0.5), load_average: Some(1.0) })
///     }
/// }
///
/// assert_eq!(HalfBusy.read()?.cpu_usage, Some(0.5));
/// # Ok::<(), ReadingError>(())
/// ```
pub trait SystemReadings: Send + Sync + fmt::Debug + 'static {
    /// Takes a reading now.
    ///
    /// # Errors
    ///
    /// [`ReadingError`] when the source cannot be read; the caller keeps its last
    /// good reading.
    fn read(&self) -> Result<Reading, ReadingError>;
}

/// Readings injected by hand, shared between clones: tests set CPU usage and load
/// average and drive time with a [`ManualClock`](crate::time::ManualClock).
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::{ManualReadings, SystemReadings};
///
/// let readings = ManualReadings::new();
/// let handle = readings.clone();
/// handle.set_cpu_usage(0.9);
/// assert_eq!(readings.read()?.cpu_usage, Some(0.9));
/// assert_eq!(readings.reads(), 1);
/// # Ok::<(), tollgate::shed::system::ReadingError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ManualReadings {
    state: Arc<Mutex<ManualState>>,
}

#[derive(Debug, Default)]
struct ManualState {
    reading: Reading,
    error: Option<ReadingError>,
    reads: u64,
}

impl ManualReadings {
    /// Readings with neither CPU usage nor load average known.
    pub fn new() -> ManualReadings {
        ManualReadings {
            state: Arc::new(Mutex::new(ManualState::default())),
        }
    }

    /// Sets the CPU usage the next reads return (and clears a failure).
    pub fn set_cpu_usage(&self, cpu_usage: f64) {
        let mut state = self.state.lock();
        state.reading.cpu_usage = Some(cpu_usage);
        state.error = None;
    }

    /// Sets the load average the next reads return (and clears a failure).
    pub fn set_load_average(&self, load_average: f64) {
        let mut state = self.state.lock();
        state.reading.load_average = Some(load_average);
        state.error = None;
    }

    /// Sets the whole reading the next reads return.
    pub fn set(&self, reading: Reading) {
        let mut state = self.state.lock();
        state.reading = reading;
        state.error = None;
    }

    /// Makes the next reads fail with `error`.
    pub fn fail(&self, error: ReadingError) {
        self.state.lock().error = Some(error);
    }

    /// How many times [`read`](SystemReadings::read) was called.
    pub fn reads(&self) -> u64 {
        self.state.lock().reads
    }
}

impl Default for ManualReadings {
    fn default() -> ManualReadings {
        ManualReadings::new()
    }
}

impl SystemReadings for ManualReadings {
    fn read(&self) -> Result<Reading, ReadingError> {
        let mut state = self.state.lock();
        state.reads += 1;
        match state.error {
            Some(error) => Err(error),
            None => Ok(state.reading),
        }
    }
}

/// CPU usage from `/proc/stat` (busy time over total time between two reads, all
/// cores) and the 1-minute load average from `/proc/loadavg`. Linux only; elsewhere
/// [`new`](ProcReadings::new) returns [`ReadingError::Unsupported`].
///
/// Sentinel takes the larger of the system's and the JVM process's CPU usage (for
/// containers); this reads the system's only.
///
/// # Examples
///
/// ```
/// use tollgate::shed::system::{ProcReadings, ReadingError, SystemReadings};
///
/// match ProcReadings::new() {
///     Ok(proc) => {
///         let reading = proc.read()?;
///         assert!(reading.load_average.is_some());
///     }
///     Err(error) => assert_eq!(error, ReadingError::Unsupported),
/// }
/// # Ok::<(), ReadingError>(())
/// ```
#[derive(Debug)]
pub struct ProcReadings {
    previous: Mutex<CpuTimes>,
}

impl ProcReadings {
    /// Takes a first `/proc/stat` reading, so that the first [`read`](SystemReadings::read)
    /// gives the CPU usage since now.
    ///
    /// # Errors
    ///
    /// [`ReadingError::Unsupported`] outside Linux; [`ReadingError::Io`] or
    /// [`ReadingError::Malformed`] when `/proc/stat` cannot be read or parsed.
    pub fn new() -> Result<ProcReadings, ReadingError> {
        Ok(ProcReadings {
            previous: Mutex::new(read_cpu_times()?),
        })
    }
}

impl SystemReadings for ProcReadings {
    fn read(&self) -> Result<Reading, ReadingError> {
        let now = read_cpu_times()?;
        let load_average = Some(parse_loadavg(&read_file(LOADAVG)?)?);
        let mut previous = self.previous.lock();
        let cpu_usage = cpu_usage(*previous, now);
        if cpu_usage.is_some() {
            *previous = now;
        }
        Ok(Reading {
            cpu_usage,
            load_average,
        })
    }
}

const STAT: &str = "/proc/stat";
const LOADAVG: &str = "/proc/loadavg";

#[cfg(target_os = "linux")]
fn read_file(file: &'static str) -> Result<String, ReadingError> {
    std::fs::read_to_string(file).map_err(|error| ReadingError::Io {
        file,
        kind: error.kind(),
    })
}

#[cfg(not(target_os = "linux"))]
fn read_file(_file: &'static str) -> Result<String, ReadingError> {
    Err(ReadingError::Unsupported)
}

fn read_cpu_times() -> Result<CpuTimes, ReadingError> {
    parse_stat(&read_file(STAT)?)
}

/// Cumulative CPU time in clock ticks, all cores together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    pub(crate) idle: u64,
    pub(crate) total: u64,
}

/// The aggregate `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq
/// steal (guest time is already in user and nice, so it is not added again).
pub(crate) fn parse_stat(text: &str) -> Result<CpuTimes, ReadingError> {
    let malformed = ReadingError::Malformed { file: STAT };
    let line = text
        .lines()
        .find(|line| line.split_whitespace().next() == Some("cpu"))
        .ok_or(malformed)?;
    let mut fields = [0u64; 8];
    let mut count = 0;
    for (slot, field) in fields.iter_mut().zip(line.split_whitespace().skip(1)) {
        *slot = field.parse().map_err(|_| malformed)?;
        count += 1;
    }
    // Kernels before 2.6.11 have fewer than 8 columns; 4 are always there.
    if count < 4 {
        return Err(malformed);
    }
    let idle = fields[3].saturating_add(fields[4]);
    let total = fields.iter().fold(0u64, |sum, &f| sum.saturating_add(f));
    Ok(CpuTimes { idle, total })
}

/// The first field of `/proc/loadavg`.
pub(crate) fn parse_loadavg(text: &str) -> Result<f64, ReadingError> {
    let malformed = ReadingError::Malformed { file: LOADAVG };
    let load: f64 = text
        .split_whitespace()
        .next()
        .ok_or(malformed)?
        .parse()
        .map_err(|_| malformed)?;
    if load.is_finite() && load >= 0.0 {
        Ok(load)
    } else {
        Err(malformed)
    }
}

/// Busy share between two reads; `None` when no tick passed (or the counters went
/// back), so the caller keeps the earlier baseline.
pub(crate) fn cpu_usage(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let idle = after.idle.checked_sub(before.idle)?;
    if total == 0 || idle > total {
        return None;
    }
    Some((total - idle) as f64 / total as f64)
}
