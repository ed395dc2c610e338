"""What a protocol is: the registry of projects.yaml (`registry`), what its labeling configs show per channel
(`channels`), and the input mapping of a protocol defined as data (`mapping`), which also finds a protocol's
importer. Stands on `evalstudio.values` and the protocol importers (`importers/`)."""
