//! The simulator driver: runs a workload on a [`SimRegion`], checks crash images at every
//! fence against the oracle (see the `oracle` module); shrinking is in [`crate::shrink`].
//!
//! Oracle: each thread works in its own directory `/tN` and has its own [`ModelStore`]. For
//! each thread the driver keeps the set of trees a crash may show for its directory:
//! `[before]` while a unit is running and before its commit call, `[before, after]` while the
//! commit call (tx_commit, the legacy call itself, fsync/syncv) has not returned, `[after]`
//! once it has. A crash image passes when recovery succeeds without panicking, every thread's
//! directory equals one of its acceptable trees (whole-unit atomicity: no mix), nothing else
//! is in the root, fsck is clean, and a second recovery of the recovered image shows the same
//! tree.

use crate::images::{for_each_chosen, give_back, reuse, take_back, Used};
use crate::meta::{self, read_metas, Metas, Times};
use crate::oracle::{
    judge, model_tree, panic_text, prefix, recover_tree, Outcomes, Partition, Recovered,
};
use crate::workload::{self, Handles, Unit, Workload};
use crate::{CrashReport, CrashTarget, Violation};
use conformance::{ModelStore, Tree};
use pmem::{CrashConfig, CrashPoint, SimRegion};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use store::{Store, TxId};

/// Budgets and switches of a run.
///
/// The image budget is spread over the whole workload: a dry run counts its crash points
/// first, every crash point then gets at least one image, and the rest of
/// `images_per_workload` is shared out evenly (what a point with few states does not use
/// carries over to the next points). A point is enumerated exhaustively when its state count
/// is at most `images_per_fence` and its share reaches that count; the report counts those
/// points. Images of crashed recoveries have a budget of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverConfig {
    /// Crash images checked at one crash point at most (exhaustive up to this many states).
    pub images_per_fence: u64,
    /// Crash images of the workload's crash points, spread over all of them; every point gets
    /// at least one even when the points outnumber this budget.
    pub images_per_workload: u64,
    /// Crash the recovery of every N-th checked image too (0: never).
    pub recovery_crash_every: u64,
    /// Images checked per fence of a crashed recovery.
    pub recovery_images_per_fence: u64,
    /// Images of crashed recoveries per workload at most (not taken from `images_per_workload`).
    pub recovery_images_per_workload: u64,
    /// Recover each recovered image a second time and compare.
    pub second_recovery: bool,
    /// Stop a workload at its first violation (used when shrinking).
    pub stop_at_first: bool,
    /// Seed of the simulator's sampling of crash images.
    pub sample_seed: u64,
}

impl DriverConfig {
    /// Environment settings giving this configuration to [`crate::suite::repro`].
    pub fn repro_env(&self) -> String {
        format!(
            "ATOMFS_CRASH_IMAGES={} ATOMFS_CRASH_IMAGES_PER_FENCE={} ATOMFS_CRASH_RECOVERY_EVERY={} ATOMFS_CRASH_RECOVERY_IMAGES={} ATOMFS_CRASH_SAMPLE_SEED={}",
            self.images_per_workload,
            self.images_per_fence,
            self.recovery_crash_every,
            self.recovery_images_per_workload,
            self.sample_seed
        )
    }

    /// This configuration with `images` per workload and a recovery budget of a quarter of it.
    pub fn with_images(self, images_per_fence: u64, images_per_workload: u64) -> Self {
        DriverConfig {
            images_per_fence,
            images_per_workload,
            recovery_images_per_workload: (images_per_workload / 4).max(1),
            ..self
        }
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            images_per_fence: 16,
            images_per_workload: 2000,
            recovery_crash_every: 16,
            recovery_images_per_fence: 4,
            recovery_images_per_workload: 500,
            second_recovery: true,
            stop_at_first: false,
            sample_seed: 0x5EED,
        }
    }
}

struct Shared {
    parts: Vec<Partition>,
    images: u64,
    crash_points: u64,
    crash_points_total: u64,
    exhaustive_points: u64,
    nested_images: u64,
    second_recoveries: u64,
    space_rollbacks: u64,
    store_stats: Vec<(String, u64)>,
    /// Per thread: the live store's metas when its last unit returned.
    acked: Vec<Option<Metas>>,
    /// Legacy writes by the mode of their file (see [`CrashTarget::handle_mode`]).
    modes: BTreeMap<String, u64>,
    violations: Vec<Violation>,
    stop: bool,
}

