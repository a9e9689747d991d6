//! A small arithmetic evaluator (std only, self-contained).
//!
//! Grammar, loosest binding first:
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/') unary)*
//! unary   := ('-' | '+') unary | power
//! power   := primary ('^' unary)?          right-associative: 2^3^2 = 2^9
//! primary := number | constant | function '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! So `-2^2` is `-(2^2)` = -4 and `2^-1` is 0.5. Numbers are decimal with an
//! optional fraction and exponent (`1.5`, `.5`, `2e-3`). Constants: `pi`, `e`.
//! Functions: `sqrt abs sin cos tan ln log10 exp floor ceil round` (one
//! argument) and `min max` (one or more). Names are case-insensitive.
//!
//! Positions in errors are 1-based character positions.

use std::fmt;

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// The expression is not well-formed (the caller should fix it).
    Syntax {
        /// What is wrong, e.g. "unexpected ')'".
        message: String,
        /// 1-based character position of the problem.
        position: usize,
    },
    /// The expression is well-formed but has no finite value (division by
    /// zero, a domain error, overflow).
    Math(String),
}

impl EvalError {
    /// Whether this is a syntax error (as opposed to a math error).
    pub fn is_syntax(&self) -> bool {
        matches!(self, EvalError::Syntax { .. })
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::Syntax { message, position } => {
                write!(f, "{message} at position {position}")
            }
            EvalError::Math(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for EvalError {}

/// Evaluates an arithmetic expression.
///
/// ```ignore
/// assert_eq!(evaluate("2*(3+4)"), Ok(14.0));
/// ```
pub fn evaluate(expr: &str) -> Result<f64, EvalError> {
    let tokens = tokenize(expr)?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
        end: expr.chars().count() + 1,
    };
    if parser.tokens.is_empty() {
        return Err(EvalError::Syntax {
            message: "empty expression".to_string(),
            position: 1,
        });
    }
    let value = parser.expr()?;
    if let Some(tok) = parser.peek() {
        return Err(unexpected(tok));
    }
    finite(value, "the result")
}

/// Formats a value the way the calculator prints it: integral values without
/// a fractional part (`14`), others in Rust's shortest round-trip form
/// (`0.1`), very large or very small magnitudes in exponent form (`1e300`).
pub fn format_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string(); // also turns -0 into 0
    }
    let magnitude = value.abs();
    if !(1e-7..1e21).contains(&magnitude) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// Deepest nesting of parentheses, unary operators and powers accepted, so
/// that hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 200;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Number(f64),
    Ident(String),
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    LParen,
    RParen,
    Comma,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// 1-based character position of the token's first character.
    position: usize,
    /// The token as written.
    text: String,
}

fn tokenize(expr: &str) -> Result<Vec<Token>, EvalError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let position = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let single = match c {
            '+' => Some(Kind::Plus),
            '-' => Some(Kind::Minus),
            '*' => Some(Kind::Star),
            '/' => Some(Kind::Slash),
            '^' => Some(Kind::Caret),
            '(' => Some(Kind::LParen),
            ')' => Some(Kind::RParen),
            ',' => Some(Kind::Comma),
            _ => None,
        };
        if let Some(kind) = single {
            tokens.push(Token {
                kind,
                position,
                text: c.to_string(),
            });
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            // An exponent: e or E, an optional sign, then digits.
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    while j < chars.len() && chars[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse::<f64>().map_err(|_| EvalError::Syntax {
                message: format!("invalid number '{text}'"),
                position,
            })?;
            tokens.push(Token {
                kind: Kind::Number(value),
                position,
                text,
            });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            tokens.push(Token {
                kind: Kind::Ident(text.to_lowercase()),
                position,
                text,
            });
        } else {
            return Err(EvalError::Syntax {
                message: format!("unexpected character '{c}'"),
                position,
            });
        }
    }
    Ok(tokens)
}

fn unexpected(tok: &Token) -> EvalError {
    EvalError::Syntax {
        message: format!("unexpected '{}'", tok.text),
        position: tok.position,
    }
}

