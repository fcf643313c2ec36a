//! The STAR reader of monomorph (RELION, stopgap, Warp, GCTF, `--orientations`,
//! `--target-list`): data blocks holding `_name value` pairs and `loop_` tables, read with
//! RELION's rules (`nextTokenInSTAR`, `src/strings.cpp`). Values are separated by white space;
//! a value that starts with `"` or `'` runs to the next same quote followed by white space or
//! the line's end (so `"it's"` and `'say "hi"'` hold their inner quotes, and a quote inside an
//! unquoted value is an ordinary character); `#` starts a comment only where a value would
//! start (`a#b` is one value, RELION writes `_rlnName #3`). A quoted value is never a
//! keyword or a label (`"data_x"` and `"_x"` are values). Every value remembers its line, so
//! callers can name the line in an error. [`star_quote`] writes a value back so that RELION
//! (and this reader) read it unchanged.

use std::path::Path;

use super::io_err;
use crate::Result;

/// One `loop_` table: its column names and its rows (line number, values).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StarLoop {
    /// Column names, with the leading `_`.
    pub columns: Vec<String>,
    /// Rows in file order: (1-based line, one value per column).
    pub rows: Vec<(usize, Vec<String>)>,
}

impl StarLoop {
    /// The index of column `name`, if present.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// One `data_NAME` block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StarBlock {
    /// The block name after `data_` (may be empty).
    pub name: String,
    /// `_name value` pairs outside loops: (name, value, line).
    pub pairs: Vec<(String, String, usize)>,
    /// The block's loops.
    pub loops: Vec<StarLoop>,
}

impl StarBlock {
    /// The loop holding column `name`, and the column's index.
    pub fn loop_with(&self, name: &str) -> Option<(&StarLoop, usize)> {
        self.loops
            .iter()
            .find_map(|l| l.column(name).map(|c| (l, c)))
    }

    /// The value of `name`: a `_name value` pair, or the first row of a loop column.
    pub fn value(&self, name: &str) -> Option<(&str, usize)> {
        if let Some((_, v, ln)) = self.pairs.iter().find(|(k, _, _)| k == name) {
            return Some((v, *ln));
        }
        let (l, c) = self.loop_with(name)?;
        l.rows.first().map(|(ln, r)| (r[c].as_str(), *ln))
    }
}

/// One value of a line: its text and whether it was quoted.
struct Token {
    text: String,
    quoted: bool,
}

/// The values of one line by RELION's rules (module docs); an unclosed quote is an error
/// message.
fn tokens(line: &str) -> std::result::Result<Vec<Token>, String> {
    let c: Vec<char> = line.chars().collect();
    let space = |ch: char| ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if space(c[i]) {
            i += 1;
            continue;
        }
        if c[i] == '#' {
            break;
        }
        if c[i] == '"' || c[i] == '\'' {
            let q = c[i];
            let start = i + 1;
            let mut end = None;
            let mut j = start;
            while j < c.len() {
                if c[j] == q && (j + 1 == c.len() || space(c[j + 1])) {
                    end = Some(j);
                    break;
                }
                j += 1;
            }
            let Some(e) = end else {
                return Err(format!("a value opened with {q} is not closed on its line"));
            };
            out.push(Token {
                text: c[start..e].iter().collect(),
                quoted: true,
            });
            i = e + 1;
        } else {
            let start = i;
            while i < c.len() && !space(c[i]) {
                i += 1;
            }
            out.push(Token {
                text: c[start..i].iter().collect(),
                quoted: false,
            });
        }
    }
    Ok(out)
}

/// `value` as a STAR file must hold it for RELION's reader (and [`parse_star`]) to read it
/// back unchanged: as is when it can stand alone, else in double quotes, else (a `"` followed
/// by white space inside) in single quotes. `None` when no quoting can hold it: a control
/// character (a line break, a tab: RELION turns tabs into spaces), or both quotes followed by
/// white space.
pub fn star_quote(value: &str) -> Option<String> {
    if value.chars().any(char::is_control) {
        return None;
    }
    let plain = !value.is_empty()
        && !value.contains(' ')
        && !value.starts_with(['"', '\'', '#', '_', ';'])
        && !value.starts_with("data_")
        && value != "loop_";
    if plain {
        return Some(value.to_string());
    }
    // Inside quotes q, a q followed by a space would end the value early.
    let fits = |q: char| !value.contains(&format!("{q} "));
    ['"', '\'']
        .into_iter()
        .find(|&q| fits(q))
        .map(|q| format!("{q}{value}{q}"))
}

