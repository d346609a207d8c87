//! FUSE requests per call, counted from fuser's request log (one `debug!` line per request
//! it receives), on both FUSE file systems mounted in this process.

use crate::targets::{self, Op, Target, OPS};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static COUNTING: AtomicBool = AtomicBool::new(false);
static COUNTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

struct Counter;

impl log::Log for Counter {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        COUNTING.load(Ordering::Relaxed) && meta.target().starts_with("fuser")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = record.args().to_string();
        if let Some(op) = opcode(&line) {
            let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
            *counts.entry(op).or_insert(0) += 1;
        }
    }

    fn flush(&self) {}
}

/// The operation of a request line `FUSE(  7) ino 0x0000000000000001 LOOKUP ...`.
fn opcode(line: &str) -> Option<String> {
    let rest = line.strip_prefix("FUSE(")?;
    let after_ino = rest.split_once(" ino ")?.1;
    let op = after_ino.split_whitespace().nth(1)?;
    let op: String = op
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!op.is_empty()).then_some(op)
}

/// Install the counting logger (silent until counting starts).
pub fn install() {
    static COUNTER: Counter = Counter;
    if log::set_logger(&COUNTER).is_ok() {
        log::set_max_level(log::LevelFilter::Off);
    }
}

/// Requests per call of `op` on `target` over `files` names, as "OPCODE count ..." text.
fn count_op(target: &dyn Target, op: Op, files: usize) -> std::io::Result<String> {
    COUNTS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    log::set_max_level(log::LevelFilter::Debug);
    COUNTING.store(true, Ordering::Relaxed);
    let result = (0..files).try_for_each(|i| target.op(op, i));
    COUNTING.store(false, Ordering::Relaxed);
    log::set_max_level(log::LevelFilter::Off);
    result?;
    let counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let text: Vec<String> = counts
        .iter()
        .map(|(op, n)| (op, *n as f64 / files as f64))
        .filter(|(_, per)| *per >= 0.05)
        .map(|(op, per)| format!("{op} {per:.1}"))
        .collect();
    Ok(text.join(", "))
}

/// For each operation of [`OPS`], the requests per call on atomfs then on the minimal fs.
pub fn requests_per_call(files: usize) -> std::io::Result<Vec<Vec<String>>> {
    let mut out = vec![Vec::new(); OPS.len()];
    for target in [targets::in_process_atomfs()?, targets::minimal(false)?] {
        target.begin_round(0)?;
        for (k, op) in OPS.iter().enumerate() {
            out[k].push(count_op(&target, *op, files)?);
        }
        for i in 0..files {
            target.op(Op::Cleanup, i)?;
        }
    }
    Ok(out)
}
