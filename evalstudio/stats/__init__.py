"""The statistics of evalstudio: pure, vectorised functions on arrays and tidy frames, each citing its paper, that
know nothing of Label Studio. Uses numpy, scipy, pandas, statsmodels, scikit-learn and crowd-kit; nothing else of
evalstudio.

- agreement: Krippendorff's alpha (O(N) kernel, vectorised bootstrap), Cohen's and Fleiss' kappa, percent
  agreement, majority vote, leave-one-annotator-out correlation
- coefficients: Gwet's AC1/AC2 and the generalised weighted Fleiss' kappa with missing data
- icc: the six Shrout-Fleiss intraclass correlations with F tests and CIs
- correlation: grouped correlations (mt-metrics-eval), Kendall variants, pairwise, tie-calibrated and soft
  pairwise accuracy
- significance: Williams test, PERM-BOTH, significance clusters, paired-bootstrap system ranking
- aggregation: plurality, majority, Dawid-Skene and MACE (crowd-kit)
- alignment: human-vs-model correlations with CIs, categorical agreement, LLM-judge kappa and calibration (ECE)
- ppi: prediction-powered means (PPI++) of human scores from a metric or judge scoring every item, and their
  calibration by resampling real data
- active: active statistical inference (which items humans label, from the judge's uncertainty, and the means
  those labels give), with robust mixing; active_replay: replaying published labels in a strategy's order
- pac: probably approximately correct labels (the judge where it is sure, humans elsewhere, a bounded error)
- small_sample: intervals for a mean that hold at small sizes on skewed ratings (Hall's transformation)
- preference: pairwise win rates (Wilson intervals), Bradley-Terry strengths with bootstrap intervals and on the
  Elo scale, Chatbot Arena's online Elo, position bias; best-worst tuples, counting scores and split-half
  reliability
- keys: which integer keys repeat (one answer per unit and annotator, one score per cell)
- assisted: the automation-bias check, assisted minus unassisted scores (paired t by segment, or Welch's t)
"""