/// Parses STAR text into its blocks; `path` names the file in errors. A loop row with the
/// wrong number of values is an error naming the line; text before the first `data_` is
/// read as a block with an empty name.
pub fn parse_star(path: &Path, text: &str) -> Result<Vec<StarBlock>> {
    let mut blocks: Vec<StarBlock> = Vec::new();
    // `in_loop`: in a loop's header (reading column names) or rows.
    let mut in_loop = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = tokens(raw).map_err(|m| io_err(path, format!("line {ln}: {m}")))?;
        let Some(head) = t.first() else { continue };
        let keyword = !head.quoted;
        let t: Vec<String> = t.into_iter().map(|k| k.text).collect();
        let first = &t[0];
        if let Some(name) = first.strip_prefix("data_").filter(|_| keyword) {
            blocks.push(StarBlock {
                name: name.to_string(),
                ..StarBlock::default()
            });
            in_loop = false;
            continue;
        }
        if blocks.is_empty() {
            blocks.push(StarBlock::default());
        }
        let b = blocks.last_mut().expect("pushed above");
        if keyword && first == "loop_" {
            b.loops.push(StarLoop::default());
            in_loop = true;
            continue;
        }
        if keyword && first.starts_with('_') {
            match b.loops.last_mut() {
                Some(l) if in_loop && l.rows.is_empty() => l.columns.push(first.clone()),
                _ => {
                    in_loop = false;
                    let v = t
                        .get(1)
                        .cloned()
                        .ok_or_else(|| io_err(path, format!("line {ln}: {first} has no value")))?;
                    b.pairs.push((first.clone(), v, ln));
                }
            }
            continue;
        }
        match b.loops.last_mut() {
            Some(l) if in_loop => {
                if t.len() != l.columns.len() {
                    return Err(io_err(
                        path,
                        format!(
                            "line {ln}: {} values for the loop's {} columns",
                            t.len(),
                            l.columns.len()
                        ),
                    ));
                }
                l.rows.push((ln, t.clone()));
            }
            _ => {
                return Err(io_err(
                    path,
                    format!("line {ln}: '{}' is outside any loop_ or _name", raw.trim()),
                ));
            }
        }
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_pairs_loops_quotes_and_comments() {
        let text = "# a comment\ndata_optics\n_rlnVoltage 300\nloop_\n_rlnA #1\n_rlnB #2\n\
                    1 'a b'\n2 \"c\"  # trailing\n\ndata_\nloop_\n_x\n3\n";
        let b = parse_star(Path::new("t.star"), text).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].name, "optics");
        assert_eq!(b[0].value("_rlnVoltage"), Some(("300", 3)));
        let (l, c) = b[0].loop_with("_rlnB").unwrap();
        assert_eq!(c, 1);
        assert_eq!(l.rows[0], (7, vec!["1".into(), "a b".into()]));
        assert_eq!(l.rows[1].1[1], "c");
        assert_eq!(b[0].value("_rlnA"), Some(("1", 7)));
        assert_eq!(b[1].name, "");
        assert_eq!(b[1].value("_x"), Some(("3", 13)));
    }

    #[test]
    fn relions_token_rules() {
        let text =
            "data_\nloop_\n_a #1\n_b #2\na#b \"it's\"\n'say \"hi\"' x #c\n\"data_x\" \"_y\"\n";
        let b = parse_star(Path::new("t.star"), text).unwrap();
        assert_eq!(b.len(), 1, "a quoted data_ value is no block");
        let l = &b[0].loops[0];
        assert_eq!(l.rows[0].1, ["a#b", "it's"]);
        assert_eq!(l.rows[1].1[0], "say \"hi\"");
        assert_eq!(l.rows[2].1, ["data_x", "_y"]);
        // A quote inside a quoted value ends it only before white space.
        let b = parse_star(Path::new("t.star"), "data_\n_a \"x\"y\" z\n").unwrap();
        assert_eq!(b[0].value("_a"), Some(("x\"y", 2)));
        let e = parse_star(Path::new("t.star"), "data_\n_a \"open\n").unwrap_err();
        assert!(e.to_string().contains("line 2") && e.to_string().contains("not closed"));
    }

    #[test]
    fn quoting_writes_what_the_reader_reads() {
        for v in [
            "plain",
            "a b",
            "it's",
            "a\" b",
            "a\" b 'c",
            "\"q",
            "'q",
            "#x",
            "a#b",
            "_x",
            "data_x",
            "loop_",
            "",
            "x\"",
            "é 日本",
        ] {
            let q = star_quote(v).unwrap_or_else(|| panic!("{v:?} must be writable"));
            let text = format!("data_\nloop_\n_v #1\n_w #2\n{q} 1\n");
            let b = parse_star(Path::new("t.star"), &text).unwrap();
            assert_eq!(b[0].loops[0].rows[0].1[0], v, "{v:?} written as {q}");
        }
        assert_eq!(star_quote("plain").as_deref(), Some("plain"));
        assert_eq!(star_quote("a b").as_deref(), Some("\"a b\""));
        assert!(star_quote("a\" b' c").is_none());
        assert!(star_quote("line\nbreak").is_none());
        assert!(star_quote("tab\there").is_none());
    }

    #[test]
    fn ragged_rows_and_stray_text_name_the_line() {
        let e = parse_star(Path::new("t.star"), "data_\nloop_\n_a\n_b\n1 2\n3\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("line 6: 1 values for the loop's 2 columns"),
            "{e}"
        );
        let e = parse_star(Path::new("t.star"), "data_\n_a 1\nstray\n").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
    }
}
