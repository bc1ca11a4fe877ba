//! The node choice itself: predicates, ranking, fit.

use super::judge::{NodeJudge, TaskFacts};
use super::preferred_pod_affinity::AffinityRanking;
use super::rejection::{NodeRejection, NodeRejections};
use super::source::NodeSource;
use crate::fit::{FitRequest, Placement, PodContext};

/// The chosen node and the pod's GPUs on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Node name.
    pub node: String,
    /// GPUs per container and the node's score before placing.
    pub placement: Placement,
    /// What the node was ranked by: the pod's node policy plus the plugins' node
    /// scores (higher is better).
    pub rank: f64,
}

/// The best node for the pod that passes every predicate and fits, by the pod's
/// node policy plus the plugins' node scores (ties: the smaller name); when none
/// does, every candidate's reason.
///
/// Without node scores the policy score is all there is, and it depends only on
/// current usage: candidates are ranked by it, nodes that surely cannot hold the
/// request are skipped, and the best one is found in one pass and fitted; the rest
/// are sorted and fitted only when it does not fit. Same answer as fitting every
/// node, at a fraction of the cost.
pub fn choose_node<S: NodeSource + ?Sized>(
    source: &S,
    ctx: &PodContext,
    task: &TaskFacts<'_>,
    judge: &dyn NodeJudge,
) -> Result<Choice, NodeRejections> {
    let request = fit_request(source, ctx);
    let mut failed = NodeRejections::new();
    if let Some(choice) = best_fitting(source, ctx, &request, task, judge, |name, reason| {
        failed.insert(name.to_string(), reason);
    }) {
        return Ok(choice);
    }
    // None fits: the reasons of the nodes never fitted (unusable, too full to
    // rank, ruled out by a predicate), each judged once.
    for i in 0..source.len() {
        let name = source.name(i);
        if failed.contains_key(name) {
            continue;
        }
        let reason = match judge_one(source, &request, task, judge, i) {
            Ok(_) => continue,
            Err(reason) => reason,
        };
        failed.insert(name.to_string(), reason);
    }
    Err(failed)
}

/// The node [`choose_node`] chooses, or `None` when none fits, without the
/// reasons of the others. For callers that only want a node (a spare one for a
/// busy node): a reason for each of thousands of candidates, each with its name
/// copied into a map, costs far more than the choice, and when no candidate
/// qualifies that is every one of them.
pub fn best_node<S: NodeSource + ?Sized>(
    source: &S,
    ctx: &PodContext,
    task: &TaskFacts<'_>,
    judge: &dyn NodeJudge,
) -> Option<Choice> {
    best_fitting(
        source,
        ctx,
        &fit_request(source, ctx),
        task,
        judge,
        |_, _| {},
    )
}

/// What fitting the pod on the source's candidates asks.
fn fit_request<'a, S: NodeSource + ?Sized>(source: &S, ctx: &'a PodContext) -> FitRequest<'a> {
    FitRequest {
        request: &ctx.request,
        policies: &ctx.policies,
        selectors: &ctx.selectors,
        quota: source.quota(&ctx.namespace),
    }
}

