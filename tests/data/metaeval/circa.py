"""Part 2 of `generate.py`: the Circa MTurk explanation-quality ratings, their complete sub-panels, and their expected
agreement statistics and aggregated labels (krippendorff, pingouin, irrCAC, crowd-kit)."""

import os

import pandas as pd

from common import HERE, fl, versions

CIRCA_RESULTS = os.path.join(
    HERE, '..', 'circa', 'explanations_mturk', 'final_results.csv')


def circa_tidy():
  d = pd.read_csv(CIRCA_RESULTS, dtype=str, keep_default_na=False)
  lab = d['Answer.explanation-quality.label'].str.strip()
  rating = lab.str.split(' ').str[0].astype(int)
  tidy = pd.DataFrame({'item': d['HITId'], 'worker': d['WorkerId'], 'rating': rating})
  tidy = tidy.sort_values(['item', 'worker']).reset_index(drop=True)
  assert not tidy.duplicated(['item', 'worker']).any()
  return tidy


def circa_panels(tidy):
  cnt = tidy.groupby('item').size()
  # Panel 1 ("slots"): all items with exactly 3 ratings; inside an item the
  # ratings are ordered by worker id (ascending) and called raters r1, r2, r3.
  full = tidy[tidy.item.isin(cnt[cnt == 3].index)].copy()
  full = full.sort_values(['item', 'worker'])
  full['rater'] = full.groupby('item').cumcount().map(lambda i: f'r{i + 1}')
  slots = full[['item', 'rater', 'worker', 'rating']].reset_index(drop=True)
  # Panel 2 ("crossed"): the largest set of items rated by one and the same
  # three workers; raters are the workers themselves.
  trip = tidy.groupby('item').worker.apply(lambda s: tuple(sorted(s)))
  trip = trip[trip.map(len) == 3]
  vc = trip.value_counts()
  best = sorted(vc[vc == vc.max()].index)[0]
  items = sorted(trip[trip == best].index)
  crossed = tidy[tidy.item.isin(items)].copy()
  crossed['rater'] = crossed.worker
  crossed = crossed.sort_values(['item', 'worker'])[['item', 'rater', 'worker', 'rating']]
  return slots, crossed.reset_index(drop=True), list(best)


def wide(tidy, col='worker'):
  return tidy.pivot(index='item', columns=col, values='rating').sort_index().sort_index(axis=1)


def kripp(tidy, col='worker'):
  import krippendorff
  w = wide(tidy, col).astype(float)
  rel = w.to_numpy().T          # raters x units, NaN = missing
  out = {}
  for level in ('nominal', 'ordinal', 'interval'):
    out[level] = fl(krippendorff.alpha(reliability_data=rel, level_of_measurement=level,
                                       value_domain=[1, 2, 3, 4, 5]))
  return out


def icc(panel):
  import pingouin
  pingouin.options['round'] = None
  pingouin.options['round.column.CI95'] = None
  res = pingouin.intraclass_corr(data=panel, targets='item', raters='rater', ratings='rating')
  names = ['ICC1', 'ICC2', 'ICC3', 'ICC1k', 'ICC2k', 'ICC3k']
  out = {}
  for name, (_, row) in zip(names, res.iterrows()):
    out[name] = {'pingouin_type': row['Type'], 'value': fl(row['ICC']), 'F': fl(row['F']),
                 'df1': int(row['df1']), 'df2': int(row['df2']), 'pval': fl(row['pval']),
                 'ci95': [fl(v) for v in row['CI95']]}
  return out


def cac(tidy, col='worker'):
  from irrCAC.raw import CAC
  w = wide(tidy, col).astype(float)
  w.columns = [str(c) for c in w.columns]
  w = w.reset_index(drop=True)
  out = {}

  def est(obj, method):
    r = getattr(obj, method)()['est']
    return {'value': fl(r['coefficient_value']), 'name': r['coefficient_name'],
            'pa': fl(r['pa']), 'pe': fl(r['pe']), 'se': fl(r['se'])}

  for wname in ('identity', 'ordinal', 'quadratic'):
    obj = CAC(w.copy(), weights=wname, categories=[1, 2, 3, 4, 5], digits=15)
    out[f'gwet_{wname}'] = est(obj, 'gwet')
    obj = CAC(w.copy(), weights=wname, categories=[1, 2, 3, 4, 5], digits=15)
    out[f'fleiss_{wname}'] = est(obj, 'fleiss')
    obj = CAC(w.copy(), weights=wname, categories=[1, 2, 3, 4, 5], digits=15)
    out[f'krippendorff_{wname}'] = est(obj, 'krippendorff')
  return {
      'AC1': out['gwet_identity'],
      'AC2_ordinal': out['gwet_ordinal'],
      'AC2_quadratic': out['gwet_quadratic'],
      'fleiss_kappa': out['fleiss_identity'],
      'fleiss_kappa_ordinal_weights': out['fleiss_ordinal'],
      'fleiss_kappa_quadratic_weights': out['fleiss_quadratic'],
      'krippendorff_alpha_irrCAC_identity': out['krippendorff_identity'],
      'krippendorff_alpha_irrCAC_ordinal_weights': out['krippendorff_ordinal'],
      'krippendorff_alpha_irrCAC_quadratic': out['krippendorff_quadratic'],
  }