struct Ctx {
    target: Arc<dyn CrashTarget>,
    cfg: DriverConfig,
    /// Crash points of the workload counted by the dry run (0 during the dry run itself,
    /// which checks no image).
    points_planned: u64,
    seed: u64,
    repro: String,
    shared: Mutex<Shared>,
}

impl Ctx {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn violation(&self, what: String, unit: Option<usize>, at: String) {
        let mut sh = self.lock();
        sh.violations.push(Violation {
            engine: self.target.name(),
            seed: self.seed,
            unit,
            at,
            what,
            repro: self.repro.clone(),
        });
        if self.cfg.stop_at_first {
            sh.stop = true;
        }
    }

    /// Record the live store's metas of thread `t` as acknowledged (call before `set` of a
    /// state the unit's return made durable).
    fn ack(&self, t: usize, s: &dyn Store) {
        let live = read_metas(s, &prefix(t)).ok();
        self.lock().acked[t] = live;
    }

    /// The acceptable trees of thread `t`, with the acknowledged metas.
    fn set(&self, t: usize, acceptable: Vec<Tree>, unit: usize, phase: &'static str) {
        let mut sh = self.lock();
        assert_eq!(
            acceptable.len(),
            1,
            "an in-flight unit goes through set_in_flight"
        );
        let metas = vec![sh.acked[t].clone()];
        sh.parts[t] = Partition {
            metas,
            acceptable,
            unit,
            phase,
        };
    }
}

impl Ctx {
    /// Thread `t` has a unit in flight: the state `before` it (with the acknowledged metas)
    /// and the state `after` it (with the model's metas after it, times not compared: the
    /// model's clock is not the store's) are acceptable. A unit changing only metadata
    /// (chmod, utimes, a hard link's count) leaves the trees equal, and then the metas
    /// decide.
    fn set_in_flight(
        &self,
        t: usize,
        before: Tree,
        after: Tree,
        model: &ModelStore,
        unit: usize,
        phase: &'static str,
    ) {
        let after_metas = read_metas(&model.crash(), "").ok();
        let mut sh = self.lock();
        let metas = vec![sh.acked[t].clone(), after_metas];
        sh.parts[t] = Partition {
            metas,
            acceptable: vec![before, after],
            unit,
            phase,
        };
    }
}

/// Check one crash image; `nested` is true for images of a crashed recovery. Returns the
/// image's buffer for the next image of the same crash point, when it could be taken back.
fn check_image(
    ctx: &Arc<Ctx>,
    parts: &[Partition],
    image: Vec<u8>,
    at: &str,
    nested: bool,
    crash_recovery: bool,
) -> Option<Used> {
    let region = Arc::new(SimRegion::from_image(image));
    if crash_recovery && !nested {
        region.set_crash_config(CrashConfig {
            exhaustive_limit: ctx.cfg.recovery_images_per_fence,
            sample_count: ctx.cfg.recovery_images_per_fence,
            seed: ctx.cfg.sample_seed,
        });
        let hook_parts = parts.to_vec();
        let hook_at = at.to_string();
        let hook_ctx = ctx.clone();
        region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| {
            let ctx = &hook_ctx;
            let left = ctx
                .cfg
                .recovery_images_per_workload
                .saturating_sub(ctx.lock().nested_images);
            let budget = left.min(ctx.cfg.recovery_images_per_fence);
            let salt = ctx.cfg.sample_seed ^ cp.fence_index();
            for_each_chosen(cp, budget, salt, |i, image| {
                let where_ = format!("{hook_at}; recovery crashed, {}", cp.describe(i));
                check_image(ctx, &hook_parts, image, &where_, true, false)
            });
        }));
    }
    {
        let mut sh = ctx.lock();
        sh.images += 1;
        sh.nested_images += nested as u64;
    }
    let unit = parts.iter().map(|p| p.unit).max();
    let recovered = recover_tree(ctx.target.as_ref(), region.clone());
    // Remove the hook as soon as recovery is over (a store may keep the region alive).
    let _ = region.take_fence_hook();
    let times = Times::of(ctx.target.as_ref());
    let checked = recovered.and_then(|got| judge(&got, parts, times).map(|()| got));
    match checked {
        Err(what) => ctx.violation(what, unit, at.to_string()),
        Ok(tree) if ctx.cfg.second_recovery && !nested => {
            return second_recovery(ctx, region, &tree, unit, at)
        }
        Ok(_) => {}
    }
    reuse(region)
}

