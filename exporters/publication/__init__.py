"""A study's publication package: the Human Evaluation Datasheet (datasheet), the data release with pseudonymous
annotators, its dataset card and Croissant metadata (release), the instrument with its manifest (instrument). Uses
exporters.tables for the files and evalstudio.protocols for what the annotators saw."""
