//! Record filters over aligned streams: the viewer's search box and `loaderx-qa`'s selections,
//! as text such as `label == 3 && len(tokens) > 512` or `0.5 <= score && score < 1`.
//!
//! Grammar (whitespace between tokens is free):
//!
//! ```text
//! expr  := and ("||" and)*
//! and   := unary ("&&" unary)*
//! unary := "!" unary | cmp
//! cmp   := term (("==" | "!=" | "<" | "<=" | ">" | ">=") term)*   -- chained: a < b < c
//! term  := number | name | "len(" name ")" | "(" expr ")"
//! name  := [A-Za-z_][A-Za-z0-9_.-]*
//! ```
//!
//! A `name` is a stream's value (a stream of one number per record); `len(name)` is a record's
//! length in rows (ragged streams). A term that is not a comparison is true when it is non-zero.
//! Comparisons are IEEE: anything compared with NaN is false, except `!=`.
//!
//! Evaluation is columnar: the front end reads, for a batch of records, each column
//! [`Filter::columns`] names (values or lengths, as `f64`) and [`Filter::matches`] says which
//! records match. Invariants: parsing never panics and reports the byte offset of an error;
//! expressions nest at most [`MAX_DEPTH`] deep; evaluation checks the column lengths.

use thiserror::Error;

/// The deepest nesting of parentheses and operators a filter may have.
pub const MAX_DEPTH: usize = 64;
/// The longest filter text.
pub const MAX_LEN: usize = 4096;

/// Why a filter cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FilterError {
    #[error("filter: {what} at character {at}")]
    Syntax { what: String, at: usize },
    #[error("filter: {0}")]
    Columns(String),
}

impl crate::error::Classify for FilterError {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Argument
    }
}

/// A column a filter reads: a stream's values, or its records' lengths in rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    pub name: String,
    pub length: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn test(self, a: f64, b: f64) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Number(f64),
    Column(usize),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    /// `a op b op c ...`: every adjacent pair holds.
    Compare(Vec<Node>, Vec<Op>),
}

