"""Tables out of Label Studio: tasks and annotations as the tidy long frame (tidy), files written spreadsheet-safe
(files), segment matrices (segments) and aggregated labels (aggregated). Uses evalstudio.stats, values, protocols."""
