//! Embedding examples; see the `[[example]]` targets.