/// A parsed filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    root: Node,
    columns: Vec<Column>,
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
    columns: Vec<Column>,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err<T>(&self, what: impl Into<String>) -> Result<T, FilterError> {
        Err(FilterError::Syntax { what: what.into(), at: self.at })
    }

    fn skip(&mut self) {
        while self.rest().starts_with(|c: char| c.is_whitespace()) {
            self.at += self.rest().chars().next().map_or(1, char::len_utf8);
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!("nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Node, FilterError> {
        self.deeper()?;
        let mut left = self.and()?;
        while self.eat("||") {
            left = Node::Or(Box::new(left), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, FilterError> {
        let mut left = self.unary()?;
        while self.eat("&&") {
            left = Node::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, FilterError> {
        self.skip();
        if self.rest().starts_with('!') && !self.rest().starts_with("!=") {
            self.at += 1;
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Not(Box::new(inner)));
        }
        self.compare()
    }

    fn op(&mut self) -> Option<Op> {
        self.skip();
        let ops =
            [("==", Op::Eq), ("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];
        let (tok, op) = ops.into_iter().find(|(t, _)| self.rest().starts_with(t))?;
        self.at += tok.len();
        Some(op)
    }

    fn compare(&mut self) -> Result<Node, FilterError> {
        let first = self.term()?;
        let (mut terms, mut ops) = (vec![first], Vec::new());
        while let Some(op) = self.op() {
            ops.push(op);
            terms.push(self.term()?);
        }
        Ok(if ops.is_empty() { terms.remove(0) } else { Node::Compare(terms, ops) })
    }

    fn name(&mut self) -> Option<&'a str> {
        self.skip();
        let rest = self.rest();
        let mut end = 0;
        for (k, c) in rest.char_indices() {
            let ok = if k == 0 {
                c.is_ascii_alphabetic() || c == '_'
            } else {
                c.is_ascii_alphanumeric() || "_.-".contains(c)
            };
            if !ok {
                break;
            }
            end = k + c.len_utf8();
        }
        (end > 0).then(|| {
            self.at += end;
            &rest[..end]
        })
    }

    fn column(&mut self, name: &str, length: bool) -> Node {
        let c = Column { name: name.to_owned(), length };
        let k = self.columns.iter().position(|x| *x == c).unwrap_or_else(|| {
            self.columns.push(c);
            self.columns.len() - 1
        });
        Node::Column(k)
    }

    fn term(&mut self) -> Result<Node, FilterError> {
        self.skip();
        if self.eat("(") {
            let inner = self.expr()?;
            if !self.eat(")") {
                return self.err("expected )");
            }
            return Ok(inner);
        }
        let rest = self.rest();
        let numeric = rest.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-' || c == '+');
        if numeric {
            let end = rest
                .char_indices()
                .find(|&(k, c)| {
                    !(c.is_ascii_digit()
                        || c == '.'
                        || c == 'e'
                        || c == 'E'
                        || ((c == '-' || c == '+') && (k == 0 || rest[..k].ends_with(['e', 'E']))))
                })
                .map_or(rest.len(), |(k, _)| k);
            return match rest[..end].parse::<f64>() {
                Ok(v) => {
                    self.at += end;
                    Ok(Node::Number(v))
                }
                Err(_) => self.err(format!("{:?} is not a number", &rest[..end])),
            };
        }
        let start = self.at;
        match self.name() {
            Some("len") if self.eat("(") => {
                let Some(name) = self.name() else { return self.err("len() takes a stream name") };
                if !self.eat(")") {
                    return self.err("expected ) after len(name");
                }
                Ok(self.column(name, true))
            }
            Some("nan") => Ok(Node::Number(f64::NAN)),
            Some("inf") => Ok(Node::Number(f64::INFINITY)),
            Some(name) => Ok(self.column(name, false)),
            None => {
                self.at = start;
                self.err(if self.rest().is_empty() {
                    "unexpected end".to_owned()
                } else {
                    "expected a number, a name or (".to_owned()
                })
            }
        }
    }
}

impl Filter {
    /// Parses a filter.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        if text.len() > MAX_LEN {
            return Err(FilterError::Syntax { what: format!("longer than {MAX_LEN} bytes"), at: MAX_LEN });
        }
        let mut p = Parser { text, at: 0, columns: Vec::new(), depth: 0 };
        let root = p.expr()?;
        p.skip();
        if !p.rest().is_empty() {
            return p.err(format!("unexpected {:?}", p.rest().chars().take(12).collect::<String>()));
        }
        Ok(Filter { root, columns: p.columns })
    }

    /// The columns the filter reads, in the order [`Filter::matches`] takes them.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Which of `n` records match, given each column's `n` values.
    pub fn matches(&self, columns: &[&[f64]], n: usize) -> Result<Vec<bool>, FilterError> {
        if columns.len() != self.columns.len() || columns.iter().any(|c| c.len() != n) {
            return Err(FilterError::Columns(format!(
                "{} columns of {n} values are needed, got {} of lengths {:?}",
                self.columns.len(),
                columns.len(),
                columns.iter().map(|c| c.len()).collect::<Vec<_>>()
            )));
        }
        Ok((0..n).map(|i| truth(eval(&self.root, columns, i))).collect())
    }
}

fn truth(v: f64) -> bool {
    v != 0.0 && !v.is_nan()
}

fn eval(node: &Node, cols: &[&[f64]], i: usize) -> f64 {
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    match node {
        Node::Number(v) => *v,
        Node::Column(k) => cols[*k][i],
        Node::Not(x) => b(!truth(eval(x, cols, i))),
        Node::And(x, y) => b(truth(eval(x, cols, i)) && truth(eval(y, cols, i))),
        Node::Or(x, y) => b(truth(eval(x, cols, i)) || truth(eval(y, cols, i))),
        Node::Compare(terms, ops) => {
            let vals: Vec<f64> = terms.iter().map(|t| eval(t, cols, i)).collect();
            b(ops.iter().zip(vals.windows(2)).all(|(op, w)| op.test(w[0], w[1])))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, cols: &[&[f64]]) -> Vec<bool> {
        let f = Filter::parse(text).unwrap();
        f.matches(cols, cols.first().map_or(0, |c| c.len())).unwrap()
    }

    #[test]
    fn comparisons_logic_and_lengths() {
        let f = Filter::parse("label == 3 && len(tokens) > 512").unwrap();
        assert_eq!(
            f.columns(),
            [Column { name: "label".into(), length: false }, Column { name: "tokens".into(), length: true }]
        );
        let got = f.matches(&[&[3.0, 3.0, 2.0], &[600.0, 10.0, 900.0]], 3).unwrap();
        assert_eq!(got, [true, false, false]);
        assert_eq!(run("0.5 <= s && s < 1", &[&[0.4, 0.5, 0.99, 1.0]]), [false, true, true, false]);
        assert_eq!(run("0.5 <= s < 1", &[&[0.4, 0.5, 0.99, 1.0]]), [false, true, true, false]);
        assert_eq!(run("!(x == 1) || x > 5", &[&[1.0, 2.0, 6.0]]), [false, true, true]);
        assert_eq!(run("x", &[&[0.0, 2.0, f64::NAN]]), [false, true, false]);
        assert_eq!(run("x != x", &[&[0.0, f64::NAN]]), [false, true]);
        assert_eq!(run("x == -1.5e2", &[&[-150.0, 150.0]]), [true, false]);
        assert_eq!(run("x >= inf || x != x", &[&[f64::INFINITY, 1.0, f64::NAN]]), [true, false, true]);
        // One column per distinct reference.
        assert_eq!(Filter::parse("a > 1 && a < 3 && len(a) == 2").unwrap().columns().len(), 2);
    }

    #[test]
    fn bad_filters_say_where() {
        for (text, at) in [
            ("label ==", 8),
            ("(a > 1", 6),
            ("a > 1 b", 6),
            ("len(3)", 4),
            ("a > 1e", 4),
            ("", 0),
            ("a >> 2", 3),
        ] {
            match Filter::parse(text) {
                Err(FilterError::Syntax { at: got, .. }) => assert_eq!(got, at, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let deep = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(Filter::parse(&deep).is_err());
        assert!(Filter::parse(&"!".repeat(200)).is_err());
        let f = Filter::parse("a > 1").unwrap();
        assert!(f.matches(&[&[1.0]], 2).is_err());
        assert!(f.matches(&[], 0).is_err());
    }

    proptest::proptest! {
        /// Any text: a filter or an error, never a panic.
        #[test]
        fn any_text_parses_or_fails_cleanly(text in "[a-z0-9 ()!=<>&|.+\\-e]{0,40}") {
            if let Ok(f) = Filter::parse(&text) {
                let cols: Vec<Vec<f64>> = f.columns().iter().map(|_| vec![1.0, 0.0, f64::NAN]).collect();
                let refs: Vec<&[f64]> = cols.iter().map(Vec::as_slice).collect();
                proptest::prop_assert_eq!(f.matches(&refs, 3).unwrap().len(), 3);
            }
        }
    }
}