/// The best candidate that passes and fits, fitting down the ranking; each
/// candidate fitted in vain is handed to `fitted_in_vain` with its reason.
fn best_fitting<S: NodeSource + ?Sized>(
    source: &S,
    ctx: &PodContext,
    request: &FitRequest<'_>,
    task: &TaskFacts<'_>,
    judge: &dyn NodeJudge,
    mut fitted_in_vain: impl FnMut(&str, NodeRejection),
) -> Option<Choice> {
    let policy = ctx.policies.node;
    let (filters, scores) = (judge.filters(), judge.scores_task(task));
    // With plugin scores every candidate is judged to be ranked, and predicates
    // rule nodes out first. Without them the ranking needs no plugin, and a
    // predicate is asked only of the nodes tried, best first: the same answer,
    // without a predicate call per node per pod (a planning cycle places
    // hundreds of pods on thousands of nodes).
    let eager = filters && scores;
    let passes = |i: usize| {
        !eager
            || source
                .facts(i)
                .is_some_and(|node| judge.predicate(task, &node).is_ok())
    };
    let try_fit = |i: usize| -> Result<Placement, NodeRejection> {
        if filters
            && !eager
            && let Some(node) = source.facts(i)
        {
            judge
                .predicate(task, &node)
                .map_err(NodeRejection::Predicate)?;
        }
        source.fit(i, request)
    };
    // Nodes worth fitting, with their rank by usage.
    let eligible = |i: usize| {
        source
            .rank(i, &ctx.request)
            .filter(|rank| rank.usable && rank.may_fit && passes(i))
    };
    // Preferred pod affinity is spread over the nodes worth fitting.
    let affinity = if scores {
        AffinityRanking::over(
            task,
            judge,
            (0..source.len())
                .filter(|&i| eligible(i).is_some())
                .filter_map(|i| source.facts(i)),
        )
    } else {
        None
    };
    // Candidates worth fitting, with the score they are ranked by.
    let candidates = || {
        (0..source.len()).filter_map(|i| {
            let rank = eligible(i)?;
            let score = if scores {
                let plugins = source.facts(i).map_or(0.0, |n| {
                    judge.score(task, &n) + affinity.map_or(0.0, |a| a.score(&n))
                });
                policy.preference(rank.score) + plugins
            } else {
                // Same order as the preference, without the arithmetic.
                match policy {
                    crate::policy::NodePolicy::Binpack => rank.score,
                    crate::policy::NodePolicy::Spread => -rank.score,
                }
            };
            Some((score, i))
        })
    };
    let by_position = source.sorted_by_name();
    let order = |(sa, ia): &(f64, usize), (sb, ib): &(f64, usize)| {
        sb.total_cmp(sa).then_with(|| {
            if by_position {
                ia.cmp(ib)
            } else {
                source.name(*ia).cmp(source.name(*ib))
            }
        })
    };
    let mut fit_at = |(rank, i): (f64, usize)| match try_fit(i) {
        Ok(placement) => Some(Choice {
            node: source.name(i).to_string(),
            placement,
            rank,
        }),
        Err(reason) => {
            fitted_in_vain(source.name(i), reason);
            None
        }
    };
    // Ranked by the node score alone, a source that keeps its candidates in
    // that order is walked best first, down to the first that fits: the same
    // candidates fitted, in the same order, as ranking them all.
    let asks_gpu = ctx.request.containers.iter().flatten().any(|c| c.nums > 0);
    if !scores
        && asks_gpu
        && let Some(walk) = source.in_score_order(policy == crate::policy::NodePolicy::Binpack)
    {
        return walk
            .filter_map(|i| {
                let rank = eligible(i)?;
                Some(match policy {
                    crate::policy::NodePolicy::Binpack => (rank.score, i),
                    crate::policy::NodePolicy::Spread => (-rank.score, i),
                })
            })
            .find_map(fit_at);
    }
    // Usually the best node fits: find it in one pass, keeping nothing. No best
    // node means no candidate worth fitting at all.
    let best = candidates().min_by(order)?;
    if let Some(choice) = fit_at(best) {
        return Some(choice);
    }
    // Otherwise rank them all and fit down the list.
    let mut ranked: Vec<(f64, usize)> = candidates().collect();
    ranked.sort_by(order);
    ranked.into_iter().skip(1).find_map(fit_at)
}

/// One candidate judged: its predicates, then the fit.
fn judge_one<S: NodeSource + ?Sized>(
    source: &S,
    request: &FitRequest<'_>,
    task: &TaskFacts<'_>,
    judge: &dyn NodeJudge,
    i: usize,
) -> Result<Placement, NodeRejection> {
    if judge.filters()
        && let Some(node) = source.facts(i)
    {
        judge
            .predicate(task, &node)
            .map_err(NodeRejection::Predicate)?;
    }
    source.fit(i, request)
}

/// Every candidate judged: those that pass and fit, with their placements (in
/// candidate order), and the reasons for the rest.
pub fn evaluate_all<S: NodeSource + ?Sized>(
    source: &S,
    ctx: &PodContext,
    task: &TaskFacts<'_>,
    judge: &dyn NodeJudge,
) -> (Vec<(String, Placement)>, NodeRejections) {
    let request = fit_request(source, ctx);
    let mut fits = Vec::new();
    let mut failed = NodeRejections::new();
    for i in 0..source.len() {
        let name = source.name(i);
        match judge_one(source, &request, task, judge, i) {
            Ok(p) => fits.push((name.to_string(), p)),
            Err(reason) => {
                failed.insert(name.to_string(), reason);
            }
        }
    }
    (fits, failed)
}
