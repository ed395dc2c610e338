"""Part 1 of `generate.py`: the synthetic meta-evaluation set (seed 0) and its expected statistics, computed with
google-research/mt-metrics-eval (README.md says how each was called and with which tolerance)."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import scipy.stats
from mt_metrics_eval import pce, stats

from common import fl, versions

SEED = 0
N_SYS = 8
N_ITEMS = 60
ANNOTATORS = ['A1', 'A2', 'A3']
METRICS = ['a', 'b', 'c', 'd']
SYSTEMS = [f'S{i}' for i in range(1, N_SYS + 1)]
MISSING_RATE = 0.05
CONST_ITEM = N_ITEMS - 1

PERM_SEED = 1234          # np.random.seed(...) before every PermutationSigDiff call
PERM_K = 1000
PERM_TOL = 0.05
SPA_NUM_PERMUTATIONS = 1000   # pce.compute_pairwise_p_values, its internal seed is 4
SPA_TOL = 0.03

# Source commit of google-research/mt-metrics-eval the values were produced with.
MME_COMMIT = '68a481aea1a787392d55af8f76ac8ef40c5f4664'


def make_synthetic():
  """Draw the synthetic ratings and metric scores (deterministic, seed 0)."""
  rng = np.random.default_rng(SEED)
  sys_quality = rng.normal(0.0, 0.6, N_SYS)
  item_difficulty = rng.normal(0.0, 0.8, N_ITEMS)
  interaction = rng.normal(0.0, 0.5, (N_SYS, N_ITEMS))
  latent = 3.0 + sys_quality[:, None] + item_difficulty[None, :] + interaction

  bias = np.array([-0.3, 0.0, 0.4])
  noise_sd = np.array([0.5, 0.7, 0.9])
  raw = latent[None, :, :] + bias[:, None, None] + (
      noise_sd[:, None, None] * rng.normal(0.0, 1.0, (3, N_SYS, N_ITEMS)))
  ratings = np.clip(np.rint(raw), 1, 5).astype(int)          # (annot, sys, item)
  missing = rng.random((3, N_SYS, N_ITEMS)) < MISSING_RATE
  all_missing = missing.all(axis=0)
  missing[0][all_missing] = False   # every segment keeps >= 1 rating
  # The last item gets the same human score for every system (all annotators
  # rate 3, none missing), so that item-grouped correlations hit a constant
  # human vector (NaN correlation, dropped from the average).
  ratings[:, :, CONST_ITEM] = 3
  missing[:, :, CONST_ITEM] = False

  a = latent + rng.normal(0.0, 0.35, latent.shape)
  b = 50.0 + 10.0 * (latent + rng.normal(0.0, 0.8, latent.shape))
  c = (latent - 3.0) + rng.normal(0.0, 1.2, latent.shape)
  d = rng.normal(0.0, 1.0, latent.shape) + 0.05 * latent
  metric_vals = {
      'a': np.round(a, 6),
      'b': np.round(b, 4),
      'c': np.round(c, 1),          # 1 decimal -> many exact ties
      'd': np.round(d, 6),
  }

  rrows = []
  for s in range(N_SYS):
    for i in range(N_ITEMS):
      for k, ann in enumerate(ANNOTATORS):
        if not missing[k, s, i]:
          rrows.append((SYSTEMS[s], i, ann, int(ratings[k, s, i])))
  ratings_df = pd.DataFrame(rrows, columns=['system', 'item', 'annotator', 'rating'])

  mrows = []
  for s in range(N_SYS):
    for i in range(N_ITEMS):
      for m in METRICS:
        mrows.append((SYSTEMS[s], i, m, float(metric_vals[m][s, i])))
  metrics_df = pd.DataFrame(mrows, columns=['system', 'item', 'metric', 'score'])
  return ratings_df, metrics_df


def load_synthetic(ratings_path, metrics_path):
  """Read the CSVs back and build system-major packed vectors."""
  r = pd.read_csv(ratings_path)
  m = pd.read_csv(metrics_path)
  systems = sorted(r.system.unique())
  items = sorted(r.item.unique())
  # annotator x system x item matrix with NaN for missing
  ann = sorted(r.annotator.unique())
  mat = np.full((len(ann), len(systems), len(items)), np.nan)
  si = {s: j for j, s in enumerate(systems)}
  ii = {x: j for j, x in enumerate(items)}
  ai = {x: j for j, x in enumerate(ann)}
  for row in r.itertuples(index=False):
    mat[ai[row.annotator], si[row.system], ii[row.item]] = row.rating
  counts = (~np.isnan(mat)).sum(axis=0)
  sums = np.nansum(mat, axis=0)
  human_seg = sums / counts                               # (sys, item)
  metric_seg = {}
  for name, g in m.groupby('metric'):
    x = np.full((len(systems), len(items)), np.nan)
    for row in g.itertuples(index=False):
      x[si[row.system], ii[row.item]] = row.score
    metric_seg[name] = x
  return systems, items, ann, mat, human_seg, metric_seg


def packed(mat):
  """System-major packing used by mt_metrics_eval: [sys0 items..., sys1 ...]."""
  return [float(v) for v in np.asarray(mat).reshape(-1)]


def synthetic_expected(ratings_path, metrics_path):
  systems, items, ann, mat, human_seg, metric_seg = load_synthetic(
      ratings_path, metrics_path)
  n_sys = len(systems)
  human_sys = human_seg.mean(axis=1)
  metric_sys = {k: v.mean(axis=1) for k, v in metric_seg.items()}
  gold_seg = packed(human_seg)
  gold_sys = [float(v) for v in human_sys]

  out = {
      'description': 'Expected meta-evaluation statistics for synthetic_ratings.csv '
                     '/ synthetic_metrics.csv, computed with mt_metrics_eval.',
      'versions': versions(),
      'mt_metrics_eval_source_commit': MME_COMMIT,
      'data': {
          'seed': SEED, 'n_systems': n_sys, 'n_items': len(items),
          'annotators': ann, 'metrics': METRICS,
          'n_ratings_present': int((~np.isnan(mat)).sum()),
          'n_ratings_missing': int(np.isnan(mat).sum()),
          'segments_with_1_2_3_ratings': [
              int(((~np.isnan(mat)).sum(axis=0) == k).sum()) for k in (1, 2, 3)],
          'human_segment_score': 'mean of the available annotator ratings of the (system,item)',
          'human_system_score': 'mean over the 60 items of the human segment scores',
          'metric_system_score': 'mean over the 60 items of the metric segment scores',
          'packing': 'vectors passed to mt_metrics_eval are system-major: systems '
                     'sorted by name (S1..S8), items 0..59 inside each system',
          'human_system_scores': {s: fl(v) for s, v in zip(systems, human_sys)},
          'metric_system_scores': {
              m: {s: fl(v) for s, v in zip(systems, metric_sys[m])} for m in METRICS},
      },
  }

  # ---- system level correlations ----
  sys_level = {}
  for m in METRICS:
    corr = stats.Correlation(n_sys, gold_sys, [float(v) for v in metric_sys[m]])
    sys_level[m] = {
        'pearson': {'value': fl(corr.Pearson('none')[0]),
                    'call': "stats.Correlation(8, human_sys, metric_sys).Pearson(average_by='none')[0]"},
        'spearman': {'value': fl(corr.Spearman('none')[0]),
                     'call': "stats.Correlation(8, human_sys, metric_sys).Spearman(average_by='none')[0]"},
        'kendall_b': {'value': fl(corr.Kendall('none', 'b')[0]),
                      'call': "stats.Correlation(8, human_sys, metric_sys).Kendall(average_by='none', variant='b')[0]"},
        'kendall_c': {'value': fl(corr.Kendall('none', 'c')[0]),
                      'call': "stats.Correlation(8, human_sys, metric_sys).Kendall(average_by='none', variant='c')[0]"},
    }
  out['system_level'] = sys_level

  # ---- segment level correlations with grouping ----
  seg_level = {}
  for avg in ('none', 'item', 'sys'):
    seg_level[avg] = {}
    for m in METRICS:
      corr = stats.Correlation(n_sys, gold_seg, packed(metric_seg[m]))
      p = corr.Pearson(avg)
      s = corr.Spearman(avg)
      k = corr.Kendall(avg, 'b')
      pz = corr.AverageCorrelation(scipy.stats.pearsonr, avg, replace_nans_with_zeros=True)(
          corr.gold_scores, corr.metric_scores)
      seg_level[avg][m] = {
          'pearson_nan_as_zero': {
              'value': fl(pz[0]), 'n_groups_averaged': int(pz[2]),
              'call': f"stats.Correlation(8, human_seg, metric_seg).AverageCorrelation(scipy.stats.pearsonr, "
                      f"'{avg}', replace_nans_with_zeros=True)(gold, metric)"},
          'pearson': {'value': fl(p[0]), 'n_groups_averaged': int(p[2]),
                      'call': f"stats.Correlation(8, human_seg, metric_seg).Pearson(average_by='{avg}')"},
          'spearman': {'value': fl(s[0]), 'n_groups_averaged': int(s[2]),
                       'call': f"stats.Correlation(8, human_seg, metric_seg).Spearman(average_by='{avg}')"},
          'kendall_b': {'value': fl(k[0]), 'n_groups_averaged': int(k[2]),
                        'call': f"stats.Correlation(8, human_seg, metric_seg).Kendall(average_by='{avg}', variant='b')"},
      }
  # groups dropped because the human vector is constant (NaN correlation)
  const_items = [int(items[j]) for j in range(len(items))
                 if np.all(human_seg[:, j] == human_seg[0, j])]
  seg_level['notes'] = {
      'none': 'one correlation over the 480 flattened (system,item) pairs',
      'item': 'for each item, correlate the 8 system scores; average over items (macro); '
              'NaN correlations (constant vectors) are dropped before averaging',
      'sys': 'for each system, correlate the 60 item scores; average over the 8 systems (macro)',
      'items_with_constant_human_vector': const_items,
      'n_groups_averaged': 'third return value of AverageCorrelation: number of groups with a non-NaN correlation',
  }
  out['segment_level'] = seg_level

  # ---- pairwise accuracy (system level) ----
  pa = {}
  for m in METRICS:
    agree, npairs = stats.Agreement(gold_sys, [float(v) for v in metric_sys[m]])
    pa[m] = {'value': fl(agree / npairs), 'agree': int(agree), 'num_pairs': int(npairs),
             'call': 'agree, n = stats.Agreement(human_sys, metric_sys); value = agree / n'}
  out['pairwise_accuracy_system'] = pa

  # ---- tie-calibrated pairwise accuracy (segment level, grouped by item) ----
  tc = {}
  for m in METRICS:
    mvec = packed(metric_seg[m])
    tau, eps, res = stats.KendallWithTiesOpt(
        gold_seg, mvec, variant='acc23', num_sys=n_sys, average_by='item',
        sample_rate=1.0)
    corr = stats.Correlation(n_sys, gold_seg, mvec)
    acc_eps0 = corr.KendallVariants('item', 'acc23', 0.0)[0]
    acc_at_eps = corr.KendallVariants('item', 'acc23', float(eps))[0]
    t23, eps23, _ = stats.KendallWithTiesOpt(
        gold_seg, mvec, variant='23', num_sys=n_sys, average_by='item',
        sample_rate=1.0)
    tc[m] = {
        'acc_eq': {'value': fl(tau),
                   'call': "stats.KendallWithTiesOpt(human_seg, metric_seg, variant='acc23', "
                           "num_sys=8, average_by='item', sample_rate=1.0)[0]"},
        'epsilon': {'value': fl(eps),
                    'call': 'same call, [1] (optimal tie threshold: metric pairs with |diff| <= epsilon are ties)'},
        'n_thresholds_tried': len(res.thresholds),
        'acc23_at_epsilon0': {'value': fl(acc_eps0),
                              'call': "stats.Correlation(8, human_seg, metric_seg).KendallVariants("
                                      "average_by='item', variant='acc23', epsilon=0.0)[0]"},
        'acc23_at_optimal_epsilon_check': {
            'value': fl(acc_at_eps),
            'call': "stats.Correlation(8, human_seg, metric_seg).KendallVariants("
                    "average_by='item', variant='acc23', epsilon=<epsilon>)[0] (equals acc_eq)"},
        'tau23_opt': {'value': fl(t23), 'epsilon': fl(eps23),
                      'call': "stats.KendallWithTiesOpt(human_seg, metric_seg, variant='23', "
                              "num_sys=8, average_by='item', sample_rate=1.0)"},
    }
  out['tie_calibrated_accuracy_segment_item'] = tc

  # ---- soft pairwise accuracy (system level, from segment scores) ----
  spa = {}
  gold_mat = human_seg
  for m in METRICS:
    val = stats.PairwiseConfidenceError(
        gold_seg, packed(metric_seg[m]), num_sys=n_sys,
        num_permutations=SPA_NUM_PERMUTATIONS, filter_nones=False)[0]
    alt = []
    for seed in range(20):
      hp = pce.compute_pairwise_p_values(gold_mat, SPA_NUM_PERMUTATIONS, seed=100 + seed)
      mp = pce.compute_pairwise_p_values(metric_seg[m], SPA_NUM_PERMUTATIONS, seed=100 + seed)
      alt.append(pce.compute_one_minus_pce(hp, mp))
    spa[m] = {
        'value': fl(val),
        'call': 'stats.PairwiseConfidenceError(human_seg, metric_seg, num_sys=8, '
                'num_permutations=1000, filter_nones=False)[0]  (pce.compute_pairwise_p_values '
                'uses np.random.default_rng(4) internally)',
        'tolerance': SPA_TOL,
        'spread_over_20_other_seeds': {'min': fl(min(alt)), 'max': fl(max(alt)),
                                       'sd': fl(np.std(alt, ddof=1))},
    }
  out['soft_pairwise_accuracy_system'] = spa

  # ---- Williams test (system level, Pearson) ----
  will = []
  for m1, m2 in itertools.combinations(METRICS, 2):
    c1 = stats.Correlation(n_sys, gold_sys, [float(v) for v in metric_sys[m1]])
    c2 = stats.Correlation(n_sys, gold_sys, [float(v) for v in metric_sys[m2]])
    p1, r1, r2 = stats.WilliamsSigDiff(c1, c2, scipy.stats.pearsonr, one_sided=True)
    p2, _, _ = stats.WilliamsSigDiff(c1, c2, scipy.stats.pearsonr, one_sided=False)
    r12 = scipy.stats.pearsonr(metric_sys[m1], metric_sys[m2])[0]
    will.append({
        'metric1': m1, 'metric2': m2,
        'r_human_metric1': fl(r1), 'r_human_metric2': fl(r2), 'r_metric1_metric2': fl(r12),
        'n': n_sys,
        'p_one_sided': fl(p1), 'p_two_sided': fl(p2),
        'call': f"stats.WilliamsSigDiff(Correlation(8, human_sys, sys_{m1}), "
                f"Correlation(8, human_sys, sys_{m2}), scipy.stats.pearsonr, one_sided=True|False)[0]",
    })
  out['williams_system_pearson'] = {
      'convention': 'p = t.sf(|t|, n-3) with the Williams (1959) t; symmetric in the metric order, '
                    'tests |r1 - r2| > 0 in the direction observed; two-sided = 2 * one-sided',
      'pairs': will,
  }

  # ---- PERM-BOTH permutation test (system level) ----
  perm = []
  psd = stats.PermutationSigDiffParams(block_size=PERM_K, early_min=0.02, early_max=0.5)
  for fname, fcn in (('pearson', scipy.stats.pearsonr), ('kendall_b', scipy.stats.kendalltau)):
    for m1, m2 in itertools.combinations(METRICS, 2):
      base = {m: fcn(human_sys, metric_sys[m])[0] for m in (m1, m2)}
      hi, lo = (m1, m2) if base[m1] >= base[m2] else (m2, m1)
      c_hi = stats.Correlation(n_sys, gold_sys, [float(v) for v in metric_sys[hi]])
      c_lo = stats.Correlation(n_sys, gold_sys, [float(v) for v in metric_sys[lo]])
      np.random.seed(PERM_SEED)
      pval, delta, k_used, _ = stats.PermutationSigDiff(
          c_lo, c_hi, fcn, 'none', PERM_K, psd)
      exact = exact_perm_both(gold_sys, metric_sys[lo], metric_sys[hi], fcn)
      perm.append({
          'corr': fname, 'metric_better': hi, 'metric_worse': lo,
          'corr_better': fl(base[hi]), 'corr_worse': fl(base[lo]),
          'delta': fl(delta), 'k_used': int(k_used),
          'p_value': fl(pval),
          'p_value_exact_enumeration': fl(exact),
          'tolerance': PERM_TOL,
          'call': f"np.random.seed({PERM_SEED}); stats.PermutationSigDiff(Correlation(8, human_sys, sys_<worse>), "
                  f"Correlation(8, human_sys, sys_<better>), scipy.stats."
                  f"{'pearsonr' if fname == 'pearson' else 'kendalltau'}, average_by='none', k={PERM_K}, "
                  f"params=PermutationSigDiffParams(block_size={PERM_K}))[0]",
      })
  out['perm_both_system'] = {
      'convention': 'one-sided p-value for H1: corr(metric_better) > corr(metric_worse); metric scores are '
                    'z-scored, each system\'s pair of scores is swapped between the two metrics with prob 1/2, '
                    'p = #(resampled delta >= observed delta) / k. The observed pattern is not added to the '
                    'numerator or denominator.',
      'seed': PERM_SEED, 'k': PERM_K, 'tolerance': PERM_TOL,
      'exact_enumeration': 'p over all 2^8 swap patterns (the quantity the Monte Carlo p estimates); computed by '
                           'this script, not by mt_metrics_eval',
      'pairs': perm,
  }

  # ---- leave-one-annotator-out human ceiling (segment level, flattened) ----
  ceiling = {'per_annotator': {}}
  pr, sp, kd = [], [], []
  for k, a in enumerate(ann):
    held = mat[k]
    others = np.delete(mat, k, axis=0)
    ocount = (~np.isnan(others)).sum(axis=0)
    with np.errstate(invalid='ignore'):
      omean = np.nansum(others, axis=0) / ocount
    ok = ~np.isnan(held) & (ocount > 0)
    x, y = held[ok], omean[ok]
    p = scipy.stats.pearsonr(x, y)[0]
    s = scipy.stats.spearmanr(x, y)[0]
    t = scipy.stats.kendalltau(x, y)[0]
    pr.append(p)
    sp.append(s)
    kd.append(t)
    ceiling['per_annotator'][a] = {'pearson': fl(p), 'spearman': fl(s), 'kendall_b': fl(t),
                                   'n_segments': int(ok.sum())}
  ceiling['average'] = {'pearson': fl(np.mean(pr)), 'spearman': fl(np.mean(sp)),
                        'kendall_b': fl(np.mean(kd))}
  ceiling['convention'] = (
      'segment level, no grouping: for held-out annotator A, x = A\'s rating, y = mean of the other '
      'annotators\' available ratings of the same (system,item); segments where A is missing or both '
      'others are missing are dropped; scipy.stats.pearsonr / spearmanr / kendalltau (tau-b) on x, y; '
      'average = arithmetic mean of the 3 per-annotator correlations')
  out['human_ceiling_leave_one_annotator_out'] = ceiling
  return out


def exact_perm_both(gold, lo_scores, hi_scores, fcn):
  """Exact PERM-BOTH p-value over all 2^n swap patterns (same statistic as mt_metrics_eval)."""
  s1 = scipy.stats.zscore(np.asarray(lo_scores, dtype=float))
  s2 = scipy.stats.zscore(np.asarray(hi_scores, dtype=float))
  gold = np.asarray(gold, dtype=float)
  n = len(s1)

  def corr(v):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      val = fcn(gold, v)[0]
    return 0.0 if math.isnan(val) else val

  delta = corr(s2) - corr(s1)
  count = 0
  for bits in itertools.product((0, 1), repeat=n):
    w1 = np.array(bits)
    w2 = 1 - w1
    m1 = w1 * s1 + w2 * s2
    m2 = w2 * s1 + w1 * s2
    if corr(m2) - corr(m1) >= delta:
      count += 1
  return count / 2 ** n