def aggregates(tidy):
  from crowdkit.aggregation import MACE, DawidSkene, MajorityVote
  data = tidy.rename(columns={'item': 'task'})[['task', 'worker', 'rating']].rename(
      columns={'rating': 'label'})
  ds = DawidSkene(n_iter=100, tol=1e-5).fit_predict(data)
  mace = MACE(n_restarts=10, n_iter=50, method='vb', smoothing=0.1, default_noise=0.5,
              alpha=0.5, beta=0.5, random_state=0).fit_predict(data)
  mv = MajorityVote().fit_predict(data)
  # independent majority vote with explicit tie rule: smallest label among the most frequent
  own = {}
  tie = {}
  for item, g in tidy.groupby('item'):
    c = g.rating.value_counts()
    top = sorted(c[c == c.max()].index)
    own[item] = int(top[0])
    tie[item] = len(top) > 1
  items = sorted(tidy.item.unique())
  df = pd.DataFrame({
      'item': items,
      'ds_label': [int(ds[i]) for i in items],
      'mace_label': [int(mace[i]) for i in items],
      'majority_vote': [int(mv[i]) for i in items],
      'n_ratings': [int((tidy.item == i).sum()) for i in items],
      'majority_tie': [int(tie[i]) for i in items],
      'mean_rating': [fl(tidy.rating[tidy.item == i].mean()) for i in items],
  })
  assert all(df.majority_vote[j] == own[i] for j, i in enumerate(items)), 'MV tie rule changed'
  return df


def circa_expected(tidy, slots, crossed, crossed_workers):
  def describe(t):
    return {'n_items': int(t.item.nunique()), 'n_workers': int(t.worker.nunique()),
            'n_ratings': int(len(t)),
            'ratings_per_item': {str(k): int(v) for k, v in
                                 t.groupby('item').size().value_counts().sort_index().items()},
            'rating_counts': {str(k): int(v) for k, v in t.rating.value_counts().sort_index().items()}}

  out = {
      'description': 'Expected agreement statistics for circa_ratings.csv (MTurk explanation-quality '
                     'ratings 1-5 of Circa items) and its complete sub-panels.',
      'versions': versions(),
      'source': '../circa/explanations_mturk/final_results.csv (item = HITId, worker = WorkerId, '
                'rating = leading integer of Answer.explanation-quality.label)',
      'tables': {
          'full': describe(tidy),
          'panel_slots': describe(slots) | {
              'definition': 'all items with exactly 3 ratings; within an item the ratings are sorted by '
                            'worker id and called raters r1, r2, r3 (raters are slots, not persons)'},
          'panel_crossed': describe(crossed) | {
              'definition': 'the items rated by the most frequent identical worker triple '
                            '(a fully crossed design: raters are persons)',
              'workers': crossed_workers},
      },
      'krippendorff_alpha': {
          'call': "krippendorff.alpha(reliability_data=<workers x items matrix, NaN = missing>, "
                  "level_of_measurement=<level>, value_domain=[1,2,3,4,5])",
          'full': kripp(tidy, 'worker'),
          'panel_slots': kripp(slots, 'rater'),
          'panel_crossed': kripp(crossed, 'rater'),
      },
      'icc_pingouin': {
          'call': "pingouin.intraclass_corr(data=<panel>, targets='item', raters='rater', ratings='rating') "
                  "with pingouin.options['round'] = None and pingouin.options['round.column.CI95'] = None",
          'panel_slots': icc(slots),
          'panel_crossed': icc(crossed),
      },
      'irrCAC': {
          'call': "irrCAC.raw.CAC(<items x raters DataFrame, NaN = missing>, weights=<identity|ordinal|quadratic>, "
                  "categories=[1,2,3,4,5], digits=15).<gwet|fleiss|krippendorff>()['est']",
          'full_with_missing': cac(tidy, 'worker'),
          'panel_slots': cac(slots, 'rater'),
          'panel_crossed': cac(crossed, 'rater'),
      },
      'aggregation': {
          'file': 'circa_aggregates.csv',
          'dawid_skene': 'crowdkit.aggregation.DawidSkene(n_iter=100, tol=1e-5).fit_predict(df) on the full table',
          'mace': "crowdkit.aggregation.MACE(n_restarts=10, n_iter=50, method='vb', smoothing=0.1, "
                  "default_noise=0.5, alpha=0.5, beta=0.5, random_state=0).fit_predict(df)",
          'majority_vote': 'crowdkit.aggregation.MajorityVote().fit_predict(df); ties -> smallest label '
                           '(checked against an independent implementation)',
          'df': "columns task=item, worker=worker, label=rating (integer labels 1..5)",
      },
  }
  return out