/// Recover the durable image of a recovered `region` (a crash right after recovery returned)
/// and compare with the first recovery's `tree`.
fn second_recovery(
    ctx: &Ctx,
    region: Arc<SimRegion>,
    first: &Recovered,
    unit: Option<usize>,
    at: &str,
) -> Option<Used> {
    ctx.lock().second_recoveries += 1;
    let (image, stale) = match take_back(region) {
        Ok((image, stale)) => (image, Some(stale)),
        Err(shared) => (shared.persistent_image(), None),
    };
    let again = Arc::new(SimRegion::from_image(image));
    let second = recover_tree(ctx.target.as_ref(), again.clone());
    let used = match (take_back(again), stale) {
        (Ok((buf, written)), Some(mut stale)) => {
            stale.extend(written);
            Some(Used { buf, stale })
        }
        (Ok((buf, _)), None) => {
            give_back(buf);
            None
        }
        (Err(_), _) => None,
    };
    let times = Times::of(ctx.target.as_ref());
    match second {
        Ok(second) if second.0 != first.0 => {
            let d = conformance::diff(&first.0, &second.0, 4).join(", ");
            ctx.violation(
                format!("a second recovery changed the state: {d}"),
                unit,
                at.to_string(),
            )
        }
        Ok(second) => {
            if let Some(d) = meta::differ(&first.1, &second.1, times) {
                ctx.violation(
                    format!("a second recovery changed the metadata: {d}"),
                    unit,
                    at.to_string(),
                )
            }
        }
        Err(what) => ctx.violation(format!("second recovery: {what}"), unit, at.to_string()),
    }
    used
}

/// The hook of the workload region: check the images of this fence, within its share of the
/// budget (at least one image).
fn on_fence(ctx: &Arc<Ctx>, cp: &CrashPoint<'_>) {
    let (parts, budget, checked) = {
        let mut sh = ctx.lock();
        if sh.stop {
            return;
        }
        sh.crash_points_total += 1;
        if ctx.points_planned == 0 {
            return;
        }
        let top = sh.images - sh.nested_images;
        let due = share_due(
            ctx.cfg.images_per_workload,
            sh.crash_points_total,
            ctx.points_planned,
        );
        let budget = due
            .saturating_sub(top)
            .clamp(1, ctx.cfg.images_per_fence.max(1));
        (sh.parts.clone(), budget, top)
    };
    let mut n = checked;
    let salt = ctx.cfg.sample_seed ^ cp.fence_index();
    let chosen = for_each_chosen(cp, budget, salt, |i, image| {
        n += 1;
        let crash_recovery =
            ctx.cfg.recovery_crash_every > 0 && n % ctx.cfg.recovery_crash_every == 0;
        check_image(ctx, &parts, image, &cp.describe(i), false, crash_recovery)
    });
    count_point(ctx, cp, chosen);
}

/// Images due after `seen` of `planned` crash points: that share of `budget` (all of it once
/// the dry run's count is exceeded, as a concurrent workload may fence more often).
fn share_due(budget: u64, seen: u64, planned: u64) -> u64 {
    let seen = seen.min(planned.max(1));
    (budget as u128 * seen as u128 / planned.max(1) as u128) as u64
}

/// Count a crash point whose `chosen` images were checked.
fn count_point(ctx: &Ctx, cp: &CrashPoint<'_>, chosen: u64) {
    let mut sh = ctx.lock();
    sh.crash_points += (chosen > 0) as u64;
    sh.exhaustive_points += (cp.is_exhaustive() && chosen == cp.image_count()) as u64;
}

/// Run one thread's units on `s` (and on its model), updating the oracle around each commit.
///
/// Legacy data calls (write, append, truncate) go through handles kept open across units, as
/// an application keeps its files open: an engine's per-open-file state (mmio's hybrid
/// logging policy) then lives long enough to change. A file's kept handle is released before
/// a unit that unlinks or renames it or opens it O_ATOMIC, and all of them at the end.
fn run_thread(ctx: &Ctx, s: &dyn Store, t: usize, units: &[Unit], model: &ModelStore) {
    let mut kept = (Handles::new(), Handles::new());
    thread_units(ctx, s, t, units, model, &mut kept);
    kept.0.release_all(model);
    kept.1.release_all(s);
}

