//! A plan file names each member of each object once.

use super::check;

fn refused(text: &str) -> String {
    check(text.as_bytes()).unwrap_err().to_string()
}

#[test]
fn each_object_names_each_member_once() {
    for ok in [
        r#"{"a": 1, "b": {"a": 1}, "c": [{"a": 1}, {"a": 2}]}"#,
        r#"[1, "a", null, true, -2.5, {}, []]"#,
        r#"{"a": {"a": {"a": 1}}}"#,
    ] {
        assert!(check(ok.as_bytes()).is_ok(), "{ok}");
    }
    assert_eq!(
        refused(r#"{"a": 1, "a": 2}"#),
        r#"member "a" given twice at line 1 column 12"#
    );
    assert_eq!(
        refused(r#"{"a": [0, {"b": {"x": 1, "y": 2, "\u0078": 3}}]}"#),
        r#"a[1].b: member "x" given twice at line 1 column 41"#
    );
    // Not JSON, or more than one document.
    assert!(refused(r#"{"a": "#).contains("EOF"));
    assert!(refused("{} {}").contains("trailing characters"));
}
