"""Input file to Label Studio tasks: the import (`importing`) with its checks of where a task may go (`placement`,
`lists`), the order tasks are sent and served in (`order`), the record of what was imported (`integrity`) and the
model outputs the ML backend generates into tasks (`generation`). Uses evalstudio.protocols and the importers (an
input record as task data), evalstudio.labelstudio (the one client) and evalstudio.crowd (lists of a study)."""