/// Count the mode of the file a legacy data call is about to write through a kept handle.
fn count_mode(ctx: &Ctx, s: &dyn Store, pre: &str, op: &workload::Op, kept: &Handles) {
    let Some(file) = workload::data_file(op) else {
        return;
    };
    let Some(fh) = kept.find(&workload::path(pre, workload::FILES[file])) else {
        return;
    };
    if let Some(mode) = ctx.target.handle_mode(s, fh) {
        *ctx.lock()
            .modes
            .entry(format!("write in {mode}"))
            .or_default() += 1;
    }
}

/// The files whose handles kept across units must be released before `unit`: those it
/// unlinks or renames (a kept handle would name another file afterwards) and those it opens
/// O_ATOMIC.
fn releases_kept(unit: &Unit) -> Vec<usize> {
    let renamed = |op: &workload::Op| match *op {
        workload::Op::Unlink { file } => vec![file],
        workload::Op::Rename { from, to } => vec![from, to],
        workload::Op::Posix(ref op) => op.moved_files(),
        _ => vec![],
    };
    match unit {
        Unit::Tx { ops, .. } => ops.iter().flat_map(renamed).collect(),
        Unit::Legacy(op) => renamed(op),
        Unit::Atomic { writes, .. } => writes.iter().map(|w| w.0).collect(),
    }
}

