//! The oracle of the simulator driver: what a crash may show for each thread's directory, and
//! how a recovered store is judged against it.

use crate::meta::{self, read_metas, Metas, Times};
use crate::CrashTarget;
use conformance::{snapshot, ModelStore, Node, Tree};
use pmem::SimRegion;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What a crash may show for one thread's directory.
#[derive(Clone, Debug)]
pub(crate) struct Partition {
    pub(crate) acceptable: Vec<Tree>,
    /// For each acceptable tree, the metas it must have too (`None`: the tree alone).
    pub(crate) metas: Vec<Option<Metas>>,
    pub(crate) unit: usize,
    pub(crate) phase: &'static str,
}

pub(crate) fn prefix(t: usize) -> String {
    format!("/t{t}")
}

/// Split a recovered tree into thread directories; `Err` names an entry outside them.
pub(crate) fn split(tree: &Tree, threads: usize) -> Result<Vec<Tree>, String> {
    let mut parts = vec![Tree::new(); threads];
    for (path, node) in tree {
        let text = String::from_utf8_lossy(path).into_owned();
        let (top, rest) = match text.split_once('/') {
            Some((top, rest)) => (top.to_string(), Some(rest.to_string())),
            None => (text.clone(), None),
        };
        let t = top
            .strip_prefix('t')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&t| t < threads);
        match (t, rest) {
            (Some(t), Some(rest)) => {
                parts[t].insert(rest.into_bytes(), node.clone());
            }
            (Some(_), None) if *node == Node::Dir => {}
            _ => return Err(format!("unexpected entry {text} in the root")),
        }
    }
    Ok(parts)
}

pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// A recovered store as the oracle sees it: its tree (names and bytes) and its metas.
pub(crate) type Recovered = (Tree, Metas);

/// Recover `image` and read its tree and metas, fsck included. Errors describe the violation.
pub(crate) fn recover_tree(
    target: &dyn CrashTarget,
    region: Arc<SimRegion>,
) -> Result<Recovered, String> {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<Recovered, String> {
        let store = target
            .recover(region)
            .map_err(|e| format!("recovery failed: {e}"))?;
        let tree = snapshot(store.as_ref())
            .map_err(|e| format!("reading the recovered store failed: {e}"))?;
        let metas = read_metas(store.as_ref(), "")
            .map_err(|e| format!("reading the recovered metadata failed: {e}"))?;
        let report = store.fsck().map_err(|e| format!("fsck failed: {e}"))?;
        if !report.is_clean() {
            let problems: Vec<String> = report
                .problems
                .iter()
                .take(5)
                .map(|p| format!("{} at {}", p.what, p.location))
                .collect();
            return Err(format!("fsck: {}", problems.join("; ")));
        }
        Ok((tree, metas))
    }));
    match result {
        Ok(r) => r,
        Err(p) => Err(format!("panic in recovery: {}", panic_text(p.as_ref()))),
    }
}

/// Compare a recovered store with the acceptable sets: its tree must equal an acceptable
/// tree, and its metas that tree's metas when they are known (times as `times` says, for the
/// acknowledged state only: the model's clock is not the store's). Trees can be equal (a unit changing only metadata): any one
/// whose metas match will do.
pub(crate) fn judge(got: &Recovered, parts: &[Partition], times: Times) -> Result<(), String> {
    let split_metas = meta::split(&got.1, parts.len());
    let split = split(&got.0, parts.len())?;
    for (t, (got, part)) in split.iter().zip(parts).enumerate() {
        let mut first_diff = None;
        let mut matched = false;
        for (k, want) in part.acceptable.iter().enumerate() {
            if want != got {
                continue;
            }
            matched = true;
            let metas = part.metas.get(k).and_then(Option::as_ref);
            match metas.and_then(|w| {
                meta::differ(
                    w,
                    &split_metas[t],
                    if k == 0 { times } else { Times::Ignored },
                )
            }) {
                None => {
                    first_diff = None;
                    break;
                }
                Some(diff) => {
                    first_diff.get_or_insert(diff);
                }
            }
        }
        if let Some(diff) = first_diff {
            return Err(format!(
                "thread {t} unit {} ({}): recovered tree is acceptable but its metadata is not: {diff}",
                part.unit, part.phase
            ));
        }
        if matched {
            continue;
        }
        let mut why = Vec::new();
        for (k, want) in part.acceptable.iter().enumerate() {
            let label = match (part.acceptable.len(), k) {
                (1, _) => "the only acceptable state",
                (_, 0) => "state before the unit",
                _ => "state after the unit",
            };
            why.push(format!(
                "vs {label}: {}",
                conformance::diff(want, got, 4).join(", ")
            ));
        }
        return Err(format!(
            "thread {t} unit {} ({}): recovered state matches no acceptable state; {}",
            part.unit,
            part.phase,
            why.join(" | ")
        ));
    }
    Ok(())
}

pub(crate) fn model_tree(model: &ModelStore) -> Tree {
    snapshot(&model.crash()).unwrap_or_default()
}

/// Outcomes of one unit on the model and on the store.
#[derive(Default)]
pub(crate) struct Outcomes {
    pub(crate) diverged: Vec<String>,
    /// The store ran out of space (NoSpace/LogFull) where the model, which has no limits, did
    /// not: legitimate; the unit must then have had no effect.
    pub(crate) out_of_space: bool,
}

impl Outcomes {
    pub(crate) fn check(&mut self, what: &str, model: String, store: String) {
        if model == store {
            return;
        }
        if model == "ok" && (store == "err:NoSpace" || store == "err:LogFull") {
            self.out_of_space = true;
            return;
        }
        self.diverged
            .push(format!("{what}: model {model}, store {store}"));
    }
}
