"""What the crowd platforms take and give: approval, rejection and bonus files for Prolific and MTurk (approvals),
an MTurk batch's results read as annotations and its facts (mturk). Uses exporters.tables and evalstudio.crowd's
decisions."""