fn thread_units(
    ctx: &Ctx,
    s: &dyn Store,
    t: usize,
    units: &[Unit],
    model: &ModelStore,
    kept: &mut (Handles, Handles),
) {
    let pre = prefix(t);
    let mut before = model_tree(model);
    for (i, unit) in units.iter().enumerate() {
        if ctx.lock().stop {
            return;
        }
        ctx.set(t, vec![before.clone()], i, "running");
        for file in releases_kept(unit) {
            kept.0
                .release_path(model, &workload::path("", workload::FILES[file]));
            kept.1
                .release_path(s, &workload::path(&pre, workload::FILES[file]));
        }
        let mut mh = Handles::new();
        let mut th = Handles::new();
        let mut out = Outcomes::default();
        match unit {
            Unit::Tx { ops, end } => {
                let (mt, tt) = match (model.tx_begin(&[]), s.tx_begin(&[])) {
                    (Ok(mt), Ok(tt)) => (mt, tt),
                    (m, g) => {
                        let what = format!(
                            "tx_begin: model {}, store {}",
                            workload::outcome(&m),
                            workload::outcome(&g)
                        );
                        return ctx.violation(what, Some(i), format!("thread {t}"));
                    }
                };
                for op in ops {
                    let m = workload::exec_op(model, "", op, Some(mt), &mut mh);
                    let g = workload::exec_op(s, &pre, op, Some(tt), &mut th);
                    out.check(&format!("{op:?} in tx"), m, g);
                }
                // A transaction that ran out of space is aborted on both sides.
                let end = if out.out_of_space {
                    workload::TxEnd::Abort
                } else {
                    *end
                };
                let (m, g) = finish_tx(ctx, s, model, t, i, end, mt, tt, &before);
                let g = if out.out_of_space && g == "err:NoSuchTransaction" {
                    "ok".to_string()
                } else {
                    g
                };
                out.check(&format!("tx {end:?}"), m, g);
            }
            Unit::Legacy(op) => {
                let (mh, th) = (&mut kept.0, &mut kept.1);
                count_mode(ctx, s, &pre, op, th);
                let saved = model.fork();
                let m = workload::exec_op(model, "", op, None, mh);
                let after = model_tree(model);
                ctx.set_in_flight(
                    t,
                    before.clone(),
                    after.clone(),
                    model,
                    i,
                    "legacy call in flight",
                );
                let g = workload::exec_op(s, &pre, op, None, th);
                if g == m {
                    ctx.ack(t, s);
                    ctx.set(t, vec![after], i, "legacy call returned");
                }
                out.check(&format!("{op:?}"), m, g);
                if out.out_of_space {
                    mh.release_all(model);
                    th.release_all(s);
                    model.restore(saved);
                }
            }
            Unit::Atomic { writes, end } => {
                let saved = model.fork();
                let m = workload::exec_atomic_writes(model, "", writes, &mut mh);
                let g = workload::exec_atomic_writes(s, &pre, writes, &mut th);
                for (k, (m, g)) in m.into_iter().zip(g).enumerate() {
                    out.check(&format!("O_ATOMIC write {k}"), m, g);
                }
                let end = if out.out_of_space {
                    workload::AtomicEnd::Abortv
                } else {
                    *end
                };
                let m = workload::exec_atomic_end(model, end, &mh);
                let after = model_tree(model);
                ctx.set_in_flight(
                    t,
                    before.clone(),
                    after.clone(),
                    model,
                    i,
                    "O_ATOMIC commit in flight",
                );
                let g = workload::exec_atomic_end(s, end, &th);
                if g == m {
                    ctx.ack(t, s);
                    ctx.set(t, vec![after], i, "O_ATOMIC commit returned");
                }
                out.check(&format!("{end:?}"), m, g);
                if out.out_of_space {
                    mh.release_all(model);
                    model.restore(saved);
                }
            }
        }
        mh.release_all(model);
        th.release_all(s);
        if out.out_of_space {
            ctx.lock().space_rollbacks += 1;
        }
        before = model_tree(model);
        ctx.ack(t, s);
        ctx.set(t, vec![before.clone()], i, "returned");
        if !out.diverged.is_empty() {
            ctx.violation(
                format!("store and model disagree: {}", out.diverged.join("; ")),
                Some(i),
                format!("thread {t}"),
            );
            return;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_tx(
    ctx: &Ctx,
    s: &dyn Store,
    model: &ModelStore,
    t: usize,
    i: usize,
    end: workload::TxEnd,
    mt: TxId,
    tt: TxId,
    before: &Tree,
) -> (String, String) {
    match end {
        workload::TxEnd::Commit => {
            let m = workload::outcome(&model.tx_commit(mt));
            let after = model_tree(model);
            ctx.set_in_flight(
                t,
                before.clone(),
                after.clone(),
                model,
                i,
                "tx_commit in flight",
            );
            let g = workload::outcome(&s.tx_commit(tt));
            if g == m {
                ctx.ack(t, s);
                ctx.set(t, vec![after], i, "tx_commit returned");
            }
            (m, g)
        }
        workload::TxEnd::Abort => {
            ctx.set(t, vec![before.clone()], i, "tx_abort in flight");
            (
                workload::outcome(&model.tx_abort(mt)),
                workload::outcome(&s.tx_abort(tt)),
            )
        }
    }
}

/// Run one workload on a fresh simulated region of `target`, checking crash images at every
/// fence, a crash after the last call, and a clean unmount and reopen. A dry run of the same
/// workload counts its crash points first, so that the image budget is spread over all of
/// them (see [`DriverConfig`]).
pub fn run_workload(
    target: Arc<dyn CrashTarget>,
    workload: &Workload,
    cfg: &DriverConfig,
) -> CrashReport {
    let workload = &workload.offered_by(target.posix_steps());
    let planned = execute(target.clone(), workload, cfg, 0).crash_points_total;
    execute(target, workload, cfg, planned.max(1))
}

fn new_ctx(
    target: Arc<dyn CrashTarget>,
    workload: &Workload,
    cfg: &DriverConfig,
    points_planned: u64,
) -> Arc<Ctx> {
    let threads = workload.threads.len();
    Arc::new(Ctx {
        target,
        cfg: *cfg,
        points_planned,
        seed: workload.config.seed,
        repro: workload.repro_env(),
        shared: Mutex::new(Shared {
            parts: vec![
                Partition {
                    acceptable: vec![],
                    metas: vec![],
                    unit: 0,
                    phase: "setup"
                };
                threads
            ],
            images: 0,
            crash_points: 0,
            crash_points_total: 0,
            exhaustive_points: 0,
            nested_images: 0,
            second_recoveries: 0,
            space_rollbacks: 0,
            store_stats: Vec::new(),
            acked: vec![None; threads],
            modes: BTreeMap::new(),
            violations: Vec::new(),
            stop: false,
        }),
    })
}

/// Run `workload`; `points_planned` 0 is the dry run (count the crash points, check nothing).
fn execute(
    target: Arc<dyn CrashTarget>,
    workload: &Workload,
    cfg: &DriverConfig,
    points_planned: u64,
) -> CrashReport {
    let threads = workload.threads.len();
    let ctx = new_ctx(target.clone(), workload, cfg, points_planned);
    let region = Arc::new(SimRegion::new(target.region_len()));
    region.set_crash_config(CrashConfig {
        exhaustive_limit: cfg.images_per_fence,
        sample_count: cfg.images_per_fence,
        seed: cfg.sample_seed ^ workload.config.seed,
    });
    let formatted = catch_unwind(AssertUnwindSafe(|| target.format(region.clone())));
    let store = match formatted {
        Ok(Ok(store)) => store,
        Ok(Err(e)) => return report_of(&ctx, format!("format failed: {e}")),
        Err(p) => return report_of(&ctx, format!("panic in format: {}", panic_text(p.as_ref()))),
    };
    let models: Vec<ModelStore> = (0..threads).map(|_| ModelStore::new()).collect();
    for (t, model) in models.iter().enumerate() {
        if let Err(e) =
            workload::setup(store.as_ref(), &prefix(t)).and_then(|_| workload::setup(model, ""))
        {
            return report_of(&ctx, format!("setup failed: {e}"));
        }
        ctx.ack(t, store.as_ref());
        ctx.set(t, vec![model_tree(model)], 0, "after setup");
    }
    let hook_ctx = ctx.clone();
    region.set_fence_hook(Box::new(move |cp: &CrashPoint<'_>| on_fence(&hook_ctx, cp)));
    let s = store.as_ref();
    std::thread::scope(|scope| {
        for (t, units) in workload.threads.iter().enumerate() {
            let (ctx, model) = (&ctx, &models[t]);
            scope.spawn(move || {
                if let Err(p) =
                    catch_unwind(AssertUnwindSafe(|| run_thread(ctx, s, t, units, model)))
                {
                    ctx.violation(
                        format!("panic in the workload: {}", panic_text(p.as_ref())),
                        None,
                        format!("thread {t}"),
                    );
                }
            });
        }
    });
    let _ = region.take_fence_hook();
    if let Ok(stats) = catch_unwind(AssertUnwindSafe(|| store.stats())) {
        ctx.lock().store_stats = stats;
    }
    if points_planned == 0 {
        ctx.lock().crash_points_total += 1;
        return report_now(&ctx);
    }
    if !ctx.lock().stop {
        // A crash after the last call returned: only the final states are acceptable.
        let parts = ctx.lock().parts.clone();
        let cp = region.crash_point();
        let chosen = for_each_chosen(&cp, cfg.images_per_fence, cfg.sample_seed, |i, image| {
            check_image(
                &ctx,
                &parts,
                image,
                &format!("crash after the workload, {}", cp.describe(i)),
                false,
                false,
            )
        });
        ctx.lock().crash_points_total += 1;
        count_point(&ctx, &cp, chosen);
        final_reopen(&ctx, store, &region, &parts);
    }
    report_now(&ctx)
}

fn final_reopen(ctx: &Ctx, store: Box<dyn Store>, region: &SimRegion, parts: &[Partition]) {
    match catch_unwind(AssertUnwindSafe(|| store.unmount())) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return ctx.violation(format!("unmount failed: {e}"), None, "end".into()),
        Err(p) => {
            return ctx.violation(
                format!("panic in unmount: {}", panic_text(p.as_ref())),
                None,
                "end".into(),
            )
        }
    }
    drop(store);
    let image = Arc::new(SimRegion::from_image(region.persistent_image()));
    match recover_tree(ctx.target.as_ref(), image) {
        Ok(tree) => {
            if let Err(what) = judge(&tree, parts, Times::of(ctx.target.as_ref())) {
                ctx.violation(format!("after a clean unmount: {what}"), None, "end".into());
            }
        }
        Err(what) => ctx.violation(
            format!("reopen after a clean unmount: {what}"),
            None,
            "end".into(),
        ),
    }
}

fn report_of(ctx: &Ctx, what: String) -> CrashReport {
    ctx.violation(what, None, "start".into());
    report_now(ctx)
}

fn report_now(ctx: &Ctx) -> CrashReport {
    let sh = ctx.lock();
    CrashReport {
        engine: ctx.target.name(),
        workloads: 1,
        images: sh.images,
        crash_points: sh.crash_points,
        crash_points_total: sh.crash_points_total,
        exhaustive_points: sh.exhaustive_points,
        nested_images: sh.nested_images,
        second_recoveries: sh.second_recoveries,
        space_rollbacks: sh.space_rollbacks,
        store_stats: sh
            .store_stats
            .iter()
            .cloned()
            .chain(sh.modes.clone())
            .collect(),
        kills: 0,
        violations: sh.violations.clone(),
    }
}
