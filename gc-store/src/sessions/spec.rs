//! Which table, id column and state column hold the sessions, checked before they reach SQL.

use gc_core::ports::StoreError;

/// Where the application keeps its sessions: a table (optionally `schema.table`), its id column
/// and, when states are read, its state column.
///
/// Names must match `[A-Za-z_][A-Za-z0-9_]*` (at most 63 bytes, PostgreSQL's limit) and are
/// quoted in SQL, so PostgreSQL matches them exactly as written (`Sessions` is not `sessions`);
/// SQLite matches names without regard to case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// The table or view, as `table` or `schema.table`.
    pub table: String,
    /// The column holding the session id.
    pub id_column: String,
    /// The column holding the session's state, or `None` to read only whether a row exists.
    pub state_column: Option<String>,
    /// Only rows whose `COLUMN` holds `VALUE` (compared as text, exactly), for each pair: a table
    /// shared by several clusters counts only this one's rows as live sessions here.
    pub scope: Vec<(String, String)>,
}

/// The most scope columns a table spec takes.
const MAX_SCOPE: usize = 16;

impl TableSpec {
    /// StreamSpace's: table `sessions`, id `id`, state `state`.
    pub fn streamspace() -> Self {
        Self {
            table: "sessions".into(),
            id_column: "id".into(),
            state_column: Some("state".into()),
            scope: Vec::new(),
        }
    }

    /// The names, checked and ready to quote.
    pub(crate) fn check(&self) -> Result<Names, StoreError> {
        let (schema, table) = match self.table.split_once('.') {
            Some((schema, table)) => (Some(schema), table),
            None => (None, self.table.as_str()),
        };
        let checked = |what: &str, name: &str| {
            if is_identifier(name) {
                Ok(name.to_owned())
            } else {
                Err(StoreError::Other(format!(
                    "invalid session {what} {name:?}: must match [A-Za-z_][A-Za-z0-9_]* \
                     (at most 63 bytes)"
                )))
            }
        };
        if let Some(schema) = schema {
            checked("table schema", schema)?;
        }
        for (i, (column, _)) in self.scope.iter().enumerate() {
            if self.scope[..i].iter().any(|(seen, _)| seen == column) {
                return Err(StoreError::Other(format!(
                    "invalid session scope: column {column:?} given twice"
                )));
            }
        }
        if self.scope.len() > MAX_SCOPE {
            return Err(StoreError::Other(format!(
                "invalid session scope: at most {MAX_SCOPE} columns"
            )));
        }
        Ok(Names {
            schema: schema.map(str::to_owned),
            table: checked("table", table)?,
            id: checked("id column", &self.id_column)?,
            state: self
                .state_column
                .as_deref()
                .map(|c| checked("state column", c))
                .transpose()?,
            scope: self
                .scope
                .iter()
                .map(|(c, _)| checked("scope column", c))
                .collect::<Result<_, _>>()?,
            shown: self.table.clone(),
        })
    }
}

impl Default for TableSpec {
    fn default() -> Self {
        Self::streamspace()
    }
}

/// Checked names: safe to put between double quotes.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub(crate) schema: Option<String>,
    pub(crate) table: String,
    pub(crate) id: String,
    pub(crate) state: Option<String>,
    /// The scope columns, in the order of the spec's pairs.
    pub(crate) scope: Vec<String>,
    /// The table as given, for messages.
    pub(crate) shown: String,
}

impl Names {
    /// `"schema"."table"` or `"table"`.
    pub(crate) fn qualified_table(&self) -> String {
        match &self.schema {
            Some(schema) => format!("{}.{}", quote(schema), quote(&self.table)),
            None => quote(&self.table),
        }
    }
}

/// A checked name in double quotes (it holds no quote to escape).
pub(crate) fn quote(name: &str) -> String {
    format!("\"{name}\"")
}

fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(table: &str, id: &str, state: Option<&str>) -> TableSpec {
        TableSpec {
            scope: Vec::new(),
            table: table.into(),
            id_column: id.into(),
            state_column: state.map(Into::into),
        }
    }

    #[test]
    fn good_names_are_quoted() {
        let names = TableSpec::streamspace().check().unwrap();
        assert_eq!(names.qualified_table(), "\"sessions\"");
        let names = spec("app_1.Sessions", "_id", None).check().unwrap();
        assert_eq!(names.qualified_table(), "\"app_1\".\"Sessions\"");
        assert_eq!((names.id.as_str(), names.state), ("_id", None));
        assert!(spec(&"t".repeat(63), "id", None).check().is_ok());
    }

    #[test]
    fn anything_else_is_refused() {
        let long = "t".repeat(64);
        for (table, id, state) in [
            ("", "id", None),
            ("sessions; drop table x", "id", None),
            ("a.b.c", "id", None),
            (".sessions", "id", None),
            ("sessions.", "id", None),
            ("1sessions", "id", None),
            ("sess ions", "id", None),
            ("\"sessions\"", "id", None),
            ("sessiöns", "id", None),
            (long.as_str(), "id", None),
            ("sessions", "id)", None),
            ("sessions", "", None),
            ("sessions", "id", Some("state--")),
            ("sessions", "id", Some("")),
        ] {
            let err = spec(table, id, state).check().unwrap_err();
            assert!(
                matches!(&err, StoreError::Other(m) if m.starts_with("invalid session ")),
                "{table:?} {id:?} {state:?}: {err}"
            );
        }
    }
}
