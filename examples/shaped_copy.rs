//! A file copy shaped to a byte rate, with a progress bar showing bytes per second.
//!
//! Run with `cargo run --example shaped_copy --features tokio`: it copies a generated
//! 6 MiB file at 2 MiB/s, in about three seconds (the first 128 KiB go at once).
//! `-- [--rate BYTES_PER_SECOND] [SOURCE [DESTINATION]]` copies a file of yours; the
//! destination defaults to a file in the temporary directory.
//!
//! The destination is a tokio `File` wrapped in `tollgate::shape::Shaped`: every byte
//! written takes a permit of a GCRA limiter whose bucket holds 1/16 of a second, so
//! writes go in chunks of at most that much, sixteen a second.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate::algorithm::Gcra;
use tollgate::shape::Shaped;
use tollgate::{Limiter, Quota};

const DEFAULT_RATE: u64 = 2 << 20;
const GENERATED: usize = 6 << 20;

struct Args {
    rate: u64,
    source: Option<PathBuf>,
    destination: Option<PathBuf>,
}

fn parse_args() -> Result<Args, Box<dyn Error>> {
    let mut args = Args {
        rate: DEFAULT_RATE,
        source: None,
        destination: None,
    };
    let mut rest = std::env::args().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--rate" {
            let value = rest
                .next()
                .ok_or("--rate takes a number of bytes per second")?;
            args.rate = value.parse().map_err(|e| format!("--rate {value}: {e}"))?;
        } else if args.source.is_none() {
            args.source = Some(arg.into());
        } else if args.destination.is_none() {
            args.destination = Some(arg.into());
        } else {
            return Err(format!("unexpected argument {arg}").into());
        }
    }
    Ok(args)
}

/// Writes `len` bytes of a simple pattern to a fresh file in the temporary directory.
async fn generate(len: usize) -> Result<PathBuf, Box<dyn Error>> {
    let path = std::env::temp_dir().join(format!("tollgate-shaped-copy-{}.in", std::process::id()));
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    tokio::fs::write(&path, data).await?;
    Ok(path)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let generated = args.source.is_none();
    let source = match args.source {
        Some(path) => path,
        None => generate(GENERATED).await?,
    };
    let temporary = args.destination.is_none();
    let destination = args.destination.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("tollgate-shaped-copy-{}.out", std::process::id()))
    });

    let bucket = (args.rate / 16).max(1);
    let quota = Quota::per_second(args.rate)?.burst(bucket)?;
    let limiter = Limiter::new(Gcra::new(quota));

    let mut input = File::open(&source).await?;
    let len = input.metadata().await?.len();
    let mut output = Shaped::new(File::create(&destination).await?, limiter);

    println!(
        "copying {} ({len} bytes) to {} at {} bytes/s, in chunks of at most {bucket}",
        source.display(),
        destination.display(),
        args.rate
    );
    let bar = ProgressBar::new(len).with_style(ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )?);

    let started = Instant::now();
    let mut buf = vec![0u8; 64 << 10];
    let mut copied = 0u64;
    loop {
        let n = input.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        output.write_all(&buf[..n]).await?;
        copied += n as u64;
        bar.set_position(copied);
    }
    output.shutdown().await?;
    let elapsed = started.elapsed();
    bar.finish();

    let achieved = copied as f64 / elapsed.as_secs_f64();
    // A token bucket that starts full lets the bucket go at once, the rest at the rate.
    let ideal = copied.saturating_sub(bucket) as f64 / args.rate as f64;
    println!(
        "copied {copied} bytes in {:.3} s: {achieved:.0} bytes/s ({:.3} × the rate; \
         a full bucket, then the rate, takes {ideal:.3} s)",
        elapsed.as_secs_f64(),
        achieved / args.rate as f64,
    );

    if generated {
        tokio::fs::remove_file(&source).await?;
    }
    if temporary {
        tokio::fs::remove_file(&destination).await?;
    }
    Ok(())
}
