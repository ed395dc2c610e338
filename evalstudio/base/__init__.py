"""The ground every other part stands on: errors and how they are reported (`file:line: field: message`), files
read and written as hostile ground, private folders and secrets, retries and bounded parallelism. Imports nothing
else of evalstudio."""