fn finite(value: f64, what: &str) -> Result<f64, EvalError> {
    if value.is_finite() {
        Ok(value)
    } else if value.is_nan() {
        Err(EvalError::Math(format!("{what} is not a number")))
    } else {
        Err(EvalError::Math(format!("{what} is too large (overflow)")))
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Position reported for "unexpected end of expression".
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_kind(&self) -> Option<&Kind> {
        self.peek().map(|t| &t.kind)
    }

    fn next(&mut self) -> Result<Token, EvalError> {
        match self.tokens.get(self.pos) {
            Some(tok) => {
                self.pos += 1;
                Ok(tok.clone())
            }
            None => Err(EvalError::Syntax {
                message: "unexpected end of expression".to_string(),
                position: self.end,
            }),
        }
    }

    fn enter(&mut self, position: usize) -> Result<(), EvalError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(EvalError::Syntax {
                message: format!("expression nested more than {MAX_DEPTH} levels deep"),
                position,
            });
        }
        Ok(())
    }

    fn expect(&mut self, kind: Kind, what: &str) -> Result<Token, EvalError> {
        match self.peek() {
            Some(tok) if tok.kind == kind => self.next(),
            Some(tok) => Err(EvalError::Syntax {
                message: format!("expected {what} but found '{}'", tok.text),
                position: tok.position,
            }),
            None => Err(EvalError::Syntax {
                message: format!("expected {what} but the expression ended"),
                position: self.end,
            }),
        }
    }

    fn expr(&mut self) -> Result<f64, EvalError> {
        let mut value = self.term()?;
        loop {
            match self.peek_kind() {
                Some(Kind::Plus) => {
                    self.pos += 1;
                    value += self.term()?;
                }
                Some(Kind::Minus) => {
                    self.pos += 1;
                    value -= self.term()?;
                }
                _ => return Ok(value),
            }
        }
    }

    fn term(&mut self) -> Result<f64, EvalError> {
        let mut value = self.unary()?;
        loop {
            match self.peek_kind() {
                Some(Kind::Star) => {
                    self.pos += 1;
                    value *= self.unary()?;
                }
                Some(Kind::Slash) => {
                    self.pos += 1;
                    let divisor = self.unary()?;
                    if divisor == 0.0 {
                        return Err(EvalError::Math("division by zero".to_string()));
                    }
                    value /= divisor;
                }
                _ => return Ok(value),
            }
        }
    }

    fn unary(&mut self) -> Result<f64, EvalError> {
        match self.peek() {
            Some(tok) if matches!(tok.kind, Kind::Minus | Kind::Plus) => {
                let negate = tok.kind == Kind::Minus;
                let position = tok.position;
                self.pos += 1;
                self.enter(position)?;
                let value = self.unary()?;
                self.depth -= 1;
                Ok(if negate { -value } else { value })
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<f64, EvalError> {
        let base = self.primary()?;
        match self.peek() {
            Some(tok) if tok.kind == Kind::Caret => {
                let position = tok.position;
                self.pos += 1;
                self.enter(position)?;
                let exponent = self.unary()?;
                self.depth -= 1;
                if base == 0.0 && exponent < 0.0 {
                    return Err(EvalError::Math("division by zero".to_string()));
                }
                finite(base.powf(exponent), "the power")
            }
            _ => Ok(base),
        }
    }

    fn primary(&mut self) -> Result<f64, EvalError> {
        let tok = self.next()?;
        match tok.kind {
            Kind::Number(value) => Ok(value),
            Kind::LParen => {
                self.enter(tok.position)?;
                let value = self.expr()?;
                self.depth -= 1;
                self.expect(Kind::RParen, "')'")?;
                Ok(value)
            }
            Kind::Ident(ref name) => {
                if self.peek_kind() == Some(&Kind::LParen) {
                    self.call(&tok)
                } else {
                    match name.as_str() {
                        "pi" => Ok(std::f64::consts::PI),
                        "e" => Ok(std::f64::consts::E),
                        _ if is_function(name) => Err(EvalError::Syntax {
                            message: format!(
                                "function '{}' needs arguments in parentheses",
                                tok.text
                            ),
                            position: tok.position,
                        }),
                        _ => Err(EvalError::Syntax {
                            message: format!("unknown name '{}' (constants: pi, e)", tok.text),
                            position: tok.position,
                        }),
                    }
                }
            }
            _ => Err(unexpected(&tok)),
        }
    }

    /// A function call; `name` is the identifier token, the next token is `(`.
    fn call(&mut self, name: &Token) -> Result<f64, EvalError> {
        let Kind::Ident(ref fname) = name.kind else {
            return Err(unexpected(name));
        };
        if !is_function(fname) {
            return Err(EvalError::Syntax {
                message: format!(
                    "unknown function '{}' (functions: {})",
                    name.text,
                    FUNCTIONS.join(", ")
                ),
                position: name.position,
            });
        }
        let open = self.next()?; // the '('
        self.enter(open.position)?;
        let mut args = vec![self.expr()?];
        while self.peek_kind() == Some(&Kind::Comma) {
            self.pos += 1;
            args.push(self.expr()?);
        }
        self.depth -= 1;
        self.expect(Kind::RParen, "')' or ','")?;
        apply(fname, &name.text, name.position, &args)
    }
}

const FUNCTIONS: [&str; 13] = [
    "sqrt", "abs", "sin", "cos", "tan", "ln", "log10", "exp", "floor", "ceil", "round", "min",
    "max",
];

fn is_function(name: &str) -> bool {
    FUNCTIONS.contains(&name)
}

fn apply(name: &str, written: &str, position: usize, args: &[f64]) -> Result<f64, EvalError> {
    let variadic = matches!(name, "min" | "max");
    if !variadic && args.len() != 1 {
        return Err(EvalError::Syntax {
            message: format!("function '{written}' takes 1 argument, got {}", args.len()),
            position,
        });
    }
    let x = args[0];
    let value = match name {
        "sqrt" if x < 0.0 => {
            return Err(EvalError::Math(format!(
                "sqrt of a negative number ({})",
                format_number(x)
            )));
        }
        "ln" | "log10" if x <= 0.0 => {
            return Err(EvalError::Math(format!(
                "{name} of a number that is not positive ({})",
                format_number(x)
            )));
        }
        "sqrt" => x.sqrt(),
        "abs" => x.abs(),
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "ln" => x.ln(),
        "log10" => x.log10(),
        "exp" => x.exp(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "min" => args.iter().copied().fold(f64::INFINITY, f64::min),
        "max" => args.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        _ => {
            return Err(EvalError::Syntax {
                message: format!("unknown function '{written}'"),
                position,
            });
        }
    };
    finite(value, &format!("{name}(…)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(expr: &str) -> f64 {
        match evaluate(expr) {
            Ok(v) => v,
            Err(e) => panic!("{expr}: {e}"),
        }
    }

    fn err(expr: &str) -> String {
        match evaluate(expr) {
            Ok(v) => panic!("{expr} evaluated to {v}"),
            Err(e) => e.to_string(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(ok("2*(3+4)"), 14.0);
        assert_eq!(ok("1 + 2 * 3"), 7.0);
        assert_eq!(ok("(1 + 2) * 3"), 9.0);
        assert_eq!(ok("10 - 4 - 3"), 3.0);
        assert_eq!(ok("100 / 10 / 5"), 2.0);
        assert_eq!(ok("7 / 2"), 3.5);
        assert_eq!(ok("  42  "), 42.0);
        assert_eq!(ok("1.5e3 + .5 + 2E-1"), 1500.7);
    }

    #[test]
    fn power_is_right_associative_and_binds_tighter_than_unary_minus() {
        assert_eq!(ok("2^3^2"), 512.0);
        assert_eq!(ok("(2^3)^2"), 64.0);
        assert_eq!(ok("-2^2"), -4.0);
        assert_eq!(ok("(-2)^2"), 4.0);
        assert_eq!(ok("2^-1"), 0.5);
        assert_eq!(ok("2*3^2"), 18.0);
        assert_eq!(ok("--3"), 3.0);
        assert_eq!(ok("+3 - -3"), 6.0);
    }

    #[test]
    fn functions_and_constants() {
        assert_eq!(ok("sqrt(16)"), 4.0);
        assert_eq!(ok("abs(-3)"), 3.0);
        assert!(close(ok("sin(pi/2)"), 1.0));
        assert!(close(ok("cos(0)"), 1.0));
        assert!(close(ok("tan(pi/4)"), 1.0));
        assert!(close(ok("ln(e)"), 1.0));
        assert_eq!(ok("log10(1000)"), 3.0);
        assert!(close(ok("exp(1)"), std::f64::consts::E));
        assert_eq!(ok("floor(2.7)"), 2.0);
        assert_eq!(ok("ceil(2.1)"), 3.0);
        assert_eq!(ok("round(2.5)"), 3.0);
        assert_eq!(ok("round(-2.5)"), -3.0);
        assert_eq!(ok("min(3, 1, 2)"), 1.0);
        assert_eq!(ok("max(3, 1 + 9, 2)"), 10.0);
        assert_eq!(ok("max(5)"), 5.0);
        assert_eq!(ok("PI"), std::f64::consts::PI);
        assert_eq!(ok("Sqrt(4)"), 2.0);
        assert_eq!(ok("2 * pi"), std::f64::consts::TAU);
    }

    #[test]
    fn syntax_errors_have_positions() {
        assert_eq!(err("1+2)"), "unexpected ')' at position 4");
        assert_eq!(
            err("(1+2"),
            "expected ')' but the expression ended at position 5"
        );
        assert_eq!(err("1 +"), "unexpected end of expression at position 4");
        assert_eq!(err(""), "empty expression at position 1");
        assert_eq!(err("   "), "empty expression at position 1");
        assert_eq!(err("2 $ 3"), "unexpected character '$' at position 3");
        assert_eq!(err("1.2.3"), "invalid number '1.2.3' at position 1");
        assert_eq!(err("2 3"), "unexpected '3' at position 3");
        assert_eq!(err("*2"), "unexpected '*' at position 1");
        assert_eq!(err("()"), "unexpected ')' at position 2");
        assert_eq!(
            err("foo(1)"),
            "unknown function 'foo' (functions: sqrt, abs, sin, cos, tan, ln, log10, exp, floor, ceil, round, min, max) at position 1"
        );
        assert_eq!(
            err("x + 1"),
            "unknown name 'x' (constants: pi, e) at position 1"
        );
        assert_eq!(
            err("sqrt"),
            "function 'sqrt' needs arguments in parentheses at position 1"
        );
        assert_eq!(
            err("sqrt(1, 2)"),
            "function 'sqrt' takes 1 argument, got 2 at position 1"
        );
        assert_eq!(
            err("min(1 2)"),
            "expected ')' or ',' but found '2' at position 7"
        );
        assert_eq!(err("min()"), "unexpected ')' at position 5");
        // Positions count characters, not bytes.
        assert_eq!(
            err("é+1"),
            "unknown name 'é' (constants: pi, e) at position 1"
        );
        assert_eq!(err("1 × 2"), "unexpected character '×' at position 3");
        assert!(evaluate("1+2)").unwrap_err().is_syntax());
    }

    #[test]
    fn math_errors() {
        assert_eq!(err("1/0"), "division by zero");
        assert_eq!(err("1/(2-2)"), "division by zero");
        assert_eq!(err("0^-1"), "division by zero");
        assert_eq!(err("sqrt(-1)"), "sqrt of a negative number (-1)");
        assert_eq!(err("ln(0)"), "ln of a number that is not positive (0)");
        assert_eq!(
            err("log10(-5)"),
            "log10 of a number that is not positive (-5)"
        );
        assert_eq!(err("10^400"), "the power is too large (overflow)");
        assert_eq!(err("exp(1000)"), "exp(…) is too large (overflow)");
        assert_eq!(err("1e308 * 10"), "the result is too large (overflow)");
        assert_eq!(err("(-8)^(1/3)"), "the power is not a number");
        assert!(!evaluate("1/0").unwrap_err().is_syntax());
    }

    #[test]
    fn deep_nesting_is_rejected_not_overflowing() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(err(&deep).contains("nested more than 200 levels"));
        let minus = format!("{}1", "-".repeat(10_000));
        assert!(err(&minus).contains("nested more than 200 levels"));
        let pow = format!("2{}", "^2".repeat(10_000));
        assert!(err(&pow).contains("nested more than 200 levels"));
        let fine = format!("{}1{}", "(".repeat(150), ")".repeat(150));
        assert_eq!(ok(&fine), 1.0);
    }

    #[test]
    fn formatting() {
        assert_eq!(format_number(14.0), "14");
        assert_eq!(format_number(-3.0), "-3");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_number(3.5), "3.5");
        assert_eq!(format_number(1e20), "100000000000000000000");
        assert_eq!(format_number(1e21), "1e21");
        assert_eq!(format_number(1.5e300), "1.5e300");
        assert_eq!(format_number(1e-7), "0.0000001");
        assert_eq!(format_number(1.5e-8), "1.5e-8");
        assert_eq!(format_number(std::f64::consts::PI), "3.141592653589793");
    }
}
