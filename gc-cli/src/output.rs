//! `-o/--output`: how a command prints what it found (`gc_output` writes it).

pub(crate) use gc_output::{ALL_FORMS, FORMS, Output};

/// `-o/--output` of a command that prints objects: every form but `kestra`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct OutputArgs {
    /// Output format (`--format` is the older spelling).
    #[arg(
        long = "output",
        short = 'o',
        alias = "format",
        value_name = "FORMAT",
        default_value = "table",
        value_parser = forms(FORMS)
    )]
    pub(crate) form: Output,
}

/// The value parser of a command's `-o`: only `allowed`, each listed with its help.
pub(crate) fn forms(
    allowed: &'static [Output],
) -> impl clap::builder::TypedValueParser<Value = Output> {
    use clap::ValueEnum;
    use clap::builder::TypedValueParser;
    let values = allowed.iter().filter_map(ValueEnum::to_possible_value);
    clap::builder::PossibleValuesParser::new(values)
        .map(|text: String| Output::from_str(&text, false).unwrap_or(Output::Table))
}
