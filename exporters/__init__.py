"""What evalstudio writes, in four flows, one sub-package each (installed as evalstudio.exporters):

- tables/: tables out of Label Studio: a project's tasks and annotations as the tidy long frame (tidy), written as
  spreadsheet-safe CSV, JSONL or Parquet (files), the item-by-system matrices the meta-evaluation reads (segments),
  labels aggregated per item (aggregated).
- analyses/: the analyses and their pages: the report of a study (report, analysis), the meta-evaluation of
  `analyze` (metaeval, metaeval_page, with ppi, alttest, judges and span_analysis), comparisons and best-worst
  annotations (preference), `plan` (plan, precision), `active` (active), `compare` (compare).
- publication/: a study's publication package: the Human Evaluation Datasheet (datasheet), the data release
  (release), the instrument and its manifest (instrument).
- payments/: what the crowd platforms take: approvals, rejections and bonuses (approvals), MTurk batch results read
  back (mturk).

Uses evalstudio.stats for every number, evalstudio.protocols, values, readers and crowd for what they read; the
commands and evalstudio.operations call them. Nothing here talks to Label Studio: its tasks come in as dicts."""
