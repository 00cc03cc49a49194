//! An indenting line writer: the emitted source has one stable layout (two spaces per level).

pub struct Writer {
    out: String,
    indent: usize,
}

impl Writer {
    pub fn new(indent: usize) -> Writer {
        Writer { out: String::new(), indent }
    }

    /// One line at the current indentation.
    pub fn line(&mut self, text: impl AsRef<str>) {
        let text = text.as_ref();
        if text.is_empty() {
            self.out.push('\n');
            return;
        }
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// A preprocessor line: always in column 0, as cpp readers expect.
    pub fn pp(&mut self, text: impl AsRef<str>) {
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }

    /// `head {` and one level deeper.
    pub fn open(&mut self, head: impl AsRef<str>) {
        let head = head.as_ref();
        self.line(if head.is_empty() { "{".to_string() } else { format!("{head} {{") });
        self.indent += 1;
    }

    /// `}` (or `} tail`) one level up.
    pub fn close_with(&mut self, tail: &str) {
        self.indent -= 1;
        self.line(if tail.is_empty() { "}".to_string() } else { format!("}} {tail}") });
    }

    /// A line one level up between two blocks, e.g. `} else {`.
    pub fn reopen(&mut self, text: &str) {
        self.indent -= 1;
        self.line(text);
        self.indent += 1;
    }

    pub fn close(&mut self) {
        self.close_with("");
    }

    /// `#pragma unroll` + `for (int v = 0; v < count; ++v) body` on one line each.
    pub fn unrolled(&mut self, var: &str, count: &str, body: impl AsRef<str>) {
        self.pp("#pragma unroll");
        self.line(format!("for (int {var} = 0; {var} < {count}; ++{var}) {}", body.as_ref()));
    }

    /// `#pragma unroll` + a halving loop `for (int v = from; v > 0; v >>= 1) body`.
    pub fn unrolled_step(&mut self, var: &str, from: &str, body: &str) {
        self.pp("#pragma unroll");
        self.line(format!("for (int {var} = {from}; {var} > 0; {var} >>= 1) {body}"));
    }

    /// As [`Writer::unrolled`], with a multi-line body opened as a block.
    pub fn open_unrolled(&mut self, var: &str, count: &str) {
        self.pp("#pragma unroll");
        self.open(format!("for (int {var} = 0; {var} < {count}; ++{var})"));
    }

    /// Where the text ends now (for [`Writer::since`]).
    pub fn mark(&self) -> usize {
        self.out.len()
    }

    /// The text written since `mark`, to be written again with [`Writer::repeat`].
    pub fn since(&self, mark: usize) -> String {
        self.out[mark..].to_string()
    }

    /// Text taken by [`Writer::since`] at the same indentation, written again as it was.
    pub fn repeat(&mut self, text: &str) {
        self.out.push_str(text);
    }

    pub fn finish(self) -> String {
        self.out
    }
}
