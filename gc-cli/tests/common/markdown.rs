//! The shell commands a Markdown page shows, for the tests that check the documentation (the
//! chart README's `kubectl`/`helm` names, every documented `gc-cli` command's flags). Plain
//! functions only: `src/cli/tests.rs` includes this file too.

/// The words of one shell line: quotes group words, an unquoted `#` starting a word ends the line.
pub(crate) fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.get_or_insert_default().push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    word.get_or_insert_default();
                }
                '#' if word.is_none() => break,
                c if c.is_whitespace() => words.extend(word.take()),
                c => word.get_or_insert_default().push(c),
            },
        }
    }
    words.extend(word);
    words
}

/// Every command of a Markdown page's fenced code blocks, in order, as words: a `$ ` prompt and
/// comments removed, `\` continuations joined, `&&`, `||`, `|`, `;` and redirections separating.
pub(crate) fn fenced_commands(markdown: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let words = shell_words(&std::mem::take(&mut pending));
        let separator = |w: &String| ["&&", "||", "|", ";", ">", "2>"].contains(&w.as_str());
        commands.extend(
            words
                .split(separator)
                .filter(|c| !c.is_empty())
                .map(<[String]>::to_vec),
        );
    }
    commands
}
