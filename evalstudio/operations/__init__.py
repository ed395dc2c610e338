"""What an operator does to a study, below the commands (evalstudio/cli only parses, calls one function here and
prints): import its input files (importing), read a study and its status (reading, status), wait for Label Studio
behind the gateway (waiting), judge it with LLMs (judging), plan it from a pilot (planning), serve it to
participants (serving), analyse its ratings or anyone's (analyzing), report on it (reporting), publish and reproduce
it (publishing). Uses the rooms below it (judge, gateway, tasks, exporters, crowd, labelstudio, readers,
protocols, values, base); knows nothing of typer. Its output goes to the consoles (consoles), as the commands'."""
