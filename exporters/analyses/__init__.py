"""Analyses and their pages: the report (report, analysis), `analyze` (metaeval, metaeval_page, ppi, alttest,
judges, span_analysis, preference), `plan` (plan, precision), `active` and `compare`. Uses exporters.tables for the
frames and evalstudio.stats for every number; writes CSVs and self-contained HTML pages."""
