"""Label Studio annotations -> one tidy long DataFrame; agreement, alignment and reports on top of it."""
