//! A STAR file reader (RELION, stopgap, Warp, GCTF): data blocks holding `_name value` pairs
//! and `loop_` tables. Values are whitespace-separated; a value in single or double quotes may
//! hold spaces; `#` starts a comment outside quotes (RELION writes `_rlnName #3`). Every
//! value remembers its line, so callers can name the line in an error.

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

fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '#' {
            break;
        } else if c == '"' || c == '\'' {
            chars.next();
            let mut v = String::new();
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                v.push(d);
            }
            out.push(v);
        } else {
            let mut v = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() {
                    break;
                }
                v.push(d);
                chars.next();
            }
            out.push(v);
        }
    }
    out
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
        let t = tokens(raw);
        let Some(first) = t.first() else { continue };
        if let Some(name) = first.strip_prefix("data_") {
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
        if first == "loop_" {
            b.loops.push(StarLoop::default());
            in_loop = true;
            continue;
        }
        if first.starts_with('_') {
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
                l.rows.push((ln, t));
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
